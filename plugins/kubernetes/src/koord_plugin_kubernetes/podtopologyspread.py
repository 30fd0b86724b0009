"""PodTopologySpread (kube-scheduler ``plugins/podtopologyspread``).

Hard constraints (``DoNotSchedule``): PreFilter counts, per constraint, the matching pods of the pod's
namespace in every topology domain of the eligible nodes (nodes with all topology keys that pass the
constraint's node-inclusion policies), and keeps the global minimum exact under the single-pod updates of
preemption what-ifs with a histogram of domain counts. Filter admits a node when
``count(domain) + selfMatch - min <= maxSkew`` (``min`` is 0 while fewer than ``minDomains`` domains exist).

Soft constraints (``ScheduleAnyway``) score: fewer matching pods in a node's domains is better, weighted by
``log(#domains + 2)``. Pods without constraints get the defaults (System: hostname maxSkew 3, zone maxSkew 5,
both soft) with a selector built from the Services, ReplicaSets, StatefulSets and ReplicationControllers
selecting the pod. ``matchLabelKeys`` values from the pod's labels are merged into the selector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.selectors import (
    DO_NOT_SCHEDULE_EFFECTS,
    EVERYTHING,
    LabelSelector,
    RequiredNodeAffinity,
    SelectorError,
    find_untolerated_taint,
    parse_label_selector,
    selector_from_set,
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
)
from koord_framework.scheduler.status import MAX_NODE_SCORE, Status
from koord_framework.scheduler.table import BoolArray, Int64Array
from koord_plugin_kubernetes._masks import required_affinity_mask
from koord_plugin_kubernetes._resources import go_round
from koord_plugin_kubernetes._shared import SharedCaches
from koord_plugin_kubernetes.args import SYSTEM_DEFAULTING, PodTopologySpreadArgs

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)
_PRE_FILTER_KEY = "PreFilterPodTopologySpread"
_PRE_SCORE_KEY = "PreScorePodTopologySpread"
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Constraint:
    """One ``topologySpreadConstraints`` entry, parsed."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"

    def matches_inclusion_policies(
        self, pod: PodInfo, node: NodeRecord, required: RequiredNodeAffinity
    ) -> bool:
        if self.node_affinity_policy == "Honor" and not required.match_node(node):
            return False
        if self.node_taints_policy == "Honor":
            return find_untolerated_taint(node.taints, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS) is None
        return True


def parse_constraints(
    raw: Sequence[Mapping[str, Any]], pod_labels: Mapping[str, str], action: str
) -> list[Constraint]:
    """``filterTopologySpreadConstraints``: the constraints with ``action``, selectors parsed and merged."""
    out: list[Constraint] = []
    for i, c in enumerate(raw):
        if c.get("whenUnsatisfiable") != action:
            continue
        selector = parse_label_selector(
            c.get("labelSelector"), f"topologySpreadConstraints[{i}].labelSelector"
        )
        keys = c.get("matchLabelKeys") or ()
        if keys and not selector.nothing:
            merged = {k: pod_labels[k] for k in keys if k in pod_labels}
            if merged:
                selector = LabelSelector(selector_from_set(merged).requirements + selector.requirements)
        min_domains = c.get("minDomains")
        out.append(
            Constraint(
                max_skew=int(c.get("maxSkew") or 0),
                topology_key=str(c.get("topologyKey") or ""),
                selector=selector,
                min_domains=int(min_domains) if min_domains is not None else 1,
                node_affinity_policy=str(c.get("nodeAffinityPolicy") or "Honor"),
                node_taints_policy=str(c.get("nodeTaintsPolicy") or "Ignore"),
            )
        )
    return out


def node_has_all_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def count_matching(pods: Mapping[str, PodInfo], selector: LabelSelector, namespace: str) -> int:
    """``countPodsMatchSelector``: pods of ``namespace`` (not terminating) the selector matches; the
    select-everything selector counts nothing."""
    if selector.empty():
        return 0
    return sum(
        1
        for p in pods.values()
        if p.deletion_time is None and p.namespace == namespace and selector.matches(p.labels)
    )


