"""NodeNUMAResource end to end through the scheduler harness, with NRTs as koordlet writes them; Koordinator's
own unit cases that the shared vectors lack; and bad input, which must be refused with a reason naming the
object and the field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_nodenumaresource.accumulator import Allocated, CPUAllocationError, take_cpus
from koord_plugin_nodenumaresource.annotations import ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.resource_manager import filter_cpus_by_required_policy
from koord_plugin_nodenumaresource.testing import lsr_pod, node, nrt
from koord_plugin_nodenumaresource.topology import build_cpu_topology_for_test
from koord_plugin_nodenumaresource.topology_options import topology_options_from_nrt

from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.scheduler.status import Code
from koord_framework.testing.scheduler import SchedulerHarness


def _harness(*objects: dict[str, Any], args: dict[str, Any] | None = None) -> SchedulerHarness:
    h = SchedulerHarness([(NodeNUMAResource, args or {})])
    h.add(*objects)
    return h


def _status(h: SchedulerHarness, pod: dict[str, Any]) -> dict[str, Any]:
    got = h.cluster.get("Pod", pod["metadata"]["name"], "default")
    raw = (got["metadata"].get("annotations") or {}).get(ANNOTATION_RESOURCE_STATUS)
    return json.loads(raw) if raw else {}


# --- end to end ---------------------------------------------------------------------------------------------
def test_lsr_pods_get_whole_cores_and_never_share_them() -> None:
    h = _harness(node("n1", 16), nrt("n1", 1, 1, 8, 2))
    seen: set[int] = set()
    for i in range(4):
        pod = lsr_pod(f"p{i}", "4")
        result = h.schedule_one(pod)
        assert result.node == "n1", result
        cpus = parse_cpuset(_status(h, pod)["cpuset"])
        assert len(cpus) == 4 and not cpus & seen
        assert all(c ^ 1 in cpus for c in cpus)  # both threads of each core
        seen |= cpus
    # The node's CPUs are all pinned: a fifth pinned pod cannot fit, and says why.
    assert not h.schedule_one(lsr_pod("p4", "2")).node


def test_pre_bind_writes_resource_spec_when_the_pod_names_no_policy() -> None:
    h = _harness(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    pod = lsr_pod("p", "2")
    assert h.schedule_one(pod).node == "n1"
    annotations = h.cluster.get("Pod", "p", "default")["metadata"]["annotations"]
    assert json.loads(annotations[ANNOTATION_RESOURCE_SPEC]) == {"preferredCPUBindPolicy": "FullPCPUs"}
    assert json.loads(annotations[ANNOTATION_RESOURCE_STATUS]) == {"cpuset": "0-1"}


def test_bound_pods_cpus_are_taken_after_a_restart() -> None:
    """A new scheduler learns the pinned CPUs from bound pods' resource-status (the informer), not memory."""
    bound = lsr_pod("old", "4")
    bound["spec"]["nodeName"] = "n1"
    bound["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = json.dumps({"cpuset": "0-3"})
    h = _harness(node("n1", 8), nrt("n1", 1, 1, 4, 2), bound)
    pod = lsr_pod("new", "4")
    assert h.schedule_one(pod).node == "n1"
    assert _status(h, pod) == {"cpuset": "4-7"}


def test_unreserve_gives_the_cpus_back() -> None:
    h = _harness(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    plugin = h.plugin("NodeNUMAResource")
    assert isinstance(plugin, NodeNUMAResource)
    pod = lsr_pod("p", "8")
    h.add(pod)
    assert h.reserve(pod, "n1").is_success
    assert plugin.resources.allocated_cpuset("n1", "uid-p") == frozenset(range(8))
    h.unreserve(pod, "n1")
    assert plugin.resources.allocated_cpuset("n1", "uid-p") is None
    assert h.schedule_one(lsr_pod("q", "8")).node == "n1"


def test_single_numa_node_pod_stays_on_one_numa_node() -> None:
    h = _harness(node("n1", 32), nrt("n1", 2, 1, 8, 2, memory_per_numa="32Gi"))
    pod = lsr_pod("p", "4", "8Gi", numa={"numaTopologyPolicy": "SingleNUMANode"})
    assert h.schedule_one(pod).node == "n1"
    status = _status(h, pod)
    assert len(status["numaNodeResources"]) == 1
    numa = status["numaNodeResources"][0]["node"]
    cpus = parse_cpuset(status["cpuset"])
    assert cpus <= set(range(16 * numa, 16 * numa + 16))
    # 20 CPUs cannot fit on one NUMA node of 16: Unaligned, with the NUMA reason.
    big = lsr_pod("big", "20", numa={"numaTopologyPolicy": "SingleNUMANode"})
    assert not h.schedule_one(big).node
    reason = h.filter(big, "n1")
    assert reason.code is Code.UNSCHEDULABLE
    assert "NUMA" in reason.message


def test_kubelet_reserved_and_pinned_cpus_are_never_given() -> None:
    kubelet = {"policy": "static", "options": {"full-pcpus-only": "true"}, "reservedCPUs": "0-1"}
    topo = nrt("n1", 1, 1, 4, 2, kubelet=kubelet)
    topo["metadata"]["annotations"]["node.koordinator.sh/pod-cpu-allocs"] = json.dumps(
        [{"namespace": "d", "name": "g", "uid": "g1", "cpuset": "2-3", "managedByKubelet": True}]
    )
    h = _harness(node("n1", 8), topo)
    pod = lsr_pod("p", "4")
    assert h.schedule_one(pod).node == "n1"
    assert _status(h, pod) == {"cpuset": "4-7"}
    assert not h.schedule_one(lsr_pod("q", "2")).node


def test_node_full_pcpus_only_binds_an_ls_pod_and_rejects_odd_counts() -> None:
    h = _harness(
        node("n1", 8, labels={"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"}), nrt("n1", 1, 1, 4, 2)
    )
    assert h.filter(lsr_pod("odd", "3", qos="LS"), "n1").reasons == (
        "node(s) requested cpus not multiple cpus per core",
    )
    pod = lsr_pod("even", "2", qos="LS")
    assert h.schedule_one(pod).node == "n1"
    assert _status(h, pod) == {"cpuset": "0-1"}


def test_nrt_updates_and_deletes_reach_the_plugin() -> None:
    h = _harness(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    pod = lsr_pod("p", "2")
    assert h.filter(pod, "n1").is_success
    h.cluster.delete("NodeResourceTopology", "n1")
    assert h.filter(pod, "n1").reasons == ("node(s) invalid CPU Topology",)


# --- Koordinator unit cases the vectors lack ---------------------------------------------------------------
def test_filter_cpus_by_required_policy() -> None:
    """``Test_filterCPUsByRequiredCPUBindPolicy``-like: whole free cores, or the lowest free CPU per core."""
    topo = build_cpu_topology_for_test(1, 1, 4, 2)
    free = {0, 1, 2, 4, 5, 7}
    assert filter_cpus_by_required_policy("FullPCPUs", free, topo) == {0, 1, 4, 5}
    assert filter_cpus_by_required_policy("SpreadByPCPUs", free, topo) == {0, 2, 4, 7}
    assert filter_cpus_by_required_policy("", free, topo) == free


def test_take_cpus_fails_with_koordinators_message() -> None:
    topo = build_cpu_topology_for_test(1, 1, 2, 2)
    with pytest.raises(CPUAllocationError, match="not enough cpus available to satisfy request"):
        take_cpus(topo, 1, {0, 1}, {}, 3, "FullPCPUs", "None", "MostAllocated")
    assert take_cpus(topo, 1, {0, 1}, {}, 0, "FullPCPUs", "None", "MostAllocated") == []


def test_exclusive_pcpu_level_avoids_cores_of_exclusive_pods() -> None:
    """``TestTakeCPUsWithExclusivePolicy``: a PCPULevel pod avoids cores with PCPULevel CPUs when it can."""
    topo = build_cpu_topology_for_test(1, 1, 4, 2)
    held = {0: Allocated(1, "PCPULevel")}
    free = set(range(1, 8))
    assert take_cpus(topo, 1, free, held, 2, "SpreadByPCPUs", "PCPULevel", "MostAllocated") == [2, 4]


def test_topology_options_reduce_numa_cpu_by_reserved_cpus() -> None:
    """``TestNewTopologyOptions``: reserved CPUs are removed from their NUMA zone's cpu."""
    topo = nrt("n1", 2, 1, 4, 2, kubelet={"policy": "static", "reservedCPUs": "0-1,8"})
    options = topology_options_from_nrt(topo)
    assert options.reserved_cpus == frozenset({0, 1, 8})
    assert dict(options.numa_node_resources)[0]["cpu"] == 6000
    assert dict(options.numa_node_resources)[1]["cpu"] == 7000


def test_nrt_topology_policies_map_to_numa_policies() -> None:
    for given, want in [
        ("SingleNUMANodePodLevel", "SingleNUMANode"),
        ("Restricted", "Restricted"),
        ("BestEffort", "BestEffort"),
        ("None", ""),
        ("SingleNUMANodeContainerLevel", ""),
    ]:
        assert topology_options_from_nrt(nrt("n", 1, 1, 2, 2, policies=[given])).numa_topology_policy == want


# --- bad input ----------------------------------------------------------------------------------------------
def test_malformed_cpu_topology_annotation_names_the_nrt_and_field() -> None:
    topo = nrt("n1", 1, 1, 4, 2)
    topo["metadata"]["annotations"]["node.koordinator.sh/cpu-topology"] = "{not json"
    h = _harness(node("n1", 8), topo)
    status = h.filter(lsr_pod("p", "2"), "n1")
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons[0] == "node(s) invalid CPU Topology"
    assert "NodeResourceTopology n1" in status.reasons[1]
    assert "node.koordinator.sh/cpu-topology" in status.reasons[1]


def test_nrt_naming_cpus_the_node_does_not_have() -> None:
    h = _harness(node("n1", 8), nrt("n1", 2, 1, 4, 2))  # 16 CPUs on an 8-CPU node
    status = h.filter(lsr_pod("p", "2"), "n1")
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "lists 16 CPUs" in status.reasons[1] and "status.capacity.cpu 8" in status.reasons[1]
    reserved = nrt("n2", 1, 1, 4, 2, kubelet={"policy": "static", "reservedCPUs": "8-9"})
    h2 = _harness(node("n2", 8), reserved)
    status = h2.filter(lsr_pod("p", "2"), "n2")
    assert "reserved CPUs [8, 9] are not in annotation node.koordinator.sh/cpu-topology" in status.reasons[1]


def test_non_integer_cpu_with_full_pcpus_is_refused() -> None:
    h = _harness(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    status = h.filter(lsr_pod("p", "1500m", spec={"requiredCPUBindPolicy": "FullPCPUs"}), "n1")
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("the requested CPUs must be integer",)


def test_unknown_bind_policy_names_pod_and_field() -> None:
    h = _harness(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    status = h.filter(lsr_pod("p", "2", spec={"preferredCPUBindPolicy": "FullCores"}), "n1")
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "pod default/p" in status.message
    assert "scheduling.koordinator.sh/resource-spec: preferredCPUBindPolicy: unknown value 'FullCores'" in (
        status.message
    )


def test_malformed_resource_spec_and_numa_spec() -> None:
    h = _harness(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    pod = lsr_pod("p", "2")
    pod["metadata"]["annotations"][ANNOTATION_RESOURCE_SPEC] = "[1,2"
    assert "invalid JSON" in h.filter(pod, "n1").message
    numa = lsr_pod("q", "2", numa={"numaTopologyPolicy": "Single"})
    assert "numaTopologyPolicy: unknown value 'Single'" in h.filter(numa, "n1").message


def test_invalid_amplification_ratio_names_the_node() -> None:
    bad = node("n1", 8)
    bad["metadata"]["annotations"] = {"node.koordinator.sh/resource-amplification-ratio": '{"cpu": "x"}'}
    h = _harness(bad, nrt("n1", 1, 1, 4, 2))
    status = h.filter(lsr_pod("p", "2"), "n1")
    assert status.reasons[0] == "node(s) invalid CPU amplification ratio"
    assert "node n1" in status.reasons[1]


def test_malformed_resource_status_of_a_bound_pod_is_skipped_not_half_counted(caplog: Any) -> None:
    bound = lsr_pod("old", "4")
    bound["spec"]["nodeName"] = "n1"
    bound["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = '{"cpuset": "0-x"}'
    h = _harness(node("n1", 8), nrt("n1", 1, 1, 4, 2), bound)
    plugin = h.plugin("NodeNUMAResource")
    assert isinstance(plugin, NodeNUMAResource)
    assert plugin.resources.allocated_cpuset("n1", "uid-old") is None
    assert "pod default/old" in caplog.text


def test_invalid_args_are_refused() -> None:
    from pydantic import ValidationError

    for raw in (
        {"defaultCPUBindPolicy": "Default"},
        {"scoringStrategy": {"type": "BalancedAllocation"}},
        {"numaScoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}},
    ):
        with pytest.raises(ValidationError):
            NodeNUMAResource.parse_args(raw)


def test_vector_forms_follow_node_and_nrt_changes() -> None:
    """The vectorised Filter/Score keep per-row facts; Node and NRT events must reach them."""
    h = _harness(node("n1", 16), nrt("n1", 1, 1, 8, 2), node("n2", 16), nrt("n2", 2, 1, 4, 2))
    pods = [
        lsr_pod("a", "4"),
        lsr_pod("b", "3", qos="LS"),
        lsr_pod("c", "2", numa={"numaTopologyPolicy": "Restricted"}),
    ]
    for pod in pods:
        h.check_vector_forms(pod, "NodeNUMAResource")
    current = h.cluster.get("Node", "n1")
    current["metadata"]["labels"]["node.koordinator.sh/cpu-bind-policy"] = "FullPCPUsOnly"
    current["metadata"]["annotations"] = {"node.koordinator.sh/resource-amplification-ratio": '{"cpu": 2}'}
    h.cluster.update(current)
    h.cluster.delete("NodeResourceTopology", "n2")
    for pod in pods:
        h.check_vector_forms(pod, "NodeNUMAResource")
    assert h.filter(pods[1], "n1").reasons == ("node(s) requested cpus not multiple cpus per core",)
    assert h.schedule_one(lsr_pod("d", "2")).node == "n1"
    for pod in pods:
        h.check_vector_forms(pod, "NodeNUMAResource")
