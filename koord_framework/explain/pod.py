"""``koord explain pod``: one dry scheduling cycle of one pod, every node's verdict and every plugin's score.

The cycle runs on a scheduler built for the purpose over a private copy of the cluster
(``koord_framework.explain.source``), in the scheduler's explain mode: every node is searched and scored
(no ``percentageOfNodesToScore`` sampling), each rejected node keeps the status of the Filter plugin that
rejected it, and each feasible node keeps every Score plugin's raw, normalized and weighted score. The
cycle then goes on as the scheduler's would (Reserve, Permit, PreBind, Bind: on the copy), so that what
Reserve and PreBind would take (a cpuset, devices, a reservation) is read from what they wrote. A pod that
waits at Permit (a gang short of members) is allowed afterwards, to show what its PreBind would write.

A bound pod is re-evaluated as if it were pending: the copy holds it unbound (its own resources no longer
counted on its node), and the explanation says so.

After the cycle, every ``PodExplainer`` of the ``koord.explain.pod`` entry points whose plugin the profile
enables adds its section (Reservation: the reservation the pod would use, or why each candidate was not).
"""

from __future__ import annotations

import copy
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from koord_framework.cluster.memory import MemoryCluster
from koord_framework.config.loader import LoadedSchedulerConfig
from koord_framework.errors import KoordError
from koord_framework.explain.hooks import POD_EXPLAINERS, PodCycle, PodExplainer
from koord_framework.explain.node import SectionResult
from koord_framework.explain.source import unknown
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.framework import _filter_one
from koord_framework.scheduler.interface import PreFilterResult
from koord_framework.scheduler.scheduler import PodOutcome, Scheduler
from koord_framework.scheduler.status import Status

__all__ = ["NodeVerdict", "PodExplanation", "explain_pod", "split_key"]


def split_key(key: str) -> tuple[str, str]:
    """``NS/NAME`` (or a bare ``NAME`` in ``default``) as (namespace, name)."""
    namespace, _, name = key.rpartition("/")
    return namespace or "default", name


