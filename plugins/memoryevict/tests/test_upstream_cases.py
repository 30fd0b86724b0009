"""Koordinator's ``memory_evict_test.go`` cases that the shared vectors do not carry, rebuilt here with this
project's pod builders: whole-strategy rounds over trigger combinations, the config checks and their
messages, the priority-based candidate order, and the release helpers. Each case names the upstream case it
mirrors; the expected values are the ones the Go test asserts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from koord_lib_evictpolicy.evict_policy import priority_evict_infos
from koord_plugin_memoryevict import BEMemoryEvict
from koord_plugin_memoryevict.plugin import TRIGGER_ORDER, Trigger
from koord_plugin_memoryevict.policy import (
    ConfigInvalid,
    release_by_allocatable,
    release_by_used_threshold,
)

from koord_framework.api.resources import to_int
from koord_framework.koordlet.eviction import PodEvictInfo
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.qos import QOSContext
from koord_framework.koordlet.states import NodeState
from koord_framework.testing import MemoryCluster
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod

GIB = 1024**3
BATCH_MIN = 5000  # PriorityBatchValueMin
BATCH_MAX = 5999
MID_MAX = 7999


def node(**extended: int) -> dict[str, Any]:
    """``MockTestNode("80", "120G")``, plus extended resources in both capacity and allocatable."""
    res: dict[str, Any] = {"cpu": "80", "memory": "120G", **{k: str(v) for k, v in extended.items()}}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "test-node"},
        "status": {"capacity": dict(res), "allocatable": dict(res)},
    }


def qos_pod(name: str, qos: str, priority: int, **extra: Any) -> dict[str, Any]:
    """``createMemoryEvictTestPod``: a running pod, uid = name, labelled with its koordinator QoS."""
    return make_running_pod(name, uid=name, qos=qos, priority=priority, **extra)


def batch_pod(name: str, memory: int, *, qos: str = "BE", priority: int = BATCH_MIN) -> dict[str, Any]:
    """A pod requesting ``memory`` bytes of ``memory`` and of its class's batch/mid memory, opted in to
    priority-based eviction (``createMemoryEvictTestPodWithPriorityAnnotationLabels``)."""
    extended = "kubernetes.io/mid-memory" if qos == "LS" else "kubernetes.io/batch-memory"
    res = {"memory": str(memory), extended: str(memory)}
    return make_running_pod(
        name,
        uid=name,
        namespace="test-ns",
        qos=qos,
        priority=priority,
        requests=res,
        limits=res,
        labels={"koordinator.sh/eviction-enabled": "true"},
    )


def standard_pods() -> list[dict[str, Any]]:
    """The six pods most ``Test_memoryEvict`` cases share."""
    return [
        qos_pod("test_lsr_pod", "LSR", 1000),
        qos_pod("test_ls_pod", "LS", 500),
        qos_pod("test_noqos_pod", "", 100),
        qos_pod("test_be_pod_priority100_1", "BE", 100),
        qos_pod("test_be_pod_priority100_2", "BE", 100),
        qos_pod("test_be_pod_priority120", "BE", 120),
    ]


STANDARD_USAGE = {
    "test_lsr_pod": "40G",
    "test_ls_pod": "30G",
    "test_noqos_pod": "10G",
    "test_be_pod_priority100_1": "5G",
    "test_be_pod_priority100_2": "20G",
    "test_be_pod_priority120": "10G",
}
BE_THREE = ["test_be_pod_priority100_2", "test_be_pod_priority100_1", "test_be_pod_priority120"]


def harness(
    tmp_path: Path,
    pods: list[dict[str, Any]],
    threshold: dict[str, Any],
    *,
    node_obj: dict[str, Any] | None = None,
    node_used: str = "115G",
    pod_used: dict[str, str] | None = None,
) -> QOSHarness:
    tree = FakeHostTree(tmp_path / "host", version=1, driver="systemd", cpus=4)
    h = QOSHarness.with_cluster(
        tree,
        node=node_obj or node(),
        pods=pods,
        node_slo={"resourceUsedThresholdWithBE": {"enable": True, **threshold}},
    )
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_MEMORY_USAGE, now, float(to_int("memory", node_used)))
    for uid, used in (pod_used or {}).items():
        h.metrics.append(MetricKind.POD_MEMORY_USAGE, now, float(to_int("memory", used)), uid)
    return h


def run_round(h: QOSHarness, triggers: list[str]) -> list[str]:
    strategy = BEMemoryEvict(BEMemoryEvict.parse_args({"triggers": triggers}), h.context)
    strategy.tick(h.clock.now())
    assert isinstance(h.cluster, MemoryCluster)
    return [e.name for e in h.cluster.evictions]


# --- Test_memoryEvict ------------------------------------------------------------------------------------

STRATEGY_CASES = [
    pytest.param(
        ["BEMemoryEvict"],
        {"memoryEvictThresholdPercent": 82},
        None,
        [],
        BE_THREE[:1],
        id="sort_by_priority_and_usage_82",
    ),
    pytest.param(
        ["BEMemoryEvict"],
        {"memoryEvictThresholdPercent": 50},
        None,
        [],
        BE_THREE,
        id="threshold_50",
    ),
    pytest.param(
        ["BEMemoryEvict"],
        {"memoryEvictThresholdPercent": 82, "memoryEvictLowerPercent": 78},
        None,
        [],
        BE_THREE[:2],
        id="lower_78",
    ),
    pytest.param(
        ["BEMemoryEvict", "MemoryEvict"],
        {"memoryEvictThresholdPercent": 82, "memoryEvictLowerPercent": 74},
        None,
        [],
        BE_THREE,
        id="BE_and_MemoryEvict__MemoryEvict_invalid",
    ),
    pytest.param(
        ["BEMemoryEvict", "MemoryEvict"],
        {
            "memoryEvictThresholdPercent": 82,
            "memoryEvictLowerPercent": 74,
            "evictEnabledPriorityThreshold": 3000,
        },
        None,
        [],
        BE_THREE,
        id="BE_and_MemoryEvict__both_valid",
    ),
    pytest.param(
        ["BEMemoryEvict", "MemoryEvict", "MemoryAllocatableEvict"],
        {
            "memoryEvictThresholdPercent": 82,
            "memoryEvictLowerPercent": 74,
            "evictEnabledPriorityThreshold": 3000,
        },
        None,
        [],
        BE_THREE,
        id="all_three__allocatable_invalid",
    ),
    pytest.param(
        ["BEMemoryEvict", "MemoryEvict", "MemoryAllocatableEvict"],
        {
            "memoryEvictThresholdPercent": 82,
            "memoryEvictLowerPercent": 74,
            "evictEnabledPriorityThreshold": 3000,
            "memoryAllocatableEvictThresholdPercent": 45,
            "memoryAllocatableEvictLowerPercent": 40,
            "allocatableEvictPriorityThreshold": BATCH_MIN,
        },
        {"kubernetes.io/batch-memory": 100 * GIB},
        [batch_pod("batch-pod-1", 20 * GIB), batch_pod("batch-pod-2", 30 * GIB)],
        # BE usage: 100_2 + 100_1 = 25G < 25.2G, so 120 too; then 50Gi of 100Gi batch-memory requested
        # (> 45%) releases 10Gi, which the larger request alone covers.
        [*BE_THREE, "batch-pod-2"],
        id="all_three__allocatable_valid",
    ),
]


@pytest.mark.parametrize(("triggers", "threshold", "extended", "extra_pods", "evicted"), STRATEGY_CASES)
def test_memory_evict_round(
    tmp_path: Path,
    triggers: list[str],
    threshold: dict[str, Any],
    extended: dict[str, int] | None,
    extra_pods: list[dict[str, Any]],
    evicted: list[str],
) -> None:
    usage = dict(STANDARD_USAGE)
    if extra_pods:
        usage |= {"batch-pod-1": "10G", "batch-pod-2": "20G"}
    h = harness(
        tmp_path,
        standard_pods() + extra_pods,
        threshold,
        node_obj=node(**(extended or {})),
        pod_used=usage,
    )
    assert run_round(h, triggers) == evicted


def test_allocatable_only_node_without_batch_memory_releases_every_request(tmp_path: Path) -> None:
    """``only feature MemoryAllocatableEvict``: the node reports no batch-memory, so all 50Gi requested is
    to be released; the larger request goes first."""
    pods = [batch_pod("batch-pod-1", 20 * GIB), batch_pod("batch-pod-2", 30 * GIB)]
    threshold = {
        "memoryAllocatableEvictThresholdPercent": 80,
        "memoryAllocatableEvictLowerPercent": 70,
        "allocatableEvictPriorityThreshold": BATCH_MIN,
    }
    h = harness(tmp_path, pods, threshold, pod_used={"batch-pod-1": "10G", "batch-pod-2": "20G"})
    assert run_round(h, ["MemoryAllocatableEvict"]) == ["batch-pod-2", "batch-pod-1"]


def test_evictions_carry_the_upstream_reason(tmp_path: Path) -> None:
    h = harness(tmp_path, standard_pods(), {"memoryEvictThresholdPercent": 82}, pod_used=STANDARD_USAGE)
    run_round(h, ["BEMemoryEvict"])
    assert isinstance(h.cluster, MemoryCluster)
    assert [(e.reason, e.requested_by) for e in h.cluster.evictions] == [
        ("trigger by koordlet feature BEMemoryEvict, kill pod: test_be_pod_priority100_2", "koordlet")
    ]


# --- generateConfigCheck ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qos_context(tmp_path_factory: pytest.TempPathFactory) -> QOSContext:
    """One QoS context for the config-check cases: the checks run before any host or metric is read."""
    tree = FakeHostTree(tmp_path_factory.mktemp("host"), version=1, driver="systemd", cpus=2)
    return QOSHarness(tree, node=node()).context


def config_error(context: QOSContext, trigger: Trigger, threshold: ResourceThresholdStrategy) -> str | None:
    """The ``ConfigInvalid`` message ``build_task`` raises for ``trigger`` (``None``: config accepted)."""
    strategy = BEMemoryEvict(BEMemoryEvict.parse_args({"triggers": list(TRIGGER_ORDER)}), context)
    try:
        strategy.build_task(trigger, threshold, NodeState("test-node"), 120 * 10**9, 0.0)
    except ConfigInvalid as err:
        return str(err)
    return None


def strategy_config(**fields: Any) -> ResourceThresholdStrategy:
    # model_construct: negative thresholds are refused when a NodeSLO is parsed (the CRD's minimum), but
    # the check's own message is still Koordinator's.
    return ResourceThresholdStrategy.model_construct(**fields)


CONFIG_CASES = [
    ("BEMemoryEvict", {}, "threshold percent is nil"),
    (
        "BEMemoryEvict",
        {"memory_evict_threshold_percent": -1},
        "threshold percent(-1) should equal or greater than 0",
    ),
    ("BEMemoryEvict", {"memory_evict_threshold_percent": 80}, None),
    (
        "BEMemoryEvict",
        {"memory_evict_threshold_percent": 80, "memory_evict_lower_percent": 90},
        "lower percent(90) should less than threshold percent(80)",
    ),
    ("BEMemoryEvict", {"memory_evict_threshold_percent": 80, "memory_evict_lower_percent": 70}, None),
    ("MemoryEvict", {}, "threshold percent is nil"),
    (
        "MemoryEvict",
        {"memory_evict_threshold_percent": -1},
        "threshold percent(-1) should equal or greater than 0",
    ),
    (
        "MemoryEvict",
        {"memory_evict_threshold_percent": 80, "memory_evict_lower_percent": 70},
        "EvictEnabledPriorityThreshold not config",
    ),
    (
        "MemoryEvict",
        {
            "memory_evict_threshold_percent": 80,
            "memory_evict_lower_percent": 80,
            "evict_enabled_priority_threshold": BATCH_MAX,
        },
        "lower percent(80) should less than threshold percent(80)",
    ),
    (
        "MemoryEvict",
        {
            "memory_evict_threshold_percent": 85,
            "memory_evict_lower_percent": 75,
            "evict_enabled_priority_threshold": BATCH_MAX,
        },
        None,
    ),
    ("MemoryAllocatableEvict", {}, "MemoryAllocatableEvictThresholdPercent not config"),
    (
        "MemoryAllocatableEvict",
        {"memory_allocatable_evict_threshold_percent": -1},
        "threshold percent(-1) should greater than 0",
    ),
    (
        "MemoryAllocatableEvict",
        {"memory_allocatable_evict_threshold_percent": 80, "memory_allocatable_evict_lower_percent": 70},
        "AllocatableEvictPriorityThreshold not config",
    ),
    (
        "MemoryAllocatableEvict",
        {
            "memory_allocatable_evict_threshold_percent": 80,
            "memory_allocatable_evict_lower_percent": 70,
            "allocatable_evict_priority_threshold": MID_MAX + 1,
        },
        f"priorityThresholdPercent({MID_MAX + 1}) should less than {MID_MAX}, "
        "koor-prod pods should not be killed",
    ),
    (
        "MemoryAllocatableEvict",
        {
            "memory_allocatable_evict_threshold_percent": 85,
            "memory_allocatable_evict_lower_percent": 75,
            "allocatable_evict_priority_threshold": BATCH_MAX,
        },
        None,
    ),
]


@pytest.mark.parametrize(("trigger", "fields", "message"), CONFIG_CASES)
def test_config_check(
    qos_context: QOSContext, trigger: Trigger, fields: dict[str, Any], message: str | None
) -> None:
    assert config_error(qos_context, trigger, strategy_config(**fields)) == message


def test_lower_percent_defaults_differ_per_trigger(qos_context: QOSContext) -> None:
    """Suspected difference 1, settled: only the usage triggers default their lower percent (threshold - 2,
    ``memoryReleaseBufferPercent``). ``memoryAllocatableEvictLowerPercent`` has no default in code -- the
    API comment's "default = 100" is applied nowhere -- so the allocatable trigger refuses to run without it,
    whatever the threshold."""
    used = strategy_config(memory_evict_threshold_percent=80)
    assert release_by_used_threshold(used, 120 * 10**9, 115e9) == 120 * 10**9 * (95 - 78) // 100
    assert config_error(qos_context, "BEMemoryEvict", used) is None
    allocatable = strategy_config(
        memory_allocatable_evict_threshold_percent=110, allocatable_evict_priority_threshold=BATCH_MAX
    )
    assert (
        config_error(qos_context, "MemoryAllocatableEvict", allocatable)
        == "MemoryAllocatableEvictLowerPercent not config"
    )


# --- getPodEvictInfoAndSortByPriority --------------------------------------------------------------------


def _opted(
    name: str, qos: str, priority: int, label_priority: str | None = None, **kw: Any
) -> dict[str, Any]:
    labels = {"koordinator.sh/eviction-enabled": kw.pop("enabled", "true")}
    if label_priority is not None:
        labels["koordinator.sh/priority"] = label_priority
    return qos_pod(name, qos, priority, labels=labels, **kw)


PRIORITY_CASES = [
    pytest.param(
        [
            _opted("test_failed_pod", "LSR", 1000, "1000", phase="Failed"),
            _opted("test_evictDisabled_pod", "LSR", 1000, "1000", enabled="false"),
            _opted("test_higher_priority", "LS", 3400, "1000"),
            _opted("test_podPriority_120_2000", "", 120, "2000"),
            _opted("test_podPriority_120_3000", "BE", 120, "3000"),
            _opted("test_podPriority_120_4000", "BE", 120, "4000"),
            _opted("test_podPriority_100_9999", "BE", 100),
            _opted("test_podPriority_100_9999_1", "BE", 100),
        ],
        {
            "test_evictDisabled_pod": "40G",
            "test_higher_priority": "30G",
            "test_podPriority_120_2000": "10G",
            "test_podPriority_120_3000": "5G",
            "test_podPriority_120_4000": "20G",
            "test_podPriority_100_9999": "10G",
            "test_podPriority_100_9999_1": "11G",
        },
        [
            "test_podPriority_100_9999_1",
            "test_podPriority_100_9999",
            "test_podPriority_120_2000",
            "test_podPriority_120_3000",
            "test_podPriority_120_4000",
        ],
        id="priority_then_label_then_used",
    ),
    pytest.param(
        [
            _opted(
                "test_evictPriority_100",
                "BE",
                120,
                "3000",
                annotations={"koordinator.sh/eviction-priority": "100"},
            ),
            _opted(
                "test_evictPriority_negative",
                "BE",
                120,
                "4000",
                annotations={"koordinator.sh/eviction-priority": "-1"},
            ),
            _opted("test_evictPriority_unset", "BE", 100),
            _opted(
                "test_evictPriority_invalid",
                "BE",
                120,
                annotations={"koordinator.sh/eviction-priority": "invalid"},
            ),
        ],
        {
            "test_evictPriority_100": "40G",
            "test_evictPriority_negative": "5G",
            "test_evictPriority_unset": "10G",
            "test_evictPriority_invalid": "20G",
        },
        [
            "test_evictPriority_negative",
            "test_evictPriority_unset",
            "test_evictPriority_invalid",
            "test_evictPriority_100",
        ],
        id="eviction_priority_annotation_first",
    ),
]


@pytest.mark.parametrize(("pods", "usage", "order"), PRIORITY_CASES)
def test_priority_candidates_order(
    tmp_path: Path, pods: list[dict[str, Any]], usage: dict[str, str], order: list[str]
) -> None:
    h = harness(tmp_path, pods, {"memoryEvictThresholdPercent": 80, "evictEnabledPriorityThreshold": 3000})
    used = {uid: float(to_int("memory", v)) for uid, v in usage.items()}
    infos = priority_evict_infos(h.state.pods, "BEMemoryEvict", 3000, used, "memory", by_request=False)
    assert [i.pod.pod.name for i in infos] == order
    # the used bytes count 1000-fold on this path
    assert infos[0].memory_used == to_int("memory", usage[order[0]]) * 1000


# --- calculateReleaseBy*ThresholdPercent -----------------------------------------------------------------


def test_release_by_used_threshold_with_explicit_lower() -> None:
    """``test_memoryevict_MemoryEvictThresholdPercent_lower80``: 115G of 120G is 95%; down to 80%."""
    t = strategy_config(memory_evict_threshold_percent=80, memory_evict_lower_percent=80)
    assert release_by_used_threshold(t, 120 * 10**9, 115e9) == 18_000_000_000


ALLOCATABLE_CASES = [
    pytest.param(
        {"kubernetes.io/batch-memory": 100 * GIB},
        [batch_pod("batch-pod-1", 45 * GIB), batch_pod("batch-pod-2", 40 * GIB)],
        BATCH_MAX,
        {"kubernetes.io/batch-memory": 16106127360},
        {
            "batch-pod-1": {"kubernetes.io/batch-memory": 45 * GIB},
            "batch-pod-2": {"kubernetes.io/batch-memory": 40 * GIB},
        },
        id="exceeded_batch_memory",
    ),
    pytest.param(
        {"kubernetes.io/batch-memory": 100 * GIB, "kubernetes.io/mid-memory": 100 * GIB},
        [batch_pod("batch-pod-1", 85 * GIB), batch_pod("mid-pod-1", 85 * GIB, qos="LS", priority=7000)],
        BATCH_MAX,
        {"kubernetes.io/batch-memory": 16106127360},
        # the mid pod is above the priority threshold: not summed, and it releases nothing
        {"batch-pod-1": {"kubernetes.io/batch-memory": 85 * GIB}, "mid-pod-1": None},
        id="mixed_priority_lower_priority_threshold",
    ),
    pytest.param(
        {},
        [batch_pod("batch-pod-1", 50 * GIB)],
        BATCH_MAX,
        {"kubernetes.io/batch-memory": 50 * GIB},
        {"batch-pod-1": {"kubernetes.io/batch-memory": 50 * GIB}},
        id="node_without_batch_memory",
    ),
    pytest.param(
        {"kubernetes.io/batch-memory": 100 * GIB},
        [batch_pod("batch-pod-1", 20 * GIB), batch_pod("batch-pod-2", 30 * GIB)],
        BATCH_MAX,
        {},
        {},
        id="not_exceeded",
    ),
]


@pytest.mark.parametrize(("extended", "pods", "prio", "release", "per_pod"), ALLOCATABLE_CASES)
def test_release_by_allocatable_and_per_pod_release(
    tmp_path: Path,
    extended: dict[str, int],
    pods: list[dict[str, Any]],
    prio: int,
    release: dict[str, int],
    per_pod: dict[str, dict[str, int] | None],
) -> None:
    threshold = {
        "memoryAllocatableEvictThresholdPercent": 80,
        "memoryAllocatableEvictLowerPercent": 70,
        "allocatableEvictPriorityThreshold": prio,
    }
    h = harness(
        tmp_path,
        pods,
        threshold,
        node_obj=node(**extended),
        pod_used={p["metadata"]["uid"]: "1G" for p in pods},
    )
    t = h.state.node_slo.threshold if h.state.node_slo else None
    assert t is not None
    assert release_by_allocatable(t, h.state.node_manifest, h.state.pods) == release
    strategy = BEMemoryEvict(BEMemoryEvict.parse_args({"triggers": ["MemoryAllocatableEvict"]}), h.context)
    task = strategy.build_task("MemoryAllocatableEvict", t, h.state, 120 * 10**9, h.clock.now())
    if not release:
        assert task is None
        return
    assert task is not None
    got: dict[str, dict[str, int] | None] = {}
    for meta in h.state.pods:
        out = task.pod_resource(PodEvictInfo(pod=meta))
        got[meta.pod.name] = dict(out) if out is not None else None
    assert got == per_pod