@dataclass(slots=True)
class PreFilterState:
    """The hard constraints of the pod and the matching pods per topology domain."""

    constraints: list[Constraint]
    tp_counts: list[dict[str, int]] = field(default_factory=list)
    """Per constraint: topology value -> matching pods."""
    histogram: list[dict[int, int]] = field(default_factory=list)
    """Per constraint: count -> number of domains holding exactly that many matching pods."""
    min_match: list[int] = field(default_factory=list)

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.constraints,
            [dict(m) for m in self.tp_counts],
            [dict(h) for h in self.histogram],
            list(self.min_match),
        )

    def global_min(self, i: int) -> int:
        if len(self.tp_counts[i]) < self.constraints[i].min_domains:
            return 0
        return self.min_match[i]

    def update(self, i: int, value: str, delta: int) -> None:
        old = self.tp_counts[i].get(value, 0)
        cur = old + delta
        self.tp_counts[i][value] = cur
        hist = self.histogram[i]
        hist[old] = hist.get(old, 0) - 1
        if hist[old] <= 0:
            del hist[old]
        hist[cur] = hist.get(cur, 0) + 1
        if cur < self.min_match[i] or (old == self.min_match[i] and hist.get(old, 0) == 0):
            self.min_match[i] = cur


@dataclass(slots=True)
class PreScoreState:
    """The soft constraints of the pod, the matching pods per domain and their weights."""

    constraints: list[Constraint]
    ignored_nodes: set[str]
    counts: list[dict[str, int]]
    weights: list[float]

    def clone(self) -> PreScoreState:
        return self


