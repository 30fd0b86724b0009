"""Koordinator's framework extensions: transformers, reservation hooks, nomination, the batched PreBind patch.

Koordinator runs kube-scheduler's framework through a "framework extender"
(``pkg/scheduler/frameworkext``). This module is its public face for koord plugins: the ABCs a plugin
subclasses to take part, the value types passed to them, and the helpers that keep per-cycle state where
every plugin finds it. A plugin that subclasses none of these ABCs is scheduled exactly as before; the
runner (``koord_framework.scheduler.framework``) only calls a hook on the plugins that implement it.

Where the extensions run in one scheduling cycle::

    BeforePreFilter (transformers, profile PreFilter order)
        → the cycle's node view: each transformer's ``NodeRestore`` takes pods off nodes for this pod only
    → PreFilter → AfterPreFilter (transformers)
    → Filter / Score over the transformed nodes (per-node and vectorised forms see the same numbers)
    → Reserve (resource plugins read ``nominated_reservation``) → Permit
    → PreBind: a normal pod's changes go into ``state.pod_mutation``; for a *reserve pod* only the plugins
      that implement ``ReservationPreBindPlugin`` run, and the mutation is patched onto the Reservation
    → one merge patch of everything PreBind wrote, then Bind.

Reservations. A ``Reservation`` (``scheduling.koordinator.sh/v1alpha1``) is scheduled as a *reserve pod*:
a pod built from its template whose uid is the reservation's uid (``is_reserve_pod``). Once Available, the
reserve pod stays counted on its node, holding what the reservation still has free; owner pods that match
the reservation get that capacity back for their own cycle (the Reservation plugin's BeforePreFilter takes
the reserve pods of matched reservations off the node through a ``NodeRestore``). Resource plugins with
finer-grained state (CPU sets, devices, quota) take part through the reservation hooks:

* ``ReservationRestorePlugin.restore_reservation``: per node, give back what matched reservations hold
  in the plugin's own state (the CPUs of a matched reservation become usable by this pod only);
* ``ReservationPreAllocationRestorePlugin``: for a *pre-allocating* reserve pod, per node, give back what
  the candidate pods it may take over hold (their CPUs, devices), so the reservation gets exactly those;
* ``ReservationFilterPlugin``: may veto a reservation for a pod (Filter) or for nomination (PreScore/Reserve);
* ``ReservationScorePlugin``: rank reservations on a node (0..100) when several match;
* ``ReservationPreBindPlugin``: write the reservation's allocation (annotations) in PreBind of a reserve pod.

The nominated reservation of a pod on a node (the one it will consume) is recorded in the cycle state by
the nominator (the Reservation plugin) and read by every plugin's Reserve through
``nominated_reservation(state, node_name)``.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from koord_framework.api.objects import PodInfo
from koord_framework.plugin import ExtensionPoint
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import Handle, PreFilterResult
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Status

# --- names Koordinator uses (apis/extension, pkg/util/reservation) -------------------------------------
RESERVATION_GROUP = "scheduling.koordinator.sh"
RESERVATION_API_VERSION = "scheduling.koordinator.sh/v1alpha1"
ANNOTATION_RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"
"""On a reserve pod: ``"true"``."""
ANNOTATION_RESERVATION_NAME = "scheduling.koordinator.sh/reservation-name"
ANNOTATION_RESERVATION_NODE = "scheduling.koordinator.sh/reservation-node"
"""On a reserve pod: the node the reservation's template named (the only node it may go to)."""
ANNOTATION_IS_PRE_ALLOCATION = "scheduling.koordinator.sh/is-pre-allocation"
ANNOTATION_RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
"""Written on a pod that consumes a reservation: ``{"name": ..., "uid": ...}``."""
ANNOTATION_RESERVATION_AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
LABEL_PRE_ALLOCATION_REQUIRED = "scheduling.koordinator.sh/pre-allocation-required"
"""On a Reservation (and so its reserve pod): ``"true"`` when it may only be placed by pre-allocating."""
LABEL_RESERVATION_IGNORED = "scheduling.koordinator.sh/reservation-ignored"
LABEL_RESERVATION_ORDER = "scheduling.koordinator.sh/reservation-order"

