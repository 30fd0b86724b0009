"""``koord compare``: run several scheduler configurations on the same snapshot and clock, side by side.

    koord compare --cluster PATH --config A --config B [--config C ...] [--label NAME ...]
                  [--workload FILE] [--scale N] [--deschedule-rounds K [--descheduler-config FILE]]
                  [--output table|json] [--html FILE] [--seed N] [--now RFC3339]

Each configuration (a KubeSchedulerConfiguration, bare or in Koordinator's ConfigMap) schedules the pending
pods of the manifests (``--cluster``, files or folders, repeatable; a ``koord snapshot`` directory) on its own
copy of the cluster, on a virtual clock starting at ``--now`` (default: the newest NodeMetric ``updateTime``).
``--workload FILE`` adds pods arriving over time (JSON Lines, see docs/compare.md); ``--scale N`` submits
every bound pod N more times as new pending pods. ``--deschedule-rounds K`` then runs K descheduling rounds
(``--descheduler-config``, default Koordinator's koord-descheduler-config) with the same scheduler placing the
evicted pods' replacements. Pods naming a scheduler another compared configuration serves are handed to a
configuration with a single profile, so configurations whose profiles have different names compete for the
same pods.

The report puts side by side: pods placed and unschedulable (by reason), node utilisation (requested, and
estimated usage as LoadAware estimates it) as distributions, CPU and memory fragmentation, LoadAware
threshold violations, ElasticQuota runtime vs used, gang outcomes, evictions and their reasons, and each
run's time. ``--output json`` prints the versioned report (schema in docs/compare.md); ``--html FILE`` writes
a self-contained page with plots (needs matplotlib: pip install 'koord-framework[report]').

Every input is checked before the first run: a configuration, workload file or descheduler configuration
that cannot be used is reported with its file and field, and nothing runs.

Exit status: 0 every run placed every pod, 1 some run left pods unplaced, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

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
from koord_framework.errors import KoordError

EXIT_OK, EXIT_UNPLACED = 0, 1
WIDTH = 100
SUMMARY = "run scheduler configurations on the same snapshot and compare them"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_manifest_command(
        subparsers,
        "compare",
        summary=SUMMARY,
        description=__doc__,
        config_help="scheduler configuration to compare (repeat for each; at least one)",
        configs=True,
    )
    parser.add_argument(
        "--label",
        action="append",
        metavar="NAME",
        help="name of each --config in the report (default: file name)",
    )
    parser.add_argument("--workload", metavar="FILE", help="arriving pods, JSON Lines (see docs/compare.md)")
    parser.add_argument(
        "--scale",
        type=int,
        default=0,
        metavar="N",
        help="submit every bound pod N more times as pending pods",
    )
    parser.add_argument(
        "--deschedule-rounds", type=int, default=0, metavar="K", help="descheduling rounds after scheduling"
    )
    parser.add_argument(
        "--descheduler-config",
        metavar="FILE",
        help="descheduler configuration of the rounds (default: Koordinator's koord-descheduler-config)",
    )
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table")
    parser.add_argument("--html", metavar="FILE", help="write a self-contained HTML report with plots")
    add_clock_options(parser)
    parser.set_defaults(func=run)


def _bad_input(message: str) -> int:
    return bad_input("compare", message)


def _labels(configs: list[str], given: list[str] | None) -> list[str]:
    if given:
        if len(given) != len(configs):
            raise UsageError(f"--label given {len(given)} time(s) for {len(configs)} --config")
        if len(set(given)) != len(given):
            raise UsageError(f"--label: names must differ ({', '.join(given)})")
        return list(given)
    labels: list[str] = []
    for path in configs:
        base = Path(path).stem or path
        label, n = base, 2
        while label in labels:
            label, n = f"{base}-{n}", n + 1
        labels.append(label)
    return labels


def run(args: argparse.Namespace) -> int:
    from koord_framework.compare import CompareInput, compare
    from koord_framework.compare.workload import load_workload
    from koord_framework.config.loader import load_descheduler_config, load_scheduler_config

    if args.scale < 0:
        return _bad_input(f"--scale {args.scale}: must be 0 or more")
    if args.deschedule_rounds < 0:
        return _bad_input(f"--deschedule-rounds {args.deschedule_rounds}: must be 0 or more")
    if args.descheduler_config and not args.deschedule_rounds:
        return _bad_input("--descheduler-config needs --deschedule-rounds K")
    html_render = None
    if args.html:
        from koord_framework.compare.html import MissingPlotting, renderer

        try:
            html_render = renderer()
        except MissingPlotting as exc:
            return _bad_input(str(exc))
    try:
        now = parse_now(args.now)
        labels = _labels(args.config, args.label)
        configs = []
        for label, path in zip(labels, args.config):
            loaded = load_scheduler_config(path)
            for note in loaded.notes:
                print(f"koord compare: {path}: {note}", file=sys.stderr)
            configs.append((label, path, loaded))
        arrivals = load_workload(args.workload) if args.workload else []
        descheduler = None
        if args.deschedule_rounds:
            if args.descheduler_config:
                descheduler = load_descheduler_config(args.descheduler_config)
            else:
                descheduler = shipped_config("descheduler", "compare")
        newest = newest_metric_time(args.cluster)
        if now is None:
            now = newest or time.time()
        served = frozenset(p.scheduler_name for _, _, loaded in configs for p in loaded.profiles)
        given = CompareInput(
            cluster=list(args.cluster),
            now=now,
            seed=args.seed,
            arrivals=arrivals,
            scale=args.scale,
            deschedule_rounds=args.deschedule_rounds,
            descheduler=descheduler,
            served=served,
        )
        tty = bool(getattr(sys.stderr, "isatty", lambda: False)())

        def announce(label: str) -> None:
            if tty:
                print(f"koord compare: running {label}...", file=sys.stderr)

        report = compare(configs, given, on_run=announce)
    except (KoordError, UsageError) as exc:
        return _bad_input(str(exc))
    if html_render is not None:
        try:
            Path(args.html).write_text(html_render(report), encoding="utf-8")
        except OSError as exc:
            return _bad_input(f"--html {args.html}: {exc.strerror or exc}")
    if args.output == "json":
        print_json(report)
    else:
        sys.stdout.write(render_table(report))
    unplaced = any(r["pods"]["unschedulable"] or r["pods"]["waiting"] for r in report["runs"])
    return EXIT_UNPLACED if unplaced else EXIT_OK


# --- table --------------------------------------------------------------------------------------------
def _stat(dist: dict[str, Any] | None) -> str:
    if not dist:
        return "-"
    return f"{dist['mean']:.1f} / {dist['p90']:.1f} / {dist['max']:.1f}"


def _rows(report: dict[str, Any]) -> list[tuple[str, list[str]]]:
    runs = report["runs"]

    def each(get: Any) -> list[str]:
        return [str(get(r)) for r in runs]

    rows: list[tuple[str, list[str]]] = [
        ("profiles", each(lambda r: ",".join(r["profiles"]))),
        ("placed", each(lambda r: r["pods"]["placed"])),
        ("unschedulable", each(lambda r: r["pods"]["unschedulable"])),
        ("waiting (gang/permit)", each(lambda r: r["pods"]["waiting"])),
    ]
    for res in ("cpu", "memory"):
        rows.append(
            (
                f"{res} requested % mean/p90/max",
                each(lambda r, res=res: _stat(r["utilisation"]["requested"][res])),
            )
        )
    for res in ("cpu", "memory"):
        rows.append(
            (
                f"{res} estimated % mean/p90/max",
                each(lambda r, res=res: _stat((r["utilisation"]["estimated"] or {}).get(res))),
            )
        )
    for res in ("cpu", "memory"):
        rows.append(
            (
                f"{res} stranded (free, % of free)",
                each(
                    lambda r, res=res: (
                        f"{r['fragmentation'][res].get('stranded', '-')} of {r['fragmentation'][res]['free']}"
                        f" ({r['fragmentation'][res].get('strandedPercent', 0):.1f}%)"
                    )
                ),
            )
        )
    rows.append(
        ("nodes fitting reference pod", each(lambda r: r["fragmentation"]["nodesFittingReference"] or "-"))
    )
    rows.append(
        (
            "LoadAware threshold violations",
            each(lambda r: r["loadAwareViolations"]["nodes"] if r["loadAwareViolations"] else "-"),
        )
    )
    rows.append(
        (
            "quotas with used > runtime",
            each(
                lambda r: (
                    sum(1 for q in r["quotas"] if q["usedOverRuntime"]) if r["quotas"] is not None else "-"
                )
            ),
        )
    )
    rows.append(
        (
            "gangs (verdict: count)",
            each(
                lambda r: (
                    ", ".join(f"{k}: {v}" for k, v in r["gangs"]["byVerdict"].items()) if r["gangs"] else "-"
                )
            ),
        )
    )
    rows.append(
        ("evictions (failed)", each(lambda r: f"{r['evictions']['total']} ({r['evictions']['failed']})"))
    )
    rows.append(
        (
            "time wall / cpu s",
            each(lambda r: f"{r['time']['wallSeconds']:.2f} / {r['time']['cpuSeconds']:.2f}"),
        )
    )
    return rows


def render_table(report: dict[str, Any]) -> str:
    runs = report["runs"]
    rows = _rows(report)
    head_w = max(len(name) for name, _ in rows)
    col_w = max(12, min(28, (WIDTH - head_w - 1) // max(len(runs), 1) - 1))
    lines = [f"{'':<{head_w}} " + " ".join(f"{cut(r['label'], col_w):<{col_w}}" for r in runs)]
    for name, values in rows:
        lines.append(f"{name:<{head_w}} " + " ".join(f"{cut(v, col_w):<{col_w}}" for v in values).rstrip())
    for r in runs:
        reasons = r["pods"]["unschedulableByReason"]
        evicted = r["evictions"]["byReason"]
        if reasons or evicted:
            lines.append("")
            lines.append(f"{r['label']}:")
            for reason, n in list(reasons.items())[:10]:
                lines.append(f"  {n:>6} not placed: {cut(reason, WIDTH - 22)}")
            for reason, n in list(evicted.items())[:10]:
                lines.append(f"  {n:>6} evicted: {cut(reason, WIDTH - 19)}")
    return "\n".join(lines) + "\n"
