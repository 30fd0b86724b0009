"""The arithmetic of the Reservation plugin: ``fitsNode``, ``fitsReservation``, ``ScoreReservation``.

Pure functions over canonical integer resource maps (cpu milli-cores, the rest ``Value()``), so the test
vectors exercise them directly and the plugin's Filter and Score call the same code.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from koord_framework.scheduler.frameworkext import MAX_RESERVATION_SCORE, ReservationInfo

REASON_PREFIX = "Reservation(s) "
"""Koordinator's ``reservationutil.ErrReasonPrefix``: reasons about a reservation rather than the node."""
NATIVE = ("cpu", "memory", "ephemeral-storage")
_NOT_SCALAR = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


def reservation_reason(message: str) -> str:
    return REASON_PREFIX + message


def is_reservation_reason(reason: str) -> bool:
    return reason.startswith(REASON_PREFIX)


def is_scalar(name: str) -> bool:
    """Whether kube-scheduler's ``Resource`` keeps ``name`` among its scalar resources (extended,
    ``kubernetes.io/``-prefixed, hugepages, attachable volumes)."""
    return name not in _NOT_SCALAR and ("/" in name or name.startswith("hugepages-"))


def is_ignored(name: str, ignored: Collection[str], groups: Collection[str]) -> bool:
    """``isResourceIgnored``: by exact name, or by the vendor prefix before the first ``/``."""
    if name in ignored:
        return True
    if groups:
        prefix, sep, _ = name.partition("/")
        if sep and prefix and prefix in groups:
            return True
    return False


def fits_node(
    pod_request: Mapping[str, int],
    node_allocatable: Mapping[str, int],
    all_pods_requested: Mapping[str, int] | None,
    all_r_allocated: Mapping[str, int] | None,
    r_remained: Mapping[str, int] | None,
    matched_or_ignored: int,
    allocated_pods: int,
    preemptible: Mapping[str, int] | None,
    ignored_resources: Collection[str] = (),
    ignored_groups: Collection[str] = (),
) -> list[str]:
    """The resources the node lacks for the pod once the matched reservations are given back.

    A resource r is insufficient iff ``req_r > alloc_r - (requested_r - remained_r - rAllocated_r -
    preemptible_r)``; pods: ``allocatedPods - matchedOrIgnored + 1 > allowedPods``. cpu, memory and
    ephemeral-storage are always checked; scalar resources may be ignored by name or vendor prefix. Order:
    pods, cpu, memory, ephemeral-storage, then scalar resources by name.
    """
    out: list[str] = []
    if allocated_pods - matched_or_ignored + 1 > node_allocatable.get("pods", 0):
        out.append("pods")
    scalars = [n for n in pod_request if n not in _NOT_SCALAR and is_scalar(n)]
    if scalars:
        scalars.sort()
    elif not (pod_request.get("cpu") or pod_request.get("memory") or pod_request.get("ephemeral-storage")):
        return out  # nothing asked for but a pod slot
    requested = all_pods_requested or {}
    allocated = all_r_allocated or {}
    remained = r_remained or {}
    free = preemptible or {}

    def short(name: str) -> bool:
        used = requested.get(name, 0) - remained.get(name, 0) - allocated.get(name, 0) - free.get(name, 0)
        return pod_request.get(name, 0) > node_allocatable.get(name, 0) - used

    for name in NATIVE:
        if short(name):
            out.append(name)
    for name in scalars:
        if is_ignored(name, ignored_resources, ignored_groups):
            continue
        if short(name):
            out.append(name)
    return out


def fits_reservation(
    pod_request: Mapping[str, int],
    reservation: ReservationInfo,
    preemptible_in_rr: Mapping[str, int] | None = None,
    detailed: bool = False,
    ignored_resources: Collection[str] = (),
    ignored_groups: Collection[str] = (),
) -> list[str]:
    """Reasons the reservation itself cannot hold the pod (``Restricted`` policy), each prefixed
    ``Reservation(s) ``; ``detailed`` adds the numbers (when the pod names the reservation)."""
    preemptible = preemptible_in_rr or {}
    reasons: list[str] = []
    allocatable, allocated, reserved = reservation.allocatable, reservation.allocated, reservation.reserved
    if "pods" in allocatable:
        pods = len(reservation.allocated_pods) - preemptible.get("pods", 0)
        if pods + 1 > allocatable["pods"]:
            if detailed:
                reasons.append(
                    reservation_reason(
                        f"Too many pods, requested: 1, used: {pods}, capacity: {allocatable['pods']}"
                    )
                )
            else:
                reasons.append(reservation_reason("Too many pods"))
    for name in reservation.resource_names:
        if is_ignored(name, ignored_resources, ignored_groups):
            continue
        requested = pod_request.get(name, 0)
        if requested == 0:
            continue
        capacity = allocatable.get(name, 0)
        used = allocated.get(name, 0)
        if name in allocated and preemptible:
            used -= preemptible.get(name, 0)
        used = max(used, 0)
        capacity -= reserved.get(name, 0)
        if requested <= capacity - used:
            continue
        if detailed:
            reasons.append(
                reservation_reason(
                    f"Insufficient {name}, requested: {requested}, used: {used}, capacity: {capacity}"
                )
            )
        else:
            reasons.append(reservation_reason(f"Insufficient {name}"))
    return reasons


def score_reservation(
    pod_request: Mapping[str, int],
    reservation: ReservationInfo,
    preemptible_in_rr: Mapping[str, int] | None = None,
) -> int:
    """``ScoreReservation``: most-allocated over the reservation's non-zero resources, counting only those
    the pod would still fit into (a reservation the pod fills scores higher)."""
    allocated: Mapping[str, int] = reservation.allocated
    if preemptible_in_rr:
        names = set(reservation.resource_names)
        allocated = {k: max(v - preemptible_in_rr.get(k, 0), 0) for k, v in allocated.items() if k in names}
    resources = {k: v for k, v in reservation.allocatable.items() if v != 0}
    if not resources:
        return 0
    total = 0
    for name, capacity in resources.items():
        req = pod_request.get(name, 0) + allocated.get(name, 0)
        if req <= capacity:
            total += MAX_RESERVATION_SCORE * req // capacity
    return total // len(resources)


__all__ = [
    "REASON_PREFIX",
    "fits_node",
    "fits_reservation",
    "is_ignored",
    "is_reservation_reason",
    "is_scalar",
    "reservation_reason",
    "score_reservation",
]
