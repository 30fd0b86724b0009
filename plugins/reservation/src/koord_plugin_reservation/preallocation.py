"""Pre-allocation: placing a Reservation by taking over what running pods already hold.

A reservation with ``spec.preAllocation: true`` (its reserve pod carries ``is-pre-allocation``) may go to a
node whose free capacity is too small, as long as running *pre-allocatable* pods there hold enough: the
chosen pods become owners of the reservation (PreBind writes ``reservation-allocated`` on them), so the
reservation starts Available with them allocated and keeps their resources when they finish.

Candidates (Koordinator's ``listPreAllocatableCandidates`` and ``checkPreAllocatableMatched``):

* ``Default`` mode: bound, running pods the reservation's owners match;
* ``Cluster`` mode (``preAllocationConfig.enableClusterMode``): bound, running pods labelled
  ``pod.koordinator.sh/is-pre-allocatable: "true"``, ordered by
  ``pod.koordinator.sh/pre-allocatable-priority`` (higher first, then uid);

in both modes only pods that consume no reservation yet (no ``reservation-allocated``, nothing assumed), and
that accept the reservation the way an owner would (its ``reservation-affinity`` name or selector, its
tolerations of the reservation's taints, its exact-match spec).

A pre-allocating reservation must use the ``Restricted`` policy. The reservation fits a node with a
candidate ``p`` when ``p`` fits inside the reservation (``fitsReservation``) and the reservation fits the
node once ``p``'s requests are taken off it (``fitsNode``); with ``enableMultiple`` candidates are added in
order (skipping those that overflow the reservation) until the node fits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.frameworkext import ANNOTATION_RESERVATION_ALLOCATED, ReservationInfo
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Code, Status
from koord_plugin_reservation.fit import fits_node, fits_reservation
from koord_plugin_reservation.model import (
    ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY,
    LABEL_POD_PRE_ALLOCATABLE,
    PRE_ALLOCATION_MODE_CLUSTER,
    ParsedReservation,
    ReservationAffinity,
    ReservationError,
    exact_match,
    exact_match_spec,
    is_reservation_ignored,
    parse_reservation_affinity,
)

log = logging.getLogger(__name__)

ERR_REASON_PRE_ALLOCATION_REQUIRED = "node(s) no pod match reservation with pre allocation required"
ERR_REASON_PRE_ALLOCATION_UNSUPPORTED = (
    "node(s) reservation pre allocation is unsupported with current attributes"
)
ERR_REASON_NO_PODS_MEET_PRE_ALLOCATION = "node(s) no pod(s) to meet the pre-allocation requirements"
ERR_REASON_CLUSTER_MODE_DISABLED = "reservation requires cluster mode pre-allocation which is disabled"


@dataclass(slots=True)
class PreAllocation:
    """One pre-allocating reserve pod's cycle (the pre-allocation part of Koordinator's ``stateData``)."""

    info: ReservationInfo
    """The reservation being placed (Pending: allocatable is the template's requests)."""
    multiple: bool
    required: bool
    """The reservation carries ``pre-allocation-required: "true"``: only nodes with a candidate that makes it
    fit will do."""
    candidates: dict[str, list[PodInfo]] = field(default_factory=dict)
    """Node -> matched candidates, in the order they are tried."""
    selected: dict[str, list[PodInfo]] = field(default_factory=dict)
    """Node -> what Filter found usable (all candidates in single mode, the accumulated set in multiple)."""
    pre_allocated: list[PodInfo] = field(default_factory=list)
    """The pods Reserve assumed into the reservation."""
    patched: list[PodInfo] = field(default_factory=list)
    """The pods PreBind wrote ``reservation-allocated`` on (Unreserve takes it off again)."""
    nomination_errors: dict[str, Status] = field(default_factory=dict)
    """Node -> why nominating there failed (the nomination itself is recorded empty in the cycle state)."""


def priority_of(pod: PodInfo, annotation_key: str) -> int:
    """The candidate's priority annotation; a malformed one counts as 0, as in Koordinator, with a warning
    naming the pod and the annotation."""
    raw = pod.annotations.get(annotation_key)
    if raw is None:
        return 0
    try:
        return int(raw)
    except ValueError:
        log.warning(
            "pod %s: annotation %s=%r is not an integer; priority 0 is used", pod.key, annotation_key, raw
        )
        return 0


def is_free_candidate(pod: PodInfo, taken: Collection[str]) -> bool:
    """Bound, running, no reserve pod, consuming no reservation (bound or assumed)."""
    return (
        bool(pod.node_name)
        and not pod.is_terminal
        and not pod.is_terminating
        and not pod.annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
        and pod.annotations.get("scheduling.koordinator.sh/reserve-pod") != "true"
        and pod.uid not in taken
    )


def list_candidates(
    nodes: Iterable[NodeInfo],
    r: ParsedReservation,
    taken: Collection[str],
    *,
    label_key: str = LABEL_POD_PRE_ALLOCATABLE,
    priority_key: str = ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY,
) -> dict[str, list[PodInfo]]:
    """Node -> the pods the reservation could pre-allocate there, before the per-pod checks."""
    cluster = r.pre_allocation_mode == PRE_ALLOCATION_MODE_CLUSTER
    out: dict[str, list[PodInfo]] = {}
    for node in nodes:
        found = []
        for pod in node.pods.values():
            if not is_free_candidate(pod, taken):
                continue
            if cluster:
                if pod.labels.get(label_key) != "true":
                    continue
            elif not any(m.matches(pod) for m in r.owners):
                continue
            found.append(pod)
        if not found:
            continue
        if cluster:
            found.sort(key=lambda p: (-priority_of(p, priority_key), p.uid))
        else:
            found.sort(key=lambda p: p.key)
        out[node.name] = found
    return out


def candidate_accepts(pod: PodInfo, r: ParsedReservation, node_labels: Mapping[str, str]) -> bool:
    """``checkPreAllocatableMatched`` past the owner check: the candidate accepts this reservation as an
    owner would (affinity by name or selector, tolerations, exact match). A candidate with a malformed
    annotation is skipped with a warning naming it."""
    if is_reservation_ignored(pod):
        return False
    try:
        affinity = parse_reservation_affinity(pod)
        exact = exact_match_spec(pod)
    except ReservationError as exc:
        log.warning("pre-allocatable candidate skipped for reservation %s: %s", r.name, exc)
        return False
    if affinity is not None and affinity.name:
        return affinity.name == r.name and exact_match(pod.requests, r.allocatable, exact)
    if r.taints and (affinity or ReservationAffinity()).untolerated_taint(list(r.taints)) is not None:
        return False
    if affinity is not None and not affinity.matches(r.name, {**node_labels, **r.labels}):
        return False
    return exact_match(pod.requests, r.allocatable, exact)


def _minus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def _plus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


FilterHook = Callable[[PodInfo], Status]
"""The ``ReservationFilterPlugin`` hooks for one candidate against the reservation on this node."""


def node_usage(node: NodeInfo, restored: Sequence[PodInfo]) -> tuple[dict[str, int], int]:
    """The node's requested resources with ``restored`` (the candidates the cycle's view took off it)
    counted, and its pod count without them (Koordinator counts the pods of the restored NodeInfo), whether
    ``node`` is the snapshot's NodeInfo or the cycle's restored one."""
    requested = dict(node.requested)
    back = 0
    for p in restored:
        if p.uid not in node.pods:
            requested = _plus(requested, p.requests)
        else:
            back += 1
    return requested, len(node.pods) - back


def filter_with_pre_allocatable(
    *,
    reservation_requests: Mapping[str, int],
    info: ReservationInfo,
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
    pods: int,
    candidates: Sequence[PodInfo],
    required: bool,
    multiple: bool,
    prefer_free: bool,
    hook: FilterHook,
    preemptible: Mapping[str, int] | None = None,
    ignored: Collection[str] = (),
    ignored_groups: Collection[str] = (),
) -> tuple[list[PodInfo], Status]:
    """``filterWithPreAllocatablePods`` / ``filterWithMultiplePreAllocatablePods``: the candidates that
    let the reservation onto a node and the verdict.

    ``requested`` counts every pod on the node, candidates included; ``pods`` is the pod count the pods
    check uses. Success with no pods means the reservation fits on free capacity (it is then placed
    without pre-allocating).
    """
    unallocated: list[str] | None = None

    def on_free_capacity() -> list[str]:
        nonlocal unallocated
        if unallocated is None:
            unallocated = fits_node(
                reservation_requests,
                allocatable,
                requested,
                None,
                None,
                0,
                pods,
                preemptible,
                ignored,
                ignored_groups,
            )
        return unallocated

    if not required and prefer_free and not on_free_capacity():
        return [], Status()

    by_node: list[str] = []
    seen_by_node: set[str] = set()
    by_reservation: list[str] = []
    accumulated: dict[str, int] = {}
    chosen: list[PodInfo] = []
    names = set(info.resource_names)
    last_short: list[str] = []
    for p in candidates:
        if not names.intersection(p.requests):
            continue
        trial = _plus(accumulated, p.requests) if multiple else dict(p.requests)
        short = fits_node(
            reservation_requests,
            allocatable,
            _minus(requested, trial),
            None,
            None,
            len(chosen) + 1 if multiple else 1,
            pods,
            preemptible,
            ignored,
            ignored_groups,
        )
        reasons = fits_reservation(trial, info, None, False, ignored, ignored_groups)
        if multiple:
            # Koordinator reports the node shortage of the last candidate tried.
            last_short = short
            if reasons:
                by_reservation += reasons
                continue
        else:
            for reason in short:
                if reason not in seen_by_node:
                    seen_by_node.add(reason)
                    by_node.append(reason)
            by_reservation += reasons
        s = hook(p)
        if not s.is_success:
            by_reservation += list(s.reasons)
            continue
        if multiple:
            accumulated = trial
            chosen.append(p)
            if not short:
                return chosen, Status()
        elif not short and not reasons:
            return list(candidates), Status()
    if multiple:
        by_node = list(last_short)
    node_reasons = [f"Insufficient {r} by node" for r in (sorted(by_node) if not multiple else by_node)]
    if required:
        failure = node_reasons + by_reservation or [ERR_REASON_NO_PODS_MEET_PRE_ALLOCATION]
        return [], Status(Code.UNSCHEDULABLE, tuple(failure))
    if not node_reasons and (candidates or unallocated is not None):
        # Not even with a candidate: fits it on free capacity, or Reserve would fail where Filter passed.
        node_reasons = [f"Insufficient {r} by node" for r in on_free_capacity()]
    if node_reasons:
        return [], Status(Code.UNSCHEDULABLE, tuple(node_reasons))
    return [], Status()


__all__ = [
    "ERR_REASON_CLUSTER_MODE_DISABLED",
    "ERR_REASON_NO_PODS_MEET_PRE_ALLOCATION",
    "ERR_REASON_PRE_ALLOCATION_REQUIRED",
    "ERR_REASON_PRE_ALLOCATION_UNSUPPORTED",
    "PreAllocation",
    "candidate_accepts",
    "filter_with_pre_allocatable",
    "is_free_candidate",
    "list_candidates",
    "node_usage",
    "priority_of",
]