MAX_RESERVATION_SCORE = 100
MIN_RESERVATION_SCORE = 0


def is_reserve_pod(pod: PodInfo) -> bool:
    """Whether ``pod`` stands for a Reservation (Koordinator's ``reservationutil.IsReservePod``)."""
    return pod.annotations.get(ANNOTATION_RESERVE_POD) == "true"


def is_pre_allocation_reserve_pod(pod: PodInfo) -> bool:
    """Whether ``pod`` stands for a Reservation with ``spec.preAllocation`` (Koordinator's
    ``reservationutil.IsReservePodPreAllocation``)."""
    return is_reserve_pod(pod) and pod.annotations.get(ANNOTATION_IS_PRE_ALLOCATION) == "true"


def is_pre_allocation_required(pod: PodInfo) -> bool:
    """The reserve pod's reservation may only be placed by pre-allocating (``IsPreAllocationRequired``)."""
    return pod.labels.get(LABEL_PRE_ALLOCATION_REQUIRED) == "true"


def reservation_name_of(pod: PodInfo) -> str:
    """The Reservation a reserve pod stands for ("" for a normal pod)."""
    return pod.annotations.get(ANNOTATION_RESERVATION_NAME, "") if is_reserve_pod(pod) else ""


def allocated_reservation_of(pod: PodInfo) -> tuple[str, str] | None:
    """``(name, uid)`` of the reservation a pod consumes (its ``reservation-allocated`` annotation), or None.

    A malformed annotation raises ``ValueError`` naming the pod and the annotation.
    """
    raw = pod.annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"pod {pod.key}: annotation {ANNOTATION_RESERVATION_ALLOCATED}: {exc}") from exc
    if not isinstance(value, dict) or not value.get("uid"):
        raise ValueError(f"pod {pod.key}: annotation {ANNOTATION_RESERVATION_ALLOCATED}: want {{name, uid}}")
    return str(value.get("name", "")), str(value["uid"])


# --- value types --------------------------------------------------------------------------------------
@dataclass(slots=True)
class ReservationInfo:
    """A reservation as the hooks see it (Koordinator's ``frameworkext.ReservationInfo``), a snapshot for
    one cycle: plugins read it and never change it.

    Resources are canonical integers (cpu milli-cores, else ``Value()``), as everywhere in the scheduler.
    """

    name: str
    uid: str
    node_name: str
    """Where it is reserved ("" while Pending)."""
    phase: str
    allocatable: Mapping[str, int]
    """``status.allocatable`` once Available, else the template's pod requests."""
    allocated: Mapping[str, int] = field(default_factory=dict)
    """Sum of the requests of the owner pods that consume it."""
    reserved: Mapping[str, int] = field(default_factory=dict)
    """Part of ``allocatable`` the node's own reservation already holds (node-reservation annotation)."""
    resource_names: tuple[str, ...] = ()
    """The sorted names of ``allocatable`` (what the reservation reserves)."""
    allocated_pods: Mapping[str, str] = field(default_factory=dict)
    """Owner pods consuming it: uid -> ``namespace/name``."""
    allocate_once: bool = True
    allocate_policy: str = ""
    """``""`` (Default), ``Aligned`` or ``Restricted``."""
    unschedulable: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    reserve_pod: PodInfo | None = None
    """The reserve pod counted on ``node_name`` (None while Pending)."""

    def available(self) -> dict[str, int]:
        """``allocatable - reserved - allocated`` per reserved resource, never below zero."""
        return {
            r: max(0, v - self.reserved.get(r, 0) - self.allocated.get(r, 0))
            for r, v in self.allocatable.items()
        }

    @property
    def order(self) -> int:
        """The ``reservation-order`` label as a positive int, 0 when absent or invalid (lowest wins)."""
        raw = self.labels.get(LABEL_RESERVATION_ORDER, "")
        try:
            value = int(raw)
        except ValueError:
            return 0
        return value


