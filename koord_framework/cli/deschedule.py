"""``koord deschedule``: run descheduling cycles on a cluster described by manifests and report them.

    koord deschedule --cluster PATH [--config FILE] [--dry-run] [--rounds N] [--output table|json]
                     [--now RFC3339] [--explain] [--then-schedule [--scheduler-config FILE]]

The manifests (nodes, pods, NodeMetrics, PodDisruptionBudgets, workloads; files or folders, ``--cluster`` may
repeat) are loaded into the embedded cluster on a virtual clock starting at ``--now`` (default: the newest
NodeMetric ``updateTime``, so the metrics are fresh; else the wall clock). The descheduler is built from
``--config`` (a DeschedulerConfiguration, bare or in Koordinator's ConfigMap; default: Koordinator's
``koord-descheduler-config``, shipped with koord, without the plugins that are not installed) and runs
``--rounds`` cycles (default 1) spaced by its ``deschedulingInterval``; between cycles migration jobs progress
and, as koordlet would, NodeMetrics drop the pods that left. ``--dry-run`` evicts nothing and changes nothing.

Per round the report names the nodes balance plugins found over (high) and under (low) their thresholds,
and every eviction with the plugin that asked and its reason; evictions that were refused follow. The
JSON is a contract:

    {"rounds": [{"round": 1, "nodes": {"high": [...], "low": [...]},
                 "evictions": [{"pod": "ns/name", "node": "...", "plugin": "LowNodeLoad", "reason": "..."}]}]}

with ``failedEvictions`` (same fields plus ``message``) and ``errors`` in a round only when it has some.
``--explain`` adds, per candidate a plugin wanted to evict that stayed, its verdict: the Filter or
PreEvictionFilter plugin that refused it and why (a namespace excluded, no owner workload, a limit of
migrating pods reached, no other node fits), or why the eviction failed; and it says when a profile enables
no deschedule or balance plugin at all (Koordinator's shipped profile only configures LowNodeLoad).
``--then-schedule`` runs the scheduler (``--scheduler-config``, default Koordinator's, as ``koord simulate``)
next to the descheduler on the same clock: evicted pods are recreated as their controllers would, scheduled,
and started (Running, Ready) as kubelet would, and Reservations (a ReservationFirst migration's) are scheduled
as they appear. The report shows where the evicted pods went and the load imbalance (mean, standard deviation,
spread of node usage %) before and after; the JSON then has a ``schedule`` key.

Exit status: 0 done, 1 a cycle reported errors, 2 bad input.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from typing import Any

from koord_framework.cli.common import (
    UsageError,
    add_manifest_command,
    bad_input,
    cut,
    newest_metric_time,
    parse_now,
    print_json,
    shipped_config,
)
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import WatchEvent
from koord_framework.config.loader import load_descheduler_config
from koord_framework.descheduler.descheduler import Descheduler
from koord_framework.descheduler.handle import RoundReport
from koord_framework.descheduler.simulation import (
    Imbalance,
    load_imbalance,
    measured_usage,
    pod_usage_of,
    pods_by_node,
    recreate_pods,
    refresh_node_metrics,
    start_bound_pods,
)
from koord_framework.errors import KoordError

EXIT_OK, EXIT_ERRORS = 0, 1
DEFAULT_CONFIG = "Koordinator's koord-descheduler-config, fitted to the installed plugins"
DEFAULT_SCHEDULER_CONFIG = "Koordinator's koord-scheduler-config, as koord simulate"
WIDTH = 100


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_manifest_command(
        subparsers,
        "deschedule",
        summary="run descheduling cycles on a cluster described by manifests",
        description=__doc__,
        config_help=f"descheduler configuration (default: {DEFAULT_CONFIG})",
    )
    parser.add_argument("--dry-run", action="store_true", help="report what would be evicted; evict nothing")
    parser.add_argument(
        "--rounds", type=int, default=1, metavar="N", help="descheduling cycles to run (default 1)"
    )
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table")
    parser.add_argument(
        "--now",
        metavar="RFC3339",
        help="where the virtual clock starts (default: the newest NodeMetric updateTime)",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="list every candidate a plugin wanted to evict that stayed, and why (which filter, limit)",
    )
    parser.add_argument(
        "--then-schedule",
        action="store_true",
        help="re-schedule the evicted pods and compare the load imbalance before and after",
    )
    parser.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help=f"scheduler configuration for --then-schedule (default: {DEFAULT_SCHEDULER_CONFIG})",
    )
    parser.set_defaults(func=run)


def _bad_input(message: str) -> int:
    return bad_input("deschedule", message)


def run(args: argparse.Namespace) -> int:
    if args.rounds < 1:
        return _bad_input(f"--rounds {args.rounds}: must be at least 1")
    try:
        now = parse_now(args.now)
    except UsageError as exc:
        return _bad_input(str(exc))
    try:
        if args.config:
            loaded = load_descheduler_config(args.config)
        else:
            loaded = shipped_config("descheduler", "deschedule")
        sched_loaded = None
        if args.then_schedule:
            from koord_framework.config.loader import load_scheduler_config

            if args.scheduler_config:
                sched_loaded = load_scheduler_config(args.scheduler_config)
            else:
                sched_loaded = shipped_config("scheduler", "deschedule")
        if now is None:
            now = newest_metric_time(args.cluster) or time.time()
        cluster = MemoryCluster(VirtualClock(now), seed=0)
        cluster.load(args.cluster)
        result = deschedule(
            cluster,
            loaded,
            rounds=args.rounds,
            dry_run=args.dry_run,
            scheduler_config=sched_loaded,
            explain=getattr(args, "explain", False),
        )
    except (KoordError, UsageError) as exc:
        return _bad_input(str(exc))
    if args.output == "json":
        print_json(result)
    else:
        sys.stdout.write(render_table(result))
    return EXIT_ERRORS if any(r.get("errors") for r in result["rounds"]) else EXIT_OK


def deschedule(
    cluster: MemoryCluster,
    loaded: Any,
    *,
    rounds: int = 1,
    dry_run: bool = False,
    scheduler_config: Any = None,
    explain: bool = False,
) -> dict[str, Any]:
    """Run the cycles on ``cluster`` and, given a loaded scheduler configuration, re-schedule the evicted
    pods; returns the report in the JSON contract's shape."""
    originals = {
        f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}": p
        for p in cluster.list("Pod")[0]
    }
    d = Descheduler.from_config(loaded, cluster, dry_run=True if dry_run else None)
    if explain:
        d.services.verdicts = {}
    sim = _Companion(cluster, scheduler_config, originals) if scheduler_config is not None else None
    if sim is not None and not d.dry_run:
        d.companions.append(sim.tick)
    # Everything loaded so far lives until the end; keep it out of the cyclic collector's full passes
    # (with 150,000 pods those would cost more than a descheduling cycle).
    gc.collect()
    gc.freeze()
    metrics_before = {
        m.name: m for m in (d.services.cache.node_metric(n.name) for n in d.services.cache.nodes()) if m
    }
    placement_before = pods_by_node(cluster)
    reports: list[RoundReport] = []
    try:
        for i in range(rounds):
            start = cluster.clock.now()
            reports.append(d.run_once())
            last = i == rounds - 1
            if d.descheduling_interval > 0 and not last:
                d.settle(start + d.descheduling_interval)
            else:
                d.drain()
            if not last and not d.dry_run:
                refresh_node_metrics(cluster, cluster.clock.now())
        out: dict[str, Any] = {"rounds": [_round(r) for r in reports]}
        if explain:
            out["explain"] = _explanation(loaded, reports, d.services.verdicts or {})
        if sim is not None:
            out["schedule"] = sim.report(metrics_before, placement_before)
    finally:
        d.close()
        if sim is not None:
            sim.close()
        gc.unfreeze()
    return out


