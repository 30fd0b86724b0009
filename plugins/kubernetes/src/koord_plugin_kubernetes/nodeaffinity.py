"""NodeAffinity: ``nodeSelector`` and required node affinity filter; preferred terms score.

PreFilter narrows the candidates to the node names a pod's required terms pin with ``metadata.name In``
(every term must pin names, else all nodes stay candidates), and rejects a pod whose terms pin no name at
all. ``addedAffinity`` from the args applies to every pod: its required part filters, its preferred terms
add to the score. The vectorised forms evaluate each distinct affinity once per node-label change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.api.selectors import (
    OBJECT_NAME_FIELD,
    NodeSelector,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
    SelectorError,
    parse_node_selector,
)
from koord_framework.scheduler.interface import (
    ClusterEvent,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeInfo,
    NodeScore,
    NodeTable,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    SchedulerPlugin,
    ScoreExtensions,
    ScorePlugin,
    VectorFilter,
    VectorScore,
)
from koord_framework.scheduler.status import MAX_NODE_SCORE, Status
from koord_framework.scheduler.table import BoolArray, Int64Array
from koord_plugin_kubernetes._masks import node_selector_mask, required_affinity_mask, take, term_mask
from koord_plugin_kubernetes._normalize import (
    VectorNormalize,
    default_normalize_array,
    default_normalize_score,
)
from koord_plugin_kubernetes._shared import SharedCaches
from koord_plugin_kubernetes.args import NodeAffinityArgs

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
_PRE_FILTER_KEY = "PreFilterNodeAffinity"
_PRE_SCORE_KEY = "PreScoreNodeAffinity"


@dataclass(frozen=True, slots=True)
class _Required:
    """The pod's required node affinity, parsed once per pod (CycleState)."""

    affinity: RequiredNodeAffinity
    signature: str

    def clone(self) -> _Required:
        return self


def _required_terms(pod: PodInfo) -> dict[str, Any] | None:
    node_aff = (pod.affinity or {}).get("nodeAffinity") or {}
    required = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    return required if required is not None else None


def _preferred(pod: PodInfo) -> PreferredSchedulingTerms | None:
    node_aff = (pod.affinity or {}).get("nodeAffinity") or {}
    terms = node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return PreferredSchedulingTerms.parse(terms) if terms else None


def _pinned_node_names(required: dict[str, Any]) -> set[str] | None:
    """Node names the required terms allow through ``metadata.name In``; None when a term does not pin."""
    names: set[str] = set()
    for term in required.get("nodeSelectorTerms") or ():
        term_names: set[str] | None = None
        for r in (term or {}).get("matchFields") or ():
            if r.get("key") == OBJECT_NAME_FIELD and r.get("operator") == "In":
                values = {str(v) for v in r.get("values") or ()}
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


