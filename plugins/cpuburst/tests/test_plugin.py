"""CPUBurst end to end on fake hosts: static burst files, cfs quota scaling, node state, rollback."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

import pytest
from koord_plugin_cpuburst import CPUBurst

from koord_framework.koordlet import executor as executor_module
from koord_framework.koordlet.executor import WriteStatus
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.testing.conformance import PluginConformance
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod

HostFactory = Callable[..., FakeHostTree]
LS = make_running_pod(
    "web", qos="LS", containers=("app", "sidecar"), requests={"cpu": "1"}, limits={"cpu": "2"}
)
BE = make_running_pod("batch", qos="BE", requests={"kubernetes.io/batch-cpu": "1000"})
LSR = make_running_pod("db", qos="LSR", requests={"cpu": "2"}, limits={"cpu": "2"})


def slo(policy: str, **extra: Any) -> dict[str, Any]:
    return {"cpuBurstStrategy": {"policy": policy, **extra}}


class TestConformance(PluginConformance):
    plugin_class = CPUBurst
    group = "qos"
    valid_args = [{"intervalSeconds": 2}]
    invalid_args = [{"intervalSeconds": 0}, {"policy": "auto"}]


@pytest.mark.parametrize(("version", "driver"), [(1, "systemd"), (2, "cgroupfs")])
def test_static_burst_per_container_and_pod(koord_host_tree: HostFactory, version: int, driver: str) -> None:
    tree = koord_host_tree(version=version, driver=driver, cpus=8)
    h = QOSHarness(tree, pods=[LS, BE, LSR], node_slo=slo("cpuBurstOnly", cpuBurstPercent=150))
    CPUBurst(CPUBurst.parse_args({}), h.context).tick(h.clock.now())
    web = h.state.pod("uid-web")
    assert web is not None
    # limit 2 cores x 150% x 100 ms = 300000 us per container, the pod gets the sum
    for c in web.containers:
        assert tree.read("cpu.cfs_burst_us", c.cgroup_dir) == "300000"
    assert tree.read("cpu.cfs_burst_us", web.cgroup_dir) == "600000"
    for uid in ("uid-batch", "uid-db"):  # BE and LSR pods never burst
        meta = h.state.pod(uid)
        assert meta is not None
        assert tree.read("cpu.cfs_burst_us", meta.cgroup_dir) == "0"


def test_policy_none_resets_burst(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    h = QOSHarness(tree, pods=[LS], node_slo=slo("cpuBurstOnly"))
    strategy = CPUBurst(CPUBurst.parse_args({}), h.context)
    strategy.tick(h.clock.now())
    web = h.state.pod("uid-web")
    assert web is not None
    assert tree.read("cpu.cfs_burst_us", web.cgroup_dir) == str(2 * 2 * 10 * 100000)
    h.set_state(pods=[LS], node_slo=slo("none"))
    h.clock.advance(61)  # past the executor's cache window
    strategy.tick(h.clock.now())
    assert tree.read("cpu.cfs_burst_us", web.cgroup_dir) == "0"


def test_pod_annotation_overrides_node_policy(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    pod = make_running_pod(
        "web",
        qos="LS",
        limits={"cpu": "1"},
        annotations={"koordinator.sh/cpuBurst": '{"policy": "cpuBurstOnly"}'},
    )
    h = QOSHarness(tree, pods=[pod], node_slo=slo("none", cpuBurstPercent=200))
    CPUBurst(CPUBurst.parse_args({}), h.context).tick(h.clock.now())
    web = h.state.pod("uid-web")
    assert web is not None
    assert tree.read("cpu.cfs_burst_us", web.cgroup_dir) == "200000"


def _quota_world(tree: FakeHostTree, **strategy: Any) -> tuple[QOSHarness, Any]:
    h = QOSHarness(tree, pods=[LS], node_slo=slo("cfsQuotaBurstOnly", **strategy))
    web = h.state.pod("uid-web")
    assert web is not None
    tree.write("cpu.cfs_quota_us", web.cgroup_dir, "400000")  # kubelet: the sum of the containers' limits
    for c in web.containers:
        tree.write("cpu.cfs_quota_us", c.cgroup_dir, "200000")
    return h, web


def test_throttled_container_scales_up_pod_first(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    h, web = _quota_world(tree)
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_CPU_USAGE, now, 1.0)  # idle share pool
    app = web.containers[0]
    h.metrics.append(MetricKind.CONTAINER_CPU_THROTTLED, now, 0.3, app.container_id)
    CPUBurst(CPUBurst.parse_args({}), h.context).tick(now)
    assert tree.read("cpu.cfs_quota_us", app.cgroup_dir) == "240000"
    assert tree.read("cpu.cfs_quota_us", web.containers[1].cgroup_dir) == "200000"  # not throttled: remain
    assert tree.read("cpu.cfs_quota_us", web.cgroup_dir) == "440000"
    quota_writes = [r.path for r in h.executor.audit if r.path.endswith("cpu.cfs_quota_us")]
    assert quota_writes == [
        str(tree.path("cpu.cfs_quota_us", web.cgroup_dir)),
        str(tree.path("cpu.cfs_quota_us", app.cgroup_dir)),
    ]


def test_overloaded_node_scales_down_to_the_limit(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    h, web = _quota_world(tree)
    app = web.containers[0]
    tree.write("cpu.cfs_quota_us", app.cgroup_dir, "300000")
    tree.write("cpu.cfs_quota_us", web.cgroup_dir, "500000")
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_CPU_USAGE, now, 7.5)  # 7.5 of 8 CPUs >= 50%: overload
    CPUBurst(CPUBurst.parse_args({}), h.context).tick(now)
    assert tree.read("cpu.cfs_quota_us", app.cgroup_dir) == "240000"  # x0.8, never below 200000
    assert tree.read("cpu.cfs_quota_us", web.cgroup_dir) == "440000"


def test_disabled_policy_resets_quota_to_limit(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    h, web = _quota_world(tree)
    app = web.containers[0]
    tree.write("cpu.cfs_quota_us", app.cgroup_dir, "360000")
    tree.write("cpu.cfs_quota_us", web.cgroup_dir, "560000")
    h.set_state(pods=[LS], node_slo=slo("none"))
    CPUBurst(CPUBurst.parse_args({}), h.context).tick(h.clock.now())
    assert tree.read("cpu.cfs_quota_us", app.cgroup_dir) == "200000"
    assert tree.read("cpu.cfs_quota_us", web.cgroup_dir) == "400000"


def test_failed_container_write_rolls_the_pod_back(
    koord_host_tree: HostFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = koord_host_tree(cpus=8)
    h, web = _quota_world(tree)
    app = web.containers[0]
    target = tree.path("cpu.cfs_quota_us", app.cgroup_dir)
    real = executor_module._os_write

    def refuse(path: Any, text: str, append: bool) -> None:
        if path == target:
            raise OSError(errno.EINVAL, "Invalid argument")
        real(path, text, append)

    monkeypatch.setattr(executor_module, "_os_write", refuse)
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_CPU_USAGE, now, 1.0)
    h.metrics.append(MetricKind.CONTAINER_CPU_THROTTLED, now, 0.5, app.container_id)
    CPUBurst(CPUBurst.parse_args({}), h.context).tick(now)
    assert tree.read("cpu.cfs_quota_us", web.cgroup_dir) == "400000"  # raised to 440000, then restored
    assert tree.read("cpu.cfs_quota_us", app.cgroup_dir) == "200000"
    statuses = [
        (r.path.split("/")[-2][-12:], r.status) for r in h.executor.audit if r.path.endswith("cfs_quota_us")
    ]
    assert [s for _, s in statuses] == [WriteStatus.WRITTEN, WriteStatus.FAILED, WriteStatus.ROLLED_BACK]


def test_limiter_stops_long_bursts(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8)
    h, web = _quota_world(tree, cfsQuotaBurstPeriodSeconds=10, cfsQuotaBurstPercent=150)
    app = web.containers[0]
    tree.write("cpu.cfs_quota_us", app.cgroup_dir, "280000")
    tree.write("cpu.cfs_quota_us", web.cgroup_dir, "480000")
    import random

    strategy = CPUBurst(CPUBurst.parse_args({}), h.context, rng=random.Random(0))
    # bucket capacity 10 x (150 - 100) = 500 tokens; using 150% of the limit for 20 s drains it
    for _ in range(3):
        now = h.clock.now()
        h.metrics.append(MetricKind.NODE_CPU_USAGE, now, 1.0)
        h.metrics.append(MetricKind.CONTAINER_CPU_USAGE, now, 3.0, app.container_id)
        h.metrics.append(MetricKind.CONTAINER_CPU_THROTTLED, now, 0.5, app.container_id)
        strategy.tick(now)
        h.clock.advance(10)
    assert int(tree.read("cpu.cfs_quota_us", app.cgroup_dir)) < 280000