class PodTopologySpread(
    SchedulerPlugin[PodTopologySpreadArgs],
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    VectorFilter,
    PreScorePlugin,
    ScorePlugin,
    ScoreExtensions,
    EnqueueExtensions,
    SharedCaches,
):
    name = "PodTopologySpread"
    Args = PodTopologySpreadArgs

    def __init__(self, args: PodTopologySpreadArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints: tuple[Mapping[str, Any], ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else tuple(args.default_constraints)
        )
        self._defaults_use_pod_labels = any(c.get("matchLabelKeys") for c in self.default_constraints)
        self._parsed_defaults: dict[str, list[Constraint]] = {}
        self._with_defaults: dict[Any, tuple[int, tuple[Constraint, ...]]] = {}
        """(action, namespace, labels, controller) -> (cluster cache version, default constraints)."""

    # --- constraints ----------------------------------------------------------------------------------
    def default_selector(self, pod: PodInfo) -> LabelSelector:
        """``helper.DefaultSelector``: labels of Services selecting the pod, plus its controller's selector."""  # noqa: E501
        cache = self.shared_cluster_cache
        merged: dict[str, str] = {}
        for svc in cache.list("Service", pod.namespace):
            sel = (svc.get("spec") or {}).get("selector")
            if sel is None:
                continue  # a nil selector matches nothing
            if selector_from_set(sel).matches(pod.labels):
                merged.update(sel)
        selector = selector_from_set(merged) if merged else EVERYTHING
        owner = pod.controller_ref()
        if owner is None:
            return selector
        if owner.kind == "ReplicationController":
            rc = cache.get("ReplicationController", owner.name, pod.namespace)
            if rc is not None:
                merged.update((rc.get("spec") or {}).get("selector") or {})
                selector = selector_from_set(merged)
        elif owner.kind in ("ReplicaSet", "StatefulSet"):
            obj = cache.get(owner.kind, owner.name, pod.namespace)
            if obj is not None:
                try:
                    other = parse_label_selector((obj.get("spec") or {}).get("selector"))
                except SelectorError:
                    return selector
                if not other.nothing:
                    selector = selector.add(*other.requirements)
        return selector

    def _defaults(self, pod: PodInfo, action: str) -> list[Constraint]:
        """The default constraints with ``action``, parsed once (they depend on the pod only through
        ``matchLabelKeys``, which a default constraint rarely has)."""
        if self._defaults_use_pod_labels:
            return parse_constraints(self.default_constraints, pod.labels, action)
        found = self._parsed_defaults.get(action)
        if found is None:
            found = self._parsed_defaults[action] = parse_constraints(self.default_constraints, {}, action)
        return found

    def constraints_for(self, pod: PodInfo, action: str) -> list[Constraint]:
        if pod.topology_spread:
            return parse_constraints(pod.topology_spread, pod.labels, action)
        constraints = self._defaults(pod, action)
        if not constraints:
            return []
        # The default selector reads Services and the pod's controller; replicas ask for the same one every
        # cycle, so it is kept while no listed object changed (the cache's version).
        owner = pod.controller_ref()
        key = (action, pod.namespace, tuple(pod.labels.items()), (owner.kind, owner.name) if owner else None)
        version = self.shared_cluster_cache.version
        found = self._with_defaults.get(key)
        if found is not None and found[0] == version:
            return list(found[1])
        result = self._with_default_selector(pod, constraints)
        if len(self._with_defaults) >= 1024:
            self._with_defaults.clear()
        # Stamped with the version read before computing, so that a change arriving meanwhile is not masked.
        self._with_defaults[key] = (version, tuple(result))
        return result

    def _with_default_selector(self, pod: PodInfo, constraints: list[Constraint]) -> list[Constraint]:
        selector = self.default_selector(pod)
        if selector.empty():
            return []
        return [
            Constraint(
                c.max_skew,
                c.topology_key,
                selector,
                c.min_domains,
                c.node_affinity_policy,
                c.node_taints_policy,
            )
            for c in constraints
        ]

    # --- PreFilter ------------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        try:
            constraints = self.constraints_for(pod, DO_NOT_SCHEDULE)
        except SelectorError as err:
            return None, Status.as_error(f"get constraints from pod: {err}")
        if not constraints:
            return None, Status.skip()
        s = PreFilterState(constraints, [{} for _ in constraints])
        required = RequiredNodeAffinity.of(pod)
        snap = self.handle.snapshot
        if snap is not None and nodes is snap.node_list:
            self._count_indexed(s, pod, required, snap)
        else:
            self._count_walk(s, pod, required, nodes)
        for counts in s.tp_counts:
            hist: dict[int, int] = {}
            for n in counts.values():
                hist[n] = hist.get(n, 0) + 1
            s.histogram.append(hist)
            s.min_match.append(min(counts.values()) if counts else _INT32_MAX)
        state.write(_PRE_FILTER_KEY, s)
        return None, Status.success()

    def _count_walk(
        self, s: PreFilterState, pod: PodInfo, required: RequiredNodeAffinity, nodes: Sequence[NodeInfo]
    ) -> None:
        """kube-scheduler's counting: every node, every pod (nodes given that are not the snapshot's)."""
        for info in nodes:
            labels = info.node.labels
            if not node_has_all_keys(labels, s.constraints):
                continue
            for i, c in enumerate(s.constraints):
                if not c.matches_inclusion_policies(pod, info.node, required):
                    continue
                value = labels[c.topology_key]
                n = count_matching(info.pods, c.selector, pod.namespace)
                s.tp_counts[i][value] = s.tp_counts[i].get(value, 0) + n

    def _count_indexed(
        self, s: PreFilterState, pod: PodInfo, required: RequiredNodeAffinity, snap: Any
    ) -> None:
        """``_count_walk`` over every node of the snapshot, from the indexes: eligible nodes as masks over
        the node index, matching pods per node from ``pod_counts``, summed per domain."""
        index = self.shared_node_index
        index.refresh()
        counts = self.shared_pod_counts
        assert counts is not None
        size = index.size
        present = snap.table.present[:size]
        has_all = present.copy()
        for c in s.constraints:
            has_all &= index.key_mask(c.topology_key)
        affinity_ok: BoolArray | None = None
        taints_ok: BoolArray | None = None
        for i, c in enumerate(s.constraints):
            eligible = has_all
            if c.node_affinity_policy == "Honor" and (
                required.label_selector is not None or required.node_selector is not None
            ):
                if affinity_ok is None:
                    affinity_ok = required_affinity_mask(index, required)
                eligible = eligible & affinity_ok
            if c.node_taints_policy == "Honor":
                if taints_ok is None:
                    blocked = np.array(
                        [
                            find_untolerated_taint(t, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS) is not None
                            for t in index.taint_sig_list
                        ],
                        dtype=np.bool_,
                    )
                    taints_ok = ~blocked[index.taint_sig]
                eligible = eligible & taints_ok
            codes, _, values = index.codes(c.topology_key)
            domains = codes[eligible]
            if c.selector.empty():
                per_row = np.zeros(size, dtype=np.int64)
            else:
                selector, namespace = c.selector, pod.namespace
                per_row = counts.counts(
                    ("PodTopologySpread", namespace, selector),
                    lambda p, ns=namespace, sel=selector: (  # type: ignore[misc]
                        p.deletion_time is None and p.namespace == ns and sel.matches(p.labels)
                    ),
                )[:size]
            hits = np.bincount(domains, minlength=len(values))
            sums = np.rint(np.bincount(domains, weights=per_row[eligible], minlength=len(values)))
            tp = s.tp_counts[i]
            for j in np.flatnonzero(hits).tolist():
                tp[values[j]] = int(sums[j])

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def _update_with_pod(
        self, state: CycleState, updated: PodInfo, preemptor: PodInfo, node: NodeInfo, delta: int
    ) -> Status:
        s = state.get(_PRE_FILTER_KEY)
        if s is None:
            return Status.as_error(f"reading {_PRE_FILTER_KEY!r} from cycleState: not found")
        if updated.namespace != preemptor.namespace or not node_has_all_keys(node.node.labels, s.constraints):
            return Status.success()
        required = RequiredNodeAffinity.of(preemptor)
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(updated.labels):
                continue
            if not c.matches_inclusion_policies(preemptor, node.node, required):
                continue
            s.update(i, node.node.labels[c.topology_key], delta)
        return Status.success()

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._update_with_pod(state, to_add, pod, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        return self._update_with_pod(state, to_remove, pod, node, -1)

    # --- Filter ---------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            return Status.as_error(f"reading {_PRE_FILTER_KEY!r} from cycleState: not found")
        labels = node.node.labels
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                return Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
            self_match = 1 if c.selector.matches(pod.labels) else 0
            skew = s.tp_counts[i].get(value, 0) + self_match - s.global_min(i)
            if skew > c.max_skew:
                return Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
        return Status.success()

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        s: PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            raise KeyError(f"reading {_PRE_FILTER_KEY!r} from cycleState: not found")
        index = self.shared_node_index
        index.refresh()
        ok = np.ones(rows.shape[0], dtype=np.bool_)
        for i, c in enumerate(s.constraints):
            codes, code_of, values = index.codes(c.topology_key)
            row_codes = codes[rows]
            per_code = np.zeros(len(values) + 1, dtype=np.int64)  # last slot: missing label
            for value, n in s.tp_counts[i].items():
                code = code_of.get(value)
                if code is not None:
                    per_code[code] = n
            self_match = 1 if c.selector.matches(pod.labels) else 0
            skew = per_code[row_codes] + self_match - s.global_min(i)
            ok &= (row_codes >= 0) & (skew <= c.max_skew)
        return ok

    # --- PreScore / Score -------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        all_nodes = self.handle.node_infos()
        if not all_nodes:
            return Status.skip()
        try:
            constraints = self.constraints_for(pod, SCHEDULE_ANYWAY)
        except SelectorError as err:
            return Status.as_error(f"calculating preScoreState: {err}")
        if not constraints:
            return Status.skip()
        require_all = bool(pod.topology_spread) or not self.system_defaulted
        ignored: set[str] = set()
        counts: list[dict[str, int]] = [{} for _ in constraints]
        for info in nodes:
            labels = info.node.labels
            if require_all and not node_has_all_keys(labels, constraints):
                ignored.add(info.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key == LABEL_HOSTNAME:
                    continue
                counts[i].setdefault(labels.get(c.topology_key, ""), 0)
        weights: list[float] = []
        for i, c in enumerate(constraints):
            size = len(nodes) - len(ignored) if c.topology_key == LABEL_HOSTNAME else len(counts[i])
            weights.append(math.log(size + 2))
        required = RequiredNodeAffinity.of(pod)
        for info in all_nodes:
            labels = info.node.labels
            if require_all and not node_has_all_keys(labels, constraints):
                continue
            for i, c in enumerate(constraints):
                if not c.matches_inclusion_policies(pod, info.node, required):
                    continue
                value = labels.get(c.topology_key, "")
                if value not in counts[i] or c.topology_key == LABEL_HOSTNAME:
                    continue
                counts[i][value] += count_matching(info.pods, c.selector, pod.namespace)
        state.write(_PRE_SCORE_KEY, PreScoreState(constraints, ignored, counts, weights))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        s: PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None:
            return 0, Status.as_error(f"reading {_PRE_SCORE_KEY!r} from cycleState: not found")
        if node.name in s.ignored_nodes:
            return 0, Status.success()
        total = 0.0
        labels = node.node.labels
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                cnt = count_matching(node.pods, c.selector, pod.namespace)
            else:
                cnt = s.counts[i].get(value, 0)
            total += float(cnt) * s.weights[i] + float(c.max_skew - 1)
        return go_round(total), Status.success()

    def score_extensions(self) -> ScoreExtensions:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        s: PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None:
            return Status.success()
        lo, hi = None, 0
        for sc in scores:
            if sc.name in s.ignored_nodes:
                continue
            lo = sc.score if lo is None or sc.score < lo else lo
            hi = max(hi, sc.score)
        for sc in scores:
            if sc.name in s.ignored_nodes:
                sc.score = 0
            elif hi == 0:
                sc.score = MAX_NODE_SCORE
            else:
                sc.score = MAX_NODE_SCORE * (hi + (lo or 0) - sc.score) // hi
        return Status.success()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "*"), ClusterEvent("Node", "*")]


__all__ = ["Constraint", "PodTopologySpread", "count_matching", "parse_constraints"]