@dataclass(slots=True)
class NodeRestore:
    """What a BeforePreFilter transformer gives back on nodes for the current pod only.

    ``remove_pods``: node name -> pods to take off that node's ``NodeInfo`` (and its table row) for this
    cycle. The Reservation plugin lists the reserve pods of the reservations the pod matches, so that their
    remaining capacity counts as free for this pod and for nobody else. The cluster's cache is not touched.
    """

    remove_pods: dict[str, list[PodInfo]] = field(default_factory=dict)

    def add(self, node_name: str, pod: PodInfo) -> None:
        self.remove_pods.setdefault(node_name, []).append(pod)


# --- extension ABCs -------------------------------------------------------------------------------------
class PreFilterTransformer(ExtensionPoint):
    """Runs around PreFilter (Koordinator's ``PreFilterTransformer``), on every transformer of the profile's
    PreFilter list, in that order.

    ``before_pre_filter`` may return a ``NodeRestore`` (or None) and a status: a rejection fails the cycle
    like a PreFilter rejection, an error names the plugin. It must not change the pod record; per-cycle data
    goes into ``state``. The framework applies the union of all restores to a copy of the affected nodes
    before PreFilter, so PreFilter, Filter and Score (per-node and vectorised) see the restored nodes.

    ``after_pre_filter`` gets the merged PreFilter result; it may correct plugin state (a rejection fails
    the cycle).
    """

    extension_point: ClassVar[str] = ""

    @abc.abstractmethod
    def before_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[NodeRestore | None, Status]: ...

    def after_pre_filter(self, state: CycleState, pod: PodInfo, result: PreFilterResult | None) -> Status:
        return Status()


class ReservationRestorePlugin(ExtensionPoint):
    """Gives back, in the plugin's own per-node state, what reservations hold (CPUs, devices, ...).

    Called by the reservation transformer once per cycle (``pre_restore_reservation``) and then per node
    with reservations (``restore_reservation``): ``matched`` are the reservations the pod may consume on
    that node, ``unmatched`` the others that have owners allocated. Whatever the plugin keeps goes into
    ``state`` under its own key; it must not change ``node``.
    """

    extension_point: ClassVar[str] = ""

    def pre_restore_reservation(self, state: CycleState, pod: PodInfo) -> Status:
        return Status()

    @abc.abstractmethod
    def restore_reservation(
        self,
        state: CycleState,
        pod: PodInfo,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node: NodeInfo,
    ) -> Status: ...


class ReservationPreAllocationRestorePlugin(ExtensionPoint):
    """Gives back, in the plugin's own per-node state, what the pods a pre-allocating reservation may take
    over hold (Koordinator's ``ReservationPreAllocationRestorePlugin``): their CPUs, devices, ...

    Called by the reservation transformer for a pre-allocating reserve pod only: once per cycle
    (``pre_restore_reservation_pre_allocation``), then per node with candidates
    (``restore_reservation_pre_allocation``; ``pre_allocatable`` are the candidates on ``node``, in the
    order they are tried). The plugin keeps what it found in ``state`` under its own key and, in Reserve,
    allocates for the reserve pod from the candidates nominated on the chosen node
    (``nominated_pre_allocation``), so that the reservation gets what they hold and nothing else of theirs.
    It must not change ``node``.
    """

    extension_point: ClassVar[str] = ""

    def pre_restore_reservation_pre_allocation(
        self, state: CycleState, reservation: ReservationInfo
    ) -> Status:
        return Status()

    @abc.abstractmethod
    def restore_reservation_pre_allocation(
        self,
        state: CycleState,
        reservation: ReservationInfo,
        pre_allocatable: Sequence[PodInfo],
        node: NodeInfo,
    ) -> Status: ...


class ReservationFilterPlugin(ExtensionPoint):
    """May veto a matched reservation for the pod.

    ``filter_reservation`` runs in Filter for each matched reservation that fits by resources: non-success
    makes that reservation unusable on this node (its reasons join the node's failure reasons).
    ``filter_nominate_reservation`` runs when a reservation is nominated (PreScore, or Reserve when PreScore
    did not nominate): non-success removes the reservation from the candidates.
    """

    extension_point: ClassVar[str] = ""

    @abc.abstractmethod
    def filter_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node: NodeInfo
    ) -> Status: ...

    def filter_nominate_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> Status:
        return Status()


