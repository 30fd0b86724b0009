"""InterPodAffinity (kube-scheduler ``plugins/interpodaffinity``).

PreFilter builds three maps from topology pair ``(key, value)`` to counts: existing pods whose required
anti-affinity terms match the incoming pod, existing pods matching *all* of the incoming pod's required
affinity terms, and existing pods matching any of its required anti-affinity terms. Filter then only looks
up the node's pairs. A pod whose affinity terms match only itself may land where no matching pod exists yet
(the first pod of a self-affine group). Preemption what-ifs update the maps pod by pod.

Score sums, over the node's topology pairs, the weights of preferred terms (incoming pod's terms matching
existing pods, and existing pods' terms matching the incoming pod, required affinity terms of existing pods
counting ``hardPodAffinityWeight``); anti-affinity subtracts. Scores are normalised min-max to 0..100.

A term's ``matchLabelKeys``/``mismatchLabelKeys`` are merged into its selector with the owning pod's label
values, as the API server does when the pod is created (the embedded cluster has no API server).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.api.selectors import (
    NOTHING,
    LabelSelector,
    Requirement,
    SelectorError,
    parse_label_selector,
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
    PreFilterExtensions,
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
from koord_plugin_kubernetes._clustercache import cluster_cache
from koord_plugin_kubernetes._nodeindex import NodeAttributeIndex, node_index
from koord_plugin_kubernetes._normalize import VectorNormalize
from koord_plugin_kubernetes._podcounts import pod_counts, snapshot_of
from koord_plugin_kubernetes.args import InterPodAffinityArgs

ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
_PRE_FILTER_KEY = "PreFilterInterPodAffinity"
_PRE_SCORE_KEY = "PreScoreInterPodAffinity"

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    namespace_selector: LabelSelector

    def matches(self, pod: PodInfo, ns_labels: Mapping[str, str] | None) -> bool:
        if pod.namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(pod.labels)
        return False


@dataclass(frozen=True, slots=True)
class PodTerms:
    """A pod's parsed (anti-)affinity terms (``framework.PodInfo``'s term fields)."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[tuple[AffinityTerm, int], ...] = ()
    preferred_anti: tuple[tuple[AffinityTerm, int], ...] = ()


def _term(pod: PodInfo, raw: Mapping[str, Any], path: str) -> AffinityTerm:
    selector = parse_label_selector(raw.get("labelSelector"), f"{path}.labelSelector")
    if not selector.nothing:
        extra: list[Requirement] = []
        for key in raw.get("matchLabelKeys") or ():
            if key in pod.labels:
                extra.append(Requirement(key, "In", frozenset({pod.labels[key]})))
        for key in raw.get("mismatchLabelKeys") or ():
            if key in pod.labels:
                extra.append(Requirement(key, "NotIn", frozenset({pod.labels[key]})))
        if extra:
            selector = selector.add(*extra)
    ns_raw = raw.get("namespaceSelector")
    names = raw.get("namespaces") or []
    namespaces = (
        frozenset([pod.namespace]) if not names and ns_raw is None else frozenset(str(n) for n in names)
    )
    ns_selector = parse_label_selector(ns_raw, f"{path}.namespaceSelector")
    return AffinityTerm(namespaces, selector, str(raw.get("topologyKey") or ""), ns_selector)


def parse_pod_terms(pod: PodInfo) -> PodTerms:
    """Raises SelectorError for a term Kubernetes could not parse."""
    aff = pod.affinity or {}
    pa = aff.get("podAffinity") or {}
    paa = aff.get("podAntiAffinity") or {}
    req_key, pref_key = (
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    )

    def required(src: Mapping[str, Any], name: str) -> tuple[AffinityTerm, ...]:
        return tuple(_term(pod, t, f"{name}.{req_key}[{i}]") for i, t in enumerate(src.get(req_key) or ()))

    def preferred(src: Mapping[str, Any], name: str) -> tuple[tuple[AffinityTerm, int], ...]:
        return tuple(
            (
                _term(pod, t.get("podAffinityTerm") or {}, f"{name}.{pref_key}[{i}].podAffinityTerm"),
                int(t.get("weight") or 0),
            )
            for i, t in enumerate(src.get(pref_key) or ())
        )

    return PodTerms(
        required(pa, "podAffinity"),
        required(paa, "podAntiAffinity"),
        preferred(pa, "podAffinity"),
        preferred(paa, "podAntiAffinity"),
    )


