"""koordlet's NodeResourceTopology: read from fake host trees shaped like real machines and from this
machine's own sysfs, written through the cluster port, and read back by the scheduler's NodeNUMAResource."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.koordlet.agent import AgentOptions, KoordletAgent
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.states import build_state
from koord_framework.koordlet.system import read_node_cpu_info
from koord_framework.koordlet.topology import (
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_POD_CPU_ALLOCS,
    KubeletCPUConfig,
    NodeTopologyReporter,
    read_numa_memory,
    topology_policy,
)
from koord_framework.testing.hosttree import FakeHostTree, Processor

GIB = 1024**3


def machine(sockets: int, nodes_per_socket: int, cores_per_node: int, threads: int) -> list[Processor]:
    """CPU ids as Linux numbers them on Intel servers: first thread of every core, then the siblings."""
    cores = sockets * nodes_per_socket * cores_per_node
    out = []
    for thread in range(threads):
        for core in range(cores):
            node = core // cores_per_node
            socket = node // nodes_per_socket
            local_core = core - socket * nodes_per_socket * cores_per_node
            out.append(Processor(cpu=thread * cores + core, core=local_core, socket=socket, node=node))
    return sorted(out, key=lambda p: p.cpu)


def node_manifest(name: str, cpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}, "annotations": {}},
        "status": {"capacity": {"cpu": str(cpus), "memory": "64Gi"}, "allocatable": {"cpu": str(cpus)}},
    }


def report(
    tree: FakeHostTree,
    *,
    kubelet: KubeletCPUConfig | None = None,
    pods: list[Any] | None = None,
    node: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cluster = MemoryCluster(VirtualClock(0))
    node = node or node_manifest("n1", len(tree.processors))
    state = build_state("n1", tree.layout, node=node, pods=pods or [], node_slo=None)
    written = NodeTopologyReporter(tree.paths, kubelet).report(cluster, state, read_node_cpu_info(tree.paths))
    assert written is not None
    return cluster.get("NodeResourceTopology", "n1")


def detail(nrt: dict[str, Any]) -> list[dict[str, int]]:
    return json.loads(nrt["metadata"]["annotations"][ANNOTATION_CPU_TOPOLOGY])["detail"]


def zones(nrt: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {z["name"]: {r["name"]: r["allocatable"] for r in z["resources"]} for z in nrt["zones"]}


def test_one_socket_four_cores_two_threads(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(1, 1, 4, 2), memory_bytes=16 * GIB)
    nrt = report(tree)
    got = detail(nrt)
    assert [d["id"] for d in got] == list(range(8))
    # siblings 0 and 4 share core 0, as on the real machine
    assert {d["id"]: d["core"] for d in got} == {0: 0, 1: 1, 2: 2, 3: 3, 4: 0, 5: 1, 6: 2, 7: 3}
    assert {d["socket"] for d in got} == {0} and {d["node"] for d in got} == {0}
    assert zones(nrt) == {
        "node-0": {"cpu": "8", "memory": "16Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    }
    assert nrt["topologyPolicies"] == ["None"]
    assert nrt["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Koordinator"
    assert nrt["metadata"]["ownerReferences"][0]["kind"] == "Node"


def test_two_sockets_two_numa_nodes_each(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(2, 2, 16, 2), memory_bytes=256 * GIB)
    nrt = report(tree)
    got = detail(nrt)
    assert len(got) == 128
    assert len({(d["socket"], d["core"]) for d in got}) == 64
    assert {d["node"] for d in got} == {0, 1, 2, 3}
    by_id = {d["id"]: d for d in got}
    assert (
        by_id[0]["node"] == 0 and by_id[16]["node"] == 1 and by_id[32]["node"] == 2 and by_id[64]["node"] == 0
    )
    assert by_id[0]["core"] == by_id[64]["core"]  # hyper-thread siblings
    assert by_id[32]["socket"] == 1
    assert zones(nrt)["node-3"] == {"cpu": "32", "memory": "64Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}


def test_offline_cpus_are_left_out(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(1, 1, 4, 2), memory_bytes=16 * GIB)
    (tree.paths.sys / "devices" / "system" / "cpu" / "online").write_text("0-5\n")
    nrt = report(tree)
    assert [d["id"] for d in detail(nrt)] == [0, 1, 2, 3, 4, 5]
    assert zones(nrt)["node-0"]["cpu"] == "6"


def test_huge_pages_are_taken_out_of_numa_memory(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(1, 1, 2, 2), memory_bytes=8 * GIB)
    pages = tree.paths.sys / "devices" / "system" / "node" / "node0" / "hugepages" / "hugepages-2048kB"
    pages.mkdir(parents=True)
    (pages / "nr_hugepages").write_text("512\n")  # 1 GiB
    memory = read_numa_memory(tree.paths)
    assert memory[0].total == 8 * GIB and memory[0].hugepages_2m == GIB
    assert zones(report(tree))["node-0"]["memory"] == "7Gi"


def test_kubelet_static_policy_and_cpu_manager_state(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(1, 1, 4, 2), memory_bytes=16 * GIB)
    tree.paths.kubelet_root.mkdir(parents=True)
    state = {
        "policyName": "static",
        "defaultCpuSet": "0,2-3,6-7",
        "entries": {"uid-g": {"app": "1,5"}, "uid-lsr": {"app": "2-3"}},
    }
    (tree.paths.kubelet_root / "cpu_manager_state").write_text(json.dumps(state))
    guaranteed = {
        "metadata": {"name": "g", "namespace": "default", "uid": "uid-g"},
        "spec": {"nodeName": "n1", "containers": [{"name": "app"}]},
        "status": {"qosClass": "Guaranteed"},
    }
    lsr = {
        "metadata": {
            "name": "lsr",
            "namespace": "default",
            "uid": "uid-lsr",
            "labels": {"koordinator.sh/qosClass": "LSR"},
            "annotations": {"scheduling.koordinator.sh/resource-status": '{"cpuset":"2-3"}'},
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "app"}]},
    }
    kubelet = KubeletCPUConfig("static", {"full-pcpus-only": "true"}, "0", "single-numa-node", "pod")
    nrt = report(tree, kubelet=kubelet, pods=[guaranteed, lsr])
    annotations = nrt["metadata"]["annotations"]
    assert json.loads(annotations[ANNOTATION_KUBELET_CPU_MANAGER_POLICY]) == {
        "policy": "static",
        "options": {"full-pcpus-only": "true"},
        "reservedCPUs": "0",
    }
    # The koord-pinned LSR pod's CPUs are koord's; only the kubelet-managed Guaranteed pod is listed.
    assert json.loads(annotations[ANNOTATION_POD_CPU_ALLOCS]) == [
        {"namespace": "default", "name": "g", "uid": "uid-g", "cpuset": "1,5", "managedByKubelet": True}
    ]
    assert nrt["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    pools = json.loads(annotations["node.koordinator.sh/cpu-shared-pools"])
    assert parse_cpuset(pools[0]["cpuset"]) == {0, 4, 6, 7}


def test_policy_from_the_state_file_when_not_configured(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(1, 1, 2, 2))
    tree.paths.kubelet_root.mkdir(parents=True)
    (tree.paths.kubelet_root / "cpu_manager_state").write_text('{"policyName":"none","defaultCpuSet":""}')
    nrt = report(tree)
    assert json.loads(nrt["metadata"]["annotations"][ANNOTATION_KUBELET_CPU_MANAGER_POLICY]) == {
        "policy": "none"
    }


def test_node_reservation_and_system_qos_are_copied(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(1, 1, 4, 2))
    node = node_manifest("n1", 8)
    node["metadata"]["annotations"] = {
        "node.koordinator.sh/reservation": '{"reservedCPUs":"0,1"}',
        "node.koordinator.sh/system-qos-resource": '{"cpuset":"7"}',
    }
    nrt = report(tree, node=node)
    annotations = nrt["metadata"]["annotations"]
    assert json.loads(annotations["node.koordinator.sh/reservation"]) == {"reservedCPUs": "0-1"}
    assert json.loads(annotations["node.koordinator.sh/system-qos-resource"]) == {"cpuset": "7"}
    be = json.loads(annotations["node.koordinator.sh/be-cpu-shared-pools"])
    assert parse_cpuset(be[0]["cpuset"]) == {2, 3, 4, 5, 6}


def test_unchanged_topology_is_not_written_again(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(1, 1, 4, 2))
    cluster = MemoryCluster(VirtualClock(0))
    state = build_state("n1", tree.layout, node=node_manifest("n1", 8), pods=[], node_slo=None)
    reporter = NodeTopologyReporter(tree.paths)
    info = read_node_cpu_info(tree.paths)
    assert reporter.report(cluster, state, info) is not None
    version = cluster.get("NodeResourceTopology", "n1")["metadata"]["resourceVersion"]
    assert reporter.report(cluster, state, info) is None
    assert cluster.get("NodeResourceTopology", "n1")["metadata"]["resourceVersion"] == version
    (tree.paths.sys / "devices" / "system" / "cpu" / "online").write_text("0-3\n")
    assert reporter.report(cluster, state, read_node_cpu_info(tree.paths)) is not None


def test_a_changed_topology_keeps_the_managers_batch_entries_on_the_zones(tmp_path: Path) -> None:
    """koord-manager writes NUMA-level batch-cpu / batch-memory into the koordlet's zones; a koordlet rewrite
    of its own resources (cpu went offline) must not drop them (Koordinator's MergeZoneList)."""
    tree = FakeHostTree(tmp_path, cpus=machine(1, 1, 4, 2))
    cluster = MemoryCluster(VirtualClock(0))
    state = build_state("n1", tree.layout, node=node_manifest("n1", 8), pods=[], node_slo=None)
    reporter = NodeTopologyReporter(tree.paths)
    assert reporter.report(cluster, state, read_node_cpu_info(tree.paths)) is not None
    nrt = cluster.get("NodeResourceTopology", "n1")
    batch = {
        "name": "kubernetes.io/batch-cpu",
        "capacity": "3000",
        "allocatable": "3000",
        "available": "3000",
    }
    zone = nrt["zones"][0]["name"]
    cluster.patch(
        "NodeResourceTopology",
        "n1",
        "",
        {
            "zones": [
                {**z, "resources": [*z["resources"], batch]} if z["name"] == zone else z for z in nrt["zones"]
            ]
        },
    )
    (tree.paths.sys / "devices" / "system" / "cpu" / "online").write_text("0-3\n")
    assert reporter.report(cluster, state, read_node_cpu_info(tree.paths)) is not None
    after = zones(cluster.get("NodeResourceTopology", "n1"))
    assert after[zone]["kubernetes.io/batch-cpu"] == "3000"
    assert after[zone]["cpu"] != zones(nrt)[zone]["cpu"]  # the koordlet's own value was rewritten


def test_topology_policy_names() -> None:
    assert topology_policy("", "container") == "None"
    assert topology_policy("none", "pod") == "None"
    assert topology_policy("best-effort", "container") == "BestEffortContainerLevel"
    assert topology_policy("restricted", "pod") == "RestrictedPodLevel"


def test_the_agent_reports_and_the_scheduler_plugin_reads_it(tmp_path: Path) -> None:
    nodenuma = pytest.importorskip("koord_plugin_nodenumaresource.topology_options")
    tree = FakeHostTree(tmp_path, cpus=machine(2, 1, 4, 2), memory_bytes=32 * GIB)
    cluster = MemoryCluster(VirtualClock(1000))
    cluster.create(node_manifest("n1", 16))
    agent = KoordletAgent(
        "n1", cluster, host=tree.paths, options=AgentOptions(report_node_metric=False), clock=cluster.clock
    )
    agent.start(watch=False)
    step = agent.step(1000.0)
    assert step.node_topology is not None, step.errors
    options = nodenuma.topology_options_from_nrt(cluster.get("NodeResourceTopology", "n1"))
    assert options.error == ""
    assert options.cpu_topology.num_cpus == 16 and options.cpu_topology.num_cores == 8
    assert options.cpu_topology.num_sockets == 2 and options.cpu_topology.cpus_per_core == 2
    assert [n for n, _ in options.numa_node_resources] == [0, 1]
    assert options.numa_node_resources[0][1]["cpu"] == 8000


def test_this_machines_sysfs() -> None:
    host = HostPaths.host()
    if not (host.sys / "devices" / "system" / "cpu" / "online").is_file():
        pytest.skip("no sysfs CPU topology here")
    info = read_node_cpu_info(host)
    online = parse_cpuset((host.sys / "devices" / "system" / "cpu" / "online").read_text())
    assert info.cpu_ids == online
    cluster = MemoryCluster(VirtualClock(0))
    from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion

    layout = CgroupLayout(host, CgroupVersion.V1, CgroupDriver.CGROUPFS)
    state = build_state("self", layout, node=node_manifest("self", len(online)), pods=[], node_slo=None)
    NodeTopologyReporter(host).report(cluster, state, info)
    nrt = cluster.get("NodeResourceTopology", "self")
    assert {d["id"] for d in detail(nrt)} == online
    assert sum(int(z["cpu"]) for z in zones(nrt).values()) == len(online)
    memory = read_numa_memory(host)
    if memory:
        assert all(m.total > 0 for m in memory.values())
