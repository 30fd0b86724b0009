"""Koordinator's ``midresource/plugin_test.go`` cases (a7a1b76b): NeedSync, Reset, Calculate (both modes,
the thresholds, host applications, invalid metrics) and isDegradeNeeded, with the exact messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from koord_plugin_midresource import DEGRADE_MESSAGE, MidResource

from koord_framework.api.resources import MID_CPU, MID_MEMORY
from koord_framework.cluster.clock import format_time
from koord_framework.manager.noderesource import ColocationStrategy, ResourceItem, ResourceMetrics

NOW = 1_700_000_000.0


def node(extra: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """``getTestNode``: 100 CPUs, 210G capacity / 200G allocatable memory, and earlier extended resources."""
    alloc = {
        "cpu": "100",
        "memory": "200G",
        "kubernetes.io/batch-cpu": "40000",
        "kubernetes.io/batch-memory": "80G",
        MID_CPU: "20000",
        MID_MEMORY: "40G",
    }
    cap = {**alloc, "memory": "210G"}
    for k, v in (extra or {}).items():
        alloc[k] = cap[k] = v
    for k in drop:
        alloc.pop(k, None)
        cap.pop(k, None)
    return {"metadata": {"name": "test-node"}, "status": {"allocatable": alloc, "capacity": cap}}


def pod(name: str, qos: str, priority_class: str, priority: int, cpu: str, memory: str) -> dict[str, Any]:
    res = {"cpu": cpu, "memory": memory}
    return {
        "metadata": {"name": name, "namespace": "test", "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {
            "priorityClassName": priority_class,
            "priority": priority,
            "nodeName": "test-node",
            "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}],
        },
        "status": {"phase": "Running"},
    }


PROD_LS = pod("podA", "LS", "koord-prod", 9000, "20", "40G")
BATCH_BE = pod("podB", "BE", "koord-batch", 7999, "15", "30G")
PODS = [PROD_LS, BATCH_BE]


def usage(cpu: str, memory: str) -> dict[str, Any]:
    return {"resources": {"cpu": cpu, "memory": memory}}


def metric(
    *,
    age: float = 20,
    node_usage: tuple[str, str] | None = ("20", "45G"),
    pods: tuple[tuple[str, str], tuple[str, str]] | None = (("10", "20G"), ("15", "20G")),
    reclaimable: tuple[str, str] | None = None,
    empty_reclaimable: bool = False,
    host_apps: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"updateTime": format_time(NOW - age)}
    status["nodeMetric"] = {"nodeUsage": usage(*node_usage)} if node_usage else {}
    status["podsMetric"] = (
        [
            {"name": "podA", "namespace": "test", "podUsage": usage(*pods[0])},
            {"name": "podB", "namespace": "test", "podUsage": usage(*pods[1])},
        ]
        if pods
        else []
    )
    if reclaimable is not None:
        status["prodReclaimableMetric"] = {"resource": usage(*reclaimable)}
    elif empty_reclaimable:
        status["prodReclaimableMetric"] = {}
    if host_apps is not None:
        status["hostApplicationMetric"] = host_apps
    return {"metadata": {"name": "test-node"}, "status": status}


def strategy(**fields: Any) -> ColocationStrategy:
    return ColocationStrategy.from_mapping({"enable": True, **fields})


STATIC_10 = {"midStaticCPUReservedPercent": 10, "midStaticMemoryReservedPercent": 10}


def calc(
    s: ColocationStrategy, m: dict[str, Any] | None, pods: list[dict[str, Any]] = PODS
) -> list[ResourceItem]:
    return MidResource().calculate(s, node(), pods, ResourceMetrics(m, NOW))


def expect(items: list[ResourceItem], cpu: int, memory: int, cpu_msg: str, mem_msg: str) -> None:
    assert [(i.name, i.quantity, i.message, i.reset) for i in items] == [
        (MID_CPU, cpu, cpu_msg, False),
        (MID_MEMORY, memory, mem_msg, False),
    ]


def test_name() -> None:
    assert MidResource.name == "MidResource"


@pytest.mark.parametrize(
    ("new", "want"),
    [
        # TestPluginNeedSync: "no need to sync for no mid resource changed"
        (
            node(
                {
                    "kubernetes.io/batch-cpu": "50000",
                    "kubernetes.io/batch-memory": "90G",
                    MID_CPU: "20000",
                    MID_MEMORY: "40G",
                }
            ),
            (False, ""),
        ),
        # "need to sync for mid resource changed"
        (
            node(
                {
                    "kubernetes.io/batch-cpu": "40000",
                    "kubernetes.io/batch-memory": "80G",
                    MID_CPU: "10000",
                    MID_MEMORY: "30G",
                }
            ),
            (True, "mid resource diff is big than threshold"),
        ),
    ],
)
def test_need_sync(new: dict[str, Any], want: tuple[bool, str]) -> None:
    s = ColocationStrategy.from_mapping({"enable": True, "resourceDiffThreshold": 0.05})
    assert MidResource().need_sync(s, node(), new) == want


def test_reset() -> None:
    items = MidResource().reset(node(), "test reset node resources")
    assert [(i.name, i.message, i.reset, i.quantity) for i in items] == [
        (MID_CPU, "test reset node resources", True, None),
        (MID_MEMORY, "test reset node resources", True, None),
    ]


def test_invalid_args_are_an_error() -> None:
    bad = node()
    del bad["status"]["allocatable"]
    with pytest.raises(ValueError, match=r"test-node.*allocatable"):
        MidResource().calculate(strategy(), bad, [], ResourceMetrics(metric(), NOW))


def test_degrade_when_node_metric_is_expired() -> None:
    items = calc(strategy(degradeTimeMinutes=5, **STATIC_10), metric(age=30 * 60))
    assert [(i.name, i.message, i.reset) for i in items] == [
        (MID_CPU, DEGRADE_MESSAGE, True),
        (MID_MEMORY, DEGRADE_MESSAGE, True),
    ]


def test_calculate_when_node_metric_is_valid() -> None:
    items = calc(strategy(degradeTimeMinutes=10, **STATIC_10), metric(reclaimable=("10", "15G")))
    expect(
        items,
        10000,
        15 * 10**9,
        "midAllocatable[CPU(milli-core)]:10000 = min(min(ProdReclaimable:10000, NodeUnused:80000) + "
        "Unallocated:80000 * midUnallocatedRatio:0, NodeCapacity:100000 * thresholdRatio:1)",
        "midAllocatable[Memory(GB)]:15 = min(min(ProdReclaimable:15, NodeUnused:165) + Unallocated:160 * "
        "midUnallocatedRatio:0, NodeCapacity:210 * thresholdRatio:1)",
    )


def test_calculate_where_prod_reclaimable_exceeds_mid_threshold() -> None:
    s = strategy(
        degradeTimeMinutes=10,
        midCPUThresholdPercent=10,
        midMemoryThresholdPercent=20,
        midUnallocatedPercent=10,
        **STATIC_10,
    )
    m = metric(node_usage=("30", "50G"), pods=(("5", "10G"), ("15", "30G")), reclaimable=("15", "30G"))
    expect(
        calc(s, m),
        10000,
        42 * 10**9,
        "midAllocatable[CPU(milli-core)]:10000 = min(min(ProdReclaimable:15000, NodeUnused:70000) + "
        "Unallocated:80000 * midUnallocatedRatio:0.1, NodeCapacity:100000 * thresholdRatio:0.1)",
        "midAllocatable[Memory(GB)]:42 = min(min(ProdReclaimable:30, NodeUnused:160) + Unallocated:160 * "
        "midUnallocatedRatio:0.1, NodeCapacity:210 * thresholdRatio:0.2)",
    )


ZERO_CPU = (
    "midAllocatable[CPU(milli-core)]:0 = min(min(ProdReclaimable:0, NodeUnused:70000) + Unallocated:{u} * "
    "midUnallocatedRatio:0, NodeCapacity:100000 * thresholdRatio:1)"
)
ZERO_MEM = (
    "midAllocatable[Memory(GB)]:0 = min(min(ProdReclaimable:0, NodeUnused:160) + Unallocated:{u} * "
    "midUnallocatedRatio:0, NodeCapacity:210 * thresholdRatio:1)"
)


def test_calculate_when_prod_reclaimable_is_nil() -> None:
    m = metric(node_usage=("30", "50G"), pods=(("5", "10G"), ("15", "30G")), empty_reclaimable=True)
    expect(
        calc(strategy(degradeTimeMinutes=10, **STATIC_10), m),
        0,
        0,
        ZERO_CPU.format(u=80000),
        ZERO_MEM.format(u=160),
    )


@pytest.mark.parametrize(
    ("static", "cpu", "memory", "cpu_msg", "mem_msg"),
    [
        (  # "static mode: not exceed"
            10,
            10000,
            21 * 10**9,
            "midAllocatable[CPU(milli-core)]:10000 = min(nodeCapacity:100000 * staticReservedPercent:0.1, "
            "nodeCapacity:100000 * thresholdRatio:0.1)",
            "midAllocatable[Memory(GB)]:21 = min(nodeCapacity:210 * staticReservedPercent:0.1, "
            "nodeCapacity:210 * thresholdRatio:0.2)",
        ),
        (  # "static mode: exceed"
            100,
            10000,
            42 * 10**9,
            "midAllocatable[CPU(milli-core)]:10000 = min(nodeCapacity:100000 * staticReservedPercent:1, "
            "nodeCapacity:100000 * thresholdRatio:0.1)",
            "midAllocatable[Memory(GB)]:42 = min(nodeCapacity:210 * staticReservedPercent:1, "
            "nodeCapacity:210 * thresholdRatio:0.2)",
        ),
    ],
)
def test_calculate_static_mode(static: int, cpu: int, memory: int, cpu_msg: str, mem_msg: str) -> None:
    s = strategy(
        degradeTimeMinutes=10,
        midStaticCPUReservedPercent=static,
        midStaticMemoryReservedPercent=static,
        midReclaimMode="static",
        midCPUThresholdPercent=10,
        midMemoryThresholdPercent=20,
        midUnallocatedPercent=10,
    )
    m = metric(node_usage=("30", "50G"), pods=(("5", "10G"), ("15", "30G")), reclaimable=("15", "30G"))
    expect(calc(s, m), cpu, memory, cpu_msg, mem_msg)


def test_calculate_where_node_metrics_is_invalid() -> None:
    m = metric(node_usage=None, pods=None, reclaimable=("20", "20G"))
    expect(
        calc(strategy(degradeTimeMinutes=10, **STATIC_10), m),
        0,
        0,
        "midAllocatable[CPU(milli-core)]:0 = min(min(ProdReclaimable:20000, NodeUnused:0) + "
        "Unallocated:80000 * "
        "midUnallocatedRatio:0, NodeCapacity:100000 * thresholdRatio:1)",
        "midAllocatable[Memory(GB)]:0 = min(min(ProdReclaimable:20, NodeUnused:0) + Unallocated:160 * "
        "midUnallocatedRatio:0, NodeCapacity:210 * thresholdRatio:1)",
    )


def test_calculate_where_prod_reclaimable_exceeds_node_free() -> None:
    m = metric(node_usage=("90", "200G"), pods=(("10", "20G"), ("15", "20G")), reclaimable=("20", "20G"))
    expect(
        calc(strategy(degradeTimeMinutes=10, **STATIC_10), m),
        10000,
        10 * 10**9,
        "midAllocatable[CPU(milli-core)]:10000 = min(min(ProdReclaimable:20000, NodeUnused:10000) + "
        "Unallocated:80000 * midUnallocatedRatio:0, NodeCapacity:100000 * thresholdRatio:1)",
        "midAllocatable[Memory(GB)]:10 = min(min(ProdReclaimable:20, NodeUnused:10) + Unallocated:160 * "
        "midUnallocatedRatio:0, NodeCapacity:210 * thresholdRatio:1)",
    )


@pytest.mark.parametrize(
    ("priority", "cpu", "memory", "unallocated"),
    [
        ("koord-prod", "5", "15G", (75000, 155)),  # prod host apps use the node's reserved resources
        ("koord-mid", "5", "15G", (80000, 160)),
        ("koord-batch", "2", "10G", (80000, 160)),
    ],
)
def test_calculate_with_host_application_usage(
    priority: str, cpu: str, memory: str, unallocated: tuple[int, int]
) -> None:
    apps = [{"name": f"test-{priority}-host-application", "usage": usage(cpu, memory), "priority": priority}]
    m = metric(
        node_usage=("30", "50G"), pods=(("5", "10G"), ("15", "30G")), empty_reclaimable=True, host_apps=apps
    )
    expect(
        calc(strategy(degradeTimeMinutes=10, **STATIC_10), m),
        0,
        0,
        ZERO_CPU.format(u=unallocated[0]),
        ZERO_MEM.format(u=unallocated[1]),
    )


def _degrade_metric(age: float | None, *, reclaimable: bool) -> dict[str, Any]:
    m = metric(node_usage=("20", "40Gi"), pods=None, reclaimable=("10", "20Gi") if reclaimable else None)
    if age is None:
        del m["status"]["updateTime"]
    else:
        m["status"]["updateTime"] = format_time(NOW - age)
    return m


@pytest.mark.parametrize(
    ("node_metric", "now", "want"),
    [
        (None, NOW, True),  # empty NodeMetric should degrade
        ({}, NOW, True),  # empty NodeMetric status should degrade
        (_degrade_metric(11 * 60, reclaimable=False), NOW, True),  # outdated NodeMetric status
        (_degrade_metric(0, reclaimable=False), NOW + 11 * 60, True),  # outdated by the clock moving on
        (_degrade_metric(0, reclaimable=False), NOW, False),  # no prod reclaimable: zero, not degraded
        (_degrade_metric(0, reclaimable=True), NOW, False),  # valid NodeMetric status
    ],
)
def test_is_degrade_needed(node_metric: dict[str, Any] | None, now: float, want: bool) -> None:
    s = strategy(degradeTimeMinutes=10)
    assert MidResource.degraded(s, ResourceMetrics(copy.deepcopy(node_metric), now)) is want


def test_pending_prod_pods_count_and_finished_ones_do_not() -> None:
    pending = copy.deepcopy(PROD_LS)
    pending["status"]["phase"] = "Pending"
    done = copy.deepcopy(PROD_LS)
    done["metadata"]["name"] = "podC"
    done["status"]["phase"] = "Succeeded"
    s = strategy(degradeTimeMinutes=10, midUnallocatedPercent=100)
    m = metric(reclaimable=("0", "0"))
    items = calc(s, m, [pending, done, BATCH_BE])
    # unallocated = capacity - reserved(10G memory) - the pending prod pod only
    assert [i.quantity for i in items] == [80000, 160 * 10**9]


def test_parsed_pods_follow_their_resource_version() -> None:
    """The per-node pod cache re-reads a pod whose resourceVersion moved, and forgets pods not given."""
    plugin = MidResource()
    s = strategy(degradeTimeMinutes=10, midUnallocatedPercent=100)
    m = metric(reclaimable=("0", "0"))
    running = copy.deepcopy(PROD_LS)
    running["metadata"]["resourceVersion"] = "1"
    first = plugin.calculate(s, node(), [running], ResourceMetrics(m, NOW))
    assert first[0].quantity == 80000  # 100 - 20 prod cores
    done = copy.deepcopy(running)
    done["metadata"]["resourceVersion"] = "2"
    done["status"]["phase"] = "Succeeded"
    second = plugin.calculate(s, node(), [done], ResourceMetrics(m, NOW))
    assert second[0].quantity == 100000
    assert plugin.calculate(s, node(), [], ResourceMetrics(m, NOW))[0].quantity == 100000
