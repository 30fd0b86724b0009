"""One LowNodeLoad round on a large cluster: 5,000 nodes, 150,000 pods, one NodeMetric per node.

    python bench/descheduler_round.py [--nodes 5000] [--pods-per-node 30] [--rounds 1]

10 % of the nodes are above the high thresholds (cpu 75 %), 30 % below the low ones (cpu 45 %, memory 55 %),
the rest in between. Pods are ReplicaSet-owned, so the DefaultEvictor admits them, and evictions go through
the embedded cluster's Eviction API. Building the cluster and the descheduler's cache is set-up and is
timed separately; the figure that matters is the round (Balance of every pool, classification, target
fitting, sorting, evictions).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from koord_plugin_defaultevictor import DefaultEvictor
from koord_plugin_lownodeload import LowNodeLoad

from koord_framework.cluster.clock import VirtualClock, format_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.testing.descheduler import DeschedulerHarness

START = 1_704_067_200.0
ARGS = {
    "lowThresholds": {"cpu": 45, "memory": 55},
    "highThresholds": {"cpu": 75, "memory": 80},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}


def build(nodes: int, per_node: int, seed: int = 1) -> tuple[MemoryCluster, dict[str, int]]:
    rng = random.Random(seed)
    cluster = MemoryCluster(VirtualClock(START), seed=seed)
    stamp = format_time(START)
    counts = {"hot": 0, "cold": 0, "warm": 0}
    for n in range(nodes):
        name = f"node-{n:05d}"
        kind = "hot" if n % 10 == 0 else "cold" if n % 10 in (1, 2, 3) else "warm"
        counts[kind] += 1
        cluster.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {
                    "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                    "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
        # Target cpu share of the node: hot ~85 %, warm ~55 %, cold ~20 %.
        share = {"hot": 0.85, "warm": 0.55, "cold": 0.20}[kind]
        per_pod_cpu = int(32000 * share / per_node)
        per_pod_mem = int(128 * 1024**3 * share * 0.8 / per_node)
        pods_metric: list[dict[str, Any]] = []
        for i in range(per_node):
            pod = f"{name}-p{i:02d}"
            cluster.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod,
                        "namespace": "bench",
                        "creationTimestamp": stamp,
                        "labels": {"app": f"app-{i % 50}"},
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "ReplicaSet",
                                "name": f"rs-{i % 50}",
                                "uid": f"rs-uid-{i % 50}",
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "nodeName": name,
                        "schedulerName": "koord-scheduler",
                        "containers": [
                            {"name": "main", "resources": {"requests": {"cpu": "200m", "memory": "512Mi"}}}
                        ],
                    },
                    "status": {"phase": "Running"},
                }
            )
            cpu = max(int(per_pod_cpu * rng.uniform(0.7, 1.3)), 1)
            mem = max(int(per_pod_mem * rng.uniform(0.7, 1.3)), 1)
            pods_metric.append(
                {
                    "namespace": "bench",
                    "name": pod,
                    "podUsage": {"resources": {"cpu": f"{cpu}m", "memory": str(mem)}},
                }
            )
        cluster.create(
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": name},
                "status": {
                    "updateTime": stamp,
                    "nodeMetric": {
                        "nodeUsage": {"resources": {}},
                        "systemUsage": {"resources": {"cpu": "500m", "memory": "2Gi"}},
                    },
                    "podsMetric": pods_metric,
                },
            }
        )
    return cluster, counts


def run(nodes: int = 5000, per_node: int = 30, rounds: int = 1) -> dict[str, Any]:
    t0 = time.perf_counter()
    cluster, counts = build(nodes, per_node)
    t1 = time.perf_counter()
    harness = DeschedulerHarness([(LowNodeLoad, ARGS)], evictor=DefaultEvictor, cluster=cluster)
    _ = harness.descheduler  # lists everything into the cache
    t2 = time.perf_counter()
    timings = []
    reports = []
    for _ in range(rounds):
        start = time.perf_counter()
        reports.append(harness.run_once())
        timings.append(time.perf_counter() - start)
    first = reports[0]
    return {
        "nodes": nodes,
        "pods": nodes * per_node,
        "build_seconds": round(t1 - t0, 2),
        "cache_seconds": round(t2 - t1, 2),
        "round_seconds": [round(t, 3) for t in timings],
        "high": len(first.high),
        "low": len(first.low),
        "evictions": len(first.evictions),
        "failures": len(first.failures),
        "errors": first.errors,
        "expected": counts,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=1)
    a = parser.parse_args()
    print(run(a.nodes, a.pods_per_node, a.rounds))
