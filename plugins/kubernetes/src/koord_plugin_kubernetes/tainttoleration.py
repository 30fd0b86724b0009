"""TaintToleration: NoSchedule/NoExecute taints a pod does not tolerate exclude the node; untolerated
PreferNoSchedule taints lower its score (fewer is better, normalised in reverse)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from koord_framework.api.objects import PodInfo, Taint
from koord_framework.api.selectors import (
    DO_NOT_SCHEDULE_EFFECTS,
    PREFER_NO_SCHEDULE,
    find_untolerated_taint,
    tolerations_tolerate_taint,
)
from koord_framework.scheduler.constant_arrays import all_pass, filled
from koord_framework.scheduler.interface import (
    ClusterEvent,
    CodedStatuses,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    NodeInfo,
    NodeScore,
    NodeTable,
    PreScorePlugin,
    SchedulerPlugin,
    ScoreExtensions,
    ScorePlugin,
    VectorFilter,
    VectorFilterStatuses,
    VectorScore,
)
from koord_framework.scheduler.status import MAX_NODE_SCORE, Status
from koord_framework.scheduler.table import BoolArray, Int64Array
from koord_plugin_kubernetes._nodeindex import NodeAttributeIndex
from koord_plugin_kubernetes._normalize import (
    VectorNormalize,
    default_normalize_array,
    default_normalize_score,
)
from koord_plugin_kubernetes._shared import SharedCaches

_PRE_SCORE_KEY = "PreScoreTaintToleration"


def _tolerations_key(tolerations: Sequence[Mapping[str, Any]]) -> str:
    if not tolerations:
        return ""  # most pods: no need to serialise anything
    return json.dumps(list(tolerations), sort_keys=True, default=str)


def count_intolerable_prefer_no_schedule(
    taints: Sequence[Taint], tolerations: Sequence[Mapping[str, Any]]
) -> int:
    return sum(
        1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(tolerations, t)
    )


def _status(taints: Sequence[Taint], pod: PodInfo) -> Status:
    taint = find_untolerated_taint(taints, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS)
    if taint is None:
        return Status.success()
    assert isinstance(taint, Taint)
    return Status.unresolvable(f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")


def _prefer_no_schedule_tolerations(tolerations: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [t for t in tolerations if not t.get("effect") or t.get("effect") == PREFER_NO_SCHEDULE]


class _Verdicts:
    """One tolerations set against every taint signature: 1 where the signature blocks the pod, and the
    number of untolerated PreferNoSchedule taints; with whether any signature blocks or counts at all."""

    __slots__ = ("any_blocked", "any_counted", "blocked", "counts")

    def __init__(self, blocked: Int64Array, counts: Int64Array) -> None:
        self.blocked = blocked
        self.counts = counts
        self.any_blocked = bool(blocked.any())
        self.any_counted = bool(counts.any())


class TaintToleration(
    SchedulerPlugin,
    FilterPlugin,
    VectorFilter,
    VectorFilterStatuses,
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    ScoreExtensions,
    VectorNormalize,
    EnqueueExtensions,
    SharedCaches,
):
    name = "TaintToleration"

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        # tolerations -> verdicts per taint signature; replicas share tolerations. The index only ever
        # appends signatures, so verdicts stay valid until it knows more signatures than they cover.
        self._verdicts: dict[str, _Verdicts] = {}

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return _status(node.node.taints, pod)

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> CodedStatuses:
        index = self.shared_node_index
        index.refresh()
        sigs = index.taint_sig_list
        return CodedStatuses.from_codes(index.taint_sig[rows], lambda sig: _status(sigs[sig], pod))

    def _by_signature(self, index: NodeAttributeIndex, pod: PodInfo) -> _Verdicts:
        """The pod's verdicts on every taint signature the index knows (computed once per tolerations)."""
        key = _tolerations_key(pod.tolerations)
        cached = self._verdicts.get(key)
        sigs = index.taint_sig_list
        if cached is not None and cached.blocked.shape[0] == len(sigs):
            return cached
        prefer = _prefer_no_schedule_tolerations(pod.tolerations)
        blocked = np.array(
            [find_untolerated_taint(t, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS) is not None for t in sigs],
            dtype=np.int64,
        )
        counts = np.array([count_intolerable_prefer_no_schedule(t, prefer) for t in sigs], dtype=np.int64)
        if len(self._verdicts) > 1024:
            self._verdicts.clear()
        found = self._verdicts[key] = _Verdicts(blocked, counts)
        return found

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        index = self.shared_node_index
        index.refresh()
        if not index.tainted_count:  # the usual cluster: no node has a taint
            return all_pass(rows.shape[0])
        verdicts = self._by_signature(index, pod)
        if not verdicts.any_blocked:  # no taint the index knows keeps this pod out: nothing to look up
            return all_pass(rows.shape[0])
        passes: BoolArray = verdicts.blocked[index.taint_sig[rows]] == 0
        return passes

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        state.write(_PRE_SCORE_KEY, _prefer_no_schedule_tolerations(pod.tolerations))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        tolerations = state.get(_PRE_SCORE_KEY)
        if tolerations is None:
            tolerations = _prefer_no_schedule_tolerations(pod.tolerations)
        return count_intolerable_prefer_no_schedule(node.node.taints, tolerations), Status.success()

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        index = self.shared_node_index
        index.refresh()
        if not index.tainted_count:
            return filled(rows.shape[0], 0)
        verdicts = self._by_signature(index, pod)
        if not verdicts.any_counted:  # no PreferNoSchedule taint counts against this pod anywhere
            return filled(rows.shape[0], 0)
        return verdicts.counts[index.taint_sig[rows]]

    def score_extensions(self) -> ScoreExtensions:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return Status.success()

    def normalize_all(
        self, state: CycleState, pod: PodInfo, rows: Int64Array, scores: Int64Array
    ) -> Int64Array:
        return default_normalize_array(MAX_NODE_SCORE, True, scores)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add"), ClusterEvent("Node", "Update"), ClusterEvent("Pod", "Update")]
