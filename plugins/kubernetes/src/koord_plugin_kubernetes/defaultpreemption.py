"""DefaultPreemption (kube-scheduler ``plugins/defaultpreemption`` and ``framework/preemption``).

When no node fits, find nodes where removing lower-priority pods makes room:

1. The pod must be eligible (``preemptionPolicy`` not ``Never``; no lower-priority pod still terminating on
   the node it was nominated to, unless that node became UnschedulableAndUnresolvable).
2. Candidates are the nodes whose Filter failure was ``Unschedulable`` (preemption cannot help an
   ``UnschedulableAndUnresolvable`` node). Starting at a random offset, each is dry-run until enough
   candidates are found (``max(minCandidateNodesAbsolute, minCandidateNodesPercentage% of them)``, at least
   one without PDB violations).
3. On a node (``selectVictimsOnNode``): remove every lower-priority pod; if the pod still does not fit, the
   node is out. Otherwise reprieve pods from the most important down, PDB-violating ones first, keeping
   each reprieved pod that still lets the preemptor fit; the rest are the victims.
4. Pick the node with the fewest PDB violations, then the lowest highest-victim priority, the smallest sum
   of priorities, the fewest victims, the latest start of the highest-priority victims, then the first.
5. Victims are marked ``DisruptionTarget`` and deleted (not evicted: kube-scheduler deletes), each with a
   ``Preempted`` Event; lower-priority pods nominated to that node lose their nomination; the preemptor is
   nominated to it (``PostFilterResult``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.api.selectors import SelectorError, parse_label_selector
from koord_framework.cluster.clock import format_time
from koord_framework.cluster.port import EventRecord
from koord_framework.errors import ClusterError, NotFoundError
from koord_framework.scheduler.frameworkext import is_reserve_pod, reservation_preemption_allowed
from koord_framework.scheduler.interface import (
    CycleState,
    Handle,
    NodeInfo,
    NodeTable,
    NodeToStatusReader,
    PostFilterPlugin,
    PostFilterResult,
    SchedulerPlugin,
    SnapshotView,
)
from koord_framework.scheduler.status import Code, Status
from koord_framework.scheduler.table import Int64Array
from koord_plugin_kubernetes._rowcache import RowCache
from koord_plugin_kubernetes._shared import SharedCaches
from koord_plugin_kubernetes.args import DefaultPreemptionArgs

COMPONENT = "koord-scheduler"
_INT32_MAX = 2**31 - 1


NO_VICTIMS = "No preemption victims found for incoming pod"
_NO_VICTIMS_STATUS = Status.unresolvable(NO_VICTIMS)
_NOT_HELPFUL_STATUS = Status.unresolvable("Preemption is not helpful for scheduling")
_INT64_MAX = 2**63 - 1


def _lowest_priority(node: NodeInfo, _: object = None) -> int:
    """The lowest priority among the node's pods (``_INT64_MAX`` for an empty node). The ignored argument
    is the row cache's per-node one (``RowCache.take``)."""
    return min((p.priority_value for p in node.pods.values()), default=_INT64_MAX)


def _lowest_priority_rows(
    table: NodeTable, rows: Int64Array, by_row: Sequence[NodeInfo | None]
) -> Int64Array:
    """``_lowest_priority`` of every row (``_INT64_MAX`` for rows without a node)."""
    return np.array(
        [_lowest_priority(ni) if (ni := by_row[i]) is not None else _INT64_MAX for i in rows.tolist()],
        dtype=np.int64,
    )


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where preemption would fit the pod, the pods it would evict and the PDBs it would violate."""

    name: str
    victims: tuple[PodInfo, ...]
    num_pdb_violations: int


@dataclass(frozen=True, slots=True)
class _PDB:
    """A PodDisruptionBudget as preemption counts it."""

    namespace: str
    selector: Any
    allowed: int
    disrupted: frozenset[str]


def _start_time(pod: PodInfo, now: float) -> float:
    """``util.GetPodStartTime``: the pod's start time, or now for a pod that has not started."""
    return pod.start_time if pod.start_time is not None else now


