"""Koordinator's reservation cases for NodeNUMAResource (``plugin_test.go``: ``TestRestoreReservation``,
``TestPlugin_PreBindReservation``, ``TestPlugin_FilterNominateReservation``-style checks) and Reserve taking
CPUs from the nominated reservation."""

from __future__ import annotations

import json

from koord_plugin_nodenumaresource.annotations import ANNOTATION_RESOURCE_STATUS
from koord_plugin_nodenumaresource.node_allocation import PodAllocation
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.state import STATE_KEY, PreFilterState, restore_state_of
from koord_plugin_nodenumaresource.testing import lsr_pod, node, nrt

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import ReservationInfo, set_nominated_reservation
from koord_framework.scheduler.status import Code
from koord_framework.testing.scheduler import SchedulerHarness

NODE = "test-node"


def _plugin() -> tuple[SchedulerHarness, NodeNUMAResource]:
    h = SchedulerHarness([(NodeNUMAResource, {})])
    h.add(node(NODE, 32), nrt(NODE, 1, 2, 8, 2))
    plugin = h.plugin("NodeNUMAResource")
    assert isinstance(plugin, NodeNUMAResource)
    return h, plugin


def _reservation(owners: dict[str, str], policy: str = "") -> ReservationInfo:
    return ReservationInfo(
        name="test-reservation",
        uid="uid-r",
        node_name=NODE,
        phase="Available",
        allocatable={"cpu": 4000},
        allocated_pods=owners,
        allocate_policy=policy,
    )


def test_restore_reservation_remained_and_allocated_cpus() -> None:
    """``TestRestoreReservation``: the reservation holds 6-9, owner A has 6-7: 8-9 remain; with owner B on
    8-9 too, nothing remains and the allocated set stays the reserved one."""
    h, plugin = _plugin()
    plugin.resources.update(NODE, PodAllocation("uid-r", cpuset=frozenset({6, 7, 8, 9})))
    plugin.resources.update(NODE, PodAllocation("uid-a", cpuset=frozenset({6, 7})))
    plugin.resources.update(NODE, PodAllocation("uid-b", cpuset=frozenset({8, 9})))
    state = CycleState()
    pod = PodInfo.from_manifest(lsr_pod("test", "4"))
    ni = h.node_info(NODE)
    assert plugin.pre_restore_reservation(state, pod).is_success
    assert plugin.restore_reservation(
        state, pod, [_reservation({"uid-a": "default/pod-a"})], [], ni
    ).is_success
    assert restore_state_of(state, NODE).matched["uid-r"].remained_cpus == {8, 9}
    owners = {"uid-a": "default/pod-a", "uid-b": "default/pod-b"}
    assert plugin.restore_reservation(state, pod, [_reservation(owners)], [], ni).is_success
    got = restore_state_of(state, NODE).matched["uid-r"]
    assert got.remained_cpus == frozenset()
    assert got.allocated_cpus == {6, 7, 8, 9}


def test_pre_bind_reservation_writes_the_cpuset_on_the_reservation() -> None:
    """``TestPlugin_PreBindReservation``."""
    h, plugin = _plugin()
    h.node_info(NODE)  # the snapshot PreBind reads
    state = CycleState()
    state.write(
        STATE_KEY,
        PreFilterState(
            request_cpu_bind=True,
            num_cpus_needed=4,
            allocation=PodAllocation("uid-r", cpuset=frozenset({0, 1, 2, 3})),
        ),
    )
    reservation = {"metadata": {"name": "test-reservation-1", "uid": "uid-r"}}
    assert plugin.pre_bind_reservation(state, reservation, NODE).is_success
    assert json.loads(state.pod_mutation.annotations[ANNOTATION_RESOURCE_STATUS]) == {"cpuset": "0-3"}


def _cycle(h: SchedulerHarness, plugin: NodeNUMAResource, pod: PodInfo, r: ReservationInfo) -> CycleState:
    state = CycleState()
    ni = h.node_info(NODE)
    _, status = plugin.pre_filter(state, pod, [ni])
    assert status.is_success, status
    assert plugin.pre_restore_reservation(state, pod).is_success
    assert plugin.restore_reservation(state, pod, [r], [], ni).is_success
    return state


def test_reserve_takes_the_nominated_reservations_cpus_and_others_never_do() -> None:
    h, plugin = _plugin()
    reserved = frozenset({4, 5, 6, 7})
    plugin.resources.update(NODE, PodAllocation("uid-r", cpuset=reserved))
    r = _reservation({})
    owner = PodInfo.from_manifest(lsr_pod("owner", "4"))
    state = _cycle(h, plugin, owner, r)
    set_nominated_reservation(state, NODE, r)
    assert plugin.reserve(state, owner, NODE).is_success
    st = state.get(STATE_KEY)
    assert isinstance(st, PreFilterState) and st.allocation is not None
    assert st.allocation.cpuset == reserved
    # A pod that matches no reservation never gets reserved CPUs.
    other = PodInfo.from_manifest(lsr_pod("other", "8"))
    state = CycleState()
    ni = h.node_info(NODE)
    plugin.pre_filter(state, other, [ni])
    assert plugin.reserve(state, other, NODE).is_success
    st = state.get(STATE_KEY)
    assert isinstance(st, PreFilterState) and st.allocation is not None
    assert not st.allocation.cpuset & reserved


def test_restricted_reservation_refuses_a_pod_bigger_than_what_remains() -> None:
    """Restricted: the pod's cpuset must come from the reservation alone (``ErrNotEnoughCPUs`` otherwise),
    so the reservation is not nominated, and a pod nominated to it anyway cannot fall back to the node."""
    h, plugin = _plugin()
    plugin.resources.update(NODE, PodAllocation("uid-r", cpuset=frozenset({4, 5, 6, 7})))
    r = _reservation({}, policy="Restricted")
    big = PodInfo.from_manifest(lsr_pod("big", "6"))
    state = _cycle(h, plugin, big, r)
    status = plugin.filter_nominate_reservation(state, big, r, NODE)
    assert status.code is Code.UNSCHEDULABLE
    set_nominated_reservation(state, NODE, r)
    status = plugin.reserve(state, big, NODE)
    assert not status.is_success
    fits = PodInfo.from_manifest(lsr_pod("fits", "4"))
    state = _cycle(h, plugin, fits, r)
    assert plugin.filter_nominate_reservation(state, fits, r, NODE).is_success
