"""Koordinator's reservation cases for DeviceShare (``reservation_test.go``:
``Test_tryAllocateFromReservation``, ``Test_Plugin_ReservationRestore``): a node of two GPUs (100 % core,
8 GiB each), some usage, and a restore state; the pod's devices come from the reservation, from the node, or
nowhere, as upstream."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import DeviceAllocation
from koord_plugin_deviceshare.allocator import AutopilotAllocator
from koord_plugin_deviceshare.builders import make_device
from koord_plugin_deviceshare.device import parse_device
from koord_plugin_deviceshare.nodedevice import DeviceResources, NodeDevice, append_allocated
from koord_plugin_deviceshare.plugin import DeviceShare
from koord_plugin_deviceshare.reservation import NodeRestoreState, ReusableAlloc, restore_node
from koord_plugin_deviceshare.state import prepare_pod

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import ReservationInfo
from koord_framework.scheduler.status import Code
from koord_framework.testing import make_pod
from koord_framework.testing.scheduler import SchedulerHarness

GI = 1 << 30
GPU = n.GPU


def share(percent: int) -> dict[str, int]:
    """``percent`` of one GPU of 8 GiB: core, memory, memory ratio."""
    return {n.GPU_CORE: percent, n.GPU_MEMORY: percent * 8 * GI // 100, n.GPU_MEMORY_RATIO: percent}


ONE = {GPU: {0: share(100), 1: share(100)}}
HALF = {GPU: {0: share(50)}}
P75 = {GPU: {0: share(75)}}
P25 = {GPU: {0: share(25)}}
P25_1 = {GPU: {0: share(25), 1: share(100)}}


def _reservation(policy: str = "") -> ReservationInfo:
    return ReservationInfo(
        name="r",
        uid="uid-r",
        node_name="test-node",
        phase="Available",
        allocatable={},
        allocate_policy=policy,
    )


def _node_device(used: DeviceResources) -> NodeDevice:
    nd = NodeDevice()
    device = make_device("test-node", 2, 0, memory=8 * GI, numa_nodes=1)
    for d in device["spec"]["devices"]:
        d.pop("topology", None)  # upstream's test Device has no topology
    nd.set_device(parse_device(device))
    if used:
        nd.update_used(
            {GPU: [DeviceAllocation(m, dict(r)) for m, r in used.items()]}, "default/used", add=True
        )
    return nd


def _restore(
    policy: str | None,
    allocatable: dict[str, DeviceResources],
    allocated: dict[str, DeviceResources] | None,
    remained: dict[str, DeviceResources] | None,
) -> NodeRestoreState:
    if policy is None:
        return NodeRestoreState()
    alloc = ReusableAlloc(_reservation(policy), allocatable, allocated or {}, remained or {})
    return NodeRestoreState(
        matched=(alloc,),
        matched_allocatable=append_allocated(None, allocatable),
        matched_allocated=append_allocated(None, allocated),
    )


CASES: list[tuple[str, dict[str, int], Any, DeviceResources, bool, bool, Any]] = [
    ("no matched reservations", share(50), (None, HALF, None, None), {}, False, False, None),
    ("default policy", share(50), ("", P25, None, P25), {}, False, False, {0: share(50)}),
    (
        "default policy, required from reservation",
        share(50),
        ("", HALF, P25, HALF),
        {0: share(50)},
        True,
        False,
        {0: share(50)},
    ),
    (
        "default policy, required from reservation, reservation empty",
        share(50),
        ("", HALF, HALF, None),
        {0: share(150)},
        True,
        False,
        {1: share(50)},
    ),
    (
        "Aligned",
        share(50),
        ("Aligned", HALF, None, HALF),
        {0: share(100), 1: share(100)},
        False,
        False,
        {0: share(50)},
    ),
    (
        "Aligned, bigger request, node full",
        {n.GPU_CORE: 60, n.GPU_MEMORY: 5 * GI},
        ("Aligned", HALF, None, HALF),
        {0: share(100), 1: share(100)},
        True,
        False,
        "Reservation(s) Insufficient gpu devices",
    ),
    (
        "Aligned, what remains does not fit",
        {n.GPU_CORE: 30, n.GPU_MEMORY: 1 * GI},
        ("Aligned", HALF, P25, P25),
        {0: share(125), 1: share(100)},
        True,
        False,
        "Reservation(s) Insufficient gpu devices",
    ),
    (
        "Restricted",
        share(50),
        ("Restricted", HALF, None, HALF),
        {0: share(100), 1: share(100)},
        False,
        False,
        {0: share(50)},
    ),
    (
        "Restricted, node has room but the reservation does not",
        share(50),
        ("Restricted", HALF, P25, P25),
        {0: share(75), 1: share(100)},
        True,
        False,
        "Reservation(s) Insufficient gpu devices",
    ),
    (
        "Restricted, reservation-ignored pods use the node",
        share(50),
        ("Restricted", ONE, None, ONE),
        {0: share(175), 1: share(150)},
        False,
        False,
        {1: share(50)},
    ),
    (
        "reservation-ignored pod",
        share(50),
        ("", ONE, P75, P25_1),
        {0: share(175), 1: share(100)},
        False,
        True,
        {1: share(50)},
    ),
    (
        "reservation-ignored pod, nothing left",
        share(50),
        ("", ONE, ONE, None),
        {0: share(200), 1: share(200)},
        False,
        True,
        "Insufficient gpu devices",
    ),
]


@pytest.mark.parametrize(("name", "request_", "restore", "used", "required", "ignored", "want"), CASES)
def test_try_allocate_from_reservation(
    name: str,
    request_: dict[str, int],
    restore: Any,
    used: DeviceResources,
    required: bool,
    ignored: bool,
    want: Any,
) -> None:
    h = SchedulerHarness([(DeviceShare, {})])
    plugin = h.plugin("DeviceShare")
    assert isinstance(plugin, DeviceShare)
    labels = {"scheduling.koordinator.sh/reservation-ignored": "true"} if ignored else {}
    pod = PodInfo.from_manifest(make_pod("p", labels=labels))
    # Upstream asks core and memory (the ratio follows from the memory).
    state = prepare_pod({k: v for k, v in request_.items() if k != n.GPU_MEMORY_RATIO}, {})
    nd = _node_device(used)
    rs = _restore(*restore)
    allocator = AutopilotAllocator(state, nd, {})
    result, status = plugin._allocate_from_reusable(allocator, pod, rs, rs.matched, {}, required)
    if isinstance(want, str):
        assert status.code is Code.UNSCHEDULABLE and status.reasons == (want,), status
        return
    assert status.is_success, status
    if want is None:
        assert not result
        return
    assert result is not None
    got = {
        a.minor: {k: a.resources[k] for k in (n.GPU_CORE, n.GPU_MEMORY, n.GPU_MEMORY_RATIO)}
        for a in result[GPU]
    }
    assert got == want


def test_restore_counts_owner_usage_on_the_reservations_own_minors_only() -> None:
    """``Test_Plugin_ReservationRestore``: allocatable is the reserve pod's devices, allocated what owners
    use of them (an owner's other devices do not count), remained the difference; unmatched reservations'
    owner usage is summed."""
    nd = _node_device({})
    nd.update_used({GPU: [DeviceAllocation(0, share(100))]}, "default/uid-r", add=True)
    nd.update_used({GPU: [DeviceAllocation(1, share(100))]}, "default/uid-u", add=True)
    nd.update_used(
        {GPU: [DeviceAllocation(0, share(25)), DeviceAllocation(1, share(10))]}, "default/owner", add=True
    )
    nd.update_used({GPU: [DeviceAllocation(1, share(50))]}, "default/owner-u", add=True)
    matched = ReservationInfo(
        "r", "uid-r", "test-node", "Available", {}, allocated_pods={"o": "default/owner"}
    )
    unmatched = ReservationInfo(
        "u", "uid-u", "test-node", "Available", {}, allocated_pods={"ou": "default/owner-u"}
    )
    got = restore_node(nd, [matched], [unmatched])
    assert len(got.matched) == 1
    alloc = got.matched[0]
    assert alloc.allocatable == {GPU: {0: share(100)}}
    assert alloc.allocated == {GPU: {0: share(25)}}
    assert alloc.remained == {GPU: {0: share(75)}}
    assert got.matched_allocatable == {GPU: {0: share(100)}}
    assert got.unmatched_used == {GPU: {1: share(50)}}


def test_normalize_reservation_score_scales_the_best_to_100() -> None:
    """``NormalizeReservationScore`` = ``DefaultReservationNormalizeScore(100, false)``: raw device scores
    (summed over device types, so above 100 at times) are scaled so that the best is 100."""
    h = SchedulerHarness([(DeviceShare, {})])
    plugin = h.plugin("DeviceShare")
    assert isinstance(plugin, DeviceShare)
    pod = PodInfo.from_manifest(make_pod("p"))
    scores = [50, 200, 0]
    assert plugin.normalize_reservation_score(CycleState(), pod, scores).is_success
    assert scores == [25, 100, 0]
    zeros = [0, 0]
    assert plugin.normalize_reservation_score(CycleState(), pod, zeros).is_success
    assert zeros == [0, 0]
