"""Pod records for plugins that keep their own index of pods from informer events.

``rebound`` is the informer's own shortcut, public so that such a plugin pays what the shared caches pay for
a bind: a binding changes only the node name, the PodScheduled condition and the resource version, so the
record built from the old object is copied with those replaced instead of parsing the new object again.
"""

from __future__ import annotations

from koord_framework.cluster.informer import rebound

__all__ = ["rebound"]
