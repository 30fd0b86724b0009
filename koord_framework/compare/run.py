"""One ``koord compare`` run: a profile on its own copy of the snapshot, on its own clock set to ``now``.

Each run loads the manifests into a fresh ``MemoryCluster`` (nothing is shared between runs, so profiles
that differ in plugins, args or scheduler names cannot see each other's placements), adds the replayed and
arriving pods, schedules until idle — arrivals created at their time on the virtual clock — and then, if
asked, runs descheduling rounds with the scheduler placing the evicted pods' replacements (as
``koord deschedule --then-schedule`` does). The measures are read from the same scheduler's caches.

Pods naming a scheduler that another compared configuration serves are handed to this configuration's
profile when it has exactly one (their ``schedulerName`` is rewritten on this run's copy only), so that two
configurations whose profiles carry different names compete for the same pods.
"""

from __future__ import annotations

import copy
import gc
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import CPU, MEMORY
from koord_framework.cluster.clock import VirtualClock, format_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import WatchEvent
from koord_framework.compare.measures import (
    NodeRow,
    distribution,
    fragmentation,
    reasons_of,
    violations,
)
from koord_framework.compare.workload import Arrival, replay_pods
from koord_framework.config.loader import LoadedSchedulerConfig
from koord_framework.descheduler.handle import RoundReport
from koord_framework.descheduler.simulation import recreate_pods, refresh_node_metrics, start_bound_pods
from koord_framework.registry import PluginRegistry
from koord_framework.scheduler.interface import ReportingPlugin, UsageEstimatingPlugin
from koord_framework.scheduler.scheduler import Scheduler
from koord_framework.scheduler.simulate import SCHEDULED, UNSCHEDULABLE, WAITING, _pod_reports

__all__ = ["CompareInput", "RunOutcome", "run_profile"]

LOADAWARE = "LoadAwareScheduling"
ELASTIC_QUOTA = "ElasticQuota"
COSCHEDULING = "Coscheduling"
DEFAULT_SCHEDULER = "default-scheduler"
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass
class CompareInput:
    """What every run of one comparison shares."""

    cluster: Sequence[str | Path]
    now: float
    seed: int = 0
    arrivals: Sequence[Arrival] = ()
    scale: int = 0
    deschedule_rounds: int = 0
    descheduler: Any = None
    """A loaded DeschedulerConfiguration (required when ``deschedule_rounds`` > 0)."""
    served: frozenset[str] = frozenset()
    """Scheduler names any compared configuration serves."""


@dataclass
class RunOutcome:
    """One run's JSON entry and the per-node columns the HTML report plots."""

    entry: dict[str, Any]
    nodes: dict[str, list[Any]] = field(default_factory=dict)


def _counts(reports: Sequence[Any]) -> dict[str, int]:
    return {
        "placed": sum(1 for p in reports if p.status == SCHEDULED),
        "unschedulable": sum(1 for p in reports if p.status == UNSCHEDULABLE),
        "waiting": sum(1 for p in reports if p.status == WAITING),
    }


def _retarget(cluster: MemoryCluster, loaded: LoadedSchedulerConfig, served: frozenset[str]) -> int:
    """Hand pending pods of the other configurations' schedulers to this one's single profile."""
    names = {p.scheduler_name for p in loaded.profiles}
    if len(names) != 1:
        return 0
    (target,) = names
    moved = 0
    for pod in cluster.list("Pod")[0]:
        spec = pod.get("spec") or {}
        name = spec.get("schedulerName") or DEFAULT_SCHEDULER
        if spec.get("nodeName") or name == target or name not in served:
            continue
        meta = pod.get("metadata") or {}
        cluster.patch(
            "Pod", meta["name"], meta.get("namespace") or "default", {"spec": {"schedulerName": target}}
        )
        moved += 1
    return moved


def _own(pod: dict[str, Any], loaded: LoadedSchedulerConfig, served: frozenset[str]) -> dict[str, Any]:
    """An added pod for this run: one without a scheduler, or naming another compared configuration's,
    goes to the first profile."""
    out = copy.deepcopy(pod)
    spec = out.setdefault("spec", {})
    names = [p.scheduler_name for p in loaded.profiles]
    current = spec.get("schedulerName")
    if not current or (current not in names and current in served and len(names) == 1):
        spec["schedulerName"] = names[0]
    return out