class _TermCache:
    """Parsed terms of existing pods, keyed by (uid, resourceVersion): pods are parsed once, not per cycle."""

    def __init__(self) -> None:
        self._terms: dict[tuple[str, str], PodTerms] = {}

    def get(self, pod: PodInfo) -> PodTerms:
        key = (pod.uid, pod.resource_version)
        found = self._terms.get(key)
        if found is None:
            try:
                found = parse_pod_terms(pod)
            except SelectorError:
                found = PodTerms()  # kube-scheduler's cache drops terms it cannot parse
            if len(self._terms) > 100_000:
                self._terms.clear()
            self._terms[key] = found
        return found


_NO_TERMS = PodTerms()
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _has_pod_affinity(pod: PodInfo) -> bool:
    aff = pod.affinity or {}
    return bool(aff.get("podAffinity") or aff.get("podAntiAffinity"))


def _matches_all(terms: Sequence[AffinityTerm], pod: PodInfo) -> bool:
    return bool(terms) and all(t.matches(pod, None) for t in terms)


# --- the indexed forms of the counts --------------------------------------------------------------------
GroupKey = tuple[str, AffinityTerm, int]
"""(kind, term, weight): kind ``anti`` (a required anti-affinity term, weight 1) or ``score`` (a term that
scores: required affinity at ``hardPodAffinityWeight``, preferred affinity at +weight, preferred
anti-affinity at -weight)."""


class _ExistingTerms:
    """The (anti-)affinity terms of existing pods grouped by ``GroupKey``, with how many pods of each node
    carry each group.

    kube-scheduler walks every node holding a pod with affinity in each PreFilter and PreScore, asking every
    such pod's terms about the incoming pod. Pods of one workload carry the same terms, so here the terms are
    grouped: a cycle asks each distinct term once and adds its per-node counts. The groups are kept current
    from the snapshot's change log, recounting only the nodes that changed.
    """

    def __init__(self, terms: _TermCache, hard_weight: int) -> None:
        self._terms = terms
        self._hard = hard_weight
        self._snapshot: Any = None
        self._seq = 0
        self._rows: dict[int, Counter[GroupKey]] = {}
        self.groups: dict[GroupKey, dict[int, int]] = {}
        """Group → row → pods of that node carrying the group's term (rows with none are absent)."""

    def refresh(self, snap: Any) -> None:
        changed = snap.rows_changed_since(self._seq) if self._snapshot is snap else None
        if changed is None:
            self._rows.clear()
            self.groups.clear()
            for ni in snap.by_row:
                if ni is not None and ni.pods_with_affinity:
                    self._set_row(ni.row, ni)
        else:
            by_row = snap.by_row
            for row in set(changed):
                self._set_row(row, by_row[row])
        self._snapshot = snap
        self._seq = snap.change_seq

    def _row_groups(self, ni: NodeInfo) -> Counter[GroupKey]:
        out: Counter[GroupKey] = Counter()
        for existing in ni.pods_with_affinity.values():
            t = self._terms.get(existing)
            for term in t.required_anti:
                out[("anti", term, 1)] += 1
            if self._hard > 0:
                for term in t.required_affinity:
                    out[("score", term, self._hard)] += 1
            for term, w in t.preferred_affinity:
                out[("score", term, w)] += 1
            for term, w in t.preferred_anti:
                out[("score", term, -w)] += 1
        return out

    def _set_row(self, row: int, ni: NodeInfo | None) -> None:
        old = self._rows.pop(row, None)
        if old:
            for key in old:
                rows = self.groups[key]
                del rows[row]
                if not rows:
                    del self.groups[key]
        if ni is None or not ni.pods_with_affinity:
            return
        new = self._row_groups(ni)
        if new:
            self._rows[row] = new
            for key, n in new.items():
                self.groups.setdefault(key, {})[row] = n