@dataclass
class NodeVerdict:
    """One node's verdict: rejected by a plugin (with its reason), or feasible with its scores."""

    name: str
    feasible: bool
    plugin: str = ""
    """The plugin that rejected the node (PreFilter or Filter); later Filter plugins did not run."""
    code: str = ""
    reason: str = ""
    scores: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """Score plugin → (raw, normalized, weighted)."""
    total: int | None = None
    rank: int | None = None
    """1 for the best total (equal totals share a rank)."""
    filters: list[dict[str, str]] | None = None
    """With ``--node``: every Filter plugin's own verdict on this node (``plugin``, ``code``, ``reason``),
    each run on its own, past a rejection (the scheduler stops at the first)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "feasible": self.feasible}
        if not self.feasible:
            out["filter"] = {"plugin": self.plugin, "code": self.code, "reason": self.reason}
        else:
            out["scores"] = {
                p: {"raw": r, "normalized": n, "weighted": w} for p, (r, n, w) in self.scores.items()
            }
            out["total"] = self.total
            out["rank"] = self.rank
        if self.filters is not None:
            out["filters"] = list(self.filters)
        return out


@dataclass
class PodExplanation:
    pod: str
    profile: str
    bound_to: str | None
    """The node the pod is bound to in the cluster (re-evaluated as if pending), else None."""
    gated_by: str
    """The PreEnqueue plugin that keeps the pod out of the active queue ("" when none)."""
    pre_filter: dict[str, Any]
    filter_plugins: list[str]
    score_plugins: list[dict[str, Any]]
    nodes: list[NodeVerdict]
    status: str
    """``Scheduled``, ``Unschedulable`` or ``Waiting`` (at Permit)."""
    node: str | None
    message: str
    tied_with: list[str] = field(default_factory=list)
    """Other nodes with the chosen node's (best) total: the scheduler picks one of them at random."""
    permit: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    """What PreBind wrote on the pod (cpuset, device allocations, the reservation it takes, ...)."""
    notes: list[str] = field(default_factory=list)
    sections: list[SectionResult] = field(default_factory=list)
    """The ``PodExplainer`` sections of the profile's plugins."""

    def groups(self) -> list[dict[str, Any]]:
        """Rejected nodes grouped by (plugin, reason), the largest group first."""
        by: dict[tuple[str, str, str], list[str]] = {}
        for v in self.nodes:
            if not v.feasible:
                by.setdefault((v.plugin, v.code, v.reason), []).append(v.name)
        return [
            {"plugin": p, "code": c, "reason": r, "count": len(names), "nodes": sorted(names)}
            for (p, c, r), names in sorted(by.items(), key=lambda item: (-len(item[1]), item[0]))
        ]

    def feasible(self) -> list[NodeVerdict]:
        return [v for v in self.nodes if v.feasible]

    def to_dict(self, *, top: int | None = None, focus: str | None = None) -> dict[str, Any]:
        feasible = self.feasible()
        shown = feasible if top is None else feasible[:top]
        if focus is not None:
            shown = [v for v in self.nodes if v.name == focus]
        return {
            "pod": self.pod,
            "profile": self.profile,
            "boundTo": self.bound_to,
            "reEvaluated": self.bound_to is not None,
            "preEnqueue": {"gatedBy": self.gated_by},
            "preFilter": self.pre_filter,
            "filterPlugins": list(self.filter_plugins),
            "scorePlugins": list(self.score_plugins),
            "summary": {
                "nodes": len(self.nodes),
                "feasible": len(feasible),
                "rejected": len(self.nodes) - len(feasible),
            },
            "rejected": self.groups(),
            "nodes": [v.to_dict() for v in shown],
            "result": {
                "status": self.status,
                "node": self.node,
                "message": self.message,
                "tiedWith": list(self.tied_with),
                "permit": self.permit,
                "annotations": dict(self.annotations),
                "notes": list(self.notes),
            },
            "sections": [s.to_dict() for s in self.sections],
        }


def explain_pod(
    cluster: MemoryCluster,
    config: LoadedSchedulerConfig,
    key: str,
    *,
    seed: int = 0,
    focus: str | None = None,
) -> PodExplanation:
    """Run one dry scheduling cycle of pod ``key`` (``NS/NAME``) on ``cluster`` (a private copy: the cycle
    writes to it). Raises ``UnknownObject`` for a pod the cluster does not hold, ``KoordError`` for one the
    configuration does not schedule."""
    namespace, name = split_key(key)
    obj = cluster.try_get("Pod", name, namespace)
    if obj is None:
        pods, _ = cluster.list("Pod")
        names = [f"{(p.get('metadata') or {}).get('namespace', '')}/{p['metadata']['name']}" for p in pods]
        raise unknown("pod", f"{namespace}/{name}", names)
    phase = str((obj.get("status") or {}).get("phase") or "")
    if phase in ("Succeeded", "Failed"):
        raise KoordError(f"pod {namespace}/{name} has finished (phase {phase}); nothing is scheduled for it")
    bound_to = str((obj.get("spec") or {}).get("nodeName") or "") or None
    if bound_to is not None:
        _unbind(cluster, obj)
    sched = Scheduler.from_config(cluster, config, seed=seed, explain=True, record_outcomes=True)
    try:
        return _dry_cycle(sched, namespace, name, bound_to, focus)
    finally:
        sched.close()


def _unbind(cluster: MemoryCluster, obj: dict[str, Any]) -> None:
    """The pod as if it had never been scheduled: without ``nodeName``, Pending, no PodScheduled."""
    pending = copy.deepcopy(obj)
    pending["spec"].pop("nodeName", None)
    status = pending.setdefault("status", {})
    status["phase"] = "Pending"
    status.pop("nominatedNodeName", None)
    status["conditions"] = [
        c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") != "PodScheduled"
    ]
    meta = obj["metadata"]
    cluster.delete("Pod", meta["name"], meta.get("namespace", ""))
    pending["metadata"].pop("resourceVersion", None)
    cluster.create(pending)