class ReservationScorePlugin(ExtensionPoint):
    """Ranks the reservations a pod could consume on one node, in [0, 100]; the nominator sums the scores
    of every such plugin (weight 1) and nominates the highest."""

    extension_point: ClassVar[str] = ""

    @abc.abstractmethod
    def score_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> tuple[int, Status]: ...

    def normalize_reservation_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> Status:
        """Koordinator's ``ReservationScoreExtensions``: rescale this plugin's scores of the candidates (in
        place, same order) before they are range-checked and summed. The default leaves them as they are."""
        return Status()


class ReservationPreBindPlugin(ExtensionPoint):
    """PreBind of a reserve pod: write what the plugin allocated to the reservation into
    ``state.pod_mutation`` (annotations); the framework patches the Reservation once with all of it.

    For reserve pods this replaces ``pre_bind``: PreBind plugins that do not implement it are skipped.
    """

    extension_point: ClassVar[str] = ""

    @abc.abstractmethod
    def pre_bind_reservation(
        self, state: CycleState, reservation: Mapping[str, Any], node_name: str
    ) -> Status: ...


class CycleExplainer(abc.ABC):
    """Lines for ``koord simulate --explain`` about one pod's cycle (the reservation it was nominated to,
    why other reservations were rejected). Called only when explaining, after Filter and Score, with the
    chosen node (None when the pod fit nowhere). Must not change any state."""

    @abc.abstractmethod
    def explain_cycle(self, state: CycleState, pod: PodInfo, node_name: str | None) -> list[str]: ...


class ReservationNominator(abc.ABC):
    """Picks the reservation a pod consumes on a node (the Reservation plugin implements it)."""

    @abc.abstractmethod
    def nominate_reservation(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[ReservationInfo | None, Status]: ...


# --- the extended handle --------------------------------------------------------------------------------
class ReservationExtensions(abc.ABC):
    """The runners of the reservation hooks over the profile's plugins (``ExtendedHandle``)."""

    @property
    @abc.abstractmethod
    def has_restore_plugins(self) -> bool:
        """Whether any plugin of the profile implements ``ReservationRestorePlugin`` (callers may skip
        gathering the arguments otherwise)."""

    @abc.abstractmethod
    def run_pre_restore_reservation(self, state: CycleState, pod: PodInfo) -> Status: ...

    @abc.abstractmethod
    def run_restore_reservation(
        self,
        state: CycleState,
        pod: PodInfo,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node: NodeInfo,
    ) -> Status: ...

    @abc.abstractmethod
    def run_pre_restore_reservation_pre_allocation(
        self, state: CycleState, reservation: ReservationInfo
    ) -> Status:
        """Every ``ReservationPreAllocationRestorePlugin`` in profile order; the first failure wins."""

    @abc.abstractmethod
    def run_restore_reservation_pre_allocation(
        self,
        state: CycleState,
        reservation: ReservationInfo,
        pre_allocatable: Sequence[PodInfo],
        node: NodeInfo,
    ) -> Status: ...

    @abc.abstractmethod
    def run_filter_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node: NodeInfo
    ) -> Status:
        """Every ``ReservationFilterPlugin`` in profile order; the first failure wins (named)."""

    @abc.abstractmethod
    def run_filter_nominate_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> Status: ...

    @abc.abstractmethod
    def run_score_reservation(
        self, state: CycleState, pod: PodInfo, reservations: Sequence[ReservationInfo], node_name: str
    ) -> tuple[list[int], Status]:
        """Per reservation, the sum of every ``ReservationScorePlugin``'s score."""


class ReservePodQueue(abc.ABC):
    """How the reservation plugin puts reserve pods where pods normally come from: the scheduling queue
    (Pending reservations) and the scheduler cache (Available ones)."""

    @abc.abstractmethod
    def enqueue_reserve_pod(self, pod: PodInfo) -> None:
        """Queue (or update) a Pending reservation's reserve pod for scheduling."""

    @abc.abstractmethod
    def dequeue_reserve_pod(self, uid: str) -> None: ...

    @abc.abstractmethod
    def count_reserve_pod(self, pod: PodInfo) -> None:
        """Count (or re-count, e.g. with new requests) a reserve pod on ``pod.node_name``."""

    @abc.abstractmethod
    def uncount_reserve_pod(self, pod: PodInfo) -> None: ...