class _Companion:
    """The scheduler, the workload controllers and kubelet, run next to the descheduler at each tick."""

    def __init__(self, cluster: MemoryCluster, loaded: Any, originals: dict[str, Any]) -> None:
        from koord_framework.scheduler.scheduler import Scheduler

        self.cluster = cluster
        self.originals = originals
        self.gone: list[str] = []
        """Original pods deleted (evicted), in order: the controllers replace them."""
        self.recreated: list[str] = []
        self.starting: list[str] = []
        """Recreated pods not started yet (kubelet starts them once bound)."""
        self.sched = Scheduler.from_config(cluster, loaded, seed=0, record_outcomes=True)
        self.sched.start()
        self._unsubscribe = cluster.subscribe(["Pod"], self._on_pod)

    def _on_pod(self, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        if event.type == "DELETED" and key in self.originals and key not in self.gone:
            self.gone.append(key)

    def tick(self, now: float) -> float | None:
        self._replace()
        while self.sched.schedule_one():
            pass
        self.sched.tick_controllers()
        self._start()
        return self.sched.next_timer()

    def _replace(self) -> None:
        done = set(self.recreated)
        todo = [k for k in self.gone if k not in done]
        if todo:
            created = recreate_pods(self.cluster, self.originals, todo)
            self.recreated.extend(created)
            self.starting.extend(created)

    def _start(self) -> None:
        if self.starting:
            self.starting = start_bound_pods(self.cluster, self.starting)

    def report(self, metrics_before: dict[str, Any], placement_before: dict[str, set[str]]) -> dict[str, Any]:
        """Replace what is still gone, schedule until idle, and report the evicted pods' placement."""
        self._replace()
        self.sched.run_until_idle()
        self._start()
        return _schedule_report(self.cluster, self.sched, self.recreated, metrics_before, placement_before)

    def close(self) -> None:
        self._unsubscribe()
        self.sched.close()


def _round(report: RoundReport) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "round": report.round,
        "nodes": {"high": list(report.high), "low": list(report.low)},
        "evictions": [e.as_dict() for e in report.evictions],
    }
    if report.failures:
        entry["failedEvictions"] = [{**e.as_dict(), "message": e.message} for e in report.failures]
    if report.errors:
        entry["errors"] = list(report.errors)
    return entry