def more_important(a: PodInfo, b: PodInfo, now: float) -> bool:
    """``util.MoreImportantPod``: higher priority, then earlier start."""
    if a.priority_value != b.priority_value:
        return a.priority_value > b.priority_value
    return _start_time(a, now) < _start_time(b, now)


def _importance_key(now: float) -> Any:
    return lambda p: (-p.priority_value, _start_time(p, now))


def parse_pdbs(objs: Sequence[Mapping[str, Any]]) -> list[_PDB]:
    out: list[_PDB] = []
    for o in objs:
        meta = o.get("metadata") or {}
        status = o.get("status") or {}
        try:
            selector = parse_label_selector((o.get("spec") or {}).get("selector"))
        except SelectorError:
            selector = None  # an invalid selector matches no pod
        out.append(
            _PDB(
                str(meta.get("namespace") or "default"),
                selector,
                int(status.get("disruptionsAllowed") or 0),
                frozenset((status.get("disruptedPods") or {}).keys()),
            )
        )
    return out


def filter_pods_with_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[_PDB]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating) in input order; each matching PDB's budget is spent pod by pod."""
    allowed = [p.allowed for p in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if pdb.namespace != pod.namespace or pdb.selector is None:
                    continue
                if pdb.selector.empty() or not pdb.selector.matches(pod.labels):
                    continue
                if pod.name in pdb.disrupted:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


def earliest_start_of_highest_priority(victims: Sequence[PodInfo], now: float) -> float:
    """``util.GetEarliestPodStartTime``: earliest start among the victims of the highest priority."""
    best_prio = victims[0].priority_value
    earliest = _start_time(victims[0], now)
    for p in victims:
        if p.priority_value == best_prio:
            earliest = min(earliest, _start_time(p, now))
        elif p.priority_value > best_prio:
            best_prio = p.priority_value
            earliest = _start_time(p, now)
    return earliest


def pick_one_node(candidates: Sequence[Candidate], now: float) -> Candidate | None:
    """``pickOneNodeForPreemption`` with kube-scheduler's default score functions, in order."""
    if not candidates:
        return None
    score_funcs = (
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority_value,
        lambda c: -sum(p.priority_value + _INT32_MAX + 1 for p in c.victims),
        lambda c: -len(c.victims),
        lambda c: earliest_start_of_highest_priority(c.victims, now),
    )
    remaining = list(candidates)
    for f in score_funcs:
        scored = [(f(c), c) for c in remaining]
        best = max(s for s, _ in scored)
        remaining = [c for s, c in scored if s == best]
        if len(remaining) == 1:
            return remaining[0]
    return remaining[0]


def _victims_histogram(handle: Handle) -> Any:
    """One histogram per metrics registry: every profile of a scheduler shares its registry, hence the
    component-wide slot."""
    registry = handle.metrics
    if registry is None:
        return None

    def build() -> Any:
        from prometheus_client import Histogram

        return Histogram(
            "koord_scheduler_preemption_victims",
            "Number of victims selected by a successful preemption",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=registry,
        )

    return handle.shared("koord_plugin_kubernetes.preemption_victims", build, scope="component")


class DefaultPreemption(SchedulerPlugin[DefaultPreemptionArgs], PostFilterPlugin, SharedCaches):
    name = "DefaultPreemption"
    Args = DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs, handle: Handle, *, seed: int = 0) -> None:
        super().__init__(args, handle)
        self.min_pct = args.min_candidate_nodes_percentage
        self.min_abs = args.min_candidate_nodes_absolute
        self._rng = random.Random(seed)
        self._hopeless_messages: dict[tuple[int, int], str] = {}
        # Attempts are counted by the framework (koord_scheduler_preemption_attempts_total); the plugin adds
        # only what the framework cannot see: how many victims a successful preemption chose.
        self._victims_hist: Any = _victims_histogram(self.handle)

    # --- the candidate count ------------------------------------------------------------------------
    def calculate_num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.min_pct // 100
        n = max(n, self.min_abs)
        return min(n, num_nodes)

    def offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return self._rng.randrange(num_nodes), self.calculate_num_candidates(num_nodes)

    # --- eligibility ----------------------------------------------------------------------------------
    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nominated_status: Status | None
    ) -> tuple[bool, str]:
        if pod.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        if pod.nominated_node:
            if nominated_status is not None and nominated_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            info = self.handle.node_info(pod.nominated_node)
            if info is not None:
                for p in info.pods.values():
                    if p.priority_value < pod.priority_value and p.is_terminating:
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    # --- victims on one node --------------------------------------------------------------------------
    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, pdbs: Sequence[_PDB]
    ) -> tuple[list[PodInfo], int, Status]:
        """Works on ``node`` and ``state`` in place: pass clones."""
        now = self.handle.clock.now()
        potential: list[PodInfo] = []

        def remove(p: PodInfo) -> Status:
            node.remove_pod(p)
            return self.handle.run_pre_filter_extension_remove_pod(state, pod, p, node)

        def add(p: PodInfo) -> Status:
            node.add_pod(p)
            return self.handle.run_pre_filter_extension_add_pod(state, pod, p, node)

        for p in list(node.pods.values()):
            if p.priority_value < pod.priority_value:
                potential.append(p)
                st = remove(p)
                if not st.is_success:
                    return [], 0, st
        if not potential:
            return [], 0, Status.unresolvable(NO_VICTIMS)
        st = self.handle.run_filter_with_nominated_pods(state, pod, node)
        if not st.is_success:
            return [], 0, st
        potential.sort(key=_importance_key(now))
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []
        num_violating = 0

        def reprieve(p: PodInfo) -> tuple[bool, Status]:
            st = add(p)
            if not st.is_success:
                return False, st
            fits = self.handle.run_filter_with_nominated_pods(state, pod, node).is_success
            if not fits:
                st = remove(p)
                if not st.is_success:
                    return False, st
                victims.append(p)
            return fits, Status.success()

        for p in violating:
            fits, st = reprieve(p)
            if not st.is_success:
                return [], 0, st
            if not fits:
                num_violating += 1
        for p in non_violating:
            _, st = reprieve(p)
            if not st.is_success:
                return [], 0, st
        if violating and non_violating:
            victims.sort(key=_importance_key(now))
        return victims, num_violating, Status.success()

    # --- the dry run ----------------------------------------------------------------------------------
    def dry_run(
        self,
        state: CycleState,
        pod: PodInfo,
        potential: Sequence[NodeInfo],
        pdbs: Sequence[_PDB],
        offset: int,
        wanted: int,
    ) -> tuple[list[Candidate], dict[str, Status]]:
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        priority = pod.priority_value
        lowest = self._lowest_priorities(potential)
        for i in range(len(potential)):
            j = (offset + i) % len(potential)
            node = potential[j]
            if lowest[j] >= priority:
                # What select_victims_on_node concludes, without cloning the node and every plugin's state.
                statuses[node.name] = _NO_VICTIMS_STATUS
                continue
            info = node.clone()
            victims, num_pdb, st = self.select_victims_on_node(state.clone(), pod, info, pdbs)
            if st.is_success and victims:
                c = Candidate(info.name, tuple(victims), num_pdb)
                (non_violating if num_pdb == 0 else violating).append(c)
                if non_violating and len(non_violating) + len(violating) >= wanted:
                    break
                continue
            if st.is_success:
                st = Status.as_error(f"expected at least one victim pod on node {info.name!r}")
            statuses[info.name] = st
        return non_violating + violating, statuses

    def _hopeless(self, pod: PodInfo, filtered: Mapping[str, Status], num_nodes: int) -> str | None:
        """The fit error when no node can be a candidate, decided over the snapshot's rows at once.

        Nodes Filter found UnschedulableAndUnresolvable (or never reached) are set aside, and a node without
        a pod of lower priority has no victims: when that leaves nothing to dry-run, the outcome — and the
        message counting both kinds of node — is known without visiting nodes one by one. Returns None
        when some node might have victims (then the dry run decides), or when the statuses are not the
        framework's ``NodeToStatusReader``.
        """
        snap = self.handle.snapshot
        cache = self.shared_row_cache
        if snap is None or cache is None or not isinstance(filtered, NodeToStatusReader):
            return None
        if self.handle.node_infos() is not snap.node_list:
            return None
        rows = snap.rows
        codes = filtered.codes(rows)
        unresolvable = codes == int(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        if len(filtered):  # a node absent from a non-empty map was excluded by PreFilter
            unresolvable |= codes < 0
        potential = rows[~unresolvable]
        n_potential = int(potential.shape[0])
        if n_potential:
            lowest = self._lowest_of_rows(cache, snap, potential)
            if int(np.minimum.reduce(lowest)) < pod.priority_value:
                return None
            self.offset_and_num_candidates(n_potential)  # the same random draw as the dry run would make
        return _hopeless_message(self._hopeless_messages, num_nodes, n_potential)

    def _lowest_of_rows(self, cache: RowCache, snap: SnapshotView, rows: Int64Array) -> Int64Array:
        found: Int64Array = cache.take(
            "lowest-priority", rows, _lowest_priority_rows, _lowest_priority, snap.by_row
        )
        return found

    def _lowest_priorities(self, nodes: Sequence[NodeInfo]) -> list[int]:
        """The lowest pod priority on each node (``_INT64_MAX`` for an empty node). For the snapshot's own
        nodes it is kept per row and patched from the change log, instead of scanning every pod of every node
        whenever a pod fails to fit."""
        cache = self.shared_row_cache
        snap = self.handle.snapshot
        if cache is None or snap is None or not all(snap.by_row[ni.row] is ni for ni in nodes):
            return [_lowest_priority(ni) for ni in nodes]
        rows = np.fromiter((ni.row for ni in nodes), dtype=np.int64, count=len(nodes))
        return self._lowest_of_rows(cache, snap, rows).tolist()  # type: ignore[no-any-return]

    # --- PostFilter -----------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        result, status = self.preempt(state, pod, filtered)
        if status.message and not status.is_success:
            return result, Status(status.code, (f"preemption: {status.message}",), error=status.error)
        return result, status

    def preempt(
        self, state: CycleState, pod: PodInfo, filtered: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        if is_reserve_pod(pod) and not reservation_preemption_allowed(state):
            # A reserve pod preempts only when the Reservation plugin allows it (enablePreemption), as in
            # Koordinator, where kube's DefaultPreemption cannot find the (fake) preemptor pod.
            return None, Status(Code.UNSCHEDULABLE)
        # Only a nominated pod's status matters; a miss in the framework's lazy map is not free.
        nominated_status = filtered.get(pod.nominated_node) if pod.nominated_node else None
        eligible, reason = self.pod_eligible_to_preempt_others(pod, nominated_status)
        if not eligible:
            return None, Status.unschedulable(reason)
        nodes = self.handle.node_infos()
        if not nodes:
            return None, Status.as_error("no nodes available")
        hopeless = self._hopeless(pod, filtered, len(nodes))
        if hopeless is not None:
            return None, Status.unschedulable(hopeless)
        all_nodes = list(nodes)
        potential: list[NodeInfo] = []
        statuses: dict[str, Status] = {}
        for info in all_nodes:
            st = filtered.get(info.name)
            # A node absent from a non-empty map was excluded before Filter (PreFilter narrowed the nodes).
            unresolvable = (st is None and bool(filtered)) or (
                st is not None and st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            )
            if unresolvable:
                statuses[info.name] = _NOT_HELPFUL_STATUS
            else:
                potential.append(info)
        candidates: list[Candidate] = []
        if potential:
            pdbs = parse_pdbs(self._list("PodDisruptionBudget"))
            offset, wanted = self.offset_and_num_candidates(len(potential))
            candidates, dry_statuses = self.dry_run(state, pod, potential, pdbs, offset, wanted)
            statuses.update(dry_statuses)
        if not candidates:
            return None, Status.unschedulable(_fit_error(len(all_nodes), statuses))
        best = candidates[0] if len(candidates) == 1 else pick_one_node(candidates, self.handle.clock.now())
        assert best is not None
        err = self.prepare_candidate(best, pod)
        if err is not None:
            return None, err
        if self._victims_hist is not None:
            self._victims_hist.observe(len(best.victims))
        return PostFilterResult(nominated_node=best.name), Status.success()

    def _list(self, kind: str) -> list[dict[str, Any]]:
        try:
            items, _ = self.handle.cluster.list(kind)
            return items
        except ClusterError:
            return []

    def prepare_candidate(self, c: Candidate, pod: PodInfo) -> Status | None:
        cluster = self.handle.cluster
        now = self.handle.clock.now()
        for victim in c.victims:
            waiting = self.handle.get_waiting_pod(victim.uid)
            if waiting is not None:
                waiting.reject(self.name, "preempted")
                continue
            try:
                self._mark_disruption_target(victim, now)
                cluster.delete("Pod", victim.name, victim.namespace)
            except NotFoundError:
                continue
            except ClusterError as err:
                return Status.as_error(err)
            cluster.record_event(
                EventRecord(
                    kind="Pod",
                    namespace=victim.namespace,
                    name=victim.name,
                    reason="Preempted",
                    message=f"Preempted by pod {pod.uid} on node {c.name}",
                    component=COMPONENT,
                    time=now,
                    extra={"preemptor": pod.key, "node": c.name},
                )
            )
        self._clear_lower_priority_nominations(c.name, pod)
        return None

    def _mark_disruption_target(self, victim: PodInfo, now: float) -> None:
        current = self.handle.cluster.get("Pod", victim.name, victim.namespace)
        conditions = [
            cond
            for cond in (current.get("status") or {}).get("conditions") or ()
            if cond.get("type") != "DisruptionTarget"
        ]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"{COMPONENT}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": format_time(now),
            }
        )
        self.handle.cluster.patch(
            "Pod", victim.name, victim.namespace, {"status": {"conditions": conditions}}, status=True
        )

    def _clear_lower_priority_nominations(self, node_name: str, pod: PodInfo) -> None:
        for obj in self._list("Pod"):
            status = obj.get("status") or {}
            if status.get("nominatedNodeName") != node_name:
                continue
            meta = obj.get("metadata") or {}
            if (
                meta.get("uid") == pod.uid
                or int((obj.get("spec") or {}).get("priority") or 0) >= pod.priority_value
            ):
                continue
            try:
                self.handle.cluster.patch(
                    "Pod",
                    str(meta.get("name")),
                    str(meta.get("namespace") or "default"),
                    {"status": {"nominatedNodeName": None}},
                    status=True,
                )
            except ClusterError:
                continue