class ExtendedHandle(Handle):
    """The handle of a framework that runs Koordinator's extensions (the scheduler's handle is one).

    A plugin checks ``isinstance(handle, ExtendedHandle)``; test harnesses without the extensions give a
    plain ``Handle`` and a reservation-aware plugin then works without reservations.
    """

    @property
    @abc.abstractmethod
    def reservation_extensions(self) -> ReservationExtensions: ...

    @property
    @abc.abstractmethod
    def reserve_pods(self) -> ReservePodQueue: ...


# --- per-cycle state every plugin reads -----------------------------------------------------------------
_NOMINATED_KEY = "koord.frameworkext/nominated-reservations"


def set_nominated_reservation(state: CycleState, node_name: str, reservation: ReservationInfo | None) -> None:
    """Record the reservation the pod will consume on ``node_name`` (None: it consumes none there)."""
    table: dict[str, ReservationInfo | None] | None = state.get(_NOMINATED_KEY)
    if table is None:
        table = {}
        state.write(_NOMINATED_KEY, table)
    table[node_name] = reservation


_NOMINATOR_KEY = "koord.frameworkext/reservation-nominator"


@dataclass(slots=True)
class _LazyNominator:
    nominate: Callable[[str], ReservationInfo | None]
    busy: bool = False


def set_reservation_nominator(state: CycleState, nominate: Callable[[str], ReservationInfo | None]) -> None:
    """Let ``nominated_reservation`` ask ``nominate(node_name)`` about a node nobody nominated on yet.

    Koordinator nominates right after the node is chosen, before any Reserve (``ReservationNominate``,
    issue #2753): PreScore is skipped when a single node is feasible, and resource plugins that run their
    Reserve before the nominator's would otherwise not see the reservation the pod consumes. ``nominate``
    records what it chose with ``set_nominated_reservation``.
    """
    state.write(_NOMINATOR_KEY, _LazyNominator(nominate))


def nominated_reservation(state: CycleState, node_name: str) -> ReservationInfo | None:
    """The reservation the pod consumes on ``node_name`` (set by the nominator in PreScore or Reserve, or
    worked out now by the nominator registered with ``set_reservation_nominator``)."""
    table: dict[str, ReservationInfo | None] | None = state.get(_NOMINATED_KEY)
    if table is not None and node_name in table:
        return table[node_name]
    lazy: _LazyNominator | None = state.get(_NOMINATOR_KEY)
    if lazy is None or lazy.busy:
        return None  # no nominator, or a filter asked while it nominates: nothing is nominated yet
    lazy.busy = True
    try:
        return lazy.nominate(node_name)
    finally:
        lazy.busy = False


def has_nomination(state: CycleState, node_name: str) -> bool:
    table: dict[str, ReservationInfo | None] | None = state.get(_NOMINATED_KEY)
    return table is not None and node_name in table


_PRE_ALLOCATION_KEY = "koord.frameworkext/nominated-pre-allocations"


@dataclass(slots=True)
class _PreAllocationNominations:
    nominate: Callable[[str], Sequence[PodInfo]] | None = None
    by_node: dict[str, tuple[PodInfo, ...]] = field(default_factory=dict)


def _pre_allocation_table(state: CycleState) -> _PreAllocationNominations:
    table: _PreAllocationNominations | None = state.get(_PRE_ALLOCATION_KEY)
    if table is None:
        table = _PreAllocationNominations()
        state.write(_PRE_ALLOCATION_KEY, table)
    return table


