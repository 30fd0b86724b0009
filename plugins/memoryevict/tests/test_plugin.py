"""BEMemoryEvict end to end, beyond Koordinator's vectors: cool time, the priority and allocatable triggers,
and a host the collector measured."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from koord_plugin_memoryevict import BEMemoryEvict

from koord_framework.koordlet.metrics.cache import MetricCache, MetricKind
from koord_framework.koordlet.metrics.collector import ResourceCollector
from koord_framework.testing import MemoryCluster
from koord_framework.testing.conformance import PluginConformance
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod

HostFactory = Callable[..., FakeHostTree]
GI = 1024**3
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "test-node"},
    "status": {
        "capacity": {"cpu": "8", "memory": "10Gi", "kubernetes.io/batch-memory": "8Gi"},
        "allocatable": {"cpu": "8", "memory": "10Gi", "kubernetes.io/batch-memory": "8Gi"},
    },
}


def be(name: str, memory: str = "2Gi", **extra: Any) -> dict[str, Any]:
    res = {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": memory}
    return make_running_pod(name, qos="BE", requests=res, limits=res, **extra)


class TestConformance(PluginConformance):
    plugin_class = BEMemoryEvict
    group = "qos"
    valid_args = [{"triggers": ["BEMemoryEvict", "MemoryEvict"], "coolTimeSeconds": 10}]
    invalid_args = [{"triggers": ["BECPUEvict"]}, {"coolTimeSeconds": -2}]


def _world(tree: FakeHostTree, pods: list[dict[str, Any]], slo: dict[str, Any]) -> QOSHarness:
    return QOSHarness.with_cluster(tree, node=NODE, pods=pods, node_slo=slo)


def test_measured_host_over_threshold_evicts_largest_be_first(koord_host_tree: HostFactory) -> None:
    """Usage comes from the fake host through the collector, not from hand-made samples."""
    tree = koord_host_tree(version=2, driver="cgroupfs", cpus=4, memory_bytes=10 * GI)
    pods = [
        be("small", "1Gi"),
        be("large", "3Gi"),
        make_running_pod("ls", qos="LS", requests={"memory": "2Gi"}),
    ]
    h = _world(
        tree, pods, {"resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 80}}
    )
    for name, used in (("small", 1 * GI), ("large", 3 * GI), ("ls", 4 * GI)):
        meta = h.state.pod(f"uid-{name}")
        assert meta is not None
        tree.set_memory_usage(meta.cgroup_dir, anon=used)
    tree.set_node_memory_used(int(8.5 * GI))  # 85% >= 80% -> release 10Gi x (85 - 78)% = 0.7Gi
    cache: MetricCache = h.metrics
    ResourceCollector(tree.paths, tree.layout, cache).collect(h.state, h.clock.now())
    strategy = BEMemoryEvict(BEMemoryEvict.parse_args({}), h.context)
    strategy.tick(h.clock.now())
    assert isinstance(h.cluster, MemoryCluster)
    assert [e.name for e in h.cluster.evictions] == ["large"]
    # within the 4 s cool time nothing more happens even though usage is still high
    h.clock.advance(2)
    strategy.tick(h.clock.now())
    assert len(h.cluster.evictions) == 1


def test_memory_evict_trigger_needs_opt_in_and_counts_used_x1000(koord_host_tree: HostFactory) -> None:
    enabled = {"koordinator.sh/eviction-enabled": "true"}
    pods = [
        make_running_pod("a", qos="LS", priority=100, labels=enabled, requests={"memory": "1Gi"}),
        make_running_pod("b", qos="LS", priority=100, labels=enabled, requests={"memory": "1Gi"}),
        make_running_pod("c", qos="LS", priority=100, requests={"memory": "1Gi"}),
    ]
    slo = {
        "resourceUsedThresholdWithBE": {
            "enable": True,
            "memoryEvictThresholdPercent": 80,
            "evictEnabledPriorityThreshold": 1000,
        }
    }
    h = _world(koord_host_tree(cpus=4), pods, slo)
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_MEMORY_USAGE, now, 9.5 * GI)  # 95% -> release 1.7Gi
    for uid, used in (("uid-a", 1 * GI), ("uid-b", 2 * GI), ("uid-c", 3 * GI)):
        h.metrics.append(MetricKind.POD_MEMORY_USAGE, now, float(used), uid)
    strategy = BEMemoryEvict(BEMemoryEvict.parse_args({"triggers": ["MemoryEvict"]}), h.context)
    strategy.tick(now)
    assert isinstance(h.cluster, MemoryCluster)
    # b uses most; its release counts 1000-fold (upstream quirk), so it alone covers 1.7Gi; c did not opt in
    assert [e.name for e in h.cluster.evictions] == ["b"]


def test_allocatable_trigger(koord_host_tree: HostFactory) -> None:
    pods = [be("x", "4Gi", priority=5000), be("y", "3Gi", priority=5000), be("z", "1Gi", priority=5000)]
    for p in pods:
        p["metadata"]["labels"]["koordinator.sh/eviction-enabled"] = "true"
    slo = {
        "resourceUsedThresholdWithBE": {
            "enable": True,
            "memoryAllocatableEvictThresholdPercent": 90,
            "memoryAllocatableEvictLowerPercent": 80,
            "allocatableEvictPriorityThreshold": 5999,
        }
    }
    h = _world(koord_host_tree(cpus=4), pods, slo)
    now = h.clock.now()
    for uid in ("uid-x", "uid-y", "uid-z"):
        h.metrics.append(MetricKind.POD_MEMORY_USAGE, now, float(GI), uid)
    strategy = BEMemoryEvict(BEMemoryEvict.parse_args({"triggers": ["MemoryAllocatableEvict"]}), h.context)
    strategy.tick(now)
    # requested 8Gi of 8Gi batch-memory (100% > 90%): release (1.0 - 0.8) x 8Gi = 1.6Gi; largest request first
    assert isinstance(h.cluster, MemoryCluster)
    assert [e.name for e in h.cluster.evictions] == ["x"]


def test_disabled_nodeslo_means_not_enabled(koord_host_tree: HostFactory) -> None:
    h = _world(koord_host_tree(cpus=4), [be("a")], {"resourceUsedThresholdWithBE": {"enable": False}})
    strategy = BEMemoryEvict(BEMemoryEvict.parse_args({}), h.context)
    assert not strategy.enabled(h.state.node_slo)
    assert not strategy.enabled(None)


def test_be_order_ties_and_missing_priority(koord_host_tree: HostFactory) -> None:
    """Upstream's BE order (``getSortedBEPodInfos``) leaves equal pods in whatever order its map of pods
    gave them (and ``sort.Slice`` is unstable); here equal pods keep the node state's namespace/name order.
    Pods without usage go last by name descending; a pod without ``spec.priority`` is compared by usage
    only, as upstream does."""
    from koord_plugin_memoryevict.policy import be_pod_evict_infos

    pods = [
        # the eviction-priority annotation orders the priority-based triggers only, not BE eviction
        be("p", namespace="team-b", priority=5000, annotations={"koordinator.sh/eviction-priority": "-100"}),
        be("q", namespace="team-a", priority=5000),
        be("p", uid="uid-p-a", namespace="team-a", priority=5000),
        be("idle-a", priority=5000),
        be("idle-z", priority=5000),
        be("no-priority"),
        be("low", priority=4000),
    ]
    h = _world(koord_host_tree(cpus=4), pods, {"resourceUsedThresholdWithBE": {"enable": True}})
    used = {"uid-p": 2.0 * GI, "uid-q": 2.0 * GI, "uid-p-a": 2.0 * GI, "uid-no-priority": 3.0 * GI}
    used["uid-low"] = 1.0 * GI
    order = [i.pod.key for i in be_pod_evict_infos(h.state.pods, used, "BEMemoryEvict")]
    assert order == [
        "default/no-priority",  # no priority: more used than every other pod
        "default/low",  # lower priority than the 5000s
        "team-a/p",  # three ties at 2Gi: namespace, then name
        "team-a/q",
        "team-b/p",
        "default/idle-z",  # no usage: last, by name descending
        "default/idle-a",
    ]
