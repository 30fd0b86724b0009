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
from dataclasses import dataclass
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
    SnapshotView,
    VectorFilter,
    VectorScore,
)
from koord_framework.scheduler.status import MAX_NODE_SCORE, Status
from koord_framework.scheduler.table import BoolArray, Int64Array
from koord_plugin_kubernetes._nodeindex import NodeAttributeIndex
from koord_plugin_kubernetes._normalize import VectorNormalize
from koord_plugin_kubernetes._shared import SharedCaches
from koord_plugin_kubernetes.args import InterPodAffinityArgs

ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
_PRE_FILTER_KEY = "PreFilterInterPodAffinity"
_PRE_SCORE_KEY = "PreScoreInterPodAffinity"

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One pod (anti-)affinity term, parsed: the pods it selects, their namespaces, the topology key."""

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


def _any_required_anti(snap: Any, nodes: Sequence[NodeInfo]) -> bool:
    """Whether any node of ``nodes`` holds a pod with required anti-affinity; O(1) for the snapshot's own
    node list, whose list of such nodes is kept up to date as pods come and go."""
    if snap is not None and nodes is snap.node_list:
        return bool(snap.have_pods_with_required_anti_affinity())
    return any(ni.pods_with_required_anti_affinity for ni in nodes)


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
        self._snapshot: SnapshotView | None = None
        self._seq = 0
        self._rows: dict[int, Counter[GroupKey]] = {}
        self.groups: dict[GroupKey, dict[int, int]] = {}
        """Group → row → pods of that node carrying the group's term (rows with none are absent)."""
        self.per_row: dict[GroupKey, Int64Array] = {}
        """Group → the same counts as an array over every snapshot row (for required anti-affinity)."""
        self._size = 0

    def refresh(self, snap: SnapshotView) -> None:
        changed = snap.rows_changed_since(self._seq) if self._snapshot is snap else None
        size = len(snap.by_row)
        if changed is None:
            self._rows.clear()
            self.groups.clear()
            self.per_row.clear()
            self._size = size
            for ni in snap.by_row:
                if ni is not None and ni.pods_with_affinity:
                    self._set_row(ni.row, ni)
        else:
            if size > self._size:
                for key, arr in self.per_row.items():
                    grown = np.zeros(size, dtype=np.int64)
                    grown[: arr.shape[0]] = arr
                    self.per_row[key] = grown
                self._size = size
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
                if rows:
                    self.per_row[key][row] = 0
                else:
                    del self.groups[key]
                    del self.per_row[key]
        if ni is None or not ni.pods_with_affinity:
            return
        new = self._row_groups(ni)
        if new:
            self._rows[row] = new
            for key, n in new.items():
                self.groups.setdefault(key, {})[row] = n
                arr = self.per_row.get(key)
                if arr is None:
                    arr = self.per_row[key] = np.zeros(self._size, dtype=np.int64)
                arr[row] = n


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


@dataclass(slots=True)
class _CodeCounts:
    """Counts per value of one topology key, indexed by the node index's value codes of that key."""

    codes: Int64Array
    """The index's per-row codes the counts belong to (they are valid while the index still uses it)."""
    values: list[str]
    counts: Int64Array

    def padded(self, size: int) -> Int64Array:
        """The counts for codes ``0..size-2`` and 0 in the last slot (code -1: the label is missing)."""
        out = np.zeros(size, dtype=np.int64)
        n = min(self.counts.shape[0], size - 1)
        out[:n] = self.counts[:n]
        return out


def _accumulate(
    vectors: dict[str, _CodeCounts], index: NodeAttributeIndex, key: str, per_row: Int64Array
) -> None:
    """Add ``per_row`` (pods per snapshot row) to the counts of ``key``, grouped by the rows' values."""
    codes, _, values = index.codes(key)
    _, sums = _value_sums(index, key, per_row)
    if not sums.size:
        return
    found = vectors.get(key)
    if found is None:
        vectors[key] = _CodeCounts(codes, values, sums)
    else:
        size = max(found.counts.shape[0], sums.shape[0])
        total = np.zeros(size, dtype=np.int64)
        total[: found.counts.shape[0]] += found.counts
        total[: sums.shape[0]] += sums
        found.counts = total


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


_MAPS = ("existing_anti", "affinity", "anti")


