"""Code the descheduler's plugins share: which pods are never evicted and whether a pod fits elsewhere
(``evictor_filters``), and the order pods and nodes are taken in (``sorter``).

A family library (ADR 0005): plugins may import it, it imports only the public plugin API and no plugin.
"""