def _dry_cycle(
    sched: Scheduler, namespace: str, name: str, bound_to: str | None, focus: str | None
) -> PodExplanation:
    sched.start()
    pod = sched.pod_cache.get(namespace, name)
    if pod is None:  # the cache follows the cluster; absent only if something removed it meanwhile
        raise KoordError(f"pod {namespace}/{name} vanished from the copy of the cluster")
    fw = sched.frameworks.get(pod.scheduler_name)
    if fw is None:
        served = ", ".join(sorted(sched.frameworks))
        raise KoordError(
            f"pod {namespace}/{name} names schedulerName {pod.scheduler_name!r}, which no profile of the"
            f" configuration serves (profiles: {served})"
        )
    gated_by = sched.queue.gate_of(pod.uid)
    info = sched.queue.take(pod.uid)
    if info is None:
        raise KoordError(f"pod {namespace}/{name} is not in the scheduling queue of the copy")
    captured: dict[str, Any] = {}
    _capture_pre_filter(sched, fw, captured, focus)
    sched._scheduling_cycle(info)
    sched._drain_bindings()
    outcome = sched.outcomes.get(pod.uid)
    if outcome is None:
        raise KoordError(f"pod {namespace}/{name}: the scheduling cycle did not run")
    permit = ""
    first = outcome
    if outcome.status == "Waiting":
        waiting = sched.waiting.get(pod.uid)
        pending = waiting.pending_plugins() if waiting is not None else []
        permit = f"Wait for {', '.join(pending)}" if pending else f"Wait: {outcome.message}"
        if waiting is not None and pending:
            permit += " (allowed on the copy to show what PreBind would write)"
            for plugin in pending:  # as if the gang were complete: what would PreBind write?
                waiting.allow(plugin)
            sched._drain_bindings()
            outcome = sched.outcomes.get(pod.uid, outcome)
    elif first.status in ("Scheduled", "Binding"):
        permit = "Allow"
    ex = _explanation(sched, fw.profile_name, first, outcome, captured, bound_to, gated_by, permit)
    state = captured.get("state")
    if state is not None:
        rejected = {v.name: f"{v.plugin}: {v.reason}" for v in ex.nodes if not v.feasible}
        cycle = PodCycle(first.pod, state, first.node, rejected, dict(outcome.annotations))
        ex.sections = _pod_sections(fw.plugins, cycle)
    return ex


def _pod_sections(plugins: dict[str, Any], cycle: PodCycle) -> list[SectionResult]:
    """Each installed ``PodExplainer`` whose plugin the profile enables, by plugin name; a hook that fails
    (to load or to run) leaves a section saying so."""
    out: list[SectionResult] = []
    for ep in sorted(importlib.metadata.entry_points(group=POD_EXPLAINERS), key=lambda e: e.name):
        plugin = plugins.get(ep.name)
        if plugin is None:
            continue
        try:
            explainer = ep.load()()
            if not isinstance(explainer, PodExplainer):
                raise TypeError(f"{ep.value} is not a PodExplainer")
            section = explainer.explain_pod(plugin, cycle)
        except Exception as exc:  # a plugin's hook must not take the explanation down
            out.append(SectionResult(ep.name, None, f"{type(exc).__name__}: {exc}"))
            continue
        if section is not None:
            out.append(SectionResult(ep.name, section))
    return out


