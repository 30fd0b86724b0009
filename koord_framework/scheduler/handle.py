"""``SchedulerHandle``: what the framework gives each plugin of a profile (kube-scheduler's ``Handle``).

One handle per profile. It reaches the scheduler's shared parts (cluster, clock, informer, metrics registry,
the cycle's snapshot, waiting pods, nominator) and the profile's own ``Framework`` for the calls preemption
makes (Filter with nominated pods, PreFilter extensions). Beyond the ``Handle`` ABC it offers what
kube-scheduler's handle also has and the core plugins need: ``snapshot`` (with the affinity node lists),
``nominated_pods_for_node``, ``reject_waiting_pod`` and ``activate_pods``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.clock import Clock
from koord_framework.cluster.informer import NodeCache, PodCache, SharedInformer
from koord_framework.cluster.port import ClusterPort
from koord_framework.scheduler.cache import Snapshot
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import ExtendedHandle, ReservationExtensions, ReservePodQueue
from koord_framework.scheduler.interface import WaitingPod
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Status
from koord_framework.scheduler.table import NodeTable
from koord_framework.scheduler.topologymanager import NUMATopologyHintProvider

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from koord_framework.scheduler.framework import Framework
    from koord_framework.scheduler.scheduler import Scheduler


class SchedulerHandle(ExtendedHandle):
    """The handle of one profile of a ``Scheduler``."""

    def __init__(self, scheduler: Scheduler, profile_name: str) -> None:
        self._scheduler = scheduler
        self.profile_name = profile_name
        self._framework: Framework | None = None
        self._slots: dict[Hashable, Any] = {}

    def bind_framework(self, framework: Framework) -> None:
        """Set once the profile's plugins exist (they receive the handle while being built)."""
        self._framework = framework

    @property
    def framework(self) -> Framework:
        if self._framework is None:
            raise RuntimeError(
                "the profile's framework is still being built (called from a plugin constructor?)"
            )
        return self._framework

    def feature_enabled(self, name: str) -> bool:
        return self._scheduler.feature_gates.enabled(name)

    # --- shared slots (``Handle.shared``) ----------------------------------------------------------------
    def _shared_slots(self) -> dict[Hashable, Any]:
        return self._slots

    def _component_slots(self) -> dict[Hashable, Any]:
        return self._scheduler.shared_slots

    # --- shared parts -------------------------------------------------------------------------------
    @property
    def cluster(self) -> ClusterPort:
        return self._scheduler.cluster

    @property
    def clock(self) -> Clock:
        return self._scheduler.clock

    @property
    def informer(self) -> SharedInformer:
        return self._scheduler.informer

    @property
    def pod_cache(self) -> PodCache:
        """The scheduler's ``PodCache`` (one ``PodInfo`` per pod, indexed by node): share it, do not build
        another — a second cache of 150,000 pods costs hundreds of MiB."""
        return self._scheduler.pod_cache

    def parsed_pod(self, obj: Mapping[str, Any]) -> PodInfo | None:
        return self._scheduler.pod_cache.record_of(obj)

    def parsed_node(self, obj: Mapping[str, Any]) -> NodeRecord | None:
        return self._scheduler.node_cache.record_of(obj)

    @property
    def node_cache(self) -> NodeCache:
        return self._scheduler.node_cache

    @property
    def metrics(self) -> CollectorRegistry:
        return self._scheduler.metrics.registry

    @property
    def snapshot(self) -> Snapshot:
        """The snapshot of the current scheduling cycle (refreshed at the start of every cycle)."""
        return self._scheduler.snapshot

    @property
    def table(self) -> NodeTable:
        return self._scheduler.snapshot.table

    def node_infos(self) -> Sequence[NodeInfo]:
        return self._scheduler.snapshot.node_list

    def node_info(self, name: str) -> NodeInfo | None:
        return self._scheduler.snapshot.get(name)

    # --- Koordinator's extensions (frameworkext) -----------------------------------------------------
    @property
    def reservation_extensions(self) -> ReservationExtensions:
        return self.framework.reservation_extensions

    @property
    def reserve_pods(self) -> ReservePodQueue:
        return self._scheduler.reserve_pod_queue

    # --- waiting pods -------------------------------------------------------------------------------
    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._scheduler.waiting.get(uid)

    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        for wp in self._scheduler.waiting.list():
            fn(wp)

    def reject_waiting_pod(self, uid: str, plugin: str = "", message: str = "removed") -> bool:
        """Reject a waiting pod by uid; returns whether it was waiting."""
        wp = self._scheduler.waiting.get(uid)
        if wp is None:
            return False
        wp.reject(plugin, message)
        return True

    # --- queue --------------------------------------------------------------------------------------
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self._scheduler.queue.nominated_pods_for_node(node_name)

    def nominated_node_names(self) -> AbstractSet[str]:
        return self._scheduler.queue.nominated_node_names()

    def activate_pods(self, pods: Iterable[PodInfo]) -> None:
        """Move pods waiting in backoff or as unschedulable to the active queue."""
        self._scheduler.queue.activate(pods)

    # --- framework calls for preemption -------------------------------------------------------------
    def run_filter_with_nominated_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.framework.run_filter_with_nominated_pods(state, pod, node)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> Status:
        return self.framework.run_pre_filter_extension_add_pod(state, pod, to_add, node)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self.framework.run_pre_filter_extension_remove_pod(state, pod, to_remove, node)

    # --- NUMA topology manager ----------------------------------------------------------------------
    def numa_topology_hint_providers(self) -> Sequence[NUMATopologyHintProvider]:
        return [p for p in self.framework.plugins.values() if isinstance(p, NUMATopologyHintProvider)]