def _schedule_report(
    cluster: MemoryCluster,
    sched: Any,
    recreated: list[str],
    metrics_before: dict[str, Any],
    placement_before: dict[str, set[str]],
) -> dict[str, Any]:
    outcomes = {o.pod.key: o for o in sched.outcomes.values()}
    placed = []
    for key in recreated:
        ns, name = key.split("/", 1)
        pod = cluster.try_get("Pod", name, ns)
        node = ((pod or {}).get("spec") or {}).get("nodeName") if pod else None
        entry: dict[str, Any] = {"pod": key, "node": node or None}
        if not node:
            outcome = outcomes.get(key)
            scheduler = ((pod or {}).get("spec") or {}).get("schedulerName") or "default-scheduler"
            entry["message"] = (
                outcome.message if outcome is not None else f"no scheduler profile is named {scheduler!r}"
            )
        placed.append(entry)
    from koord_framework.api.objects import NodeRecord

    nodes = [NodeRecord.from_manifest(n) for n in cluster.list("Node")[0]]
    pod_usage = pod_usage_of(metrics_before.values())
    before = load_imbalance(nodes, measured_usage(nodes, metrics_before, pod_usage, placement_before))
    after = load_imbalance(nodes, measured_usage(nodes, metrics_before, pod_usage, pods_by_node(cluster)))
    return {
        "pods": placed,
        "imbalance": {
            "before": {i.resource: i.as_dict() for i in before},
            "after": {i.resource: i.as_dict() for i in after},
        },
    }


# --- table --------------------------------------------------------------------------------------------
def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "-"


