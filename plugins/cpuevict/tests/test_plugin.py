"""BECPUEvict end to end: samples in the metric cache -> evictions through the cluster's Eviction API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from koord_plugin_cpuevict import BECPUEvict

from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.testing import MemoryCluster
from koord_framework.testing.conformance import PluginConformance
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod

HostFactory = Callable[..., FakeHostTree]

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "test-node"},
    "status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "kubernetes.io/batch-cpu": "4000"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "kubernetes.io/batch-cpu": "4000"},
    },
}


def be_pod(name: str, **extra: Any) -> dict[str, Any]:
    res = {"kubernetes.io/batch-cpu": "4000", "kubernetes.io/batch-memory": "1Gi"}
    return make_running_pod(name, qos="BE", requests=res, limits=res, **extra)


PODS = [be_pod("be-1"), be_pod("be-2"), be_pod("be-3")]
SLO = {
    "resourceUsedThresholdWithBE": {
        "enable": True,
        "cpuEvictBESatisfactionLowerPercent": 30,
        "cpuEvictBESatisfactionUpperPercent": 40,
    }
}


class TestConformance(PluginConformance):
    plugin_class = BECPUEvict
    group = "qos"
    valid_args = [{"coolTimeSeconds": 5, "triggers": ["BECPUEvict", "CPUEvict"]}]
    invalid_args = [{"triggers": []}, {"triggers": ["NoSuchTrigger"]}, {"coolTimeSeconds": -1}]


def _world(tree: FakeHostTree, pods: list[dict[str, Any]] = PODS, slo: dict[str, Any] = SLO) -> QOSHarness:
    return QOSHarness.with_cluster(tree, node=NODE, pods=pods, node_slo=slo)


def _be_samples(h: QOSHarness, *, usage: float, request: float, limit: float, seconds: int = 3) -> None:
    now = h.clock.now()
    for back in range(seconds):
        t = now - back
        h.metrics.append(MetricKind.BE_CPU_USAGE, t, usage)
        h.metrics.append(MetricKind.BE_CPU_REQUEST, t, request)
        h.metrics.append(MetricKind.BE_CPU_REAL_LIMIT, t, limit)
    for uid, used in (("uid-be-1", 2.0), ("uid-be-2", 1.0), ("uid-be-3", 0.5)):
        h.metrics.append(MetricKind.POD_CPU_USAGE, now, used, uid)


def test_starved_be_evicts_the_heaviest_user_once(koord_host_tree: HostFactory) -> None:
    h = _world(koord_host_tree(cpus=8))
    strategy = BECPUEvict(BECPUEvict.parse_args({}), h.context)
    h.clock.advance(21)  # past the cool time that starts with the agent
    # BE requests 12 cores, may use 2 (satisfaction 16.7% < 30%) and uses 1.9 of them
    _be_samples(h, usage=1900, request=12000, limit=2000)
    strategy.tick(h.clock.now())
    # release int(12000 x (40% - 16.7%)) = 2800 milli: be-1 alone (4000) covers it
    cluster = h.cluster
    assert isinstance(cluster, MemoryCluster)
    assert [(e.name, e.requested_by) for e in cluster.evictions] == [("be-1", "koordlet")]
    assert cluster.evictions[0].reason == "trigger by koordlet feature BECPUEvict, kill pod: be-1"
    assert cluster.try_get("Pod", "be-1", "default") is None
    # within the cool time nothing happens; after it, be-1 (still in our snapshot, terminating) counts as
    # released: no second victim and no second eviction of be-1
    h.clock.advance(5)
    _be_samples(h, usage=1900, request=12000, limit=2000)
    strategy.tick(h.clock.now())
    h.clock.advance(30)
    _be_samples(h, usage=1900, request=12000, limit=2000)
    strategy.tick(h.clock.now())
    assert len(cluster.evictions) == 1


def test_satisfied_be_is_left_alone(koord_host_tree: HostFactory) -> None:
    h = _world(koord_host_tree(cpus=8))
    strategy = BECPUEvict(BECPUEvict.parse_args({"coolTimeSeconds": 0}), h.context)
    _be_samples(h, usage=5900, request=12000, limit=6000)  # satisfaction 50% > 30%
    strategy.tick(h.clock.now())
    assert isinstance(h.cluster, MemoryCluster)
    assert h.cluster.evictions == []


def test_eviction_policy_annotation_protects_a_pod(koord_host_tree: HostFactory) -> None:
    pods = [
        be_pod("be-1", annotations={"koordinator.sh/eviction-policy": '["BEMemoryEvict"]'}),
        be_pod("be-2"),
        be_pod("be-3"),
    ]
    h = _world(koord_host_tree(cpus=8), pods=pods)
    strategy = BECPUEvict(BECPUEvict.parse_args({"coolTimeSeconds": 0}), h.context)
    _be_samples(h, usage=1900, request=12000, limit=2000)
    strategy.tick(h.clock.now())
    assert isinstance(h.cluster, MemoryCluster)
    assert [e.name for e in h.cluster.evictions] == ["be-2"]


def test_cpu_evict_trigger_uses_priority_order(koord_host_tree: HostFactory) -> None:
    labels = {"koordinator.sh/eviction-enabled": "true"}
    pods = [
        make_running_pod("low", qos="LS", priority=100, labels=labels, requests={"cpu": "2"}),
        make_running_pod("lower", qos="LS", priority=50, labels=labels, requests={"cpu": "2"}),
        make_running_pod("not-enabled", qos="LS", priority=10, requests={"cpu": "2"}),
    ]
    slo = {
        "resourceUsedThresholdWithBE": {
            "enable": True,
            "cpuEvictThresholdPercent": 80,
            "evictEnabledPriorityThreshold": 1000,
        }
    }
    h = _world(koord_host_tree(cpus=8), pods=pods, slo=slo)
    strategy = BECPUEvict(BECPUEvict.parse_args({"coolTimeSeconds": 0, "triggers": ["CPUEvict"]}), h.context)
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_CPU_USAGE, now, 7.2)  # 90% of 8 cores -> release 8000 x (90-78)% = 960m
    for uid in ("uid-low", "uid-lower", "uid-not-enabled"):
        h.metrics.append(MetricKind.POD_CPU_USAGE, now, 2.0, uid)
    strategy.tick(now)
    assert isinstance(h.cluster, MemoryCluster)
    assert [e.name for e in h.cluster.evictions] == ["lower"]


@pytest.mark.parametrize(
    "bad", [{"cpuEvictBESatisfactionLowerPercent": 70, "cpuEvictBESatisfactionUpperPercent": 80}]
)
def test_invalid_thresholds_are_reported(koord_host_tree: HostFactory, bad: dict[str, Any]) -> None:
    h = _world(koord_host_tree(cpus=8), slo={"resourceUsedThresholdWithBE": {"enable": True, **bad}})
    strategy = BECPUEvict(BECPUEvict.parse_args({"coolTimeSeconds": 0}), h.context)
    _be_samples(h, usage=1900, request=12000, limit=2000)
    strategy.tick(h.clock.now())
    assert "invalid config" in h.context.journal[-1].summary
    assert "must (0,60]" in h.context.journal[-1].summary