class PreFilterState:
    """The three topology-pair count maps (kube-scheduler's ``preFilterState``).

    ``existing_anti``: pairs where existing pods' required anti-affinity terms match the incoming pod;
    ``affinity``: pairs with pods matching all the incoming pod's required affinity terms; ``anti``: pairs
    with pods matching one of its required anti-affinity terms. The indexed PreFilter produces them as
    per-key arrays over the node index's value codes (a hostname key has a pair per node: thousands), which
    the vectorised Filter reads directly; they become ``(key, value) → count`` dicts on first use by anything
    else (the per-node Filter, preemption's AddPod/RemovePod), which then owns them.
    """

    __slots__ = ("_dicts", "_vectors", "namespace_labels", "terms")

    def __init__(
        self,
        terms: PodTerms,
        namespace_labels: Mapping[str, str],
        existing_anti: dict[Pair, int] | None = None,
        affinity: dict[Pair, int] | None = None,
        anti: dict[Pair, int] | None = None,
    ) -> None:
        self.terms = terms
        self.namespace_labels = namespace_labels
        self._dicts: dict[str, dict[Pair, int]] = {}
        self._vectors: dict[str, dict[str, _CodeCounts]] = {}
        for name, given in zip(_MAPS, (existing_anti, affinity, anti), strict=True):
            self._dicts[name] = given if given is not None else {}

    # --- the dicts ------------------------------------------------------------------------------------
    def _dict(self, name: str) -> dict[Pair, int]:
        vectors = self._vectors.pop(name, None)
        if vectors:
            counts = self._dicts[name]
            for key, cc in vectors.items():
                for code in np.flatnonzero(cc.counts).tolist():
                    pair = (key, cc.values[code])
                    n = counts.get(pair, 0) + int(cc.counts[code])
                    if n == 0:
                        counts.pop(pair, None)
                    else:
                        counts[pair] = n
        return self._dicts[name]

    @property
    def existing_anti(self) -> dict[Pair, int]:
        return self._dict("existing_anti")

    @property
    def affinity(self) -> dict[Pair, int]:
        return self._dict("affinity")

    @property
    def anti(self) -> dict[Pair, int]:
        return self._dict("anti")

    # --- the arrays -----------------------------------------------------------------------------------
    def vectors(self, name: str) -> dict[str, _CodeCounts]:
        """Where the indexed PreFilter accumulates the counts of map ``name`` (before any dict use)."""
        return self._vectors.setdefault(name, {})

    def has(self, name: str) -> bool:
        """Whether map ``name`` has a non-zero count (``bool`` of the dict, without building it)."""
        if self._dicts[name]:
            return True
        return any(cc.counts.any() for cc in self._vectors.get(name, {}).values())

    def per_code(self, name: str, key: str, index: NodeAttributeIndex) -> Int64Array:
        """Counts of map ``name`` for topology key ``key`` by the index's current value code of each
        node, with a last slot of 0 for nodes without the label (so ``per_code[codes[rows]]`` works)."""
        codes, code_of, values = index.codes(key)
        vectors = self._vectors.get(name)
        if vectors is not None and not self._dicts[name]:
            cc = vectors.get(key)
            if cc is None:
                return np.zeros(len(values) + 1, dtype=np.int64)
            if cc.codes is codes:
                return cc.padded(len(values) + 1)
        out = np.zeros(len(values) + 1, dtype=np.int64)
        for (k, value), cnt in self._dict(name).items():
            if k == key and value in code_of:
                out[code_of[value]] = cnt
        return out

    def keys(self, name: str) -> set[str]:
        """The topology keys map ``name`` counts anything for."""
        if not self._dicts[name] and name in self._vectors:
            return {k for k, cc in self._vectors[name].items() if cc.counts.any()}
        return {k for (k, _), cnt in self._dict(name).items() if cnt}

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.terms,
            self.namespace_labels,
            dict(self.existing_anti),
            dict(self.affinity),
            dict(self.anti),
        )