def _value_sums(index: NodeAttributeIndex, key: str, per_row: Int64Array) -> tuple[list[str], Int64Array]:
    """Per value of node label ``key``: the sum of ``per_row`` over the nodes with that value (``values[i]``
    ↔ ``sums[i]``); empty when no node with the label has a positive count."""
    codes, _, values = index.codes(key)
    n = min(codes.shape[0], per_row.shape[0])
    c, w = codes[:n], per_row[:n]
    sel = (c >= 0) & (w > 0)
    if not sel.any():
        return values, np.zeros(0, dtype=np.int64)
    sums = np.bincount(c[sel], weights=w[sel], minlength=len(values))
    return values, np.rint(sums).astype(np.int64)


def _add_pairs(counts: dict[Pair, int], key: str, values: list[str], sums: Int64Array) -> None:
    """``_bump`` once per counted pod, in bulk (every sum is positive)."""
    for i in np.flatnonzero(sums).tolist():
        pair = (key, values[i])
        counts[pair] = counts.get(pair, 0) + int(sums[i])


def _bump(counts: dict[Pair, int], labels: Mapping[str, str], key: str, delta: int) -> None:
    value = labels.get(key)
    if value is None:
        return
    pair = (key, value)
    n = counts.get(pair, 0) + delta
    if n == 0:
        counts.pop(pair, None)
    else:
        counts[pair] = n


@dataclass(slots=True)
class PreFilterState:
    terms: PodTerms
    namespace_labels: Mapping[str, str]
    existing_anti: dict[Pair, int] = field(default_factory=dict)
    affinity: dict[Pair, int] = field(default_factory=dict)
    anti: dict[Pair, int] = field(default_factory=dict)

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.terms, self.namespace_labels, dict(self.existing_anti), dict(self.affinity), dict(self.anti)
        )


