"""The simulation driver behind ``koord simulate`` and its result model.

``simulate`` loads manifests into a ``MemoryCluster`` on a ``VirtualClock`` (starting at ``now``), builds a
``Scheduler`` from a ``KubeSchedulerConfiguration`` in its deterministic mode, runs it until nothing more
can happen, and reports every pending pod it was responsible for: where it went (or why not), the
annotations PreBind wrote, and with ``explain`` each node's Filter verdict and every plugin's scores.

The JSON form (``SimulationResult.to_dict``) is a contract other tools build on; its schema is
``koord_framework/scheduler/simulate_schema.json``. One input, one seed and one ``now`` give one output,
except ``summary.seconds`` and ``summary.podsPerSecond`` (wall-clock measurements).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koord_framework.api.resources import format_resource_list
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.config.loader import LoadedSchedulerConfig, load_scheduler_config
from koord_framework.registry import PluginRegistry
from koord_framework.scheduler.interface import ReportingPlugin
from koord_framework.scheduler.scheduler import PodOutcome, Scheduler

SCHEDULED, UNSCHEDULABLE, WAITING = "Scheduled", "Unschedulable", "Waiting"

SCHEMA_PATH = Path(__file__).with_name("simulate_schema.json")


@dataclass
class PodReport:
    pod: str
    """``namespace/name``."""
    node: str | None
    status: str
    message: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    filter: dict[str, dict[str, str]] | None = None
    scores: dict[str, dict[str, Any]] | None = None
    notes: list[str] | None = None
    """Lines of explaining plugins (the reservation a pod was nominated to, why others were rejected)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod,
            "node": self.node,
            "status": self.status,
            "message": self.message,
            "annotations": dict(self.annotations),
        }
        if self.filter is not None:
            out["filter"] = self.filter
        if self.scores is not None:
            out["scores"] = self.scores
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass
class ReservationReport:
    """A Reservation of the cluster after the run: scheduled like a pod, reported with its phase."""

    name: str
    node: str | None
    phase: str
    message: str = ""
    owners: list[str] = field(default_factory=list)
    """``namespace/name`` of the pods that consume it (``status.currentOwners``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node": self.node,
            "phase": self.phase,
            "message": self.message,
            "owners": list(self.owners),
        }


@dataclass
class NodeReport:
    name: str
    requested: dict[str, str]
    allocatable: dict[str, str]
    pods: int
    requested_raw: dict[str, int] = field(default_factory=dict, repr=False)
    allocatable_raw: dict[str, int] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "requested": self.requested,
            "allocatable": self.allocatable,
            "pods": self.pods,
        }


@dataclass
class SimulationResult:
    pods: list[PodReport]
    nodes: list[NodeReport]
    seconds: float
    ignored: int = 0
    """Pending pods that name a scheduler no profile serves (left alone, as kube-scheduler leaves them)."""
    cycles: int = 0
    reservations: list[ReservationReport] = field(default_factory=list)
    plugins: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Plugin name → the rows of its own report section (``ReportingPlugin``), e.g. one per gang."""
    plugin_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ignored_pods: list[str] = field(default_factory=list)
    """``namespace/name (schedulerName)`` of each ignored pod."""

    def count(self, status: str) -> int:
        return sum(1 for p in self.pods if p.status == status)

    @property
    def all_scheduled(self) -> bool:
        """Every pod scheduled and no reservation left Pending."""
        return all(p.status == SCHEDULED for p in self.pods) and all(
            r.phase != "Pending" for r in self.reservations
        )

    def summary(self) -> dict[str, Any]:
        scheduled = self.count(SCHEDULED)
        return {
            "scheduled": scheduled,
            "unschedulable": self.count(UNSCHEDULABLE),
            "waiting": self.count(WAITING),
            "ignored": self.ignored,
            "ignoredPods": list(self.ignored_pods),
            "seconds": round(self.seconds, 6),
            "podsPerSecond": round(scheduled / self.seconds, 3) if self.seconds > 0 else 0.0,
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pods": [p.to_dict() for p in self.pods],
            "summary": self.summary(),
            "nodes": [n.to_dict() for n in self.nodes],
        }
        if self.reservations:
            out["reservations"] = [r.to_dict() for r in self.reservations]
        if self.plugins:
            out["plugins"] = {name: list(rows) for name, rows in self.plugins.items()}
        return out