class InterPodAffinity(
    SchedulerPlugin[InterPodAffinityArgs],
    PreFilterPlugin,
    PreFilterExtensions,
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
    name = "InterPodAffinity"
    Args = InterPodAffinityArgs

    def __init__(self, args: InterPodAffinityArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.hard_weight = args.hard_pod_affinity_weight
        self.ignore_existing_preferred = args.ignore_preferred_terms_of_existing_pods
        self._terms = _TermCache()
        self._existing = _ExistingTerms(self._terms, self.hard_weight)

    # --- helpers ------------------------------------------------------------------------------------
    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self.shared_cluster_cache.get("Namespace", namespace)
        return ((ns or {}).get("metadata") or {}).get("labels") or {}

    def _merge_namespaces(self, term: AffinityTerm) -> AffinityTerm:
        """``mergeAffinityTermNamespacesIfNotEmpty``: resolve a namespace selector into names."""
        if term.namespace_selector.empty():
            return term
        names = set(term.namespaces)
        for ns in self.shared_cluster_cache.list("Namespace"):
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
        snap = self.handle.snapshot
        has_affinity = _has_pod_affinity(pod)
        if not has_affinity and not _any_required_anti(snap, nodes):
            # Nothing can count: kube-scheduler's Skip (no existing anti-affinity match, no own terms),
            # decided without building the state.
            return None, Status.skip()
        try:
            terms = self._incoming_terms(pod) if has_affinity else _NO_TERMS
        except SelectorError as err:
            return None, Status.unresolvable(f"parsing pod: {err}")
        s = PreFilterState(terms, self._namespace_labels(pod.namespace))
        if snap is not None and nodes is snap.node_list:
            self._pre_filter_indexed(s, pod, snap)
        else:
            self._pre_filter_walk(s, pod, nodes)
        if not s.has("existing_anti") and not terms.required_affinity and not terms.required_anti:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, s)
        return None, Status.success()

    def _pre_filter_indexed(self, s: PreFilterState, pod: PodInfo, snap: Any) -> None:
        """The counts of ``_pre_filter_walk`` over every node of the snapshot, from the indexes."""
        terms = s.terms
        self._existing.refresh(snap)
        index = self.shared_node_index
        index.refresh()
        existing = s.vectors("existing_anti")
        for key, per_row in self._existing.per_row.items():
            kind, term, _ = key
            if kind == "anti" and term.matches(pod, s.namespace_labels):
                _accumulate(existing, index, term.topology_key, per_row)
        if not terms.required_affinity and not terms.required_anti:
            return
        counts = self.shared_pod_counts
        assert counts is not None
        if terms.required_affinity:
            affinity = terms.required_affinity
            matching = counts.counts(("InterPodAffinity/all", affinity), lambda p: _matches_all(affinity, p))
            for t in affinity:
                _accumulate(s.vectors("affinity"), index, t.topology_key, matching)
        for t in terms.required_anti:
            matching = counts.counts(("InterPodAffinity/one", t), lambda p, t=t: t.matches(p, None))  # type: ignore[misc]
            _accumulate(s.vectors("anti"), index, t.topology_key, matching)

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
        index = self.shared_node_index
        index.refresh()
        n = rows.shape[0]
        ok = np.ones(n, dtype=np.bool_)
        if s.terms.required_affinity:
            keys_ok = np.ones(n, dtype=np.bool_)
            exist = np.ones(n, dtype=np.bool_)
            for t in s.terms.required_affinity:
                rc = index.codes(t.topology_key)[0][rows]
                keys_ok &= rc >= 0
                exist &= s.per_code("affinity", t.topology_key, index)[rc] > 0
            fallback = not s.has("affinity") and _matches_all(s.terms.required_affinity, pod)
            ok &= keys_ok & (exist | fallback)
        if s.has("anti"):
            for t in s.terms.required_anti:
                rc = index.codes(t.topology_key)[0][rows]
                ok &= ~((rc >= 0) & (s.per_code("anti", t.topology_key, index)[rc] > 0))
        if s.has("existing_anti"):
            # A node fails when any of its (key, value) labels has a positive count: one lookup table per
            # key over the label's value codes (code -1, a missing label, reads the trailing 0).
            for key in s.keys("existing_anti"):
                rc = index.codes(key)[0][rows]
                ok &= ~(s.per_code("existing_anti", key, index)[rc] > 0)
        return ok

    # --- PreScore / Score -------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        has_affinity = _has_pod_affinity(pod)
        has_constraints = False
        if has_affinity:
            aff = pod.affinity or {}
            has_constraints = bool((aff.get("podAffinity") or {}).get(_PREFERRED)) or bool(
                (aff.get("podAntiAffinity") or {}).get(_PREFERRED)
            )
        if self.ignore_existing_preferred and not has_constraints:
            return Status.skip()
        snap = self.handle.snapshot
        if snap is not None and not has_affinity and not snap.have_pods_with_affinity():
            # No term anywhere to score with: kube-scheduler ends with an empty score map, hence Skip.
            return Status.skip()
        try:
            terms = self._incoming_terms(pod) if has_affinity else _NO_TERMS
        except SelectorError as err:
            return Status.as_error(f"failed to parse pod: {err}")
        ns_labels = self._namespace_labels(pod.namespace)
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
        """``_pre_score_walk`` over every node of the snapshot, from the indexes; None if nothing matched."""
        scores: dict[str, dict[str, int]] = {}
        touched = False
        incoming = [(t, w) for t, w in terms.preferred_affinity] + [(t, -w) for t, w in terms.preferred_anti]
        if incoming:
            counts = self.shared_pod_counts
            assert counts is not None
            index = self.shared_node_index
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
        index = self.shared_node_index
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

    def normalize_all(
        self, state: CycleState, pod: PodInfo, rows: Int64Array, scores: Int64Array
    ) -> Int64Array:
        if not state.get(_PRE_SCORE_KEY) or not scores.size:
            return scores
        lo, hi = int(scores.min()), int(scores.max())
        diff = hi - lo
        if diff <= 0:
            return np.zeros(scores.shape, dtype=np.int64)
        # The same float64 operations as the per-node form, then truncation toward zero like ``int()``.
        ratio = (scores - lo).astype(np.float64) / float(diff)
        return (float(MAX_NODE_SCORE) * ratio).astype(np.int64)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "*"), ClusterEvent("Node", "Add"), ClusterEvent("Node", "Update")]


__all__ = ["AffinityTerm", "InterPodAffinity", "PodTerms", "parse_pod_terms"]
