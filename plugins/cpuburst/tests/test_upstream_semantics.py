"""Details of Koordinator's ``cpuburst`` plugin (snapshot a7a1b76b) that the vectors do not cover: how the pod
annotation is decoded and merged (Go ``json.Unmarshal`` rules, no validation), the share-pool cooling band,
and cases of ``TestCPUBurst_applyCFSQuotaBurst`` (``cpu_burst_test.go:705``) the other tests lack."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from koord_plugin_cpuburst import CPUBurst
from koord_plugin_cpuburst.policy import BurstConfig, pod_burst_config, quota_ceil, static_burst_us

from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod

HostFactory = Callable[..., FakeHostTree]
ANNOTATION = "koordinator.sh/cpuBurst"
NODE = BurstConfig(
    policy="auto", cpu_burst_percent=1000, cfs_quota_burst_percent=300, cfs_quota_burst_period_seconds=600
)


def merged(annotation: str) -> BurstConfig:
    return pod_burst_config({ANNOTATION: annotation}, NODE)


# --- genPodBurstConfig (Test_genPodBurstConfig, cpu_burst_test.go:418) ------------------------------------
def test_no_annotation_uses_the_node_config() -> None:
    assert pod_burst_config({}, NODE) == NODE


def test_merge_pod_config_field_by_field() -> None:
    got = merged(json.dumps({"policy": "cpuBurstOnly", "cpuBurstPercent": 500}))
    assert got == BurstConfig("cpuBurstOnly", 500, 300, 600)


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        # The koordlet does not validate: out-of-webhook-range values and unknown policies are used as given.
        ('{"cpuBurstPercent": 0}', BurstConfig("auto", 0, 300, 600)),
        ('{"cfsQuotaBurstPercent": 90}', BurstConfig("auto", 1000, 90, 600)),
        ('{"cfsQuotaBurstPeriodSeconds": -7}', BurstConfig("auto", 1000, 300, -7)),
        ('{"policy": "turbo"}', BurstConfig("turbo", 1000, 300, 600)),
        # Go matches keys case-insensitively and ignores keys it does not know (snake_case among them).
        ('{"POLICY": "none", "CpuBurstPercent": 200}', BurstConfig("none", 200, 300, 600)),
        ('{"cpu_burst_percent": 200, "extra": [1]}', NODE),
        # omitempty: an empty policy and null numbers leave the node's values; zero is kept.
        (
            '{"policy": "", "cpuBurstPercent": null, "cfsQuotaBurstPercent": 0}',
            BurstConfig("auto", 1000, 0, 600),
        ),
        # null into a plain string is a no-op; the later duplicate wins otherwise.
        ('{"policy": "none", "policy": null}', BurstConfig("none", 1000, 300, 600)),
        ('{"cpuBurstPercent": 5, "cpuBurstPercent": null}', NODE),
        ("null", NODE),
    ],
)
def test_annotation_decoded_like_go(annotation: str, expected: BurstConfig) -> None:
    assert merged(annotation) == expected


@pytest.mark.parametrize(
    "annotation",
    [
        "",
        "not json",
        "[]",
        '[["policy", "none"], ["cpuBurstPercent", 5]]',  # an array is not an object, whatever it holds
        '"policy"',
        '{"policy": "none", "cpuBurstPercent": "200"}',  # a string into int64
        '{"policy": "none", "cpuBurstPercent": 200.0}',  # a float literal into int64
        '{"policy": "none", "cpuBurstPercent": true}',
        '{"policy": "none", "cpuBurstPercent": NaN}',
        '{"policy": "none", "cpuBurstPercent": 9223372036854775808}',  # int64 overflow
        '{"policy": 1}',
    ],
)
def test_undecodable_annotation_keeps_the_whole_node_config(annotation: str) -> None:
    assert merged(annotation) == NODE


def test_unknown_policy_bursts_nothing() -> None:
    assert static_burst_us(2000, BurstConfig("turbo", 1000)) == 0
    assert static_burst_us(2000, BurstConfig("auto", 0)) == 0
    assert static_burst_us(2000, BurstConfig("cpuBurstOnly", 1000)) == 2_000_000


def test_quota_ceil() -> None:
    assert quota_ceil(200_000, 300) == 600_000
    assert quota_ceil(200_000, 100) == 200_000  # only a percent above 100 raises the ceiling
    assert quota_ceil(200_000, 90) == 200_000
    assert quota_ceil(200_000, None) == 200_000
    assert quota_ceil(150_000, 333) == 499_500


# --- end to end ---------------------------------------------------------------------------------------------
def _one_container(tree: FakeHostTree, node_policy: str, annotation: dict[str, Any] | None = None) -> Any:
    pod = make_running_pod(
        "web",
        qos="LS",
        requests={"cpu": "1"},
        limits={"cpu": "2"},
        annotations={ANNOTATION: json.dumps(annotation)} if annotation is not None else None,
    )
    h = QOSHarness(tree, pods=[pod], node_slo={"cpuBurstStrategy": {"policy": node_policy}})
    web = h.state.pod("uid-web")
    assert web is not None
    return h, web


def test_annotation_with_unknown_policy_switches_burst_off(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    h, web = _one_container(tree, "cpuBurstOnly", {"policy": "turbo"})
    CPUBurst(CPUBurst.parse_args({}), h.context).tick(h.clock.now())
    assert tree.read("cpu.cfs_burst_us", web.containers[0].cgroup_dir) == "0"
    assert tree.read("cpu.cfs_burst_us", web.cgroup_dir) == "0"


def test_annotation_zero_percent_writes_zero_burst(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    h, web = _one_container(tree, "cpuBurstOnly", {"cpuBurstPercent": 0})
    CPUBurst(CPUBurst.parse_args({}), h.context).tick(h.clock.now())
    assert tree.read("cpu.cfs_burst_us", web.cgroup_dir) == "0"


def _quota(tree: FakeHostTree, dir_: str, value: int) -> None:
    tree.write("cpu.cfs_quota_us", dir_, str(value))


def _tick_throttled(h: QOSHarness, web: Any, node_used_cores: float | None, **kw: Any) -> None:
    now = h.clock.now()
    if node_used_cores is not None:
        h.metrics.append(MetricKind.NODE_CPU_USAGE, now, node_used_cores)
    for c in web.containers:
        h.metrics.append(MetricKind.CONTAINER_CPU_USAGE, now, 1.5, c.container_id)
        h.metrics.append(MetricKind.CONTAINER_CPU_THROTTLED, now, 0.5, c.container_id)
    CPUBurst(CPUBurst.parse_args({}), h.context, **kw).tick(now)


def test_illegal_burst_percent_pins_quota_at_base(koord_host_tree: HostFactory) -> None:
    """scale-reset-because-burst-percent-config-illegal-on-idle-state: percent 90 makes the ceiling the base,
    so a throttled container's "scale up" lands on the base."""
    tree = koord_host_tree(cpus=8)
    h, web = _one_container(tree, "auto", {"cfsQuotaBurstPercent": 90, "cfsQuotaBurstPeriodSeconds": -1})
    _quota(tree, web.cgroup_dir, 400_000)
    _quota(tree, web.containers[0].cgroup_dir, 400_000)
    _tick_throttled(h, web, node_used_cores=1.0)
    assert tree.read("cpu.cfs_quota_us", web.containers[0].cgroup_dir) == "200000"
    assert tree.read("cpu.cfs_quota_us", web.cgroup_dir) == "200000"


