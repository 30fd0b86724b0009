"""Koordinator's NUMA-level cases of plugin_test.go (``TestPluginCalculate`` with an NRT, ``TestPreUpdate``):
per-zone batch resources from the NodeResourceTopology, and their write into its zones."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from koord_plugin_batchresource import BatchResource

from koord_framework.api.quantity import Quantity
from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY
from koord_framework.cluster.clock import VirtualClock, format_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.manager.noderesource import ColocationStrategy, ResourceItem, ResourceMetrics

NOW = 1_700_000_000.0
STRATEGY = {
    "enable": True,
    "cpuReclaimThresholdPercent": 65,
    "memoryReclaimThresholdPercent": 65,
    "degradeTimeMinutes": 15,
    "updateTimeThresholdSeconds": 300,
    "resourceDiffThreshold": 0.1,
}
NODE = {
    "metadata": {"name": "test-node1"},
    "status": {"capacity": {"cpu": "100", "memory": "120G"}, "allocatable": {"cpu": "100", "memory": "120G"}},
}
ON_NUMA_0 = json.dumps({"numaNodeResources": [{"node": 0}]})


def _containers(*reqs: tuple[str, str]) -> list[dict[str, Any]]:
    return [
        {"resources": {"requests": {"cpu": c, "memory": m}, "limits": {"cpu": c, "memory": m}}}
        for c, m in reqs
    ]


def _pod(
    name: str,
    phase: str,
    *reqs: tuple[str, str],
    qos: str | None = None,
    priority: tuple[str, int] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "test"}
    if qos is not None:
        meta["labels"] = {"koordinator.sh/qosClass": qos}
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"nodeName": "test-node1", "containers": _containers(*reqs)}
    if priority is not None:
        spec["priorityClassName"], spec["priority"] = priority
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def _pods(first: str, first_qos: str, first_annotations: dict[str, str] | None) -> list[dict[str, Any]]:
    return [
        _pod(first, "Running", ("10", "10G"), qos=first_qos, annotations=first_annotations),
        _pod("podProd1", "Running", ("10", "10G"), priority=("koord-prod", 9999)),
        _pod("podBatch", "Running", ("10", "10G"), qos="BE"),
        _pod("podMid", "Pending", ("10", "20G"), ("10", "20G"), qos="BE", priority=("koord-mid", 7000)),
        _pod("podProd2", "Succeeded", ("10", "10G")),
    ]


def _pm(name: str, cpu: str, memory: str, priority: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "namespace": "test",
        "name": name,
        "podUsage": {"resources": {"cpu": cpu, "memory": memory}},
    }
    if priority is not None:
        out["priority"] = priority
    return out


def _metric(pods_metric: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "test-node1"},
        "status": {
            "updateTime": format_time(NOW),
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": "50", "memory": "55G"}},
                "systemUsage": {"resources": {"cpu": "7", "memory": "12G"}},
            },
            "podsMetric": pods_metric,
        },
    }


def _zone(name: str, cpu: str, memory: str, extra: list[dict[str, str]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    res = [
        {"name": "cpu", "capacity": cpu, "allocatable": cpu, "available": cpu},
        *extra,
        {"name": "memory", "capacity": memory, "allocatable": memory, "available": memory},
    ]
    return {"name": name, "type": "Node", "resources": res}


def _nrt(*zones: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "test-node1"},
        "topologyPolicies": ["None"],
        "zones": list(zones),
    }


TWO_ZONES = _nrt(_zone("node-0", "50", "62G"), _zone("node-1", "50", "58G"))
BASE_METRICS = [
    _pm("podProd", "5", "5G"),
    _pm("podProd1", "6", "6G"),
    _pm("podBatch", "10", "10G"),
    _pm("podMid", "22", "22G"),
]
SLO_METRICS = [
    _pm("podProd1", "6", "6G", "koord-prod"),
    _pm("podProd2", "2", "4G", "koord-prod"),  # dangling: the listed podProd2 has succeeded
    _pm("podBatch", "10", "10G", "koord-batch"),
    _pm("podMid", "22", "22G", "koord-mid"),
]
CASES = [
    pytest.param(
        {},
        _nrt(_zone("node-0", "100", "120G")),
        _pods("podProd", "LS", None),
        BASE_METRICS,
        (25000, 33 * 10**9, {"node-0": 25000}, {"node-0": 33 * 10**9}),
        id="calculate with one NUMA-level resources",
    ),
    pytest.param(
        {},
        TWO_ZONES,
        _pods("podProd", "LS", {"scheduling.koordinator.sh/resource-status": ON_NUMA_0}),
        BASE_METRICS,
        # cpu: 50 - 17.5 - 3.5 - (14 + 5) | 50 - 17.5 - 3.5 - 14
        # memory: 62 - 21.7 - 6 - (14 + 5) | 58 - 20.3 - 6 - 14
        (
            25000,
            33 * 10**9,
            {"node-0": 10000, "node-1": 15000},
            {"node-0": 15_300_000_000, "node-1": 17_700_000_000},
        ),
        id="calculate with multiple NUMA-level resources",
    ),
    pytest.param(
        {"memoryCalculatePolicy": "request"},
        TWO_ZONES,
        _pods(
            "podProdLSE",
            "LSE",
            {
                "scheduling.koordinator.sh/resource-status": json.dumps(
                    {"cpuset": "2-5,10-13", "numaNodeResources": [{"node": 0}]}
                )
            },
        ),
        [_pm("podProdLSE", "5", "5G"), *BASE_METRICS[1:]],
        (
            20000,
            18 * 10**9,
            {"node-0": 5000, "node-1": 15000},
            {"node-0": 5_300_000_000, "node-1": 12_700_000_000},
        ),
        id="calculate with memory not over-committed, LSE pods and NUMA-level resources",
    ),
    pytest.param(
        {"memoryCalculatePolicy": "request"},
        TWO_ZONES,
        _pods("podProdLSE", "LSE", {"scheduling.koordinator.sh/resource-status": ON_NUMA_0}),
        SLO_METRICS,
        (
            18000,
            18 * 10**9,
            {"node-0": 4000, "node-1": 14000},
            {"node-0": 5_300_000_000, "node-1": 12_700_000_000},
        ),
        id="calculate NUMA resources with memory not over-committed, missing metric LSE pod and dangling pod",
    ),
    pytest.param(
        {"memoryCalculatePolicy": "request"},
        TWO_ZONES,
        _pods("podProdLSE", "LSE", {"scheduling.koordinator.sh/resource-status": ON_NUMA_0}),
        [*SLO_METRICS, _pm("podProd3", "4", "8G", "koord-prod"), _pm("podBatch2", "8", "8G", "koord-batch")],
        (
            14000,
            18 * 10**9,
            {"node-0": 2000, "node-1": 12000},
            {"node-0": 5_300_000_000, "node-1": 12_700_000_000},
        ),
        id="calculate NUMA resources with memory not over-committed, some pods not shown in list",
    ),
]


@pytest.mark.parametrize(("strategy", "nrt", "pods", "pods_metric", "want"), CASES)
def test_numa_level_batch_resources(
    strategy: dict[str, Any],
    nrt: dict[str, Any],
    pods: list[dict[str, Any]],
    pods_metric: list[dict[str, Any]],
    want: tuple[int, int, dict[str, int], dict[str, int]],
) -> None:
    items = BatchResource().calculate(
        ColocationStrategy.from_mapping({**STRATEGY, **strategy}),
        NODE,
        pods,
        ResourceMetrics(_metric(pods_metric), NOW, nrt),
    )
    cpu, memory = items
    assert (cpu.name, memory.name) == (BATCH_CPU, BATCH_MEMORY)
    assert (cpu.quantity, memory.quantity, dict(cpu.zone_quantity), dict(memory.zone_quantity)) == want


@pytest.mark.parametrize(
    "nrt",
    [
        None,
        _nrt(),
        _nrt({"name": "node-0", "type": "Node", "resources": [{"name": "gpu", "allocatable": "1"}]}),
    ],
    ids=["no NRT", "no zones", "zones without cpu or memory"],
)
def test_no_zone_values_without_a_filled_in_nrt(nrt: dict[str, Any] | None) -> None:
    items = BatchResource().calculate(
        ColocationStrategy.from_mapping(STRATEGY),
        NODE,
        _pods("podProd", "LS", None),
        ResourceMetrics(_metric(BASE_METRICS), NOW, nrt),
    )
    assert [i.quantity for i in items] == [25000, 33 * 10**9]
    assert all(not i.zone_quantity for i in items)


def test_malformed_nrt_quantity_gives_node_values_only() -> None:
    nrt = _nrt(_zone("node-0", "fifty", "62G"))
    items = BatchResource().calculate(
        ColocationStrategy.from_mapping(STRATEGY),
        NODE,
        _pods("podProd", "LS", None),
        ResourceMetrics(_metric(BASE_METRICS), NOW, nrt),
    )
    assert [i.quantity for i in items] == [25000, 33 * 10**9]
    assert all(not i.zone_quantity for i in items)


# --- TestPreUpdate ------------------------------------------------------------------------------------------


def _batch(cpu: str, memory: str) -> list[dict[str, str]]:
    return [
        {"name": BATCH_CPU, "capacity": cpu, "allocatable": cpu, "available": cpu},
        {"name": BATCH_MEMORY, "capacity": memory, "allocatable": memory, "available": memory},
    ]


PLAIN_ZONES = (_zone("node-0", "50", "200Gi"), _zone("node-1", "50", "180Gi"))
WITH_BATCH = (
    _zone("node-0", "50", "200Gi", _batch("25000", "62G")),
    _zone("node-1", "50", "180Gi", _batch("25000", "58G")),
)


@dataclass(frozen=True)
class _AnnotatedItem(ResourceItem):
    """An item as a cpu-normalization calculator makes it (the framework's items carry annotations there)."""

    annotations: dict[str, str] = field(default_factory=dict)


def _items(zones: dict[str, tuple[int, int]], ratio: str | None = None) -> list[ResourceItem]:
    items: list[ResourceItem] = [
        ResourceItem(BATCH_CPU, 50000, {z: v[0] for z, v in zones.items()}),
        ResourceItem(BATCH_MEMORY, 120 * 10**9, {z: v[1] for z, v in zones.items()}),
    ]
    if ratio is not None:
        items.append(
            _AnnotatedItem(
                "CPUNormalization", annotations={"node.koordinator.sh/cpu-normalization-ratio": ratio}
            )
        )
    return items


def _cluster(*zones: dict[str, Any], clock: VirtualClock | None = None) -> MemoryCluster:
    cluster = MemoryCluster(clock or VirtualClock(NOW), seed=0)
    if zones:
        cluster.create(_nrt(*zones))
    return cluster


def _zone_values(cluster: MemoryCluster) -> list[tuple[str, list[tuple[str, int, int, int]]]]:
    nrt = cluster.get("NodeResourceTopology", "test-node1")
    return [
        (
            z["name"],
            [
                (r["name"], *(Quantity.parse(r[f]).value() for f in ("capacity", "allocatable", "available")))
                for r in z["resources"]
            ],
        )
        for z in nrt["zones"]
    ]


def _expected(
    node0: tuple[int, int], node1: tuple[int, int]
) -> list[tuple[str, list[tuple[str, int, int, int]]]]:
    def zone(name: str, memory: int, batch: tuple[int, int]) -> tuple[str, list[tuple[str, int, int, int]]]:
        return (
            name,
            [
                ("cpu", 50, 50, 50),
                (BATCH_CPU, *(batch[0],) * 3),
                (BATCH_MEMORY, *(batch[1],) * 3),
                ("memory", *(memory,) * 3),
            ],
        )

    return [zone("node-0", 200 * 2**30, node0), zone("node-1", 180 * 2**30, node1)]


STRATEGY_01 = ColocationStrategy.from_mapping({"resourceDiffThreshold": 0.1})


def test_pre_update_without_zone_values_leaves_the_nrt_alone() -> None:
    cluster = _cluster(*PLAIN_ZONES)
    before = cluster.get("NodeResourceTopology", "test-node1")
    plugin = BatchResource()
    plugin.pre_update(
        STRATEGY_01, NODE, [ResourceItem(BATCH_CPU, 50000), ResourceItem(BATCH_MEMORY, 120 * 10**9)], cluster
    )
    plugin.pre_update(STRATEGY_01, NODE, plugin.reset(NODE, "reset"), cluster)
    assert cluster.get("NodeResourceTopology", "test-node1") == before


def test_pre_update_without_nrt_writes_nothing() -> None:
    cluster = _cluster()
    BatchResource().pre_update(STRATEGY_01, NODE, _items({"node-0": (25000, 62 * 10**9)}), cluster)
    assert cluster.list("NodeResourceTopology")[0] == []


def test_pre_update_adds_numa_level_batch_resources() -> None:
    cluster = _cluster(*PLAIN_ZONES)
    BatchResource().pre_update(
        STRATEGY_01, NODE, _items({"node-0": (25000, 62 * 10**9), "node-1": (25000, 58 * 10**9)}), cluster
    )
    assert _zone_values(cluster) == _expected((25000, 62 * 10**9), (25000, 58 * 10**9))


def test_pre_update_updates_numa_level_batch_resources() -> None:
    cluster = _cluster(*WITH_BATCH)
    BatchResource().pre_update(
        STRATEGY_01, NODE, _items({"node-0": (15000, 30 * 10**9), "node-1": (10000, 20 * 10**9)}), cluster
    )
    assert _zone_values(cluster) == _expected((15000, 30 * 10**9), (10000, 20 * 10**9))


def test_pre_update_amplifies_batch_cpu_by_the_cpu_normalization_ratio() -> None:
    cluster = _cluster(*WITH_BATCH)
    BatchResource().pre_update(
        STRATEGY_01,
        NODE,
        _items({"node-0": (15000, 30 * 10**9), "node-1": (10000, 20 * 10**9)}, ratio="1.20"),
        cluster,
    )
    assert _zone_values(cluster) == _expected((18000, 30 * 10**9), (12000, 20 * 10**9))


def test_pre_update_keeps_small_changes_until_the_update_interval() -> None:
    clock = VirtualClock(NOW)
    cluster = _cluster(*WITH_BATCH, clock=clock)
    plugin = BatchResource()
    small = _items({"node-0": (26000, 62 * 10**9), "node-1": (24000, 58 * 10**9)})  # 4% < 10%
    plugin.pre_update(STRATEGY_01, NODE, small, cluster)  # first sync: written, entries within threshold kept
    version = cluster.get("NodeResourceTopology", "test-node1")["metadata"]["resourceVersion"]
    assert _zone_values(cluster) == _expected((25000, 62 * 10**9), (25000, 58 * 10**9))
    clock.advance(10)
    plugin.pre_update(STRATEGY_01, NODE, small, cluster)  # synced 10 s ago: nothing written
    assert cluster.get("NodeResourceTopology", "test-node1")["metadata"]["resourceVersion"] == version
    big = _items({"node-0": (15000, 62 * 10**9), "node-1": (25000, 58 * 10**9)})
    plugin.pre_update(STRATEGY_01, NODE, big, cluster)  # over the threshold: written at once
    assert _zone_values(cluster) == _expected((15000, 62 * 10**9), (25000, 58 * 10**9))


def test_pre_update_zeroes_zones_the_calculation_did_not_cover() -> None:
    cluster = _cluster(*WITH_BATCH)
    BatchResource().pre_update(STRATEGY_01, NODE, _items({"node-0": (25000, 62 * 10**9)}), cluster)
    assert _zone_values(cluster) == _expected((25000, 62 * 10**9), (0, 0))


def test_nrt_events_recalculate_only_on_cpu_or_memory_changes() -> None:
    plugin = BatchResource()
    plain, with_batch = _nrt(*PLAIN_ZONES), _nrt(*WITH_BATCH)
    assert plugin.wants_event("NodeResourceTopology", None, plain)
    assert not plugin.wants_event("NodeResourceTopology", None, _nrt())
    assert not plugin.wants_event("NodeResourceTopology", plain, with_batch)  # only batch entries moved
    bigger = _nrt(_zone("node-0", "60", "200Gi"), PLAIN_ZONES[1])
    assert plugin.wants_event("NodeResourceTopology", plain, bigger)
    plugin.nrt_synced.store("test-node1", NOW)
    assert not plugin.wants_event("NodeResourceTopology", plain, None)
    assert plugin.nrt_synced.get("test-node1") is None


@pytest.mark.parametrize(
    ("status", "want"),
    [
        (None, {"node-0": 24000, "node-1": 24000}),  # no NUMA allocation: shared evenly
        ("{not json", {"node-0": 24000, "node-1": 24000}),  # unreadable: treated as LS, shared
        (json.dumps({"numaNodeResources": [{"node": 0}, {"node": 5}]}), {"node-0": 19000, "node-1": 29000}),
        # an entry named twice counts twice in the divisor, as Koordinator counts entries
        (json.dumps({"numaNodeResources": [{"node": 0}, {"node": 0}]}), {"node-0": 24000, "node-1": 29000}),
    ],
    ids=["none", "unreadable", "node out of range ignored", "node named twice"],
)
def test_pod_numa_allocation_decides_its_zones(status: str | None, want: dict[str, int]) -> None:
    annotations = {"scheduling.koordinator.sh/resource-status": status} if status is not None else None
    pods = [_pod("ls", "Running", ("10", "10G"), qos="LS", annotations=annotations)]
    items = BatchResource().calculate(
        ColocationStrategy.from_mapping(STRATEGY),
        NODE,
        pods,
        ResourceMetrics(_metric([]), NOW, TWO_ZONES),
    )
    # each zone: 50 - 17.5 (safety margin) - 3.5 (system 7 / 2) - the pod's request on it
    assert dict(items[0].zone_quantity) == want