def run_profile(
    label: str,
    source: str,
    loaded: LoadedSchedulerConfig,
    given: CompareInput,
    *,
    on_cycle: Callable[[int, int], None] | None = None,
) -> RunOutcome:
    """Run one configuration on its own copy of the snapshot and measure the result."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    clock = VirtualClock(given.now)
    cluster = MemoryCluster(clock, seed=given.seed)
    cluster.load(list(given.cluster))
    retargeted = _retarget(cluster, loaded, given.served)
    replayed = 0
    if given.scale > 0:
        for pod in replay_pods(cluster.list("Pod")[0], given.scale):
            cluster.create(_own(pod, loaded, given.served))
            replayed += 1
    arrivals = list(given.arrivals)
    while arrivals and arrivals[0].at <= 0:
        for pod in arrivals.pop(0).pods:
            cluster.create(_own(pod, loaded, given.served))
    snapshot_counts = _snapshot_counts(cluster)
    sched = Scheduler.from_config(cluster, loaded, seed=given.seed, record_outcomes=True)
    observer: Any = None
    try:
        sched.start()
        gc.collect()
        gc.freeze()  # the snapshot lives to the end: keep it out of the collector's full passes
        load_seconds = time.perf_counter() - wall0
        pending = [p for p in sched.pod_cache.all() if not p.node_name and not p.is_terminal]
        ours = [p for p in pending if sched.responsible_for(p) and not p.is_terminating]
        ignored = len(pending) - len(ours)
        order = [p.uid for p in ours]
        total = len(ours) + sum(len(a.pods) for a in arrivals)
        callback = None
        if on_cycle is not None:
            report = on_cycle

            def callback() -> None:
                report(sched.scheduled_count, total)

        t_sched = time.perf_counter()
        cycles = sched.run_until_idle(on_cycle=callback)
        for arrival in arrivals:
            when = given.now + arrival.at
            if when > clock.now():
                clock.set(when)
            for pod in arrival.pods:
                created = cluster.create(_own(pod, loaded, given.served))
                order.append(created["metadata"]["uid"])
            cycles += sched.run_until_idle(on_cycle=callback)
        schedule_seconds = time.perf_counter() - t_sched
        reports = _pod_reports(sched, order, False)
        scheduled_counts = _counts(reports)
        rounds: list[RoundReport] = []
        deschedule_seconds = 0.0
        if given.deschedule_rounds > 0:
            t_desched = time.perf_counter()
            placed = [p.pod for p in reports if p.status == SCHEDULED]
            rounds = _deschedule(cluster, sched, given, placed, lambda pod: _own(pod, loaded, given.served))
            deschedule_seconds = time.perf_counter() - t_desched
            reports = _pod_reports(sched, order, False)
        rows, estimated_by, observer = _node_rows(sched, loaded)
        plugin_rows = _plugin_reports(sched)
        reference = _reference_shape([p for p in ours], sched, order)
    finally:
        sched.close()
        if observer is not None:
            observer.close()
        gc.unfreeze()
    final_counts = _counts(reports)
    evictions = [e for r in rounds for e in r.evictions]
    failures = [e for r in rounds for e in r.failures]
    by_reason: dict[str, int] = {}
    for p in reports:
        if p.status != SCHEDULED:
            for reason in reasons_of(p.message):
                by_reason[reason] = by_reason.get(reason, 0) + 1
    phases: dict[str, Any] = {
        "snapshot": {**snapshot_counts, "evictions": 0},
        "scheduled": {**scheduled_counts, "evictions": 0},
    }
    if given.deschedule_rounds > 0:
        phases["descheduled"] = {**final_counts, "evictions": len(evictions)}
    eviction_reasons: dict[str, int] = {}
    for e in evictions:
        # Figures differ from node to node (``usage(83.75%)>threshold(75.00%)``): N, so that reasons group.
        key = f"{e.plugin}: {_NUMBER.sub('N', e.reason)}"
        eviction_reasons[key] = eviction_reasons.get(key, 0) + 1
    wall = time.perf_counter() - wall0
    entry: dict[str, Any] = {
        "label": label,
        "config": source,
        "profiles": [p.scheduler_name for p in loaded.profiles],
        "retargeted": retargeted,
        "pods": {
            **final_counts,
            "ignored": ignored,
            "replayed": replayed,
            "arrived": sum(len(a.pods) for a in given.arrivals),
            "unschedulableByReason": dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))),
        },
        "phases": phases,
        "utilisation": {
            "requested": {res: distribution(r.requested_percent(res) for r in rows) for res in (CPU, MEMORY)},
            "estimated": (
                {res: distribution(r.estimated_percent(res) for r in rows) for res in (CPU, MEMORY)}
                if estimated_by
                else None
            ),
            "estimatedBy": estimated_by,
        },
        "fragmentation": fragmentation(rows, reference),
        "loadAwareViolations": violations(rows),
        "quotas": _quotas(plugin_rows.get(ELASTIC_QUOTA)),
        "gangs": _gangs(plugin_rows.get(COSCHEDULING)),
        "evictions": {
            "total": len(evictions),
            "failed": len(failures),
            "byReason": dict(sorted(eviction_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
            "rounds": [_round(r) for r in rounds],
        },
        "time": {
            "loadSeconds": round(load_seconds, 3),
            "scheduleSeconds": round(schedule_seconds, 3),
            "descheduleSeconds": round(deschedule_seconds, 3),
            "wallSeconds": round(wall, 3),
            "cpuSeconds": round(time.process_time() - cpu0, 3),
            "cycles": cycles,
            "simulatedUntil": format_time(clock.now()),
        },
    }
    columns: dict[str, list[Any]] = {
        "names": [r.name for r in rows],
        "requestedCpuPercent": [_r(r.requested_percent(CPU)) for r in rows],
        "requestedMemoryPercent": [_r(r.requested_percent(MEMORY)) for r in rows],
        "estimatedCpuPercent": [_r(r.estimated_percent(CPU)) for r in rows],
        "estimatedMemoryPercent": [_r(r.estimated_percent(MEMORY)) for r in rows],
        "freeCpuMilli": [r.free(CPU) for r in rows],
        "freeMemoryBytes": [r.free(MEMORY) for r in rows],
        "pods": [r.pods for r in rows],
    }
    entry["nodes"] = columns
    return RunOutcome(entry, columns)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _snapshot_counts(cluster: MemoryCluster) -> dict[str, int]:
    """Before anything runs: every pending pod counts as not placed yet."""
    placed = pending = 0
    for pod in cluster.list("Pod")[0]:
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            continue
        if (pod.get("spec") or {}).get("nodeName"):
            placed += 1
        else:
            pending += 1
    return {"bound": placed, "placed": 0, "unschedulable": pending, "waiting": 0}


def _deschedule(
    cluster: MemoryCluster,
    sched: Scheduler,
    given: CompareInput,
    placed: Sequence[str],
    own: Callable[[dict[str, Any]], dict[str, Any]],
) -> list[RoundReport]:
    """Start the placed pods (kubelet), then run the rounds; evicted pods come back as their controllers
    would recreate them (handed to this run's profile, as pending pods are) and this run's scheduler places
    them."""
    from koord_framework.descheduler.descheduler import Descheduler

    start_bound_pods(cluster, placed)
    originals = {
        f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}": own(p)
        for p in cluster.list("Pod")[0]
    }
    gone: list[str] = []
    recreated: list[str] = []
    starting: list[str] = []

    def on_pod(event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        if event.type == "DELETED" and key in originals and key not in gone:
            gone.append(key)

    def replace() -> None:
        nonlocal starting
        done = set(recreated)
        todo = [k for k in gone if k not in done]
        if todo:
            created = recreate_pods(cluster, originals, todo)
            recreated.extend(created)
            starting.extend(created)

    def tick(now: float) -> float | None:
        nonlocal starting
        replace()
        while sched.schedule_one():
            pass
        sched.tick_controllers()
        if starting:
            starting = start_bound_pods(cluster, starting)
        return sched.next_timer()

    unsubscribe = cluster.subscribe(["Pod"], on_pod)
    d = Descheduler.from_config(given.descheduler, cluster, dry_run=False)
    d.companions.append(tick)
    reports: list[RoundReport] = []
    try:
        for i in range(given.deschedule_rounds):
            start = cluster.clock.now()
            reports.append(d.run_once())
            last = i == given.deschedule_rounds - 1
            if d.descheduling_interval > 0 and not last:
                d.settle(start + d.descheduling_interval)
            else:
                d.drain()
            if not last:
                refresh_node_metrics(cluster, cluster.clock.now())
        replace()
        sched.run_until_idle()
        if starting:
            start_bound_pods(cluster, starting)
    finally:
        d.close()
        unsubscribe()
    return reports


def _round(report: RoundReport) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "round": report.round,
        "evictions": [e.as_dict() for e in report.evictions],
    }
    if report.failures:
        entry["failedEvictions"] = [{**e.as_dict(), "message": e.message} for e in report.failures]
    if report.errors:
        entry["errors"] = list(report.errors)
    return entry


def _node_rows(sched: Scheduler, loaded: LoadedSchedulerConfig) -> tuple[list[NodeRow], str | None, Any]:
    """Every node's requested and allocatable, and its estimated usage: from the profile's own
    usage-estimating plugin, else from a LoadAware observer with that profile's (or default) args, so that
    every run is measured the same way whether or not its profile filters by load."""
    estimator: UsageEstimatingPlugin | None = None
    estimated_by: str | None = None
    observer: Any = None
    for fw in sched.frameworks.values():
        for name, plugin in fw.plugins.items():
            if isinstance(plugin, UsageEstimatingPlugin):
                estimator, estimated_by = plugin, name
                break
        if estimator is not None:
            break
    if estimator is None:
        observer = _loadaware_observer(sched, loaded)
        if observer is not None:
            estimator, estimated_by = observer, f"{LOADAWARE} (observer)"
    rows = []
    for ni in sorted(sched.cache.node_infos(), key=lambda n: n.name):
        rows.append(
            NodeRow(
                ni.name,
                dict(ni.allocatable),
                dict(ni.requested),
                len(ni.pods),
                estimator.estimate_node_usage(ni) if estimator is not None else None,
            )
        )
    if estimator is not None and all(r.estimate is None for r in rows):
        estimated_by = None  # no NodeMetric anywhere: nothing was estimated
    return rows, estimated_by, observer


def _loadaware_observer(sched: Scheduler, loaded: LoadedSchedulerConfig) -> Any:
    """LoadAware built next to the run (not in its profile) to read estimates; None when not installed."""
    registry = PluginRegistry.discover("scheduler")
    if LOADAWARE not in registry:
        return None
    cls = registry.get(LOADAWARE)
    profile = loaded.profiles[0]
    args = cls.parse_args(profile.args.get(LOADAWARE))
    handle = sched.handles[profile.scheduler_name]
    plugin = cls(args, handle)  # type: ignore[call-arg]
    return plugin if isinstance(plugin, UsageEstimatingPlugin) else None


def _plugin_reports(sched: Scheduler) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for fw in sched.frameworks.values():
        for name, plugin in fw.plugins.items():
            if isinstance(plugin, ReportingPlugin) and name not in out:
                out[name] = plugin.report(False)
    return out


def _reference_shape(
    ours: Sequence[PodInfo], sched: Scheduler, order: Sequence[str]
) -> dict[str, int] | None:
    """The median CPU and memory request of the pods the run was asked to place (arrivals included)."""
    by_uid = {p.uid: p for p in sched.pod_cache.all()}
    pods = [by_uid[u] for u in order if u in by_uid] or list(ours)
    if not pods:
        return None
    return {res: int(statistics.median_low([p.requests.get(res, 0) for p in pods])) for res in (CPU, MEMORY)}


def _quotas(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """ElasticQuota's rows, with whether used went over runtime (it must not, for a leaf quota)."""
    if rows is None:
        return None
    from koord_framework.api.resources import parse_resource_list

    out = []
    for row in rows:
        runtime = parse_resource_list(row.get("runtime") or {})
        used = parse_resource_list(row.get("used") or {})
        over = sorted(r for r, v in used.items() if v > runtime.get(r, 0) and r in runtime)
        out.append(
            {
                "name": row.get("name"),
                "tree": row.get("tree"),
                "parent": row.get("parent"),
                "isParent": row.get("isParent"),
                **{k: row.get(k) for k in ("min", "max", "runtime", "request", "used")},
                "usedOverRuntime": over,
            }
        )
    return out


def _gangs(rows: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    if rows is None:
        return None
    verdicts: dict[str, int] = {}
    for row in rows:
        verdict = str(row.get("verdict", ""))
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    keep = ("gang", "minMember", "totalNumber", "bound", "waiting", "pending", "verdict", "why")
    return {
        "total": len(rows),
        "byVerdict": dict(sorted(verdicts.items())),
        "gangs": [{k: row.get(k) for k in keep} for row in rows],
    }
