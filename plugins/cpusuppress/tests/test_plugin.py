"""BECPUSuppress end to end on fake hosts (cgroup v1 and v2, both drivers): what it computes from the
metric cache and what lands in the besteffort cgroups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from koord_plugin_cpusuppress import BECPUSuppress

from koord_framework.api.qos import KubeQoS
from koord_framework.koordlet.executor import WriteStatus
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.testing.conformance import PluginConformance
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod

NODE = {
    "metadata": {"name": "test-node"},
    "status": {"capacity": {"cpu": "8", "memory": "32Gi"}, "allocatable": {"cpu": "8", "memory": "32Gi"}},
}
LS = make_running_pod(
    "ls", qos="LS", requests={"cpu": "4", "memory": "4Gi"}, limits={"cpu": "4", "memory": "4Gi"}
)
BE = make_running_pod(
    "be",
    qos="BE",
    requests={"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2Gi"},
    limits={"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2Gi"},
)


def slo(policy: str, enable: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "resourceUsedThresholdWithBE": {
            "enable": enable,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": policy,
            **extra,
        }
    }


class TestConformance(PluginConformance):
    plugin_class = BECPUSuppress
    group = "qos"
    valid_args = [{"intervalSeconds": 5}]
    invalid_args = [{"intervalSeconds": 0}, {"intervalSeconds": -1}]


def _harness(tree: FakeHostTree, policy: str, **extra: Any) -> QOSHarness:
    h = QOSHarness(tree, node=NODE, pods=[LS, BE], node_slo=slo(policy, **extra))
    now = h.clock.now()
    # node uses 6 cores: LS 3, BE 2, system 1  ->  BE may use 8 * 65% - 3 - 1 = 1.2 cores
    h.metrics.append(MetricKind.NODE_CPU_USAGE, now, 6.0)
    h.metrics.append(MetricKind.POD_CPU_USAGE, now, 3.0, "uid-ls")
    h.metrics.append(MetricKind.POD_CPU_USAGE, now, 2.0, "uid-be")
    return h


HostFactory = Callable[..., FakeHostTree]
LAYOUTS = [(1, "systemd"), (1, "cgroupfs"), (2, "systemd"), (2, "cgroupfs")]


@pytest.mark.parametrize(("version", "driver"), LAYOUTS)
def test_cfs_quota_policy_sets_be_quota_by_formula(
    koord_host_tree: HostFactory, version: int, driver: str
) -> None:
    tree = koord_host_tree(version=version, driver=driver, cpus=8)
    h = _harness(tree, "cfsQuota")
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
    assert strategy.enabled(h.state.node_slo)
    strategy.tick(h.clock.now())
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    quota = tree.read("cpu.cfs_quota_us", be_dir)
    assert quota == ("120000" if version == 1 else "120000 100000")
    decision = h.context.journal[-1]
    assert decision.details["suppressMilli"] == 1200
    assert decision.details["targetQuota"] == 120000
    # the cpuset policy is not in use, so every BE cgroup keeps all CPUs
    for d in [be_dir, *tree.layout.walk("cpuset", be_dir, 2)[1:]]:
        if version == 1:
            assert tree.read("cpuset.cpus", d) == "0-7"


@pytest.mark.parametrize(("version", "driver"), LAYOUTS)
def test_cpuset_policy_narrows_every_be_cgroup(
    koord_host_tree: HostFactory, version: int, driver: str
) -> None:
    tree = koord_host_tree(version=version, driver=driver, cpus=8)
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    h = _harness(tree, "cpuset")
    tree.write("cpu.cfs_quota_us", be_dir, "50000")  # left over from a cfsQuota period
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
    strategy.tick(h.clock.now())
    # 1.2 cores -> ceil = 2 CPUs, one hyper-thread pair: cpus 0 and 1 (cores are pairs 0-1, 2-3, ...)
    paths = tree.layout.walk("cpuset", be_dir, 2)
    assert len(paths) == 3  # besteffort dir, the BE pod, its container
    for d in paths:
        assert tree.read("cpuset.cpus", d) == "0-1"
    assert tree.read("cpu.cfs_quota_us", be_dir) == ("-1" if version == 1 else "max 100000")
    written = [r for r in h.executor.audit if r.path.endswith("cpuset.cpus")]
    # loosened top-down first (a no-op here: the new set is inside the old one), then written bottom-up
    assert [r.path for r in written] == [str(tree.path("cpuset.cpus", d)) for d in reversed(paths)]


def test_disabled_by_nodeslo_recovers_quota_and_cpuset(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(version=1, cpus=8)
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    h = _harness(tree, "cpuset")
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
    strategy.tick(h.clock.now())
    assert tree.read("cpuset.cpus", be_dir) == "0-1"
    tree.write("cpu.cfs_quota_us", be_dir, "40000")
    h.set_state(node=NODE, pods=[LS, BE], node_slo=slo("cpuset", enable=False))
    assert not strategy.enabled(h.state.node_slo)
    strategy.policy_status.clear()
    strategy.on_disabled(h.clock.now())
    assert tree.read("cpu.cfs_quota_us", be_dir) == "-1"
    for d in tree.layout.walk("cpuset", be_dir, 2):
        assert tree.read("cpuset.cpus", d) == "0-7"


def test_min_percent_floors_the_quota(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(version=1, cpus=8)
    h = _harness(tree, "cfsQuota", cpuSuppressThresholdPercent=10, cpuSuppressMinPercent=25)
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
    strategy.tick(h.clock.now())
    # 8 * 10% - 3 - 1 < 0  -> floored at 8 * 25% = 2 cores
    assert tree.read("cpu.cfs_quota_us", tree.layout.qos_dir(KubeQoS.BEST_EFFORT)) == "200000"


def test_no_node_sample_means_no_write(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(version=1, cpus=8)
    h = QOSHarness(tree, node=NODE, pods=[LS, BE], node_slo=slo("cfsQuota"))
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
    strategy.tick(h.clock.now())
    assert h.executor.audit == []
    assert "no recent node cpu sample" in h.context.journal[-1].summary


def test_a_failed_write_is_reported_not_raised(
    koord_host_tree: HostFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from koord_framework.koordlet import executor as executor_module

    tree = koord_host_tree(version=1, cpus=8)
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    quota = tree.path("cpu.cfs_quota_us", be_dir)
    real = executor_module._os_write

    def refuse_quota(path: Any, text: str, append: bool) -> None:
        if path == quota:
            raise OSError(errno.EINVAL, "Invalid argument")
        real(path, text, append)

    monkeypatch.setattr(executor_module, "_os_write", refuse_quota)
    h = _harness(tree, "cfsQuota")
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
    strategy.tick(h.clock.now())  # must not raise
    failed = [r for r in h.executor.audit if r.status is WriteStatus.FAILED]
    assert [r.path for r in failed] == [str(quota)]
    assert "Invalid argument" in (failed[0].error or "")
    assert tree.read("cpu.cfs_quota_us", be_dir) == "-1"
    assert any(d.details.get("status") == "failed" for d in h.context.journal)
    # the next round tries again (a failed write is not cached as done)
    monkeypatch.setattr(executor_module, "_os_write", real)
    strategy.tick(h.clock.now())
    assert tree.read("cpu.cfs_quota_us", be_dir) == "120000"


def test_cpuset_policy_waits_for_the_node_resource_topology(koord_host_tree: HostFactory) -> None:
    """As upstream: until koordlet has created the node's NRT, BE's cpuset is not narrowed nor recovered."""
    tree = koord_host_tree(cpus=8)
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    h = _harness(tree, "cpuset")
    h.set_state(node=NODE, pods=[LS, BE], node_slo=slo("cpuset"), has_topology=False)
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
    strategy.tick(h.clock.now())
    assert tree.read("cpuset.cpus", be_dir) == "0-7"
    assert any("waiting for the node's NodeResourceTopology" in d.summary for d in h.context.journal)
    h.set_state(node=NODE, pods=[LS, BE], node_slo=slo("cpuset"))
    strategy.tick(h.clock.now())
    assert tree.read("cpuset.cpus", be_dir) == "0-1"
