"""``python -m bench``: run the scheduler benchmarks, print JSON reports and a summary, write bench/results/.

    python -m bench                                   # every workload, each in its own process
    python -m bench --workload basic                  # one workload, in this process
    python -m bench --workload spread --pods 2000     # smaller run
    python -m bench --workload basic --cprofile /tmp/basic.prof

The JSON report goes to stdout (and to ``--out``, by default ``bench/results/<workload>.json``); progress
and the human summary go to stderr. ``bench/README.md`` explains every field.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

from bench.scheduler_perf import Workload, run

RESULTS = Path(__file__).resolve().with_name("results")
ORDER = ("basic", "spread", "antiaffinity", "colocation-1k", "colocation-20k", "rss")
ORDER += ("gang-1000x3", "gang-3x1000", "gang-80pct")  # bench/coscheduling.py
"""The order of ``--workload all``: about 5 minutes on 2 cores (most of it ``colocation-20k``)."""


def all_workloads() -> dict[str, Workload]:
    from bench import colocation, coscheduling, deviceshare, numa, reservation, rss, scheduler_perf

    return {
        **scheduler_perf.WORKLOADS,
        **colocation.WORKLOADS,
        **rss.WORKLOADS,
        **reservation.WORKLOADS,
        **numa.WORKLOADS,
        **deviceshare.WORKLOADS,
        **coscheduling.WORKLOADS,
    }


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def summary_lines(reports: Sequence[dict[str, Any]]) -> list[str]:
    head = (
        f"{'workload':<15} {'nodes':>6} {'pods':>7} {'bound':>7}  {'pods/s mean':>11} {'p50':>7} {'p99':>7}"
        f" {'per cpu-s':>9}"
        f"  {'attempt ms p50':>14} {'p99':>7}  {'queue→bind s p50':>16} {'p99':>7}  {'RSS MiB':>8}  target"
    )
    lines = [head, "-" * len(head)]
    for r in reports:
        pps = r["podsPerSecond"]
        attempt = r["latencyMs"]["attempt"]
        e2e = r["latencyMs"]["queueToBind"]
        target = r["target"]
        goal = []
        if target["minPodsPerSecond"]:
            goal.append(f">= {target['minPodsPerSecond']:,.0f}/s")
        if target.get("maxPeakRssMiB"):
            goal.append(f"RSS < {target['maxPeakRssMiB']:,.0f} MiB")
        for check in (r.get("checks") or {}).values():
            goal.append(f"{check.get('violations', 0)} violations")
        verdict = "met" if target["met"] else "MISSED"
        lines.append(
            f"{r['workload']:<15} {r['nodes']:>6} {r['measuredPods']:>7} {r['scheduled']:>7}"
            f"  {_fmt(pps['mean'], 1):>11} {_fmt(pps['p50']):>7} {_fmt(pps['p99']):>7}"
            f" {_fmt(pps.get('perCpuSecond')):>9}"
            f"  {_fmt(attempt['p50'], 2):>14} {_fmt(attempt['p99'], 2):>7}"
            f"  {_fmt(e2e['p50'] / 1000, 2):>16} {_fmt(e2e['p99'] / 1000, 2):>7}"
            f"  {_fmt(r['peakRssMiB']):>8}  {verdict} ({', '.join(goal)})"
        )
    return lines


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def run_one(args: argparse.Namespace, workload: Workload) -> dict[str, Any]:
    profiler = cProfile.Profile(process_time) if args.cprofile else None
    started = perf_counter()
    report, _ = run(
        workload,
        nodes=args.nodes,
        init_pods=args.init_pods,
        pods=args.pods,
        progress=_stderr,
        profiler=profiler,
    )
    if profiler is not None:
        profiler.dump_stats(args.cprofile)
        _stderr(f"cProfile statistics written to {args.cprofile}")
    report["seconds"]["total"] = round(perf_counter() - started, 3)
    report["command"] = " ".join(["python -m bench", *sys.argv[1:]])
    report["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    return report


def run_all(args: argparse.Namespace, names: Sequence[str]) -> list[dict[str, Any]]:
    """Each workload in a fresh process, so that its peak RSS is its own."""
    reports = []
    for name in names:
        out = RESULTS / f"{name}.json"
        cmd = [sys.executable, "-m", "bench", "--workload", name, "--out", str(out), "--quiet"]
        for flag, value in (("--nodes", args.nodes), ("--init-pods", args.init_pods), ("--pods", args.pods)):
            if value is not None:
                cmd += [flag, str(value)]
        _stderr(f"== {name}")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        reports.append(json.loads(out.read_text()))
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    workloads = all_workloads()
    parser = argparse.ArgumentParser(prog="python -m bench", description="Run the scheduler benchmarks.")
    parser.add_argument(
        "--workload", choices=[*ORDER, *sorted(set(workloads) - set(ORDER)), "all"], default="all"
    )
    parser.add_argument("--nodes", type=int, help="override the workload's node count")
    parser.add_argument("--init-pods", type=int, help="override the number of pods bound before measuring")
    parser.add_argument("--pods", type=int, help="override the number of measured pods")
    parser.add_argument("--out", type=Path, help="where to write the JSON (default bench/results/NAME.json)")
    parser.add_argument(
        "--cprofile", help="write cProfile statistics of the measured scheduling to this file"
    )
    parser.add_argument("--quiet", action="store_true", help="no JSON on stdout (the file is still written)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a workload misses its target (pods/s, RSS) or its correctness check",
    )
    args = parser.parse_args(argv)

    if args.workload == "all":
        if args.cprofile:
            parser.error("--cprofile needs a single --workload")
        reports = run_all(args, ORDER)
        _write(args.out or RESULTS / "all.json", reports)
        if not args.quiet:
            print(json.dumps(reports, indent=2))
    else:
        report = run_one(args, workloads[args.workload])
        reports = [report]
        _write(args.out or RESULTS / f"{args.workload}.json", report)
        if not args.quiet:
            print(json.dumps(report, indent=2))
    for line in summary_lines(reports):
        _stderr(line)
    if args.check:
        missed = [r["workload"] for r in reports if not r["target"]["met"]]
        if missed:
            _stderr(f"target missed: {', '.join(missed)}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