class InterPodAffinity(
    SchedulerPlugin,
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    VectorFilter,
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    ScoreExtensions,
    EnqueueExtensions,
):
    name = "InterPodAffinity"
    Args = InterPodAffinityArgs

    def __init__(self, args: InterPodAffinityArgs, handle: Handle) -> None:  # type: ignore[override]
        super().__init__(args, handle)
        self.hard_weight = args.hard_pod_affinity_weight
        self.ignore_existing_preferred = args.ignore_preferred_terms_of_existing_pods
        self._terms = _TermCache()
        self._existing = _ExistingTerms(self._terms, self.hard_weight)

    # --- helpers ------------------------------------------------------------------------------------
    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = cluster_cache(self.handle).get("Namespace", namespace)
        return ((ns or {}).get("metadata") or {}).get("labels") or {}

    def _merge_namespaces(self, term: AffinityTerm) -> AffinityTerm:
        """``mergeAffinityTermNamespacesIfNotEmpty``: resolve a namespace selector into names."""
        if term.namespace_selector.empty():
            return term
        names = set(term.namespaces)
        for ns in cluster_cache(self.handle).list("Namespace"):
            meta = ns.get("metadata") or {}
            if term.namespace_selector.matches(meta.get("labels") or {}):
                names.add(str(meta.get("name") or ""))
        return AffinityTerm(frozenset(names), term.selector, term.topology_key, NOTHING)

    def _incoming_terms(self, pod: PodInfo) -> PodTerms:
        t = parse_pod_terms(pod)
        return PodTerms(
            tuple(self._merge_namespaces(x) for x in t.required_affinity),
            tuple(self._merge_namespaces(x) for x in t.required_anti),
            tuple((self._merge_namespaces(x), w) for x, w in t.preferred_affinity),
            tuple((self._merge_namespaces(x), w) for x, w in t.preferred_anti),
        )

    # --- PreFilter ------------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        try:
            terms = self._incoming_terms(pod) if _has_pod_affinity(pod) else _NO_TERMS
        except SelectorError as err:
            return None, Status.unresolvable(f"parsing pod: {err}")
        s = PreFilterState(terms, self._namespace_labels(pod.namespace))
        snap = snapshot_of(self.handle)
        if snap is not None and nodes is snap.node_list:
            self._pre_filter_indexed(s, pod, snap)
        else:
            self._pre_filter_walk(s, pod, nodes)
        if not s.existing_anti and not terms.required_affinity and not terms.required_anti:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, s)
        return None, Status.success()

    def _pre_filter_indexed(self, s: PreFilterState, pod: PodInfo, snap: Any) -> None:
        """The counts of ``_pre_filter_walk`` over every node of the snapshot, from the indexes."""
        terms = s.terms
        self._existing.refresh(snap)
        by_row = snap.by_row
        for (kind, term, _), rows in self._existing.groups.items():
            if kind != "anti" or not term.matches(pod, s.namespace_labels):
                continue
            for row, n in rows.items():
                ni = by_row[row]
                assert ni is not None
                _bump(s.existing_anti, ni.node.labels, term.topology_key, n)
        if not terms.required_affinity and not terms.required_anti:
            return
        counts = pod_counts(self.handle)
        assert counts is not None
        index = node_index(self.handle)
        index.refresh()
        if terms.required_affinity:
            affinity = terms.required_affinity
            matching = counts.counts(("InterPodAffinity/all", affinity), lambda p: _matches_all(affinity, p))
            for t in affinity:
                values, sums = _value_sums(index, t.topology_key, matching)
                _add_pairs(s.affinity, t.topology_key, values, sums)
        for t in terms.required_anti:
            matching = counts.counts(("InterPodAffinity/one", t), lambda p, t=t: t.matches(p, None))  # type: ignore[misc]
            values, sums = _value_sums(index, t.topology_key, matching)
            _add_pairs(s.anti, t.topology_key, values, sums)

    def _pre_filter_walk(self, s: PreFilterState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> None:
        """kube-scheduler's counting: every node, every pod (nodes given that are not the snapshot's)."""
        terms = s.terms
        for info in nodes:
            if not info.pods_with_required_anti_affinity:
                continue
            labels = info.node.labels
            for existing in info.pods_with_required_anti_affinity.values():
                for t in self._terms.get(existing).required_anti:
                    if t.matches(pod, s.namespace_labels):
                        _bump(s.existing_anti, labels, t.topology_key, 1)
        if terms.required_affinity or terms.required_anti:
            for info in nodes:
                labels = info.node.labels
                for existing in info.pods.values():
                    if _matches_all(terms.required_affinity, existing):
                        for t in terms.required_affinity:
                            _bump(s.affinity, labels, t.topology_key, 1)
                    for t in terms.required_anti:
                        if t.matches(existing, None):
                            _bump(s.anti, labels, t.topology_key, 1)

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def _update(
        self, state: CycleState, incoming: PodInfo, other: PodInfo, node: NodeInfo, delta: int
    ) -> Status:
        s: PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            return Status.as_error(f"reading {_PRE_FILTER_KEY!r} from cycleState: not found")
        labels = node.node.labels
        for t in self._terms.get(other).required_anti:
            if t.matches(incoming, s.namespace_labels):
                _bump(s.existing_anti, labels, t.topology_key, delta)
        if _matches_all(s.terms.required_affinity, other):
            for t in s.terms.required_affinity:
                _bump(s.affinity, labels, t.topology_key, delta)
        for t in s.terms.required_anti:
            if t.matches(other, None):
                _bump(s.anti, labels, t.topology_key, delta)
        return Status.success()

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, pod, to_add, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, pod, to_remove, node, -1)

    # --- Filter ---------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            return Status.as_error(f"reading {_PRE_FILTER_KEY!r} from cycleState: not found")
        labels = node.node.labels
        pods_exist = True
        for t in s.terms.required_affinity:
            value = labels.get(t.topology_key)
            if value is None:
                return Status.unresolvable(ERR_REASON_AFFINITY)
            if s.affinity.get((t.topology_key, value), 0) <= 0:
                pods_exist = False
        if not pods_exist and not (not s.affinity and _matches_all(s.terms.required_affinity, pod)):
            return Status.unresolvable(ERR_REASON_AFFINITY)
        if s.anti:
            for t in s.terms.required_anti:
                value = labels.get(t.topology_key)
                if value is not None and s.anti.get((t.topology_key, value), 0) > 0:
                    return Status.unschedulable(ERR_REASON_ANTI_AFFINITY)
        if s.existing_anti:
            for key, value in labels.items():
                if s.existing_anti.get((key, value), 0) > 0:
                    return Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY)
        return Status.success()

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        s: PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            raise KeyError(f"reading {_PRE_FILTER_KEY!r} from cycleState: not found")
        index = node_index(self.handle)
        index.refresh()
        n = rows.shape[0]
        ok = np.ones(n, dtype=np.bool_)
        if s.terms.required_affinity:
            keys_ok = np.ones(n, dtype=np.bool_)
            exist = np.ones(n, dtype=np.bool_)
            for t in s.terms.required_affinity:
                codes, code_of, values = index.codes(t.topology_key)
                rc = codes[rows]
                keys_ok &= rc >= 0
                per_code = np.zeros(len(values) + 1, dtype=np.int64)
                for (key, value), cnt in s.affinity.items():
                    if key == t.topology_key and value in code_of:
                        per_code[code_of[value]] = cnt
                exist &= per_code[rc] > 0
            fallback = not s.affinity and _matches_all(s.terms.required_affinity, pod)
            ok &= keys_ok & (exist | fallback)
        if s.anti:
            for t in s.terms.required_anti:
                codes, code_of, values = index.codes(t.topology_key)
                rc = codes[rows]
                per_code = np.zeros(len(values) + 1, dtype=np.int64)
                for (key, value), cnt in s.anti.items():
                    if key == t.topology_key and value in code_of:
                        per_code[code_of[value]] = cnt
                ok &= ~((rc >= 0) & (per_code[rc] > 0))
        if s.existing_anti:
            # A node fails when any of its (key, value) labels has a positive count: per key, one lookup
            # table over the label's value codes instead of a mask per pair.
            by_key: dict[str, list[str]] = {}
            for (key, value), cnt in s.existing_anti.items():
                if cnt > 0:
                    by_key.setdefault(key, []).append(value)
            for key, values_hit in by_key.items():
                codes, code_of, values = index.codes(key)
                bad = np.zeros(len(values) + 1, dtype=np.bool_)  # last slot: the label is missing
                for value in values_hit:
                    code = code_of.get(value)
                    if code is not None:
                        bad[code] = True
                ok &= ~bad[codes[rows]]
        return ok

    # --- PreScore / Score -------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        aff = pod.affinity or {}
        pref = "preferredDuringSchedulingIgnoredDuringExecution"
        has_constraints = bool((aff.get("podAffinity") or {}).get(pref)) or bool(
            (aff.get("podAntiAffinity") or {}).get(pref)
        )
        if self.ignore_existing_preferred and not has_constraints:
            return Status.skip()
        try:
            terms = self._incoming_terms(pod) if _has_pod_affinity(pod) else _NO_TERMS
        except SelectorError as err:
            return Status.as_error(f"failed to parse pod: {err}")
        ns_labels = self._namespace_labels(pod.namespace)
        snap = snapshot_of(self.handle)
        if snap is not None:
            scores = self._pre_score_indexed(pod, terms, ns_labels, snap)
        else:
            scores = self._pre_score_walk(pod, terms, ns_labels, has_constraints)
        if scores is None:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, scores)
        return Status.success()

    def _pre_score_indexed(
        self, pod: PodInfo, terms: PodTerms, ns_labels: Mapping[str, str], snap: Any
    ) -> dict[str, dict[str, int]] | None:
        """``_pre_score_walk`` over every node of the snapshot, from the indexes; None when nothing matched."""
        scores: dict[str, dict[str, int]] = {}
        touched = False
        incoming = [(t, w) for t, w in terms.preferred_affinity] + [(t, -w) for t, w in terms.preferred_anti]
        if incoming:
            counts = pod_counts(self.handle)
            assert counts is not None
            index = node_index(self.handle)
            index.refresh()
            for t, w in incoming:
                matching = counts.counts(("InterPodAffinity/one", t), lambda p, t=t: t.matches(p, None))  # type: ignore[misc]
                values, sums = _value_sums(index, t.topology_key, matching)
                hit = np.flatnonzero(sums).tolist()
                if hit:
                    touched = True
                    per_key = scores.setdefault(t.topology_key, {})
                    for i in hit:
                        per_key[values[i]] = per_key.get(values[i], 0) + int(sums[i]) * w
        self._existing.refresh(snap)
        by_row = snap.by_row
        for (kind, term, weight), rows in self._existing.groups.items():
            if kind != "score" or not term.matches(pod, ns_labels):
                continue
            key = term.topology_key
            for row, n in rows.items():
                ni = by_row[row]
                assert ni is not None
                value = ni.node.labels.get(key)
                if value is not None:
                    per_key = scores.setdefault(key, {})
                    per_key[value] = per_key.get(value, 0) + weight * n
                    touched = True
        return scores if touched else None

    def _pre_score_walk(
        self, pod: PodInfo, terms: PodTerms, ns_labels: Mapping[str, str], has_constraints: bool
    ) -> dict[str, dict[str, int]] | None:
        """kube-scheduler's PreScore: every node, its pods (or only those with affinity), every term."""
        scores: dict[str, dict[str, int]] = {}
        touched = False

        def process(
            term: AffinityTerm,
            weight: int,
            target: PodInfo,
            target_ns: Mapping[str, str] | None,
            labels: Mapping[str, str],
            mult: int,
        ) -> None:
            nonlocal touched
            if term.matches(target, target_ns):
                value = labels.get(term.topology_key)
                if value is not None:
                    per_key = scores.setdefault(term.topology_key, {})
                    per_key[value] = per_key.get(value, 0) + weight * mult
                    touched = True

        for info in self.handle.node_infos():
            candidates = info.pods if has_constraints else info.pods_with_affinity
            if not candidates:
                continue
            labels = info.node.labels
            if not labels:
                continue
            for existing in candidates.values():
                for t, w in terms.preferred_affinity:
                    process(t, w, existing, None, labels, 1)
                for t, w in terms.preferred_anti:
                    process(t, w, existing, None, labels, -1)
                ex = self._terms.get(existing)
                if self.hard_weight > 0:
                    for t in ex.required_affinity:
                        process(t, self.hard_weight, pod, ns_labels, labels, 1)
                for t, w in ex.preferred_affinity:
                    process(t, w, pod, ns_labels, labels, 1)
                for t, w in ex.preferred_anti:
                    process(t, w, pod, ns_labels, labels, -1)
        return scores if touched else None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        scores: dict[str, dict[str, int]] | None = state.get(_PRE_SCORE_KEY)
        if scores is None:
            return 0, Status.as_error(f"failed to read {_PRE_SCORE_KEY!r} from cycleState")
        labels = node.node.labels
        total = 0
        for key, per_value in scores.items():
            value = labels.get(key)
            if value is not None:
                total += per_value.get(value, 0)
        return total, Status.success()

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        scores: dict[str, dict[str, int]] | None = state.get(_PRE_SCORE_KEY)
        if scores is None:
            raise KeyError(f"failed to read {_PRE_SCORE_KEY!r} from cycleState")
        index = node_index(self.handle)
        index.refresh()
        total = np.zeros(rows.shape[0], dtype=np.int64)
        for key, per_value in scores.items():
            codes, code_of, values = index.codes(key)
            per_code = np.zeros(len(values) + 1, dtype=np.int64)
            for value, w in per_value.items():
                code = code_of.get(value)
                if code is not None:
                    per_code[code] = w
            total += per_code[codes[rows]]
        return total

    def score_extensions(self) -> ScoreExtensions:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        if not state.get(_PRE_SCORE_KEY):
            return Status.success()
        lo = min((s.score for s in scores), default=0)
        hi = max((s.score for s in scores), default=0)
        diff = hi - lo
        for s in scores:
            s.score = int(float(MAX_NODE_SCORE) * (float(s.score - lo) / float(diff))) if diff > 0 else 0
        return Status.success()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "*"), ClusterEvent("Node", "Add"), ClusterEvent("Node", "Update")]


__all__ = ["AffinityTerm", "InterPodAffinity", "PodTerms", "parse_pod_terms"]
