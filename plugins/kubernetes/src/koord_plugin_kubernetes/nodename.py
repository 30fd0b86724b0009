"""NodeName: a pod that names a node (``spec.nodeName``) fits only that node."""

from __future__ import annotations

import numpy as np

from koord_framework.api.objects import PodInfo
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

ERR_REASON = "node(s) didn't match the requested node name"
_MISMATCH = Status.unresolvable(ERR_REASON)
_PASS = Status.success()


class NodeName(SchedulerPlugin, FilterPlugin, VectorFilter, VectorFilterStatuses, EnqueueExtensions):
    name = "NodeName"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not pod.node_name or pod.node_name == node.name:
            return Status.success()
        return Status.unresolvable(ERR_REASON)

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        if not pod.node_name:
            return all_pass(rows.shape[0])
        same: BoolArray = rows == table.index.get(pod.node_name, -1)
        return same

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> CodedStatuses:
        if not pod.node_name:
            return CodedStatuses(np.zeros(rows.shape[0], dtype=np.int64), [_PASS])
        target = table.index.get(pod.node_name, -1)
        return CodedStatuses((rows != target).astype(np.int64), [_PASS, _MISMATCH])

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add")]
