"""Benchmark: the Resctrl strategy's reconcile tick, and the bulk tasks write of the koord-native shim
against plain Python writes.

    python bench/resctrl.py [--pods 150] [--threads-per-pod 4] [--ids 10000] [--repeat 5]

1. **tick**: a cgroup v1 fake host (16 CPUs, 2 L3 caches, cbm 7ff) with ``--pods`` pods of every QoS class
   whose classes all have ``resctrlQOS.enable``, ``--threads-per-pod`` threads each. Timed: the first tick
   (groups made, schemata written, every thread moved) and a steady tick (nothing to change: schemata read
   and compared, each group's tasks diffed against every container's). Run twice: task ids through the
   production path (``HostResctrlFS``, the shim's C loop, onto the tree's plain ``tasks`` files), and
   through the testing kit's kernel-like ``FakeResctrl`` (which checks every id); schemata and groups go
   through ``FakeResctrl`` both times.
2. **bulk write**: ``--ids`` ids into a ``tasks`` file with one ``write(2)`` per id, by the shim's C loop and
   by a Python loop of ``os.write``: on a regular file (tmpfs), and on a real cgroup v1 ``tasks`` file when
   run as root with ``/sys/fs/cgroup/cpu`` (ids of threads that do not exist: each write goes through the
   kernel's pid lookup and fails with ESRCH, which is what both loops report per id).

Prints one JSON object and a side-by-side summary on stderr. Times are medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

QOS_MIX = ("BE", "BE", "LS", "LSR", "LSE")


def _median_ms(samples: Sequence[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def _build(root: Path, pods: int, threads: int, kernel_like: bool) -> tuple[Any, Any, Any]:
    from koord_plugin_resctrl import Resctrl

    from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod

    tree = FakeHostTree(root, version=1, driver="systemd", cpus=16)
    tree.with_resctrl(cbm_mask="7ff", cache_ids=(0, 1), groups=("LSR", "LS", "BE"))
    manifests = [make_running_pod(f"pod-{i}", qos=QOS_MIX[i % len(QOS_MIX)]) for i in range(pods)]
    slo = {
        "resourceQOSStrategy": {
            "lsrClass": {"resctrlQOS": {"enable": True}},
            "lsClass": {"resctrlQOS": {"enable": True, "mbaPercent": 80}},
            "beClass": {"resctrlQOS": {"enable": True, "catRangeEndPercent": 30, "mbaPercent": 40}},
        }
    }
    h = QOSHarness(tree, pods=manifests, node_slo=slo)
    next_id = 100_000
    for meta in h.state.pods:
        tree.add_threads(meta.containers[0].cgroup_dir, range(next_id, next_id + threads))
        next_id += threads
    fs: Any = tree.resctrl
    if not kernel_like:
        fs = _ShimTasks(tree.resctrl)
    strategy = Resctrl(Resctrl.parse_args({}), h.context, fs=fs)
    return tree, h, strategy


class _ShimTasks:
    """The fake kernel for mount, groups and schemata (a plain file cannot keep the other lines of a
    partial schemata write), the production ``HostResctrlFS`` (the shim's C loop) for tasks."""

    def __init__(self, kernel: Any) -> None:
        from koord_plugin_resctrl.host import HostResctrlFS

        self._kernel = kernel
        self._host = HostResctrlFS()
        self.capabilities = kernel.capabilities
        self.mount = kernel.mount
        self.make_group = kernel.make_group
        self.remove_group = kernel.remove_group
        self.write_schemata = kernel.write_schemata
        self.write_tasks = self._host.write_tasks


def bench_tick(pods: int, threads: int, repeat: int, kernel_like: bool) -> dict[str, Any]:
    first: list[float] = []
    steady: list[float] = []
    moved = 0
    with tempfile.TemporaryDirectory(prefix="koord-bench-resctrl-") as tmp:
        for r in range(repeat):
            _, h, strategy = _build(Path(tmp) / f"host-{r}", pods, threads, kernel_like)
            t0 = time.perf_counter()
            strategy.tick(h.clock.now())
            first.append(time.perf_counter() - t0)
            moved = sum(strategy.last.tasks_written.values())
            assert not strategy.last.errors, strategy.last.errors
            for _ in range(3):
                t0 = time.perf_counter()
                strategy.tick(h.clock.now())
                steady.append(time.perf_counter() - t0)
                assert not strategy.last.tasks_written and not strategy.last.schemata_written
    return {
        "path": "tasks via the fake kernel" if kernel_like else "tasks via the shim (HostResctrlFS)",
        "pods": pods,
        "threads": pods * threads,
        "threadsMovedFirstTick": moved,
        "firstTickMs": _median_ms(first),
        "steadyTickMs": _median_ms(steady),
    }


def python_write_tasks(path: str, ids: Sequence[int]) -> list[int]:
    """The same contract as the shim in plain Python: one os.write per id, the errno of each."""
    out = []
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        for i in ids:
            try:
                os.write(fd, b"%d\n" % i)
                out.append(0)
            except OSError as err:
                out.append(err.errno or errno.EIO)
    finally:
        os.close(fd)
    return out


def _time(fn: Callable[[], object], repeat: int, reset: Callable[[], None]) -> float:
    samples = []
    for _ in range(repeat):
        reset()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return _median_ms(samples)


def bench_bulk(n: int, repeat: int) -> list[dict[str, Any]]:
    import koord_native

    ids = list(range(4_000_000, 4_000_000 + n))  # above any pid_max default: never a live thread
    rows = []
    with tempfile.TemporaryDirectory(
        prefix="koord-bench-tasks-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None
    ) as tmp:
        path = str(Path(tmp) / "tasks")

        def reset() -> None:
            Path(path).write_text("")

        shim = _time(lambda: koord_native.write_tasks(path, ids), repeat, reset)
        py = _time(lambda: python_write_tasks(path, ids), repeat, reset)
        reset()
        assert koord_native.write_tasks(path, ids).errnos == tuple(python_write_tasks(path, ids))
        rows.append({"target": "regular file (tmpfs)", "ids": n, "shimMs": shim, "pythonMs": py})
    cpu = Path("/sys/fs/cgroup/cpu")
    if os.geteuid() == 0 and (cpu / "tasks").is_file():
        group = cpu / f"koord-bench-{uuid.uuid4().hex[:8]}"
        group.mkdir()
        try:
            tasks = str(group / "tasks")
            shim = _time(lambda: koord_native.write_tasks(tasks, ids), repeat, lambda: None)
            py = _time(lambda: python_write_tasks(tasks, ids), repeat, lambda: None)
            answers = koord_native.write_tasks(tasks, ids)
            assert set(answers.errnos) == {errno.ESRCH}
            rows.append({"target": "cgroup v1 tasks (ESRCH each)", "ids": n, "shimMs": shim, "pythonMs": py})
        finally:
            group.rmdir()
    for row in rows:
        row["speedup"] = round(row["pythonMs"] / row["shimMs"], 2) if row["shimMs"] else None
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=150)
    parser.add_argument("--threads-per-pod", type=int, default=4)
    parser.add_argument("--ids", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    ticks = [
        bench_tick(args.pods, args.threads_per_pod, args.repeat, kernel_like=False),
        bench_tick(args.pods, args.threads_per_pod, args.repeat, kernel_like=True),
    ]
    bulk = bench_bulk(args.ids, args.repeat)
    print(json.dumps({"benchmark": "resctrl", "tick": ticks, "bulkTasksWrite": bulk}))
    for t in ticks:
        print(
            f"resctrl tick, {t['pods']} pods / {t['threads']} threads, {t['path']}: first "
            f"{t['firstTickMs']} ms ({t['threadsMovedFirstTick']} moved), steady {t['steadyTickMs']} ms",
            file=sys.stderr,
        )
    for b in bulk:
        print(
            f"bulk tasks write, {b['ids']} ids, {b['target']}: shim {b['shimMs']} ms"
            f" | python {b['pythonMs']} ms | x{b['speedup']}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
