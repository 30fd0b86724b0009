"""MigrationController: evictions become PodMigrationJobs, arbitrated, throttled and carried out safely.

Koordinator's default Evict and Filter plugin (``pkg/descheduler/controllers/migration``):

* ``filter(pod)`` — the arbitrator's filter (see ``filters``);
* ``pre_eviction_filter(pod)`` — with ``nodeFit``, the pod must fit another Ready node of ``nodeSelector``;
* ``evict(pod, options)`` — in dry run: yes, and nothing else. Otherwise the pod must pass ``filter`` and its
  object limiter, and a Pending PodMigrationJob is created carrying the reason and the plugin that asked
  (annotations ``koordinator.sh/evict-reason`` / ``koordinator.sh/evict-trigger``);
* ``tick(now)`` — arbitration, reconciliation (the actual eviction through the Eviction API by default,
  never a bare delete unless ``evictionPolicy: Delete``), scavenging.
"""

from __future__ import annotations

from koord_lib_descheduling.evictor_filters import pod_fits_any_other_node

from koord_framework.api.objects import PodInfo
from koord_framework.descheduler.interface import (
    BackgroundPlugin,
    DeschedulerPlugin,
    EvictionFailed,
    EvictOptions,
    EvictPlugin,
    FilterPlugin,
    Handle,
    PreEvictionFilterPlugin,
)
from koord_plugin_migration.args import MigrationControllerArgs
from koord_plugin_migration.controller import MigrationReconciler
from koord_plugin_migration.filters import MigrationFilter
from koord_plugin_migration.workloads import ControllerFinder


class MigrationController(
    DeschedulerPlugin[MigrationControllerArgs],
    FilterPlugin,
    PreEvictionFilterPlugin,
    EvictPlugin,
    BackgroundPlugin,
):
    name = "MigrationController"
    Args = MigrationControllerArgs

    def __init__(self, args: MigrationControllerArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        args = self.args
        self.config: MigrationControllerArgs = args
        self.finder = ControllerFinder(handle.cluster)
        self.migration_filter = MigrationFilter(args, handle, self.finder)
        self.reconciler = MigrationReconciler(args, handle, self.migration_filter, self.finder)

    def filter(self, pod: PodInfo) -> bool:
        return self.migration_filter.filter(pod)

    def refusal_reason(self, pod: PodInfo) -> str | None:
        """Why Filter or PreEvictionFilter refuses ``pod`` (``koord deschedule --explain``)."""
        why = self.migration_filter.refusal_reason(pod)
        if why is None and not self.pre_eviction_filter(pod):
            return "no other node fits it (nodeFit)"
        return why

    def pre_eviction_filter(self, pod: PodInfo) -> bool:
        if self.config.node_fit and not self.config.skips("NodeFit"):
            nodes = self.handle.ready_nodes(self.config.node_selector)
            return pod_fits_any_other_node(pod, nodes, self.handle.pods_on_node)
        return True

    def evict(self, pod: PodInfo, options: EvictOptions) -> bool:
        if self.config.dry_run:
            return True
        if not self.filter(pod):
            raise EvictionFailed(f"Pod {pod.key} cannot be evicted since failed to filter")
        if self.reconciler.object_limit_exceeded(pod):
            raise EvictionFailed(f"Pod {pod.key} cannot be evicted since it exceeds object limiter")
        self.reconciler.create_job(pod, options.reason, options.plugin_name, options.delete_options)
        return True

    def tick(self, now: float) -> float | None:
        return self.reconciler.tick(now)
