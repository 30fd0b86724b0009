"""Quota-local preemption (``preempt.go``): kube-scheduler's preemption evaluator with ElasticQuota's victim
rule (``can_preempt``) and its extra reprieve condition (the quota must also have room).

Per node: remove every pod the preemptor may preempt, check the preemptor fits (every Filter plugin, with the
PreFilter what-ifs applied, so the quota's used drops with each removal); then give victims back from the most
important down (PDB-violating ones first) and keep removed those without which the pod no longer fits, or
whose return would leave the quota without room. Among candidate nodes the one with the fewest PDB
violations, then the lowest highest-victim priority, then the smallest priority sum, then the fewest victims
wins (kube's ``pickOneNodeForPreemption``, without the start-time tie-break). Victims are deleted with a
``Preempted`` event; the pod is nominated to the node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from koord_framework.api.resources import add, mask, within
from koord_framework.api.selectors import LabelSelector, SelectorError, parse_label_selector
from koord_framework.errors import ClusterError, NotFoundError
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import PostFilterResult
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Code, Status
from koord_plugin_elasticquota.manager import quota_pod_requests

if TYPE_CHECKING:
    from koord_framework.api.objects import PodInfo
    from koord_plugin_elasticquota.plugin import ElasticQuota

__all__ = ["Candidate", "QuotaPreemption", "more_important"]


def _start(pod: PodInfo) -> float:
    return pod.start_time if pod.start_time is not None else (pod.creation_time or 0.0)


def more_important(a: PodInfo, b: PodInfo) -> bool:
    """kube's MoreImportantPod: higher priority, then the one that started earlier."""
    if a.priority_value != b.priority_value:
        return a.priority_value > b.priority_value
    return _start(a) < _start(b)


def importance_key(pod: PodInfo) -> tuple[int, float]:
    """Sort key: most important first."""
    return (-pod.priority_value, _start(pod))


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]
    pdb_violations: int


@dataclass(frozen=True, slots=True)
class _PDB:
    namespace: str
    selector: LabelSelector | None
    allowed: int
    disrupted: frozenset[str]


def _parse_pdbs(objs: Sequence[Mapping[str, Any]]) -> list[_PDB]:
    out: list[_PDB] = []
    for obj in objs:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        try:
            selector: LabelSelector | None = parse_label_selector(spec.get("selector"))
        except SelectorError:
            selector = None
        out.append(
            _PDB(
                str(meta.get("namespace") or "default"),
                selector,
                int(status.get("disruptionsAllowed") or 0),
                frozenset((status.get("disruptedPods") or {}).keys()),
            )
        )
    return out


def split_by_pdb(pods: Sequence[PodInfo], pdbs: Sequence[_PDB]) -> tuple[list[PodInfo], list[PodInfo]]:
    """filterPodsWithPDBViolation: order-preserving split into (violating, non-violating)."""
    allowed = [p.allowed for p in pdbs]
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for pod in pods:
        hit = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if pdb.namespace != pod.namespace or pdb.selector is None or pdb.selector.empty():
                    continue
                if not pdb.selector.matches(pod.labels) or pod.name in pdb.disrupted:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    hit = True
        (violating if hit else others).append(pod)
    return violating, others