def set_pre_allocation_nominator(state: CycleState, nominate: Callable[[str], Sequence[PodInfo]]) -> None:
    """Let ``nominated_pre_allocation`` ask ``nominate(node_name)`` the first time a node is asked about.

    Koordinator nominates a pre-allocating reservation's pods right after the node is chosen, before any
    Reserve (``ReservationNominate``); here the nominator (the Reservation plugin) registers itself in
    BeforePreFilter and the first reader nominates, whatever the order of the Reserve plugins, so every
    plugin's Reserve and the nominator's own see the same pods.
    """
    _pre_allocation_table(state).nominate = nominate


def set_nominated_pre_allocation(state: CycleState, node_name: str, pods: Sequence[PodInfo]) -> None:
    """Record the pods a pre-allocating reserve pod takes over on ``node_name`` (empty: none)."""
    _pre_allocation_table(state).by_node[node_name] = tuple(pods)


def nominated_pre_allocation(state: CycleState, node_name: str) -> tuple[PodInfo, ...]:
    """The pods the pre-allocating reserve pod of this cycle takes over on ``node_name`` (Koordinator's
    ``GetNominatedPreAllocation(s)``); empty when it takes over none there."""
    table: _PreAllocationNominations | None = state.get(_PRE_ALLOCATION_KEY)
    if table is None:
        return ()
    found = table.by_node.get(node_name)
    if found is None and table.nominate is not None:
        nominate, table.nominate = table.nominate, None  # no re-entry while it nominates
        try:
            found = tuple(nominate(node_name))
        finally:
            table.nominate = nominate
        table.by_node[node_name] = found
    return found or ()


def has_pre_allocation_nomination(state: CycleState, node_name: str) -> bool:
    table: _PreAllocationNominations | None = state.get(_PRE_ALLOCATION_KEY)
    return table is not None and node_name in table.by_node


_RESERVATION_PREEMPTION_KEY = "koord.frameworkext/reservation-preemption"


def allow_reservation_preemption(state: CycleState) -> None:
    """Let this reserve pod's cycle preempt pods (the Reservation plugin's ``enablePreemption``).

    Koordinator's reservations preempt only through the Reservation plugin's own PostFilter when
    ``enablePreemption`` is set; kube-scheduler's DefaultPreemption cannot act for a reserve pod (it is no
    Pod in the API). koord's DefaultPreemption does the work, for a reserve pod only in cycles marked here.
    """
    state.write(_RESERVATION_PREEMPTION_KEY, True)


def reservation_preemption_allowed(state: CycleState) -> bool:
    """Whether ``allow_reservation_preemption`` was called in this cycle."""
    return state.get(_RESERVATION_PREEMPTION_KEY) is True


__all__ = [
    "ANNOTATION_IS_PRE_ALLOCATION",
    "ANNOTATION_RESERVATION_AFFINITY",
    "ANNOTATION_RESERVATION_ALLOCATED",
    "ANNOTATION_RESERVATION_NAME",
    "ANNOTATION_RESERVATION_NODE",
    "ANNOTATION_RESERVE_POD",
    "LABEL_PRE_ALLOCATION_REQUIRED",
    "LABEL_RESERVATION_IGNORED",
    "LABEL_RESERVATION_ORDER",
    "MAX_RESERVATION_SCORE",
    "MIN_RESERVATION_SCORE",
    "RESERVATION_API_VERSION",
    "RESERVATION_GROUP",
    "CycleExplainer",
    "ExtendedHandle",
    "NodeRestore",
    "PreFilterTransformer",
    "ReservationExtensions",
    "ReservationFilterPlugin",
    "ReservationInfo",
    "ReservationNominator",
    "ReservationPreAllocationRestorePlugin",
    "ReservationPreBindPlugin",
    "ReservationRestorePlugin",
    "ReservationScorePlugin",
    "ReservePodQueue",
    "allocated_reservation_of",
    "allow_reservation_preemption",
    "has_nomination",
    "has_pre_allocation_nomination",
    "is_pre_allocation_required",
    "is_pre_allocation_reserve_pod",
    "is_reserve_pod",
    "nominated_pre_allocation",
    "nominated_reservation",
    "reservation_name_of",
    "reservation_preemption_allowed",
    "set_nominated_pre_allocation",
    "set_nominated_reservation",
    "set_pre_allocation_nominator",
    "set_reservation_nominator",
]
