"""The fake host tree of the testing kit looks like a host to the koordlet's readers, on v1 and v2."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from koord_framework.cluster.memory import MemoryCluster
from koord_framework.koordlet.cgroups import CgroupReader
from koord_framework.koordlet.system import read_cpu_ticks, read_meminfo, read_node_cpu_info, vendor_id
from koord_framework.testing.hosttree import FakeHostTree, Processor, QOSHarness, make_running_pod

HostFactory = Callable[..., FakeHostTree]


def test_proc_and_sys(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=8, sockets=2, memory_bytes=8 * 1024**3, vendor="AuthenticAMD")
    info = read_node_cpu_info(tree.paths)
    assert len(info) == 8
    assert [(p.cpu_id, p.core_id, p.socket_id, p.node_id) for p in info.processors[:4]] == [
        (0, 0, 0, 0),
        (1, 0, 0, 0),
        (2, 1, 0, 0),
        (3, 1, 0, 0),
    ]
    assert info.processors[4].socket_id == 1 and info.processors[4].core_id == 2  # machine-wide core ids
    assert vendor_id(tree.paths) == "AuthenticAMD"
    assert read_meminfo(tree.paths).usage() == 0
    tree.set_node_memory_used(1024**3)
    assert read_meminfo(tree.paths).usage() == 1024**3
    tree.add_node_cpu(seconds=2.5)
    assert read_cpu_ticks(tree.paths) == 250


def test_explicit_topology(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=[Processor(0, 0, 0, 0), Processor(4, 0, 0, 0), Processor(1, 1, 0, 1)])
    info = read_node_cpu_info(tree.paths)
    assert [(p.cpu_id, p.core_id, p.node_id) for p in info.processors] == [(0, 0, 0), (1, 1, 1), (4, 0, 0)]
    assert tree.all_cpus == "0-1,4"


@pytest.mark.parametrize(
    ("version", "expected_files"), [(1, {"cpu.cfs_quota_us", "cpu.shares"}), (2, {"cpu.max", "cpu.weight"})]
)
def test_cgroup_files_follow_the_version(
    koord_host_tree: HostFactory, version: int, expected_files: set[str]
) -> None:
    tree = koord_host_tree(version=version)
    pod = tree.add_pod(make_running_pod("p", qos="LS", requests={"cpu": "1"}))
    files = {p.name for p in tree.layout.dir_path("cpu", pod.cgroup_dir).iterdir()}
    assert expected_files <= files
    assert len(pod.containers) == 1
    reader = CgroupReader(tree.layout)
    assert reader.read_cpu_quota(pod.containers["main"]) == -1
    tree.remove_pod(pod)
    assert not tree.layout.dir_path("cpu", pod.cgroup_dir).exists()


def test_pod_without_uid_is_refused(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree()
    with pytest.raises(ValueError, match=r"metadata\.uid"):
        tree.add_pod({"metadata": {"name": "x"}})


def test_resctrl(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree().with_resctrl(cbm_mask="ff", cache_ids=(0, 1), groups=["BE", "LS"])
    assert tree.paths.resctrl_file("info", "L3", "cbm_mask").read_text() == "ff\n"
    assert tree.paths.resctrl_file("BE", "schemata").read_text() == "L3:0=ff;1=ff\nMB:0=100;1=100\n"
    from koord_framework.koordlet.system import is_resctrl_supported

    assert is_resctrl_supported(tree.paths)


def test_harness_state_and_defaults(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4)
    h = QOSHarness(
        tree,
        pods=[make_running_pod("a", qos="BE")],
        node_slo={"resourceUsedThresholdWithBE": {"enable": True}},
    )
    assert h.state.node_slo is not None and h.state.node_slo.threshold.enable is True
    assert [p.uid for p in h.state.pods] == ["uid-a"]
    assert h.context.cpu_info is not None and len(h.context.cpu_info) == 4
    assert h.executor.node_cpus == frozenset(range(4))
    h.set_state(pods=[])
    assert h.context.state.pods == ()


def test_harness_with_cluster_lets_the_evictor_find_the_pods(koord_host_tree: HostFactory) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "test-node"}}
    h = QOSHarness.with_cluster(koord_host_tree(cpus=2), node=node, pods=[make_running_pod("a", qos="BE")])
    cluster = h.cluster
    assert isinstance(cluster, MemoryCluster)
    assert cluster.try_get("Node", "test-node") is not None
    meta = h.state.pod("uid-a")
    assert meta is not None
    assert h.evictor.evict(meta, "test") is True
    assert [(e.name, e.reason) for e in cluster.evictions] == [("a", "test")]
    assert cluster.try_get("Pod", "a", "default") is None
