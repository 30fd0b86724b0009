"""``koord simulate``: schedule a cluster described by manifests and report where every pending pod went.

    koord simulate --cluster PATH [--config FILE] [--output table|json|yaml] [--explain]
                   [--write-state DIR] [--seed N] [--now RFC3339]

The manifests (nodes, bound and pending pods, Koordinator CRDs; files or folders, ``--cluster`` may repeat)
are loaded into the embedded cluster, the scheduler built from ``--config`` (a KubeSchedulerConfiguration,
bare or in Koordinator's ConfigMap; default: Koordinator's ``koord-scheduler-config``, shipped with koord,
without the plugins that are not installed) runs until nothing more can happen, on a virtual clock that starts
at ``--now`` (default: the newest NodeMetric ``updateTime``, so the metrics are fresh, as in ``koord
deschedule``; else the wall clock), and the result is printed. ``--explain`` adds every node's Filter verdict
and every plugin's raw, normalized and weighted scores (json/yaml); every feasible node is then searched and
scored, so on clusters of 100 nodes or more the sampling of ``percentageOfNodesToScore`` is off.
``--write-state DIR`` writes the resulting cluster as manifests that ``--cluster`` reads back.

Exit status: 0 every pod was scheduled, 1 some were not (or every pending pod names a scheduler no profile
serves: nothing was done), 2 bad input (a file that cannot be read, a ``--cluster`` with no manifests).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

import yaml

from koord_framework.cli.common import (
    UsageError,
    add_clock_options,
    add_manifest_command,
    bad_input,
    cut,
    newest_metric_time,
    parse_now,
    print_json,
    shipped_config,
)
from koord_framework.cluster.manifests import dump_manifests
from koord_framework.config.loader import load_scheduler_config
from koord_framework.errors import KoordError
from koord_framework.scheduler.simulate import SimulationResult, simulate

EXIT_OK, EXIT_UNSCHEDULED = 0, 1
DEFAULT_CONFIG = "Koordinator's koord-scheduler-config, fitted to the installed plugins"
WIDTH = 100


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_manifest_command(
        subparsers,
        "simulate",
        summary="schedule the pending pods of a cluster described by manifests",
        description=__doc__,
        config_help=f"scheduler configuration (default: {DEFAULT_CONFIG})",
    )
    parser.add_argument("--output", "-o", choices=("table", "json", "yaml"), default="table")
    parser.add_argument(
        "--explain", action="store_true", help="per-node Filter verdicts and per-plugin scores"
    )
    parser.add_argument("--write-state", metavar="DIR", help="write the resulting cluster as manifests")
    add_clock_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        now = parse_now(args.now)
    except UsageError as exc:
        return _bad_input(str(exc))
    progress = _Progress(sys.stderr)
    try:
        if args.config:
            config = load_scheduler_config(args.config)
            for note in config.notes:  # an older apiVersion read as v1: say what changed
                print(f"koord simulate: {args.config}: {note}", file=sys.stderr)
        else:
            config = shipped_config("scheduler", "simulate")
        newest = newest_metric_time(args.cluster)
        if now is None:
            now = newest or time.time()
        result, cluster = simulate(
            args.cluster, config, seed=args.seed, now=now, explain=args.explain, on_cycle=progress.update
        )
    except (KoordError, UsageError) as exc:
        progress.clear()
        return _bad_input(str(exc))
    finally:
        progress.clear()
    if args.write_state:
        try:
            dump_manifests(cluster, args.write_state)
        except OSError as exc:
            return _bad_input(f"--write-state {args.write_state}: {exc.strerror or exc}")
    if args.output == "json":
        print_json(result.to_dict())
    elif args.output == "yaml":
        yaml.safe_dump(result.to_dict(), sys.stdout, sort_keys=False, default_flow_style=False)
    else:
        sys.stdout.write(render_table(result, explain=args.explain))
    if result.ignored:
        served = ", ".join(sorted({p.scheduler_name for p in _profiles(config)})) or "none"
        shown = ", ".join(result.ignored_pods[:10]) + (
            f" (+{len(result.ignored_pods) - 10} more)" if len(result.ignored_pods) > 10 else ""
        )
        print(
            f"koord simulate: {result.ignored} pending pod(s) name a scheduler no profile serves"
            f" (profiles serve: {served}); left alone: {shown}",
            file=sys.stderr,
        )
    if not result.pods and not result.reservations:
        # Nothing was scheduled because nothing was ours: say so in the status too.
        print(
            "koord simulate: no pending pod for this configuration's profiles; nothing done", file=sys.stderr
        )
        return EXIT_UNSCHEDULED if result.ignored else EXIT_OK
    return EXIT_OK if result.all_scheduled else EXIT_UNSCHEDULED


def _profiles(config: Any) -> list[Any]:
    from koord_framework.config.loader import load_scheduler_config

    loaded = config if not isinstance(config, str) else load_scheduler_config(config)
    return list(loaded.profiles)


def _bad_input(message: str) -> int:
    return bad_input("simulate", message)


# --- table --------------------------------------------------------------------------------------------
def render_table(result: SimulationResult, *, explain: bool = False) -> str:
    """One line per pod, a summary line, then per-node utilisation; fits a 100-column terminal."""
    lines: list[str] = []
    pod_w = min(max([len("POD"), *(len(p.pod) for p in result.pods)]), 36)
    node_w = min(max([len("NODE"), *(len(p.node or "-") for p in result.pods)]), 22)
    status_w = len("Unschedulable")
    msg_w = max(WIDTH - pod_w - node_w - status_w - 3, 16)
    lines.append(f"{'POD':<{pod_w}} {'STATUS':<{status_w}} {'NODE':<{node_w}} MESSAGE")
    for p in result.pods:
        lines.append(
            f"{cut(p.pod, pod_w):<{pod_w}} {p.status:<{status_w}} {cut(p.node or '-', node_w):<{node_w}} "
            f"{cut(p.message, msg_w)}".rstrip()
        )
        if explain:
            # What PreBind wrote (a cpuset and its NUMA nodes, device allocations, ...), one line each.
            lines.extend(f"    {key}: {value}" for key, value in sorted(p.annotations.items()))
            if p.node is None and p.filter:
                lines.extend(_rejections(p.filter))
    if result.reservations:
        lines.append("")
        lines.extend(_reservation_lines(result))
    s = result.summary()
    lines.append("")
    lines.append(
        f"{s['scheduled']} scheduled, {s['unschedulable']} unschedulable, {s['waiting']} waiting"
        f" in {s['seconds']:.2f} s ({s['podsPerSecond']:.0f} pods/s)"
    )
    for name, rows in result.plugins.items():
        lines += _plugin_table(name, rows, result.plugin_columns.get(name, ()))
    if explain:
        # The MESSAGE column is cut to the terminal; an explanation wants the whole reason (a quota's
        # runtime, used and request, say).
        refused = [p for p in result.pods if p.status != "Scheduled" and p.message]
        if refused:
            lines.append("")
            lines.extend(f"{p.pod}: {p.message}" for p in refused)
        lines.append("per-node Filter verdicts, scores and plugin details (Permit decisions): -o json|yaml")
    if result.nodes:
        lines.append("")
        name_w = min(max([len("NODE"), *(len(n.name) for n in result.nodes)]), 30)
        lines.append(f"{'NODE':<{name_w}} {'PODS':>5}  {'CPU (requested/allocatable)':<30} MEMORY")
        for n in result.nodes:
            cpu = _usage(n.requested.get("cpu", "0"), n.allocatable.get("cpu", "0"), n, "cpu")
            mem = _usage(n.requested.get("memory", "0"), n.allocatable.get("memory", "0"), n, "memory")
            lines.append(f"{cut(n.name, name_w):<{name_w}} {n.pods:>5}  {cpu:<30} {mem}")
    return "\n".join(lines) + "\n"


def _reservation_lines(result: SimulationResult) -> list[str]:
    """Reservations are scheduled like pods: one line each, with the phase instead of a pod status."""
    name_w = min(max([len("RESERVATION"), *(len(r.name) for r in result.reservations)]), 36)
    node_w = min(max([len("NODE"), *(len(r.node or "-") for r in result.reservations)]), 22)
    phase_w = len("Succeeded")
    rest_w = max(WIDTH - name_w - node_w - phase_w - 3, 16)
    lines = [f"{'RESERVATION':<{name_w}} {'PHASE':<{phase_w}} {'NODE':<{node_w}} OWNERS / MESSAGE"]
    for r in result.reservations:
        tail = r.message if r.phase == "Pending" else ", ".join(r.owners)
        lines.append(
            f"{cut(r.name, name_w):<{name_w}} {r.phase:<{phase_w}} {cut(r.node or '-', node_w):<{node_w}} "
            f"{cut(tail, rest_w)}".rstrip()
        )
    return lines


def _rejections(filtered: dict[str, dict[str, str]]) -> list[str]:
    """One line per distinct (plugin, reason) of an unschedulable pod, with the nodes that gave it."""
    by_reason: dict[tuple[str, str], list[str]] = {}
    for node, verdict in filtered.items():
        by_reason.setdefault((verdict.get("plugin", ""), verdict.get("reason", "")), []).append(node)
    out = []
    for (plugin, reason), nodes in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(nodes[:3]) + (f" (+{len(nodes) - 3})" if len(nodes) > 3 else "")
        out.append(f"    {plugin or '-'} on {shown}: {reason}")
    return out


def _cell(value: Any) -> str:
    """A report cell: a resource list reads as ``cpu=3,memory=1Gi``, anything else as its text."""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)


def _plugin_table(name: str, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> list[str]:
    """A plugin's own section (``ReportingPlugin``): its chosen columns, the last one cut to the width."""
    if not rows or not columns:
        return []
    cells = [[_cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [min(max(len(c), *(len(r[i]) for r in cells)), 36) for i, c in enumerate(columns)]
    head = [c.upper() for c in columns]
    out = ["", f"{name}:"]
    for r in [head, *cells]:
        fixed = " ".join(f"{cut(v, w):<{w}}" for v, w in zip(r[:-1], widths[:-1]))
        room = max(WIDTH - len(fixed) - 1, 16)
        out.append(f"{fixed} {cut(r[-1], room)}".rstrip())
    return out


def _usage(requested: str, allocatable: str, node: Any, resource: str) -> str:
    req = node.requested_raw.get(resource, 0)
    alloc = node.allocatable_raw.get(resource, 0)
    pct = f"{100 * req / alloc:5.1f}%" if alloc else "    -"
    return f"{requested}/{allocatable} {pct}"


# --- progress -------------------------------------------------------------------------------------------
class _Progress:
    """A one-line progress bar on a terminal, shown only once a run has taken more than a second."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._enabled = bool(getattr(stream, "isatty", lambda: False)())
        self._start = time.monotonic()
        self._last = 0.0
        self._shown = False

    def update(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if now - self._start < 1.0 or now - self._last < 0.1:
            return
        self._last = now
        rate = done / (now - self._start)
        width = 30
        filled = width * done // total if total else width
        bar = "#" * filled + "." * (width - filled)
        self._stream.write(f"\r[{bar}] {done}/{total} pods scheduled  {rate:,.0f} pods/s ")
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r" + " " * 79 + "\r")
            self._stream.flush()
            self._shown = False