def _capture_pre_filter(sched: Scheduler, fw: Any, captured: dict[str, Any], focus: str | None) -> None:
    """Keep what ``run_pre_filter`` returned (the merged node set and the first rejection) and which
    plugins skipped their Filter, on this throwaway framework only; with ``focus``, also run every Filter
    plugin on that node on its own, on a copy of the cycle state PreFilter left."""
    original: Callable[[CycleState, Any], tuple[PreFilterResult | None, Status]] = fw.run_pre_filter

    def run_pre_filter(state: CycleState, pod: Any) -> tuple[PreFilterResult | None, Status]:
        result, status = original(state, pod)
        captured["result"], captured["status"], captured["state"] = result, status, state
        captured["skipped"] = sorted(state.skip_filter)
        node = sched.snapshot.get(focus) if focus is not None else None
        if node is not None and status.is_success:
            copy_state = state.clone()
            verdicts = []
            for f in fw.filters:
                if f.name in state.skip_filter:
                    verdicts.append({"plugin": f.name, "code": "Skip", "reason": "PreFilter returned Skip"})
                    continue
                s = _filter_one(f, copy_state, pod, node)
                verdicts.append({"plugin": f.name, "code": s.code.label, "reason": s.message})
            captured["focus"], captured["focus_name"] = verdicts, focus
        return result, status

    fw.run_pre_filter = run_pre_filter


def _explanation(
    sched: Scheduler,
    profile: str,
    cycle: PodOutcome,
    final: PodOutcome,
    captured: dict[str, Any],
    bound_to: str | None,
    gated_by: str,
    permit: str,
) -> PodExplanation:
    fw = sched.frameworks[profile]
    status: Status | None = captured.get("status")
    result: PreFilterResult | None = captured.get("result")
    pre_filter: dict[str, Any] = {
        "status": status.code.label if status is not None else "NotRun",
        "plugin": status.plugin if status is not None else "",
        "reason": status.message if status is not None and not status.is_success else "",
        "nodes": sorted(result.node_names) if result is not None and result.node_names is not None else None,
        "skippedFilter": list(captured.get("skipped", [])),
    }
    verdicts: list[NodeVerdict] = []
    filt = cycle.filter or {}
    scores = cycle.scores or {}
    totals = cycle.totals or {}
    for ni in sched.snapshot.node_list:
        s = filt.get(ni.name)
        if s is not None and not s.is_success:
            verdicts.append(NodeVerdict(ni.name, False, s.plugin, s.code.label, s.message or s.code.label))
        elif ni.name in totals or ni.name in scores or cycle.node == ni.name:
            verdict = NodeVerdict(
                ni.name, True, scores=dict(scores.get(ni.name, {})), total=totals.get(ni.name)
            )
            verdicts.append(verdict)
        else:  # not reached: the cycle ended before scoring (an error, or a PreScore rejection)
            verdicts.append(NodeVerdict(ni.name, True))
    _rank(verdicts)
    if "focus" in captured:
        for v in verdicts:
            if v.name == captured.get("focus_name"):
                v.filters = captured["focus"]
    chosen = cycle.node
    tied: list[str] = []
    if chosen is not None and chosen in totals:
        tied = sorted(n for n, t in totals.items() if t == totals[chosen] and n != chosen)
    node_status = {"Binding": "Scheduled"}.get(cycle.status, cycle.status)
    return PodExplanation(
        pod=cycle.pod.key,
        profile=profile,
        bound_to=bound_to,
        gated_by=gated_by,
        pre_filter=pre_filter,
        filter_plugins=[f.name for f in fw.filters],
        score_plugins=[{"name": s.name, "weight": s.weight} for s in fw.scores],
        nodes=verdicts,
        status=node_status,
        node=chosen,
        message=cycle.message if cycle.status == "Unschedulable" else final.message,
        tied_with=tied,
        permit=permit,
        annotations=dict(final.annotations),
        notes=list(cycle.notes or []),
    )


def _rank(verdicts: list[NodeVerdict]) -> None:
    """Feasible nodes first, best total first (then by name); equal totals share a rank."""
    verdicts.sort(key=lambda v: (not v.feasible, -(v.total if v.total is not None else -1), v.name))
    rank, last = 0, None
    for i, v in enumerate(verdicts):
        if not v.feasible or v.total is None:
            continue
        if v.total != last:
            rank, last = i + 1, v.total
        v.rank = rank
