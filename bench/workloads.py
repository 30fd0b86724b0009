"""Workload generators for the benchmarks, as Kubernetes-shaped manifests (dicts).

Shapes follow kube-scheduler's scheduler_perf (``SchedulingBasic``, ``TopologySpreading``,
``SchedulingPodAntiAffinity``) and Koordinator's co-location perf baseline. Everything is seeded.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]
ZONES = ("zone-a", "zone-b", "zone-c")
NOW = "2024-01-01T00:00:00Z"


def node(name: str, i: int, resources: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
            },
        },
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    requests: dict[str, str],
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    node_name: str | None = None,
    priority: int | None = None,
    scheduler_name: str | None = None,
    extra_spec: dict[str, Any] | None = None,
) -> Obj:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "pause",
                "resources": {"requests": dict(requests), "limits": dict(requests)},
            }
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if extra_spec:
        spec.update(extra_spec)
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }
    if node_name:
        obj["status"] = {"phase": "Running"}
    return obj


# --- scheduler_perf SchedulingBasic and variants ------------------------------------------------------
BASIC_NODE = {"cpu": "4", "memory": "32Gi", "pods": "110"}
BASIC_POD = {"cpu": "100m", "memory": "500Mi"}


def basic_nodes(n: int) -> Iterator[Obj]:
    for i in range(n):
        yield node(f"node-{i}", i, BASIC_NODE)


def basic_pods(
    n: int, *, prefix: str, bound_to: int = 0, seed: int = 0, variant: str = "basic"
) -> Iterator[Obj]:
    """``n`` pods; with ``bound_to`` > 0 they are pre-bound round-robin to that many nodes (the init pods)."""
    for i in range(n):
        extra: dict[str, Any] | None = None
        labels = {"app": prefix}
        if variant == "spread":
            extra = {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 5,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"color": "blue"}},
                    }
                ]
            }
            labels["color"] = "blue"
        elif variant == "antiaffinity":
            labels["color"] = "green"
            extra = {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"color": "green"}},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                }
            }
        yield pod(
            f"{prefix}-{i}",
            BASIC_POD,
            labels=labels,
            node_name=f"node-{i % bound_to}" if bound_to else None,
            extra_spec=extra,
        )


# --- Koordinator co-location mix ----------------------------------------------------------------------
COLO_NODE = {
    "cpu": "32",
    "memory": "256Gi",
    "pods": "110",
    "kubernetes.io/batch-cpu": "20000",
    "kubernetes.io/batch-memory": "100Gi",
}


def colocation_nodes(n: int, seed: int = 0) -> Iterator[Obj]:
    """Nodes plus one NodeMetric each: cpu usage uniform in 10–80 %, memory 20–70 %."""
    rng = random.Random(seed)
    for i in range(n):
        name = f"colo-node-{i}"
        yield node(name, i, COLO_NODE)
        cpu_pct = rng.uniform(10, 80)
        mem_pct = rng.uniform(20, 70)
        yield {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
            "status": {
                "updateTime": NOW,
                "nodeMetric": {
                    "nodeUsage": {
                        "resources": {
                            "cpu": f"{round(32000 * cpu_pct / 100)}m",
                            "memory": str(round(256 * 1024**3 * mem_pct / 100)),
                        }
                    }
                },
            },
        }


def colocation_pods(n: int, seed: int = 0) -> Iterator[Obj]:
    """80 % LS {500m, 512Mi, priority 9000}, 20 % BE {batch-cpu 1000, batch-memory 2Gi, priority 5000}."""
    rng = random.Random(seed + 1)
    for i in range(n):
        if rng.random() < 0.8:
            yield pod(
                f"ls-{i}",
                {"cpu": "500m", "memory": "512Mi"},
                labels={"koordinator.sh/qosClass": "LS"},
                priority=9000,
                scheduler_name="koord-scheduler",
            )
        else:
            yield pod(
                f"be-{i}",
                {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "2Gi"},
                labels={"koordinator.sh/qosClass": "BE"},
                priority=5000,
                scheduler_name="koord-scheduler",
            )