class NodeAffinity(
    SchedulerPlugin[NodeAffinityArgs],
    PreFilterPlugin,
    FilterPlugin,
    VectorFilter,
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    ScoreExtensions,
    VectorNormalize,
    EnqueueExtensions,
    SharedCaches,
):
    name = "NodeAffinity"
    Args = NodeAffinityArgs

    def __init__(self, args: NodeAffinityArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        added = args.added_affinity or {}
        required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
        self.added_node_selector: NodeSelector | None = (
            parse_node_selector(required, strict=True) if required is not None else None
        )
        preferred = added.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        self.added_pref_terms: PreferredSchedulingTerms | None = (
            PreferredSchedulingTerms.parse(preferred) if preferred else None
        )
        self._masks: dict[str, tuple[int, BoolArray]] = {}
        self._pref_masks: dict[str, tuple[int, Int64Array]] = {}

    # --- PreFilter / Filter ---------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        required = _required_terms(pod)
        if required is None and self.added_node_selector is None and not pod.node_selector:
            return None, Status.skip()
        signature = json.dumps([pod.node_selector, required], sort_keys=True, default=str)
        state.write(_PRE_FILTER_KEY, _Required(RequiredNodeAffinity.of(pod), signature))
        if required is None or not required.get("nodeSelectorTerms"):
            return None, Status.success()
        names = _pinned_node_names(required)
        if names is None:
            return None, Status.success()
        if not names:
            return None, Status.unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(names), Status.success()

    def _required(self, state: CycleState, pod: PodInfo) -> _Required:
        found = state.get(_PRE_FILTER_KEY)
        if found is None:
            required = _required_terms(pod)
            signature = json.dumps([pod.node_selector, required], sort_keys=True, default=str)
            found = _Required(RequiredNodeAffinity.of(pod), signature)
        return found  # type: ignore[no-any-return]

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if self.added_node_selector is not None and not self.added_node_selector.match_node(node.node):
            return Status.unresolvable(ERR_REASON_ENFORCED)
        if not self._required(state, pod).affinity.match_node(node.node):
            return Status.unresolvable(ERR_REASON_POD)
        return Status.success()

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        index = self.shared_node_index
        index.refresh()
        req = self._required(state, pod)
        cached = self._masks.get(req.signature)
        if cached is None or cached[0] != index.epoch or cached[1].shape[0] != index.size:
            mask = required_affinity_mask(index, req.affinity)
            if self.added_node_selector is not None:
                mask &= node_selector_mask(index, self.added_node_selector)
            if len(self._masks) > 1024:
                self._masks.clear()
            cached = (index.epoch, mask)
            self._masks[req.signature] = cached
        return take(cached[1], rows)

    # --- PreScore / Score -----------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        try:
            preferred = _preferred(pod)
        except SelectorError as err:
            return Status.as_error(err)
        if preferred is None and self.added_pref_terms is None:
            return Status.skip()
        node_aff = (pod.affinity or {}).get("nodeAffinity") or {}
        signature = json.dumps(
            node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or [], sort_keys=True
        )
        state.write(_PRE_SCORE_KEY, (preferred, signature))
        return Status.success()

    def _preferred_state(
        self, state: CycleState, pod: PodInfo
    ) -> tuple[PreferredSchedulingTerms | None, str]:
        found = state.get(_PRE_SCORE_KEY)
        if found is None:
            node_aff = (pod.affinity or {}).get("nodeAffinity") or {}
            terms = node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []
            found = (_preferred(pod), json.dumps(terms, sort_keys=True))
        return found  # type: ignore[no-any-return]

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        count = 0
        labels, name = node.node.labels, node.node.name
        if self.added_pref_terms is not None:
            count += self.added_pref_terms.score(labels, name)
        preferred, _ = self._preferred_state(state, pod)
        if preferred is not None:
            count += preferred.score(labels, name)
        return count, Status.success()

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        index = self.shared_node_index
        index.refresh()
        preferred, signature = self._preferred_state(state, pod)
        cached = self._pref_masks.get(signature)
        if cached is None or cached[0] != index.epoch or cached[1].shape[0] != index.size:
            total = np.zeros(index.size, dtype=np.int64)
            for terms in (self.added_pref_terms, preferred):
                if terms is None:
                    continue
                for term, weight in terms.terms:
                    total += np.where(term_mask(index, term), weight, 0)
            if len(self._pref_masks) > 1024:
                self._pref_masks.clear()
            cached = (index.epoch, total)
            self._pref_masks[signature] = cached
        scores = cached[1]
        if rows.size and int(rows.max()) >= scores.shape[0]:
            out = np.zeros(rows.shape[0], dtype=np.int64)
            ok = rows < scores.shape[0]
            out[ok] = scores[rows[ok]]
            return out
        return scores[rows]

    def score_extensions(self) -> ScoreExtensions:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return Status.success()

    def normalize_all(
        self, state: CycleState, pod: PodInfo, rows: Int64Array, scores: Int64Array
    ) -> Int64Array:
        return default_normalize_array(MAX_NODE_SCORE, False, scores)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add"), ClusterEvent("Node", "Update")]