def test_zero_burst_period_scales_down(koord_host_tree: HostFactory) -> None:
    """scale-down-because-burst-period-config-zero-on-idle-state: a 0 s period is an empty bucket, never
    "unlimited" (only a negative period is)."""
    tree = koord_host_tree(cpus=8)
    h, web = _one_container(tree, "auto", {"cfsQuotaBurstPeriodSeconds": 0})
    _quota(tree, web.cgroup_dir, 400_000)
    _quota(tree, web.containers[0].cgroup_dir, 400_000)
    _tick_throttled(h, web, node_used_cores=1.0)
    assert tree.read("cpu.cfs_quota_us", web.containers[0].cgroup_dir) == "320000"
    assert tree.read("cpu.cfs_quota_us", web.cgroup_dir) == "320000"


@pytest.mark.parametrize(
    ("node_used", "state"),
    [
        (3.6, "nodeBurstCooling"),  # 45% of 8 CPUs: the cooling band [0.9 x 50%, 50%) starts here
        (3.99, "nodeBurstCooling"),
        (None, "nodeBurstUnknown"),  # no node samples
    ],
)
def test_cooling_or_unknown_node_holds_a_throttled_container(
    koord_host_tree: HostFactory, node_used: float | None, state: str
) -> None:
    """scale-remain-for-throttled-pod-on-cooling-state: near the threshold "up" becomes "remain"."""
    tree = koord_host_tree(cpus=8)
    h, web = _one_container(tree, "auto")
    _quota(tree, web.cgroup_dir, 400_000)
    _quota(tree, web.containers[0].cgroup_dir, 400_000)
    _tick_throttled(h, web, node_used_cores=node_used)
    assert tree.read("cpu.cfs_quota_us", web.containers[0].cgroup_dir) == "400000"
    assert h.context.registry.get_sample_value("koordlet_cpu_burst_node_state", {"state": state}) == 1