def _explanation(loaded: Any, reports: list[RoundReport], verdicts: dict[str, str]) -> dict[str, Any]:
    """``--explain``: what the profiles can do at all, and the verdict on each candidate that stayed."""
    notes = []
    for prof in loaded.profiles:
        points = prof.plugins.points
        if not points.get("deschedule") and not points.get("balance"):
            enabled = {name for names in points.values() for name in names}
            configured = (
                [e.name for e in prof.spec.plugin_config if e.name not in enabled] if prof.spec else []
            )
            hint = (
                f" ({', '.join(configured)} configured in pluginConfig but not enabled)" if configured else ""
            )
            notes.append(
                f"profile {prof.name}: no deschedule or balance plugin is enabled{hint}; nothing can be"
                " evicted (enable one under plugins.balance or plugins.deschedule)"
            )
    candidates = [{"pod": pod, "verdict": verdict} for pod, verdict in sorted(verdicts.items())]
    for r in reports:
        for f in r.failures:
            if f.pod not in verdicts:
                candidates.append({"pod": f.pod, "verdict": f"eviction {f.result}: {f.message}"})
    for r in reports:
        if r.high and not r.evictions and not r.failures and not verdicts:
            notes.append(
                f"round {r.round}: nodes {', '.join(r.high)} are high but no pod on them was a candidate"
            )
    return {"notes": notes, "candidates": candidates}


def render_table(result: dict[str, Any]) -> str:
    lines: list[str] = []
    for r in result["rounds"]:
        lines.append(f"Round {r['round']}")
        lines.append(f"  high: {_names(r['nodes']['high'])}")
        lines.append(f"  low:  {_names(r['nodes']['low'])}")
        rows = [("EVICTED", e) for e in r["evictions"]] + [
            ("FAILED", e) for e in r.get("failedEvictions", [])
        ]
        if rows:
            pod_w = min(max(len("POD"), *(len(e["pod"]) for _, e in rows)), 32)
            node_w = min(max(len("NODE"), *(len(e["node"]) for _, e in rows)), 16)
            plugin_w = min(max(len("PLUGIN"), *(len(e["plugin"]) for _, e in rows)), 20)
            reason_w = max(WIDTH - pod_w - node_w - plugin_w - 12, 20)
            lines.append(f"  {'':<7} {'POD':<{pod_w}} {'NODE':<{node_w}} {'PLUGIN':<{plugin_w}} REASON")
            for what, e in rows:
                reason = e["reason"] + (f" ({e['message']})" if e.get("message") else "")
                lines.append(
                    f"  {what:<7} {cut(e['pod'], pod_w):<{pod_w}} {cut(e['node'], node_w):<{node_w}} "
                    f"{cut(e['plugin'], plugin_w):<{plugin_w}} {cut(reason, reason_w)}".rstrip()
                )
        else:
            lines.append("  no evictions")
        for err in r.get("errors", []):
            lines.append(f"  error: {err}")
        lines.append("")
    total = sum(len(r["evictions"]) for r in result["rounds"])
    failed = sum(len(r.get("failedEvictions", [])) for r in result["rounds"])
    lines.append(f"{total} eviction(s), {failed} refused, in {len(result['rounds'])} round(s)")
    schedule = result.get("schedule")
    if schedule is not None:
        lines.append("")
        lines.append("Re-scheduled")
        for p in schedule["pods"]:
            where = p["node"] or f"not scheduled: {p.get('message', '')}"
            lines.append(f"  {p['pod']} -> {cut(where, WIDTH - len(p['pod']) - 6)}")
        lines.append("")
        lines.append(
            f"  {'RESOURCE':<10} {'':<7} {'MEAN %':>8} {'STDDEV':>8} {'MIN %':>8} {'MAX %':>8} {'SPREAD':>8}"
        )
        for when in ("before", "after"):
            for res, s in schedule["imbalance"][when].items():
                lines.append(
                    f"  {res:<10} {when:<7} {s['mean']:>8.2f} {s['stddev']:>8.2f} {s['min']:>8.2f} "
                    f"{s['max']:>8.2f} {s['spread']:>8.2f}"
                )
    explanation = result.get("explain")
    if explanation is not None:
        lines.append("")
        lines.append("Explain:")
        lines.extend(f"  {note}" for note in explanation["notes"])
        # The whole verdict: the reason is the point of --explain, so it is never cut.
        lines.extend(f"  {c['pod']}: {c['verdict']}" for c in explanation["candidates"])
        if not explanation["notes"] and not explanation["candidates"]:
            lines.append("  no candidate was refused by a filter or a limit")
    return "\n".join(lines) + "\n"


__all__ = ["Imbalance", "deschedule", "register", "render_table", "run"]
