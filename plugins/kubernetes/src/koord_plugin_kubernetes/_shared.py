"""The caches the plugins of one profile share, looked up once per plugin instance.

Each lives in its handle's shared slot (``Handle.shared``): one per profile, made by the first plugin that
asks. A plugin reaches several of them per scheduling cycle, and a slot lookup per call would cost as much
as what the cache saves, so the mixin keeps the reference on the instance (a handle's slot never changes).
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar

from koord_framework.scheduler.interface import Handle
from koord_plugin_kubernetes._clustercache import ClusterCache, cluster_cache
from koord_plugin_kubernetes._nodeindex import NodeAttributeIndex, node_index
from koord_plugin_kubernetes._podcounts import PodCounts, pod_counts
from koord_plugin_kubernetes._rowcache import RowCache, row_cache


class SharedCaches:
    """Mixin of the core plugins: the profile's shared caches as attributes."""

    handle: Handle
    name: ClassVar[str]

    @cached_property
    def shared_node_index(self) -> NodeAttributeIndex:
        return node_index(self.handle)

    @cached_property
    def shared_pod_counts(self) -> PodCounts | None:
        """None when the handle keeps no snapshot (the plugin then walks the nodes)."""
        return pod_counts(self.handle)

    @cached_property
    def shared_cluster_cache(self) -> ClusterCache:
        return cluster_cache(self.handle)

    @cached_property
    def shared_row_cache(self) -> RowCache | None:
        """This plugin's row cache; None when the handle keeps no snapshot."""
        return row_cache(self.handle, self.name)
