"""Koordinator's pre-allocation cases for DeviceShare (``reservation_test.go``:
``Test_Plugin_RestoreReservationPreAllocation``; ``utils_test.go``: ``pre-allocation-required`` makes the
reservation required) and the rules koord enforces: a pre-allocating reserve pod gets exactly the devices of
the pods nominated for it, never those of another candidate, never by the node-level fallback."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import DeviceAllocation
from koord_plugin_deviceshare.builders import device_pod, make_device
from koord_plugin_deviceshare.device import parse_device
from koord_plugin_deviceshare.nodedevice import NodeDevice
from koord_plugin_deviceshare.plugin import STATE_KEY, DeviceShare, _reservation_required
from koord_plugin_deviceshare.reservation import restore_states_of
from koord_plugin_deviceshare.state import PodDeviceState

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import (
    ANNOTATION_IS_PRE_ALLOCATION,
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVE_POD,
    LABEL_PRE_ALLOCATION_REQUIRED,
    ReservationInfo,
    set_nominated_pre_allocation,
)
from koord_framework.scheduler.status import Code
from koord_framework.testing import make_node
from koord_framework.testing.scheduler import SchedulerHarness

NODE = "test-node-1"
GI = 1 << 30
GPU = n.GPU


def share(percent: int) -> dict[str, int]:
    """``percent`` of one GPU of 8 GiB: core, memory, memory ratio."""
    return {n.GPU_CORE: percent, n.GPU_MEMORY: percent * 8 * GI // 100, n.GPU_MEMORY_RATIO: percent}


def _plugin(used: dict[str, dict[int, dict[str, int]]]) -> tuple[SchedulerHarness, DeviceShare]:
    """Two GPUs of 8 GiB; ``used``: pod name -> minor -> what it holds."""
    h = SchedulerHarness([(DeviceShare, {})])
    h.add(make_node(NODE, cpu="16", memory="64Gi"))
    plugin = h.plugin("DeviceShare")
    assert isinstance(plugin, DeviceShare)
    nd = NodeDevice()
    device = make_device(NODE, 2, 0, memory=8 * GI, numa_nodes=1)
    for d in device["spec"]["devices"]:
        d.pop("topology", None)
    nd.set_device(parse_device(device))
    for name, held in used.items():
        nd.update_used(
            {GPU: [DeviceAllocation(m, dict(r)) for m, r in held.items()]}, f"default/{name}", add=True
        )
    plugin.nodes[NODE] = nd
    return h, plugin


def _candidate(name: str, gpu: str) -> PodInfo:
    manifest = device_pod(name, {n.KOORD_GPU: gpu})
    manifest["spec"]["nodeName"] = NODE
    manifest["status"]["phase"] = "Running"
    return PodInfo.from_manifest(manifest)


def _reservation(requests: dict[str, int], policy: str = "Restricted") -> ReservationInfo:
    return ReservationInfo(
        name="pre-allocation-reservation",
        uid="uid-r",
        node_name="",
        phase="Pending",
        allocatable=requests,
        allocate_policy=policy,
    )


def _reserve_pod(requests: dict[str, str], *, required: bool = False) -> PodInfo:
    manifest: dict[str, Any] = device_pod("uid-r", requests)
    manifest["metadata"]["uid"] = "uid-r"
    manifest["metadata"]["annotations"] = {
        ANNOTATION_RESERVE_POD: "true",
        ANNOTATION_RESERVATION_NAME: "pre-allocation-reservation",
        ANNOTATION_IS_PRE_ALLOCATION: "true",
    }
    if required:
        manifest["metadata"]["labels"] = {LABEL_PRE_ALLOCATION_REQUIRED: "true"}
    return PodInfo.from_manifest(manifest)


def test_restore_reservation_pre_allocation() -> None:
    """``Test_Plugin_RestoreReservationPreAllocation``: both candidates' devices restored, in order, with
    the pre-allocating reservation recorded."""
    h, plugin = _plugin({"pre-allocatable-pod-1": {0: share(50)}, "pre-allocatable-pod-2": {1: share(100)}})
    pod1 = _candidate("pre-allocatable-pod-1", "50")
    pod2 = _candidate("pre-allocatable-pod-2", "100")
    r = _reservation({n.KOORD_GPU: 100})
    state = CycleState()
    assert plugin.pre_restore_reservation_pre_allocation(state, r).is_success
    assert plugin.restore_reservation_pre_allocation(state, r, [pod1, pod2], h.node_info(NODE)).is_success
    restored = restore_states_of(state).of(NODE)
    assert len(restored.matched) == 2
    assert restored.pre_allocation is r
    assert restored.pre_allocation.name == "pre-allocation-reservation"
    assert [a.pre_allocatable for a in restored.matched] == [pod1, pod2]
    assert all(a.reservation is r for a in restored.matched)
    assert restored.matched[0].allocatable == {GPU: {0: share(50)}} == restored.matched[0].remained
    assert restored.matched[1].allocatable == {GPU: {1: share(100)}}
    assert restored.matched_allocatable[GPU]
    # The node-level fallback never hands a candidate's devices back.
    assert not restored.fallback_allocatable


def test_nothing_is_restored_for_a_reservation_without_devices() -> None:
    h, plugin = _plugin({"p": {0: share(100)}})
    r = _reservation({"cpu": 1000})
    state = CycleState()
    assert plugin.pre_restore_reservation_pre_allocation(state, r).is_success
    assert restore_states_of(state).skip
    ni = h.node_info(NODE)
    assert plugin.restore_reservation_pre_allocation(state, r, [_candidate("p", "100")], ni).is_success
    assert not restore_states_of(state).nodes


def _cycle(
    h: SchedulerHarness, plugin: DeviceShare, reserve: PodInfo, r: ReservationInfo, pods: list[PodInfo]
) -> CycleState:
    state = CycleState()
    ni = h.node_info(NODE)
    _, status = plugin.pre_filter(state, reserve, [ni])
    assert status.is_success, status
    assert plugin.pre_restore_reservation_pre_allocation(state, r).is_success
    assert plugin.restore_reservation_pre_allocation(state, r, pods, ni).is_success
    return state


def _minors(state: CycleState) -> list[int]:
    s = state.get(STATE_KEY)
    assert isinstance(s, PodDeviceState) and s.allocation_result
    return sorted(a.minor for a in s.allocation_result[GPU])


def test_reserve_takes_over_exactly_the_nominated_pods_gpu() -> None:
    h, plugin = _plugin({"a": {0: share(100)}, "b": {1: share(100)}})
    a, b = _candidate("a", "100"), _candidate("b", "100")
    r = _reservation({n.KOORD_GPU: 100})
    reserve = _reserve_pod({n.KOORD_GPU: "100"})
    state = _cycle(h, plugin, reserve, r, [a, b])
    assert plugin.filter(state, reserve, h.node_info(NODE)).is_success
    assert plugin.filter_nominate_reservation(state, b, r, NODE).is_success
    set_nominated_pre_allocation(state, NODE, [b])
    assert plugin.reserve(state, reserve, NODE).is_success
    assert _minors(state) == [1]
    plugin.unreserve(state, reserve, NODE)
    # Nobody nominated: the node has no free GPU, and the candidates' are not free.
    state = _cycle(h, plugin, reserve, r, [a, b])
    set_nominated_pre_allocation(state, NODE, [])
    status = plugin.reserve(state, reserve, NODE)
    assert status.code is Code.UNSCHEDULABLE, status


def test_a_candidate_whose_devices_the_reservation_cannot_all_take_is_refused() -> None:
    """The reservation asks one GPU, the candidate holds two: taking it over would leave a GPU of the
    pod outside the reservation (Koordinator's ``isDeviceAllocationsInclude``)."""
    h, plugin = _plugin({"big": {0: share(100), 1: share(100)}})
    big = _candidate("big", "200")
    r = _reservation({n.KOORD_GPU: 100})
    reserve = _reserve_pod({n.KOORD_GPU: "100"})
    state = _cycle(h, plugin, reserve, r, [big])
    status = plugin.filter_nominate_reservation(state, big, r, NODE)
    assert status.code is Code.UNSCHEDULABLE and "Insufficient GPU Devices" in status.message, status
    set_nominated_pre_allocation(state, NODE, [big])
    assert not plugin.reserve(state, reserve, NODE).is_success


def test_pre_allocation_required_allows_no_fallback_in_filter() -> None:
    """``utils_test.go``: ``pre-allocation-required`` makes the reserve pod's devices required from the
    candidates; the node's free GPU does not do."""
    h, plugin = _plugin({"big": {0: share(100), 1: share(50)}})
    big = _candidate("big", "150")
    r = _reservation({n.KOORD_GPU: 50})
    reserve = _reserve_pod({n.KOORD_GPU: "50"}, required=True)
    state = _cycle(h, plugin, reserve, r, [big])
    status = plugin.filter(state, reserve, h.node_info(NODE))
    assert status.code is Code.UNSCHEDULABLE and any(x.startswith("Reservation(s)") for x in status.reasons)
    optional = _reserve_pod({n.KOORD_GPU: "50"})
    state = _cycle(h, plugin, optional, r, [big])
    assert plugin.filter(state, optional, h.node_info(NODE)).is_success  # half of GPU 1 is free


@pytest.mark.parametrize(
    ("annotations", "labels", "want"),
    [
        pytest.param({}, {}, False, id="normal pod"),
        pytest.param({ANNOTATION_RESERVATION_AFFINITY: '{"name": "r"}'}, {}, True, id="reservation affinity"),
        pytest.param({}, {LABEL_PRE_ALLOCATION_REQUIRED: "true"}, True, id="pre-allocation label"),
        pytest.param(
            {ANNOTATION_RESERVATION_AFFINITY: '{"reservationSelector": {"k": "v"}}'},
            {LABEL_PRE_ALLOCATION_REQUIRED: "true"},
            True,
            id="both",
        ),
    ],
)
def test_is_reservation_required(annotations: dict[str, str], labels: dict[str, str], want: bool) -> None:
    """``utils_test.go`` (``preparePod``'s ``isReservationRequired``)."""
    manifest = device_pod("test-pod", {n.KOORD_GPU: "100"}, annotations=annotations)
    manifest["metadata"]["labels"] = labels
    assert _reservation_required(PodInfo.from_manifest(manifest)) is want
