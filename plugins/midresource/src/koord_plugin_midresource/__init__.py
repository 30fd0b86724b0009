"""Koordinator's MidResource node-resource calculator
(``kubernetes.io/mid-cpu``, ``kubernetes.io/mid-memory``)."""

from koord_plugin_midresource.plugin import DEGRADE_MESSAGE, MidResource, MidResourceArgs

__all__ = ["DEGRADE_MESSAGE", "MidResource", "MidResourceArgs"]