class QuotaPreemption:
    def __init__(self, plugin: ElasticQuota) -> None:
        self.plugin = plugin

    def eligible(self, pod: PodInfo, nominated_status: Status | None) -> tuple[bool, str]:
        if pod.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        if pod.nominated_node:
            if nominated_status is not None and nominated_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            info = self.plugin.handle.node_info(pod.nominated_node)
            if info is None:
                return True, ""
            quota, _ = self.plugin.quota_of(pod)
            for p in info.pods.values():
                if (
                    p.is_terminating
                    and p.priority_value < pod.priority_value
                    and self.plugin.quota_of(p)[0] == quota
                ):
                    return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, pdbs: Sequence[_PDB]
    ) -> tuple[list[PodInfo], int, Status]:
        """Works on ``node`` and ``state`` in place: pass clones."""
        handle = self.plugin.handle

        def remove(p: PodInfo) -> Status:
            node.remove_pod(p)
            return handle.run_pre_filter_extension_remove_pod(state, pod, p, node)

        def put_back(p: PodInfo) -> Status:
            node.add_pod(p)
            return handle.run_pre_filter_extension_add_pod(state, pod, p, node)

        potential: list[PodInfo] = []
        for p in list(node.pods.values()):
            if self.plugin.can_preempt(pod, p):
                potential.append(p)
                st = remove(p)
                if not st.is_success:
                    return [], 0, st
        if not potential:
            return (
                [],
                0,
                Status.unresolvable(f"No victims found on node {node.name} for preemptor pod {pod.name}"),
            )
        st = handle.run_filter_with_nominated_pods(state, pod, node)
        if not st.is_success:
            return [], 0, st
        potential.sort(key=importance_key)
        violating, others = split_by_pdb(potential, pdbs)
        snap = state.get("PostFilter" + self.plugin.name)
        request = quota_pod_requests(pod, self.plugin.quotas.ignore_pod_overhead)
        victims: list[PodInfo] = []

        def reprieve(p: PodInfo) -> tuple[bool, Status]:
            st = put_back(p)
            if not st.is_success:
                return False, st
            fits = handle.run_filter_with_nominated_pods(state, pod, node).is_success
            removed = False
            if not fits:
                st = remove(p)
                if not st.is_success:
                    return False, st
                victims.append(p)
                removed = True
            if snap is not None and not snap.skip and not removed:
                # Upstream also keeps the victim removed when the quota has no room with it back.
                used = mask(add(snap.used, request), request)
                if not within(used, snap.used_limit):
                    st = remove(p)
                    if not st.is_success:
                        return False, st
                    victims.append(p)
            return fits, Status.success()

        violations = 0
        for p in violating:
            fits, st = reprieve(p)
            if not st.is_success:
                return [], 0, st
            if not fits:
                violations += 1
        for p in others:
            _, st = reprieve(p)
            if not st.is_success:
                return [], 0, st
        return victims, violations, Status.success()

    def preempt(
        self, state: CycleState, pod: PodInfo, filtered: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        nominated = filtered.get(pod.nominated_node) if pod.nominated_node else None
        ok, reason = self.eligible(pod, nominated)
        if not ok:
            return None, Status.unschedulable(reason)
        handle = self.plugin.handle
        nodes = handle.node_infos()
        if not nodes:
            return None, Status.as_error("no nodes available")
        # Victims can only be pods of the pod's own quota: look there first, and only at their nodes.
        hosts = self._victim_hosts(pod)
        if not hosts:
            return None, Status.unschedulable(
                f"0/{len(nodes)} nodes are available: no lower-priority preemptible pods of the pod's quota "
                "would make room"
            )
        pdbs = _parse_pdbs(self._list("PodDisruptionBudget"))
        candidates: list[Candidate] = []
        for node in nodes:
            if "" not in hosts and node.name not in hosts:
                continue
            st = filtered.get(node.name)
            if (st is None and bool(filtered)) or (
                st is not None and st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            ):
                continue
            if not any(self.plugin.can_preempt(pod, p) for p in node.pods.values()):
                continue  # no victim here: what select_victims_on_node concludes, without the clones
            victims, violations, st = self.select_victims_on_node(state.clone(), pod, node.clone(), pdbs)
            if st.is_success and victims:
                candidates.append(Candidate(node.name, tuple(victims), violations))
        if not candidates:
            return None, Status.unschedulable(
                f"0/{len(nodes)} nodes are available: no lower-priority preemptible pods of the pod's quota "
                "would make room"
            )
        best = min(
            candidates,
            key=lambda c: (
                c.pdb_violations,
                max(v.priority_value for v in c.victims),
                sum(v.priority_value for v in c.victims),
                len(c.victims),
            ),
        )
        err = self._evict(best, pod)
        if err is not None:
            return None, err
        return PostFilterResult(nominated_node=best.node), Status.success()

    def _victim_hosts(self, pod: PodInfo) -> set[str]:
        """Nodes of the assigned pods ``pod`` may preempt ("" for one reserved but not yet bound)."""
        quotas = self.plugin.quotas
        priority = pod.priority_value
        with quotas.lock:
            name, tree = quotas.quota_and_tree(pod)
            mgr = quotas.manager_for_tree(tree)
            info = mgr.get_quota_info(name) if mgr is not None else None
            # Lower priority first: it is the cheapest test and rules out most pods of a busy quota.
            lower = (
                [e.pod for e in info.pods.values() if e.assigned and e.pod.priority_value < priority]
                if info
                else []
            )
        return {p.node_name for p in lower if self.plugin.can_preempt(pod, p)}

    def _list(self, kind: str) -> list[dict[str, Any]]:
        try:
            items, _ = self.plugin.handle.cluster.list(kind)
            return items
        except ClusterError:
            return []

    def _evict(self, c: Candidate, pod: PodInfo) -> Status | None:
        cluster = self.plugin.handle.cluster
        for victim in c.victims:
            waiting = self.plugin.handle.get_waiting_pod(victim.uid)
            if waiting is not None:
                waiting.reject(self.plugin.name, "preempted")
                continue
            try:
                cluster.delete("Pod", victim.name, victim.namespace)
            except NotFoundError:
                continue
            except ClusterError as err:
                return Status.as_error(err)
            self.plugin.record_event(victim, "Preempted", f"Preempted by pod {pod.uid} on node {c.node}")
        return None
