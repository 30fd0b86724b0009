"""Generate ``configs/examples/cluster/``: the realistic example cluster that ``make demo`` schedules.

24 nodes in three zones (16 cores, 64 GiB, batch resources from co-location), two of them tainted for a
dedicated team, NodeMetrics with mixed load (two hot nodes that LoadAwareScheduling should avoid), bound
workloads, and pending pods of every kind: LS web pods spread across zones, LSR pods, BE batch jobs on
batch resources, and pods for the dedicated nodes. Deterministic: re-running gives the same files.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).resolve().parent.parent / "configs" / "examples" / "cluster"
NOW = "2024-01-01T00:00:00Z"
ZONES = ["zone-a", "zone-b", "zone-c"]
SCHED = "koord-scheduler"


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:02d}"
    zone = ZONES[i % 3]
    res = {
        "cpu": "16",
        "memory": "64Gi",
        "pods": "110",
        "kubernetes.io/batch-cpu": "8000",
        "kubernetes.io/batch-memory": "24Gi",
    }
    n: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
                "node-pool": "general",
            },
        },
        "spec": {},
        "status": {"capacity": res, "allocatable": res, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    if i >= 22:
        n["metadata"]["labels"]["node-pool"] = "dedicated"
        n["spec"]["taints"] = [{"key": "dedicated", "value": "ml-team", "effect": "NoSchedule"}]
    return n


def metric(name: str, cpu_pct: float, mem_pct: float) -> dict[str, Any]:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": NOW,
            "nodeMetric": {
                "nodeUsage": {
                    "resources": {
                        "cpu": f"{round(16000 * cpu_pct / 100)}m",
                        "memory": f"{round(64 * 1024 * mem_pct / 100)}Mi",
                    }
                }
            },
        },
    }


def pod(
    name: str,
    ns: str,
    requests: dict[str, str],
    *,
    labels: dict[str, str],
    priority: int,
    node: str | None = None,
    limits: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHED,
        "priority": priority,
        "containers": [
            {
                "name": "main",
                "image": "registry.example/app:1",
                "resources": {"requests": requests, "limits": limits or requests},
            }
        ],
    }
    if extra:
        spec.update(extra)
    p: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
    }
    if node:
        spec["nodeName"] = node
        p["status"] = {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-12-31T22:00:00Z"}
            ],
        }
    return p


def main() -> None:
    rng = random.Random(7)
    OUT.mkdir(parents=True, exist_ok=True)
    nodes = [node(i) for i in range(24)]
    metrics = []
    for i, n in enumerate(nodes):
        hot = i in (4, 11)
        metrics.append(
            metric(n["metadata"]["name"], 78.0 if hot else rng.uniform(15, 55), rng.uniform(30, 60))
        )
    bound = []
    for i in range(36):
        target = nodes[i % 22]["metadata"]["name"]
        bound.append(
            pod(
                f"checkout-{i}",
                "shop",
                {"cpu": "2", "memory": "4Gi"},
                labels={"app": "checkout", "koordinator.sh/qosClass": "LS"},
                priority=9100,
                node=target,
                limits={"cpu": "4", "memory": "4Gi"},
            )
        )
    pending = []
    for i in range(18):
        pending.append(
            pod(
                f"web-{i}",
                "shop",
                {"cpu": "1", "memory": "2Gi"},
                labels={"app": "web", "koordinator.sh/qosClass": "LS"},
                priority=9000,
                limits={"cpu": "2", "memory": "2Gi"},
                extra={
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": {"app": "web"}},
                        }
                    ]
                },
            )
        )
    for i in range(6):
        pending.append(
            pod(
                f"payments-{i}",
                "shop",
                {"cpu": "4", "memory": "8Gi"},
                labels={"app": "payments", "koordinator.sh/qosClass": "LSR"},
                priority=9500,
            )
        )
    for i in range(20):
        pending.append(
            pod(
                f"spark-exec-{i}",
                "batch",
                {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "4Gi"},
                labels={"app": "spark", "koordinator.sh/qosClass": "BE"},
                priority=5000,
            )
        )
    for i in range(4):
        pending.append(
            pod(
                f"trainer-{i}",
                "ml",
                {"cpu": "6", "memory": "16Gi"},
                labels={"app": "trainer", "koordinator.sh/qosClass": "LS"},
                priority=9000,
                extra={
                    "nodeSelector": {"node-pool": "dedicated"},
                    "tolerations": [
                        {"key": "dedicated", "operator": "Equal", "value": "ml-team", "effect": "NoSchedule"}
                    ],
                },
            )
        )
    files = {
        "00-nodes.yaml": nodes,
        "10-nodemetrics.yaml": metrics,
        "20-pods-running.yaml": bound,
        "30-pods-pending.yaml": pending,
    }
    for fname, docs in files.items():
        header = "# Generated by tools/gen_example_cluster.py; edit that script, not this file.\n"
        (OUT / fname).write_text(header + yaml.safe_dump_all(docs, sort_keys=False))
    print(f"wrote {sum(len(d) for d in files.values())} objects to {OUT}")


if __name__ == "__main__":
    main()
