"""What reservations hold in DeviceShare's terms, per node and cycle (Koordinator's ``reservation.go``).

A Reservation's reserve pod is allocated devices like any pod, and they stay counted on the node under the
reserve pod's key. For a pod that matches reservations, ``restore`` works out per reservation what it holds
(``allocatable``), what its owner pods already took of it (``allocated``, counted on its own minors only)
and what is left (``remained``); the plugin then hands those back to the pod as *preemptible* (free for this
pod only) when it allocates inside the reservation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import ReservationInfo
from koord_plugin_deviceshare.allocation import DeviceAllocation
from koord_plugin_deviceshare.nodedevice import (
    DeviceResources,
    NodeDevice,
    append_allocated,
    copy_resources,
    subtract_allocated,
)

__all__ = [
    "RESTORE_STATE_KEY",
    "NodeRestoreState",
    "RestoreStates",
    "ReusableAlloc",
    "includes_devices",
    "merge_pre_allocatable",
    "required_device_resources",
    "restore_node",
    "restore_pre_allocation",
    "restore_states_of",
]

RESTORE_STATE_KEY: Final = "DeviceShare/reservationRestoreState"
ByType = dict[str, DeviceResources]


@dataclass(frozen=True, slots=True)
class ReusableAlloc:
    """One reservation's devices on a node, or one pod's that a pre-allocating reservation may take over
    (Koordinator's ``reusableAlloc``)."""

    reservation: ReservationInfo
    """The matched reservation, or the pre-allocating one for a candidate pod."""
    allocatable: ByType
    allocated: ByType
    remained: ByType
    pre_allocatable: PodInfo | None = None
    """The candidate pod whose devices these are (pre-allocation only)."""


@dataclass(frozen=True, slots=True)
class NodeRestoreState:
    """Koordinator's ``nodeReservationRestoreStateData`` (with the merged sums)."""

    matched: tuple[ReusableAlloc, ...] = ()
    unmatched: tuple[ReusableAlloc, ...] = ()
    matched_allocatable: ByType = field(default_factory=dict)
    matched_allocated: ByType = field(default_factory=dict)
    unmatched_used: ByType = field(default_factory=dict)
    """What owner pods use inside the reservations the pod does not match (counted twice otherwise)."""
    pre_allocation: ReservationInfo | None = None
    """Set for a pre-allocating reserve pod: ``matched`` then holds its candidate pods' devices."""
    fallback_allocatable: ByType = field(default_factory=dict)
    """What the node-level fallback hands back: what owner pods use inside the matched reservations
    (counted twice on the node otherwise), as NodeNUMAResource's ``tryAllocateFromNode``. Upstream hands
    back every matched reservation's whole allocatable (its own TODO says this is not the intent): a pod
    not allocated inside a reservation would get devices the reservation still holds for its owners, and a
    pre-allocating reservation devices of pods it does not take over."""

    def find(self, uid: str) -> ReusableAlloc | None:
        """The matched reservation ``uid`` (never a pre-allocation candidate)."""
        return next((a for a in self.matched if a.pre_allocatable is None and a.reservation.uid == uid), None)

    def find_pre_allocatable(self, pod_uid: str) -> ReusableAlloc | None:
        return next(
            (a for a in self.matched if a.pre_allocatable is not None and a.pre_allocatable.uid == pod_uid),
            None,
        )


_EMPTY = NodeRestoreState()


@dataclass(slots=True)
class RestoreStates:
    """Per-cycle: ``skip`` when the pod asks for no device; node -> restore state."""

    skip: bool = True
    nodes: dict[str, NodeRestoreState] = field(default_factory=dict)

    def of(self, node: str) -> NodeRestoreState:
        return self.nodes.get(node, _EMPTY)


def restore_states_of(state: CycleState) -> RestoreStates:
    found = state.get(RESTORE_STATE_KEY)
    return found if isinstance(found, RestoreStates) else RestoreStates()


def reserve_pod_key(r: ReservationInfo) -> str:
    """The cache key of a reservation's reserve pod (namespace/name; the name is the reservation's uid)."""
    return r.reserve_pod.key if r.reserve_pod is not None else f"default/{r.uid}"


def _by_hints(minors: Mapping[str, Iterable[int]], *parts: Mapping[str, DeviceResources]) -> ByType:
    """``appendAllocatedByHints``: the sum of ``parts`` on the reservation's own minors only."""
    out: ByType = {}
    for part in parts:
        for device_type, resources in part.items():
            own = set(minors.get(device_type, ()))
            picked = {m: r for m, r in resources.items() if m in own}
            if picked:
                append_allocated(out, {device_type: picked})
    return out


def _reusable(nd: NodeDevice, r: ReservationInfo) -> ReusableAlloc | None:
    allocatable = nd.get_used(reserve_pod_key(r))
    if not allocatable:
        return None
    minors = {t: list(res) for t, res in allocatable.items()}
    allocated = _by_hints(minors, *(nd.get_used(key) for key in r.allocated_pods.values()))
    remained = subtract_allocated({t: copy_resources(res) for t, res in allocatable.items()}, allocated)
    return ReusableAlloc(r, {t: copy_resources(res) for t, res in allocatable.items()}, allocated, remained)


def restore_node(
    nd: NodeDevice, matched: Sequence[ReservationInfo], unmatched: Sequence[ReservationInfo]
) -> NodeRestoreState:
    """``RestoreReservation`` on one node."""
    found_matched = tuple(a for a in (_reusable(nd, r) for r in matched) if a is not None)
    found_unmatched = tuple(a for a in (_reusable(nd, r) for r in unmatched) if a is not None)
    used: ByType = {}
    for a in found_unmatched:
        held = subtract_allocated({t: copy_resources(res) for t, res in a.allocatable.items()}, a.remained)
        append_allocated(
            used,
            {t: {m: {k: max(0, v) for k, v in r.items()} for m, r in res.items()} for t, res in held.items()},
        )
    return _merged(found_matched, found_unmatched, used, None)


def _merged(
    matched: tuple[ReusableAlloc, ...],
    unmatched: tuple[ReusableAlloc, ...],
    unmatched_used: ByType,
    pre_allocation: ReservationInfo | None,
) -> NodeRestoreState:
    """``mergeReservationAllocations``."""
    return NodeRestoreState(
        matched=matched,
        unmatched=unmatched,
        matched_allocatable=append_allocated(None, *(a.allocatable for a in matched)),
        matched_allocated=append_allocated(None, *(a.allocated for a in matched)),
        unmatched_used=unmatched_used,
        pre_allocation=pre_allocation,
        fallback_allocatable=append_allocated(None, *(a.allocated for a in matched)),
    )


def restore_pre_allocation(
    nd: NodeDevice, current: NodeRestoreState, r: ReservationInfo, pre_allocatable: Sequence[PodInfo]
) -> NodeRestoreState:
    """``RestoreReservationPreAllocation`` on one node: every candidate's devices, all reusable by the
    pre-allocating reserve pod, after what ``current`` already holds."""
    found = []
    for p in pre_allocatable:
        held = nd.get_used(p.key)
        if not held:
            continue
        allocatable = {t: copy_resources(res) for t, res in held.items()}
        found.append(
            ReusableAlloc(
                r,
                allocatable,
                {},
                {t: copy_resources(res) for t, res in held.items()},
                pre_allocatable=p,
            )
        )
    if not found:
        return current
    return _merged((*current.matched, *found), current.unmatched, current.unmatched_used, r)


def merge_pre_allocatable(allocs: Sequence[ReusableAlloc]) -> ReusableAlloc:
    """Several candidate pods taken over together (``enableMultiple``) as one: all their devices."""
    if len(allocs) == 1:
        return allocs[0]
    allocatable = append_allocated(None, *(a.allocatable for a in allocs))
    return ReusableAlloc(
        allocs[0].reservation,
        allocatable,
        {},
        {t: copy_resources(res) for t, res in allocatable.items()},
        pre_allocatable=allocs[0].pre_allocatable,
    )


def includes_devices(result: Mapping[str, Sequence[DeviceAllocation]], required: ByType) -> bool:
    """``isDeviceAllocationsInclude``: ``result`` has every device (type, minor) of ``required``."""
    for device_type, devices in required.items():
        minors = {a.minor for a in result.get(device_type, ())}
        if not minors or not set(devices) <= minors:
            return False
    return True


def required_device_resources(alloc: ReusableAlloc) -> ByType:
    """``calcRequiredDeviceResources``: a Restricted reservation's pod gets only what it still has, on its
    own minors; when nothing is left, its minors are listed with nothing (so nothing fits)."""
    required = _by_hints({t: list(res) for t, res in alloc.allocatable.items()}, alloc.remained)
    if not required:
        for device_type, resources in alloc.allocatable.items():
            required[device_type] = {minor: {k: 0 for k in res} for minor, res in resources.items()}
    return required
