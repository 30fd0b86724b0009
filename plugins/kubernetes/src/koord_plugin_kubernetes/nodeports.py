"""NodePorts: a pod's host ports must be free on the node (0.0.0.0 conflicts with every address)."""

from __future__ import annotations

from collections.abc import Sequence

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.interface import (
    ClusterEvent,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    NodeInfo,
    PreFilterPlugin,
    PreFilterResult,
    SchedulerPlugin,
)
from koord_framework.scheduler.status import Status

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts(SchedulerPlugin, PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "NodePorts"

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.host_ports:
            return None, Status.skip()
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if pod.host_ports and node.port_conflict(pod.host_ports):
            return Status.unschedulable(ERR_REASON)
        return Status.success()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add")]
