"""Benchmark: the koordlet over a fake host of 150 containers, 1 s collection and QoS loops, wall clock.

    python tests/koordlet/bench_agent.py [--seconds 60] [--containers 150]

Builds a cgroup v1 fake host (systemd driver, 16 CPUs) with pods of three containers each (a third LS, a
third BE, a third unlabelled Burstable), an embedded cluster holding them with a NodeSLO that enables
suppression (cpuset policy), both eviction strategies (thresholds not reached) and CPU burst (policy
``auto``), then runs the agent for ``--seconds`` on the wall clock. A second process moves the cgroup
counters once a second like a kernel would, so rates and writes are real. Prints one JSON line: CPU cores
used by the agent process over the run, its peak RSS, rounds, writes, and samples held.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def build(root: Path, containers: int) -> tuple[Any, Any, list[dict[str, Any]]]:
    from koord_framework.testing.hosttree import FakeHostTree, make_running_pod

    tree = FakeHostTree(root, version=1, driver="systemd", cpus=16, memory_bytes=64 * 1024**3)
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "bench-node"},
        "status": {
            "capacity": {"cpu": "16", "memory": "64Gi", "kubernetes.io/batch-cpu": "8000"},
            "allocatable": {"cpu": "16", "memory": "64Gi", "kubernetes.io/batch-cpu": "8000"},
        },
    }
    pods = []
    for i in range(containers // 3):
        kind = ("LS", "BE", None)[i % 3]
        names = ("app", "log", "proxy")
        if kind == "BE":
            res = {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "512Mi"}
            pod = make_running_pod(
                f"be-{i}", node="bench-node", qos="BE", containers=names, requests=res, limits=res
            )
        else:
            pod = make_running_pod(
                f"pod-{i}",
                node="bench-node",
                qos=kind,
                containers=names,
                requests={"cpu": "100m", "memory": "128Mi"},
                limits={"cpu": "1", "memory": "1Gi"},
            )
        tree.add_pod(pod)
        pods.append(pod)
    slo = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": "bench-node"},
        "spec": {
            "resourceUsedThresholdWithBE": {
                "enable": True,
                "cpuSuppressPolicy": "cpuset",
                "cpuEvictBESatisfactionLowerPercent": 30,
                "cpuEvictBESatisfactionUpperPercent": 40,
                "memoryEvictThresholdPercent": 95,
            },
            "cpuBurstStrategy": {"policy": "auto"},
        },
    }
    return tree, [node, slo, *pods], pods


def kernel(root: str, pod_dirs: list[str], container_dirs: list[str], stop_at: float) -> None:
    """Advance every cgroup's cpuacct.usage and /proc/stat once a second (outside the measured process)."""
    base = Path(root)
    stat = base / "proc" / "stat"
    busy = 0
    while time.time() < stop_at:
        for d in (*pod_dirs, *container_dirs):
            f = base / "sys" / "fs" / "cgroup" / "cpuacct" / d / "cpuacct.usage"
            with contextlib.suppress(OSError):
                f.write_text(str(int(f.read_text()) + 50_000_000))
        busy += 600
        stat.write_text(f"cpu  {busy} 0 0 {busy} 0 0 0 0 0 0\n")
        time.sleep(1.0)


def _args(name: str) -> dict[str, Any] | None:
    return {"coolTimeSeconds": 0} if name.endswith("Evict") else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--containers", type=int, default=150)
    args = parser.parse_args()
    from koord_framework.cluster.clock import WallClock
    from koord_framework.cluster.memory import MemoryCluster
    from koord_framework.koordlet.agent import AgentOptions, KoordletAgent
    from koord_framework.registry import PluginRegistry

    with tempfile.TemporaryDirectory(prefix="koordlet-bench-") as tmp:
        tree, objects, _ = build(Path(tmp) / "host", args.containers)
        cluster = MemoryCluster(WallClock())
        for obj in objects:
            cluster.create(obj)
        registry = PluginRegistry.discover("qos")
        names = [n for n in ("BECPUSuppress", "CPUBurst", "BECPUEvict", "BEMemoryEvict") if n in registry]
        agent = KoordletAgent(
            "bench-node",
            cluster,
            host=tree.paths,
            options=AgentOptions(create_node_metric=True),
            strategies=[(cls, _args(cls.name)) for cls in registry.load(names)],  # type: ignore[misc]
            clock=WallClock(),
        )
        agent.start()
        state = agent.state
        pod_dirs = [m.cgroup_dir for m in state.pods]
        container_dirs = [c.cgroup_dir for m in state.pods for c in m.containers]
        stop_at = time.time() + args.seconds + 2
        feeder = multiprocessing.Process(
            target=kernel, args=(str(tree.root), pod_dirs, container_dirs, stop_at)
        )
        feeder.start()
        rounds = 0
        writes = 0

        def count(report: Any) -> None:
            nonlocal rounds, writes
            rounds += 1
            writes += len(report.writes)

        before = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        agent.run(duration=args.seconds, on_step=count)
        elapsed = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_SELF)
        feeder.terminate()
        feeder.join()
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        result = {
            "containers": sum(len(m.containers) for m in state.pods),
            "pods": len(state.pods),
            "strategies": [s.name for s in agent.strategies],
            "seconds": round(elapsed, 2),
            "cpuCores": round(cpu / elapsed, 4),
            "peakRSSMiB": round(after.ru_maxrss / 1024, 1),
            "steps": rounds,
            "writes": writes,
            "series": agent.metrics.series_count(),
            "metricBytes": agent.metrics.nbytes(),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
