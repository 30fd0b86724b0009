"""``python -m bench.suite``: every benchmark of ``make bench``, each in its own process, then one table.

    python -m bench.suite               # all of them (about 25 minutes on 2 quiet cores)
    python -m bench.suite --list        # their names and commands
    python -m bench.suite numa manager  # only these

A benchmark that misses its target exits non-zero; the suite goes on with the next one (so one missed
target does not hide the figures of the others), prints every step's exit status and time at the end, and
exits 1 when any step failed. Each step's own output (its JSON report, its figures) is left as it prints it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Step:
    name: str
    argv: tuple[str, ...]
    """Arguments after the interpreter (``-m module ...`` or ``bench/script.py ...``)."""


STEPS: tuple[Step, ...] = (
    Step("scheduler", ("-m", "bench", "--check")),
    Step("reservation", ("-m", "bench.reservation")),
    Step("descheduler", ("bench/descheduler_round.py",)),
    Step("koordlet", ("bench/koordlet_agent.py", "--seconds", "60")),
    Step("resctrl", ("bench/resctrl.py",)),
    Step("numa", ("bench/numa.py",)),
    Step("elasticquota", ("-m", "bench.elasticquota")),
    Step("deviceshare", ("bench/deviceshare.py",)),
    Step("manager", ("-m", "bench.manager")),
    Step("runtime-proxy", ("bench/runtime_proxy.py",)),
    Step("manager-webhook", ("-m", "bench.manager_webhook")),
    Step("runtimehooks", ("-m", "bench.runtimehooks")),
    Step("compare", ("-m", "bench.compare", "--check")),
)
"""In the order ``make bench`` runs them; a new benchmark is one line here."""


@dataclass(frozen=True)
class Outcome:
    step: Step
    returncode: int
    seconds: float


def _select(names: Sequence[str]) -> list[Step]:
    if not names:
        return list(STEPS)
    known = {step.name: step for step in STEPS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"bench.suite: unknown step(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[name] for name in names]


def run(steps: Sequence[Step], python: str = sys.executable) -> list[Outcome]:
    outcomes = []
    for index, step in enumerate(steps, 1):
        print(
            f"\n=== bench.suite [{index}/{len(steps)}] {step.name}: {' '.join(step.argv)}",
            file=sys.stderr,
            flush=True,
        )
        start = time.perf_counter()
        # The benches import ``bench`` as a package: run from the checkout's root whatever the caller's cwd.
        proc = subprocess.run([python, *step.argv], cwd=ROOT, env=os.environ.copy(), check=False)
        outcomes.append(Outcome(step, proc.returncode, time.perf_counter() - start))
    return outcomes


def table(outcomes: Sequence[Outcome]) -> str:
    width = max([len(o.step.name) for o in outcomes] + [4])
    lines = [f"{'step':<{width}}  {'status':<14} {'seconds':>8}"]
    for o in outcomes:
        status = "ok" if o.returncode == 0 else f"FAILED (exit {o.returncode})"
        lines.append(f"{o.step.name:<{width}}  {status:<14} {o.seconds:>8.1f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__.split("\n")[0])
    parser.add_argument("steps", nargs="*", metavar="STEP", help="run only these steps (default: all)")
    parser.add_argument("--list", action="store_true", help="print the steps and their commands, run nothing")
    args = parser.parse_args(argv)
    steps = _select(args.steps)
    if args.list:
        for step in steps:
            print(f"{step.name:<16} python {' '.join(step.argv)}")
        return 0
    outcomes = run(steps)
    print("\n" + table(outcomes), file=sys.stderr)
    failed = [o.step.name for o in outcomes if o.returncode != 0]
    if failed:
        print(
            f"bench.suite: {len(failed)} of {len(outcomes)} step(s) failed: {', '.join(failed)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
