"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take only pods tolerating
``node.kubernetes.io/unschedulable:NoSchedule``."""

from __future__ import annotations

import numpy as np

from koord_framework.api.objects import PodInfo, Taint
from koord_framework.api.selectors import tolerations_tolerate_taint
from koord_framework.scheduler.constant_arrays import all_pass
from koord_framework.scheduler.interface import (
    ClusterEvent,
    CodedStatuses,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    NodeInfo,
    NodeTable,
    SchedulerPlugin,
    VectorFilter,
    VectorFilterStatuses,
)
from koord_framework.scheduler.status import Status
from koord_framework.scheduler.table import BoolArray, Int64Array
from koord_plugin_kubernetes._masks import take
from koord_plugin_kubernetes._shared import SharedCaches

ERR_REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
_UNSCHEDULABLE = Status.unresolvable(ERR_REASON)
_PASS = Status.success()


class NodeUnschedulable(
    SchedulerPlugin, FilterPlugin, VectorFilter, VectorFilterStatuses, EnqueueExtensions, SharedCaches
):
    name = "NodeUnschedulable"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.node.unschedulable and not tolerations_tolerate_taint(pod.tolerations, UNSCHEDULABLE_TAINT):
            return Status.unresolvable(ERR_REASON)
        return Status.success()

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        index = self.shared_node_index
        index.refresh()
        # Cordoned nodes are rare: usually there is none and the answer needs no per-row work.
        if not index.unschedulable_count or tolerations_tolerate_taint(pod.tolerations, UNSCHEDULABLE_TAINT):
            return all_pass(rows.shape[0])
        return ~take(index.unschedulable, rows)

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> CodedStatuses:
        index = self.shared_node_index
        index.refresh()
        if tolerations_tolerate_taint(pod.tolerations, UNSCHEDULABLE_TAINT):
            return CodedStatuses(np.zeros(rows.shape[0], dtype=np.int64), [_PASS])
        return CodedStatuses(take(index.unschedulable, rows).astype(np.int64), [_PASS, _UNSCHEDULABLE])

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add"), ClusterEvent("Node", "Update")]
