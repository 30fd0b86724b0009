"""The collector on fake v1/v2 hosts: node, pod, container, best-effort and system samples."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from koord_framework.api.qos import KubeQoS
from koord_framework.cluster.clock import VirtualClock
from koord_framework.koordlet.cgroups import CgroupLayout
from koord_framework.koordlet.metrics.cache import MetricCache, MetricKind
from koord_framework.koordlet.metrics.collector import ResourceCollector, host_app_cgroup_dir
from koord_framework.koordlet.nodeslo import HostApplicationSpec
from koord_framework.koordlet.states import build_state
from koord_framework.testing.hosttree import FakeHostTree, make_running_pod

HostFactory = Callable[..., FakeHostTree]
GI = 1024**3
LS = make_running_pod("ls", qos="LS", requests={"cpu": "1"}, limits={"cpu": "2"})
BE = make_running_pod(
    "be",
    qos="BE",
    containers=("a", "b"),
    requests={"kubernetes.io/batch-cpu": "1500"},
    limits={"kubernetes.io/batch-cpu": "1500"},
)


@pytest.mark.parametrize(
    ("version", "driver"), [(1, "systemd"), (1, "cgroupfs"), (2, "systemd"), (2, "cgroupfs")]
)
def test_collect_node_pods_containers_be_system(
    koord_host_tree: HostFactory, version: int, driver: str
) -> None:
    tree = koord_host_tree(version=version, driver=driver, cpus=8, memory_bytes=16 * GI)
    ls, be = tree.add_pod(LS), tree.add_pod(BE)
    state = build_state("test-node", tree.layout, node=None, pods=[LS, BE], node_slo=None)
    cache = MetricCache()
    collector = ResourceCollector(tree.paths, tree.layout, cache)
    clock = VirtualClock(1000.0)
    first = collector.collect(state, clock.now())
    assert first.node_cpu is None and first.pod_cpu == {}  # rates need two samples
    assert first.node_memory == 0

    clock.advance(2.0)
    tree.add_node_cpu(seconds=5.0, wall_seconds=2.0)
    tree.add_cpu_usage(ls.cgroup_dir, seconds=2.0)
    tree.add_cpu_usage(ls.containers["main"], seconds=2.0)
    tree.add_cpu_usage(be.cgroup_dir, seconds=1.0)
    tree.add_cpu_usage(be.containers["a"], seconds=1.0)
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    tree.add_cpu_usage(be_dir, seconds=1.0)
    tree.set_memory_usage(ls.cgroup_dir, anon=3 * GI, file=GI)
    tree.set_memory_usage(be.cgroup_dir, anon=1 * GI)
    tree.set_node_memory_used(6 * GI)
    tree.set_throttled(ls.containers["main"], nr_periods=20, nr_throttled=5)
    out = collector.collect(state, clock.now())

    assert out.errors == []
    assert out.node_cpu == pytest.approx(2.5)
    assert out.pod_cpu == {"uid-ls": pytest.approx(1.0), "uid-be": pytest.approx(0.5)}
    assert out.container_cpu["containerd://uid-ls-main"] == pytest.approx(1.0)
    assert out.container_cpu["containerd://uid-be-b"] == 0.0
    assert out.pod_memory == {"uid-ls": 3 * GI, "uid-be": GI}  # page cache is not usage
    assert out.node_memory == 6 * GI
    assert out.system_cpu == pytest.approx(1.0)
    assert out.be_cpu_usage_milli == 500
    assert out.be_cpu_request_milli == 3000
    assert out.be_cpu_real_limit_milli == 8000
    now = clock.now()
    assert cache.last(MetricKind.NODE_CPU_USAGE, now, 2) == pytest.approx(2.5)
    assert cache.last(MetricKind.POD_MEMORY_USAGE, now, 2, "uid-ls") == 3 * GI
    assert cache.last(MetricKind.SYSTEM_MEMORY_USAGE, now, 2) == 2 * GI
    assert cache.last(
        MetricKind.CONTAINER_CPU_THROTTLED, now, 2, "containerd://uid-ls-main"
    ) == pytest.approx(0.25)
    assert cache.last(MetricKind.BE_CPU_REQUEST, now, 2) == 3000.0


def test_be_real_limit_is_capped_by_quota_and_smallest_cpuset(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(version=1, cpus=8)
    be = tree.add_pod(BE)
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    collector = ResourceCollector(tree.paths, tree.layout, MetricCache())
    assert collector.be_real_milli_limit() == 8000
    tree.write("cpuset.cpus", be.containers["a"], "0-3")
    assert collector.be_real_milli_limit() == 4000  # the smallest container cpuset
    tree.write("cpu.cfs_quota_us", be_dir, "150000")
    assert collector.be_real_milli_limit() == 1500  # 1.5 cores of quota


def test_vanished_pods_are_quiet_and_forgotten(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(version=1, cpus=4)
    pod = tree.add_pod(LS)
    state = build_state("n", tree.layout, node=None, pods=[LS], node_slo=None)
    collector = ResourceCollector(tree.paths, tree.layout, MetricCache())
    collector.collect(state, 1.0)
    tree.remove_pod(pod)
    out = collector.collect(state, 2.0)
    assert out.errors == [] and out.pod_cpu == {}
    tree.add_pod(LS)
    tree.add_cpu_usage(pod.cgroup_dir, seconds=9.0)
    assert collector.collect(state, 3.0).pod_cpu == {}  # new baseline, no bogus delta from the old one


def test_host_applications(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(version=1, driver="cgroupfs", cpus=4)
    slo = {
        "hostApplications": [
            {
                "name": "nginx",
                "qos": "LS",
                "cgroupPath": {
                    "base": "CgroupRoot",
                    "parentDir": "host-latency-sensitive",
                    "relativePath": "nginx",
                },
            }
        ]
    }
    state = build_state(
        "n", tree.layout, node=None, pods=[], node_slo={"metadata": {"name": "n"}, "spec": slo}
    )
    app_dir = tree.ensure_cgroup("host-latency-sensitive/nginx")
    collector = ResourceCollector(tree.paths, tree.layout, cache := MetricCache())
    collector.collect(state, 1.0)
    tree.add_cpu_usage(app_dir, seconds=0.5)
    tree.add_node_cpu(seconds=1.0)
    out = collector.collect(state, 2.0)
    assert cache.last(MetricKind.HOST_APP_CPU_USAGE, 2.0, 2, "nginx") == pytest.approx(0.5)
    assert out.system_cpu == pytest.approx(0.5)


def test_host_app_dirs() -> None:
    from koord_framework.koordlet.cgroups import CgroupDriver, CgroupVersion
    from koord_framework.koordlet.hostpaths import HostPaths

    layout = CgroupLayout(HostPaths.under("/h"), CgroupVersion.V1, CgroupDriver.SYSTEMD)
    app = HostApplicationSpec.model_validate({"name": "a", "qos": "BE"})
    assert host_app_cgroup_dir(layout, app) == "host-best-effort/a"
    app = HostApplicationSpec.model_validate(
        {"name": "a", "cgroupPath": {"base": "KubepodsBesteffort", "parentDir": "x", "relativePath": "a"}}
    )
    assert host_app_cgroup_dir(layout, app) == "kubepods.slice/kubepods-besteffort.slice/x/a"