def _hopeless_message(messages: dict[tuple[int, int], str], num_nodes: int, n_potential: int) -> str:
    """The fit error of ``_hopeless``; pods keep failing the same way, so the text is built once per
    (nodes, nodes without victims) and kept in ``messages`` (the plugin's own)."""
    key = (num_nodes, n_potential)
    found = messages.get(key)
    if found is None:
        counts = [(_NOT_HELPFUL_STATUS, num_nodes - n_potential), (_NO_VICTIMS_STATUS, n_potential)]
        found = _fit_error_counts(num_nodes, [(st, n) for st, n in counts if n])
        if len(messages) >= 1024:
            messages.clear()
        messages[key] = found
    return found


def _fit_error(num_nodes: int, statuses: Mapping[str, Status]) -> str:
    return _fit_error_counts(num_nodes, [(st, 1) for st in statuses.values()])


def _fit_error_counts(num_nodes: int, statuses: Sequence[tuple[Status, int]]) -> str:
    histogram: dict[str, int] = {}
    for st, n in statuses:
        for reason in st.reasons or (st.code.label,):
            histogram[reason] = histogram.get(reason, 0) + n
    reasons = sorted(f"{n} {r}" for r, n in histogram.items())
    return f"0/{num_nodes} nodes are available: {', '.join(reasons)}."


__all__ = [
    "Candidate",
    "DefaultPreemption",
    "filter_pods_with_pdb_violation",
    "more_important",
    "parse_pdbs",
    "pick_one_node",
]