def test_just_below_cooling_is_idle_and_scales_up(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    h, web = _one_container(tree, "auto")
    _quota(tree, web.cgroup_dir, 400_000)
    _quota(tree, web.containers[0].cgroup_dir, 400_000)
    _tick_throttled(h, web, node_used_cores=3.59)
    assert tree.read("cpu.cfs_quota_us", web.containers[0].cgroup_dir) == "480000"
    assert tree.read("cpu.cfs_quota_us", web.cgroup_dir) == "480000"


def test_unlimited_pod_quota_left_alone(koord_host_tree: HostFactory) -> None:
    """scale-up-one-container-in-unlimited-pod-from-base-on-idle-state: the limited container scales, the
    unlimited one (no CPU limit: no base quota) is skipped, and a pod quota of -1 is not touched."""
    tree = koord_host_tree(cpus=8)
    pod = make_running_pod("web", qos="LS", containers=("limited", "free"), requests={"cpu": "1"})
    pod["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "2"}
    h = QOSHarness(tree, pods=[pod], node_slo={"cpuBurstStrategy": {"policy": "auto"}})
    web = h.state.pod("uid-web")
    assert web is not None
    _quota(tree, web.cgroup_dir, -1)
    _quota(tree, web.containers[0].cgroup_dir, 200_000)
    _quota(tree, web.containers[1].cgroup_dir, -1)
    _tick_throttled(h, web, node_used_cores=1.0)
    assert tree.read("cpu.cfs_quota_us", web.containers[0].cgroup_dir) == "240000"
    assert tree.read("cpu.cfs_quota_us", web.containers[1].cgroup_dir) == "-1"
    assert tree.read("cpu.cfs_quota_us", web.cgroup_dir) == "-1"


def test_scaled_quota_gauge_is_reset_every_round(koord_host_tree: HostFactory) -> None:
    """``ResetCPUBurstCollector`` at the start of each round: only containers rescaled this round report."""
    tree = koord_host_tree(cpus=8)
    h, web = _one_container(tree, "auto")
    _quota(tree, web.cgroup_dir, 200_000)
    _quota(tree, web.containers[0].cgroup_dir, 200_000)
    strategy = CPUBurst(CPUBurst.parse_args({}), h.context)
    labels = {"namespace": "default", "pod": "web", "container": "main"}
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_CPU_USAGE, now, 1.0)
    h.metrics.append(MetricKind.CONTAINER_CPU_THROTTLED, now, 0.5, web.containers[0].container_id)
    strategy.tick(now)
    assert h.context.registry.get_sample_value("koordlet_container_scaled_cfs_quota_us", labels) == 240_000
    h.clock.advance(5)
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_CPU_USAGE, now, 1.0)
    h.metrics.append(MetricKind.CONTAINER_CPU_THROTTLED, now, 0.0, web.containers[0].container_id)
    strategy.tick(now)  # not throttled: remain, nothing rescaled
    assert h.context.registry.get_sample_value("koordlet_container_scaled_cfs_quota_us", labels) is None
