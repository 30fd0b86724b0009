"""``koord explain``: why the scheduler decides what it decides, on a copy of a cluster.

Every explanation runs on a private in-memory copy (``source.read_only_copy``): the manifests of
``--cluster``, or the objects listed from a live cluster (``--kubeconfig``; only reads reach it). The plugin
hooks that contribute sections (``koord_framework.explain.hooks``) are public; the rest is the runtime's.
"""