def simulate(
    cluster_paths: Sequence[str | Path],
    config: str | Path | LoadedSchedulerConfig,
    *,
    seed: int = 0,
    now: float | None = None,
    explain: bool = False,
    registry: PluginRegistry | None = None,
    on_cycle: Callable[[int, int], None] | None = None,
) -> tuple[SimulationResult, MemoryCluster]:
    """Run the scheduler on the manifests of ``cluster_paths`` until idle; returns the report and the cluster.

    Raises ``ManifestError`` / ``ValidationError`` / ``ConfigReadError`` on bad input (nothing runs).
    ``on_cycle(done, total)`` is called after every scheduling cycle (for progress display).
    """
    loaded = config if isinstance(config, LoadedSchedulerConfig) else load_scheduler_config(config, registry)
    clock = VirtualClock(time.time() if now is None else now)
    cluster = MemoryCluster(clock, seed=seed)
    cluster.load(list(cluster_paths))
    sched = Scheduler.from_config(cluster, loaded, seed=seed, explain=explain, record_outcomes=True)
    try:
        sched.start()
        pending = [p for p in sched.pod_cache.all() if not p.node_name and not p.is_terminal]
        ours = [p for p in pending if sched.responsible_for(p) and not p.is_terminating]
        total = len(ours)
        callback = None
        if on_cycle is not None:
            report_cycle = on_cycle

            def callback() -> None:
                report_cycle(sched.scheduled_count, total)

        started = time.perf_counter()
        cycles = sched.run_until_idle(on_cycle=callback)
        seconds = time.perf_counter() - started
    finally:
        sched.close()
    pods = _pod_reports(sched, [p.uid for p in ours], explain)
    result = SimulationResult(pods, _node_reports(sched), seconds, len(pending) - len(ours), cycles)
    result.ignored_pods = sorted(
        f"{p.key} ({p.scheduler_name})" for p in pending if not sched.responsible_for(p)
    )
    result.reservations = _reservation_reports(sched, cluster)
    for fw in sched.frameworks.values():
        for name, plugin in fw.plugins.items():
            if isinstance(plugin, ReportingPlugin) and name not in result.plugins:
                result.plugins[name] = plugin.report(explain)
                result.plugin_columns[name] = tuple(plugin.report_columns)
    return result, cluster


def _reservation_reports(sched: Scheduler, cluster: MemoryCluster) -> list[ReservationReport]:
    """Every Reservation with its phase; a Pending one carries its reserve pod's failure message."""
    reports: list[ReservationReport] = []
    if "Reservation" not in cluster.kinds:  # koord-plugin-reservation contributes the kind (ADR 0004)
        return reports
    objs, _ = cluster.list("Reservation")
    for obj in sorted(objs, key=lambda o: str((o.get("metadata") or {}).get("name", ""))):
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        phase = str(status.get("phase") or "Pending")
        outcome = sched.outcomes.get(str(meta.get("uid") or ""))
        message = ""
        if phase == "Pending" and outcome is not None and outcome.status != SCHEDULED:
            message = outcome.message
        owners = [
            f"{o.get('namespace', '')}/{o.get('name', '')}"
            for o in status.get("currentOwners") or []
            if isinstance(o, dict)
        ]
        node = str(status.get("nodeName") or "") or None
        reports.append(ReservationReport(str(meta.get("name", "")), node, phase, message, owners))
    return reports


def _pod_reports(sched: Scheduler, order: Sequence[str], explain: bool) -> list[PodReport]:
    by_uid = {p.uid: p for p in sched.pod_cache.all()}
    reports: list[PodReport] = []
    for uid in dict.fromkeys([*order, *sched.outcomes]):
        current = by_uid.get(uid)
        if current is None:
            continue  # deleted during the run
        outcome = sched.outcomes.get(uid)
        if outcome is None and not current.node_name:
            reports.append(PodReport(current.key, None, UNSCHEDULABLE, "not tried"))
            continue
        waiting = sched.waiting.get(uid) is not None
        reports.append(_report(current.key, current.node_name, waiting, outcome, explain))
    return reports


def _report(key: str, bound_to: str, waiting: bool, o: PodOutcome | None, explain: bool) -> PodReport:
    node: str | None
    if bound_to:
        status, node, message = SCHEDULED, bound_to, ""
    elif waiting:
        status, node, message = WAITING, (o.node if o else None), (o.message if o else "")
    else:
        status, node, message = UNSCHEDULABLE, None, (o.message if o else "")
    report = PodReport(key, node, status, message, dict(o.annotations) if o and bound_to else {})
    if explain and o is not None and o.notes:
        report.notes = list(o.notes)
    if explain and o is not None:
        report.filter = {
            n: {"plugin": s.plugin, "reason": s.message or s.code.label} for n, s in (o.filter or {}).items()
        }
        scores: dict[str, dict[str, Any]] = {}
        for n, per in (o.scores or {}).items():
            entry: dict[str, Any] = {
                pl: {"raw": r, "normalized": nm, "weighted": w} for pl, (r, nm, w) in per.items()
            }
            entry["total"] = (o.totals or {}).get(n, sum(w for _, _, w in per.values()))
            scores[n] = entry
        for n, total in (o.totals or {}).items():
            scores.setdefault(n, {"total": total})
        report.scores = scores
    return report


def _node_reports(sched: Scheduler) -> list[NodeReport]:
    out: list[NodeReport] = []
    for ni in sched.cache.node_infos():
        requested = {k: v for k, v in ni.requested.items() if v}
        allocatable = dict(ni.allocatable)
        out.append(
            NodeReport(
                ni.name,
                format_resource_list(requested),
                format_resource_list(allocatable),
                len(ni.pods),
                requested,
                allocatable,
            )
        )
    return out
