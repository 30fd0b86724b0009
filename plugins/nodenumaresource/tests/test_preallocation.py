"""Koordinator's pre-allocation cases for NodeNUMAResource (``reservation_test.go``:
``TestPlugin_RestoreReservationPreAllocation``, ``TestPlugin_AllocateReservationPreAllocationFrom
PreAllocatablePods``, ``TestPlugin_PreAllocationWithMultiplePreAllocatablePods``,
``TestPlugin_FilterNominateReservationPreAllocation``, ``TestPlugin_GetNominatedReusableAlloc``) and the
Restricted rules koord enforces on top: the reservation takes over exactly the nominated pods' CPUs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_nodenumaresource.annotations import ANNOTATION_RESOURCE_STATUS
from koord_plugin_nodenumaresource.node_allocation import PodAllocation
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.state import STATE_KEY, PreFilterState, restore_state_of
from koord_plugin_nodenumaresource.testing import lsr_pod, node, nrt

from koord_framework.api.objects import PodInfo
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import (
    ANNOTATION_IS_PRE_ALLOCATION,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVE_POD,
    LABEL_PRE_ALLOCATION_REQUIRED,
    ReservationInfo,
    set_nominated_pre_allocation,
)
from koord_framework.scheduler.status import Code
from koord_framework.testing.scheduler import SchedulerHarness

NODE = "test-node"
GI = 1024**3


def _plugin() -> tuple[SchedulerHarness, NodeNUMAResource]:
    # buildCPUTopologyForTest(1, 2, 4, 2): one socket, two NUMA nodes of 4 cores, 2 threads: CPUs 0-15.
    h = SchedulerHarness([(NodeNUMAResource, {})])
    h.add(node(NODE, 16, "32Gi"), nrt(NODE, 1, 2, 4, 2, memory_per_numa="16Gi"))
    plugin = h.plugin("NodeNUMAResource")
    assert isinstance(plugin, NodeNUMAResource)
    return h, plugin


def _candidate(name: str, cpus: set[int]) -> PodInfo:
    manifest = lsr_pod(name, str(len(cpus)), "8Gi")
    manifest["spec"]["nodeName"] = NODE
    return PodInfo.from_manifest(manifest)


def _hold(
    plugin: NodeNUMAResource, pod: PodInfo, cpus: set[int], numa: dict[int, dict[str, int]] | None
) -> None:
    plugin.resources.update(
        NODE,
        PodAllocation(pod.uid, cpuset=frozenset(cpus), numa_node_resources=tuple((numa or {}).items())),
    )


def _reservation(cpu: int, policy: str = "Aligned") -> ReservationInfo:
    return ReservationInfo(
        name="test-prealloc-reservation",
        uid="uid-r",
        node_name="",
        phase="Pending",
        allocatable={"cpu": cpu * 1000, "memory": 2 * cpu * GI},
        allocate_policy=policy,
    )


def _reserve_pod(cpu: int, *, required: bool = False, spec: dict[str, str] | None = None) -> PodInfo:
    """``NewReservePod`` of the pre-allocating reservation (its uid is the reservation's)."""
    manifest: dict[str, Any] = lsr_pod("reserve", str(cpu), f"{2 * cpu}Gi", spec=spec)
    manifest["metadata"]["uid"] = "uid-r"
    manifest["metadata"]["annotations"].update(
        {
            ANNOTATION_RESERVE_POD: "true",
            ANNOTATION_RESERVATION_NAME: "test-prealloc-reservation",
            ANNOTATION_IS_PRE_ALLOCATION: "true",
        }
    )
    if required:
        manifest["metadata"]["labels"][LABEL_PRE_ALLOCATION_REQUIRED] = "true"
    return PodInfo.from_manifest(manifest)


NUMA0 = {0: {"cpu": 4000, "memory": 8 * GI}}


@pytest.mark.parametrize(
    ("cpus", "numa", "merged"),
    [
        pytest.param({"pod-1": {0, 1, 2, 3}}, {}, {0, 1, 2, 3}, id="restore single pod with CPUSet"),
        pytest.param(
            {"pod-1": {0, 1}, "pod-2": {2, 3}},
            {"pod-1": {0: {"cpu": 2000, "memory": 4 * GI}}, "pod-2": {0: {"cpu": 2000, "memory": 4 * GI}}},
            {0, 1, 2, 3},
            id="restore multiple pods with CPUSet and NUMA",
        ),
        pytest.param({}, {}, set(), id="no pre-allocatable pods"),
    ],
)
def test_restore_reservation_pre_allocation(
    cpus: dict[str, set[int]], numa: dict[str, dict[int, dict[str, int]]], merged: set[int]
) -> None:
    """``TestPlugin_RestoreReservationPreAllocation``."""
    h, plugin = _plugin()
    pods = []
    for name, held in cpus.items():
        pod = _candidate(name, held)
        _hold(plugin, pod, held, numa.get(name))
        pods.append(pod)
    r = _reservation(4)
    state = CycleState()
    assert plugin.pre_restore_reservation_pre_allocation(state, r).is_success
    assert plugin.restore_reservation_pre_allocation(state, r, pods, h.node_info(NODE)).is_success
    restored = restore_state_of(state, NODE)
    assert len(restored.matched) == len(pods)
    assert restored.matched_remain_cpus == merged
    if pods:
        assert restored.pre_allocation is r
    for pod in pods:
        alloc = restored.matched[pod.uid]
        assert alloc.pre_allocatable is pod
        assert alloc.remained_cpus == cpus[pod.name] == alloc.allocatable_cpus
        assert not alloc.allocated_cpus


def _cycle(
    h: SchedulerHarness, plugin: NodeNUMAResource, reserve: PodInfo, r: ReservationInfo, pods: list[PodInfo]
) -> CycleState:
    state = CycleState()
    ni = h.node_info(NODE)
    _, status = plugin.pre_filter(state, reserve, [ni])
    assert status.is_success, status
    assert plugin.pre_restore_reservation_pre_allocation(state, r).is_success
    assert plugin.restore_reservation_pre_allocation(state, r, pods, ni).is_success
    return state


def _allocated(state: CycleState) -> frozenset[int]:
    st = state.get(STATE_KEY)
    assert isinstance(st, PreFilterState) and st.allocation is not None
    return st.allocation.cpuset


def test_allocate_reservation_pre_allocation_from_pre_allocatable_pods() -> None:
    """``TestPlugin_AllocateReservationPreAllocationFromPreAllocatablePods``: an Aligned reservation of 8
    cores gets a superset of the 4 cores its nominated pod holds; PreBind writes it on the reservation."""
    h, plugin = _plugin()
    pod = _candidate("pre-allocatable-pod", {0, 1, 2, 3})
    _hold(plugin, pod, {0, 1, 2, 3}, NUMA0)
    r = _reservation(8)
    reserve = _reserve_pod(8, spec={"preferredCPUBindPolicy": "FullPCPUs"})
    state = _cycle(h, plugin, reserve, r, [pod])
    assert restore_state_of(state, NODE).matched_remain_cpus == {0, 1, 2, 3}
    set_nominated_pre_allocation(state, NODE, [pod])
    assert plugin.filter(state, reserve, h.node_info(NODE)).is_success
    assert plugin.reserve(state, reserve, NODE).is_success
    cpus = _allocated(state)
    assert {0, 1, 2, 3} <= cpus and len(cpus) == 8
    assert plugin.pre_bind_reservation(state, {"metadata": {"name": r.name, "uid": r.uid}}, NODE).is_success
    written = json.loads(state.pod_mutation.annotations[ANNOTATION_RESOURCE_STATUS])
    assert parse_cpuset(written["cpuset"]) == cpus


def test_pre_allocation_with_multiple_pre_allocatable_pods() -> None:
    """``TestPlugin_PreAllocationWithMultiplePreAllocatablePods``, then Reserve with both nominated
    (``enableMultiple``): the reservation gets exactly their 8 CPUs (Koordinator would take the first's)."""
    h, plugin = _plugin()
    pod1 = _candidate("pre-allocatable-pod-1", {0, 1, 2, 3})
    pod2 = _candidate("pre-allocatable-pod-2", {4, 5, 6, 7})
    _hold(plugin, pod1, {0, 1, 2, 3}, NUMA0)
    _hold(plugin, pod2, {4, 5, 6, 7}, NUMA0)
    r = _reservation(8, policy="Restricted")
    reserve = _reserve_pod(8)
    state = _cycle(h, plugin, reserve, r, [pod1, pod2])
    restored = restore_state_of(state, NODE)
    assert len(restored.matched) == 2
    assert restored.matched_remain_cpus == set(range(8))
    set_nominated_pre_allocation(state, NODE, [pod1, pod2])
    assert plugin.reserve(state, reserve, NODE).is_success
    assert _allocated(state) == frozenset(range(8))


def test_filter_nominate_reservation_pre_allocation() -> None:
    """``TestPlugin_FilterNominateReservationPreAllocation``: the candidate is asked about as ``pod``."""
    h, plugin = _plugin()
    pod = _candidate("pre-allocatable-pod", {0, 1, 2, 3})
    _hold(plugin, pod, {0, 1, 2, 3}, NUMA0)
    r = _reservation(4)
    reserve = _reserve_pod(4, spec={"preferredCPUBindPolicy": "FullPCPUs"})
    state = _cycle(h, plugin, reserve, r, [pod])
    assert plugin.filter_nominate_reservation(state, pod, r, NODE).is_success


def test_restricted_takes_over_exactly_the_nominated_pods_cpus() -> None:
    """Restricted (what the Reservation plugin requires): the reserve pod's cpuset is the nominated pod's,
    not another candidate's, never a free one; a reservation needing more CPUs than the pod holds (or fewer)
    cannot take it over: the candidate is not nominated and Reserve does not fall back to free CPUs."""
    h, plugin = _plugin()
    one = _candidate("one", {0, 1, 2, 3})
    two = _candidate("two", {8, 9, 10, 11})
    _hold(plugin, one, {0, 1, 2, 3}, NUMA0)
    _hold(plugin, two, {8, 9, 10, 11}, {1: {"cpu": 4000, "memory": 8 * GI}})
    r = _reservation(4, policy="Restricted")
    reserve = _reserve_pod(4)
    state = _cycle(h, plugin, reserve, r, [one, two])
    set_nominated_pre_allocation(state, NODE, [two])
    assert plugin.reserve(state, reserve, NODE).is_success
    assert _allocated(state) == {8, 9, 10, 11}
    plugin.unreserve(state, reserve, NODE)
    for cpu in (6, 2):  # more, then fewer CPUs than the candidate holds
        reserve = _reserve_pod(cpu)
        r = _reservation(cpu, policy="Restricted")
        state = _cycle(h, plugin, reserve, r, [one])
        assert plugin.filter_nominate_reservation(state, one, r, NODE).code is Code.UNSCHEDULABLE
        set_nominated_pre_allocation(state, NODE, [one])
        status = plugin.reserve(state, reserve, NODE)
        assert status.code is Code.UNSCHEDULABLE, status


def test_get_nominated_reusable_alloc_required() -> None:
    """``TestPlugin_GetNominatedReusableAlloc``, and the ``pre-allocation-required`` label: without a
    nominated pod the reserve pod cannot take free CPUs."""
    h, plugin = _plugin()
    pod = _candidate("pre-allocatable-pod", {0, 1, 2, 3})
    _hold(plugin, pod, {0, 1, 2, 3}, None)
    r = _reservation(4, policy="Restricted")
    reserve = _reserve_pod(4, required=True)
    state = _cycle(h, plugin, reserve, r, [pod])
    set_nominated_pre_allocation(state, NODE, [pod])
    assert plugin.reserve(state, reserve, NODE).is_success
    assert _allocated(state) == {0, 1, 2, 3}
    plugin.unreserve(state, reserve, NODE)
    state = _cycle(h, plugin, reserve, r, [pod])
    status = plugin.reserve(state, reserve, NODE)
    assert status.code is Code.UNSCHEDULABLE and "no nominated pre-allocatable pod" in status.message


def test_a_normal_pod_never_gets_candidate_cpus() -> None:
    """The restore state of a pre-allocation belongs to the reserve pod's cycle: an ordinary pod (or a
    reserve pod without pre-allocation) on the same node gets free CPUs only."""
    h, plugin = _plugin()
    pod = _candidate("held", set(range(12)))
    _hold(plugin, pod, set(range(12)), None)
    other = PodInfo.from_manifest(lsr_pod("other", "4"))
    state = CycleState()
    plugin.pre_filter(state, other, [h.node_info(NODE)])
    assert plugin.reserve(state, other, NODE).is_success
    assert _allocated(state) == {12, 13, 14, 15}
