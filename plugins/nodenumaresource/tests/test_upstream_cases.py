"""Koordinator's unit cases for the node allocation and helpers that the shared vectors lack
(``node_allocation_test.go``, ``util_test.go``), re-expressed against this plugin's classes."""

from __future__ import annotations

import pytest
from koord_plugin_nodenumaresource.accumulator import Allocated
from koord_plugin_nodenumaresource.node_allocation import NodeAllocation, PodAllocation
from koord_plugin_nodenumaresource.plugin import cpu_bind_policy, merge_topology_policy
from koord_plugin_nodenumaresource.topology import CPUInfo, CPUTopology, build_cpu_topology_for_test
from koord_plugin_nodenumaresource.topology_options import TopologyOptions

from koord_framework.koordlet.cpuset import parse_cpuset


def _topology() -> CPUTopology:
    """``buildCPUTopologyForTest(2, 1, 4, 2)`` with core ids made unique per socket, as the tests do."""
    topo = build_cpu_topology_for_test(2, 1, 4, 2)
    topo.details = {c: CPUInfo(c, i.socket << 16 | i.core, i.node, i.socket) for c, i in topo.details.items()}
    return topo


def _pod(uid: str, cpus: str, policy: str = "PCPULevel") -> PodAllocation:
    return PodAllocation(uid, cpuset=parse_cpuset(cpus), exclusive_policy=policy)


def test_add_cpus_counts_references_once_per_pod() -> None:
    """``TestNodeAllocationAddCPUs``."""
    topo = _topology()
    alloc = NodeAllocation("test-node-1")
    alloc.add(_pod("a", "1-4"))
    assert alloc.cpus == {c: Allocated(1, "PCPULevel") for c in range(1, 5)}
    available, _ = alloc.available_cpus(topo, 2, frozenset())
    assert available == set(range(16))
    alloc.add(_pod("a", "1-4"))  # the same pod again changes nothing
    assert alloc.cpus == {c: Allocated(1, "PCPULevel") for c in range(1, 5)}
    alloc.add(_pod("b", "2-5"))
    assert alloc.cpus == {1: Allocated(1, "PCPULevel"), 5: Allocated(1, "PCPULevel")} | {
        c: Allocated(2, "PCPULevel") for c in (2, 3, 4)
    }


def test_release_drops_the_pods_references() -> None:
    """``TestNodeAllocationStateReleaseCPUs``."""
    alloc = NodeAllocation("test-node-1")
    alloc.add(_pod("a", "1-4"))
    alloc.release("a")
    assert alloc.pods == {} and alloc.cpus == {}
    assert alloc.release("a") is None  # idempotent


def test_available_cpus_by_max_ref_count() -> None:
    """``Test_cpuAllocation_getAvailableCPUs``."""
    topo = _topology()
    alloc = NodeAllocation("test-node-1")
    alloc.add(_pod("a", "1-4"))
    assert alloc.available_cpus(topo, 2, frozenset())[0] == set(range(16))
    alloc.add(_pod("b", "2-5"))
    assert alloc.available_cpus(topo, 2, frozenset())[0] == parse_cpuset("0-1,5-15")
    alloc.release("a")
    assert alloc.available_cpus(topo, 1, frozenset())[0] == parse_cpuset("0-1,6-15")


def test_available_cpus_with_preferred_cpus_returned() -> None:
    """``Test_cpuAllocation_getAvailableCPUs_with_preferred_cpus``."""
    topo = _topology()
    alloc = NodeAllocation("test-node-1")
    alloc.add(_pod("a", "0-4"))
    assert alloc.available_cpus(topo, 1, frozenset())[0] == parse_cpuset("5-15")
    assert alloc.available_cpus(topo, 1, frozenset(), [{1, 2}])[0] == parse_cpuset("1-2,5-15")


def test_available_numa_resources_with_amplified_pinned_cpus() -> None:
    """``Test_getAvailableNUMANodeResources``: a pinned CPU counts amplified in its NUMA node."""
    topo = build_cpu_topology_for_test(2, 1, 8, 2)
    options = TopologyOptions(
        cpu_topology=topo,
        numa_node_resources=[
            (0, {"cpu": 24000, "memory": 32 << 30}),
            (1, {"cpu": 24000, "memory": 32 << 30}),
        ],
    )
    alloc = NodeAllocation("n")
    alloc.add(PodAllocation("p", cpuset=parse_cpuset("0-3"), numa_node_resources=((0, {"cpu": 4000}),)))
    available, allocated = alloc.available_numa_resources(options, {"cpu": 1.5}, {})
    assert allocated[0]["cpu"] == 6000  # 4 pinned CPUs x 1.5
    assert available[0]["cpu"] == 18000 and available[1]["cpu"] == 24000
    available, _ = alloc.available_numa_resources(options, {}, {})
    assert available[0]["cpu"] == 20000


def test_numa_node_statuses() -> None:
    """``GetAllNUMANodeStatus``: idle, single (only pods confined to it), shared (a spanning pod)."""
    topo = build_cpu_topology_for_test(1, 3, 2, 2)  # NUMA nodes 0..2 of 4 CPUs each
    alloc = NodeAllocation("n")
    alloc.add(_pod("single", "0-1"))
    alloc.add(_pod("spanning", "6-9"))
    assert alloc.numa_node_statuses(topo, 3) == ["single", "shared", "shared"]


@pytest.mark.parametrize(
    ("node", "pod", "want"),
    [
        ("Restricted", "", "Restricted"),  # no policy on pod
        ("Restricted", "Restricted", "Restricted"),  # policy on pod
        ("Restricted", "BestEffort", None),  # policy on pod not match policy on node
        ("", "SingleNUMANode", "SingleNUMANode"),
    ],
)
def test_merge_topology_policy(node: str, pod: str, want: str | None) -> None:
    """``Test_mergeTopologyPolicy``."""
    assert merge_topology_policy(node, pod) == want


@pytest.mark.parametrize(
    ("labels", "required", "preferred", "want"),
    [
        ({}, "", "FullPCPUs", ("FullPCPUs", False)),
        ({}, "SpreadByPCPUs", "FullPCPUs", ("SpreadByPCPUs", True)),
        ({"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"}, "", "SpreadByPCPUs", ("FullPCPUs", True)),
        ({"node.koordinator.sh/cpu-bind-policy": "SpreadByPCPUs"}, "", "FullPCPUs", ("SpreadByPCPUs", True)),
        ({"node.koordinator.sh/cpu-bind-policy": "SpreadByPCPUs"}, "FullPCPUs", "", ("FullPCPUs", True)),
    ],
)
def test_cpu_bind_policy(
    labels: dict[str, str], required: str, preferred: str, want: tuple[str, bool]
) -> None:
    """``Test_getCPUBindPolicy``: a required policy wins, else the node's, else the preferred one."""
    assert cpu_bind_policy(TopologyOptions(), labels, required, preferred) == want
