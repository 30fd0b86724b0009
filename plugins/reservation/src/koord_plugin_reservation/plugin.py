"""Koordinator's ``Reservation`` scheduler plugin (``pkg/scheduler/plugins/reservation``).

A Reservation is scheduled as a *reserve pod* through every plugin of the profile; once bound (this
plugin's Bind sets it Available on the node) its reserve pod stays counted on the node, holding what the
reservation has not given away. For a pod that matches a reservation (owners, affinity, taints, exact-match
spec), the BeforePreFilter transformer takes that reserve pod off the node for this pod's cycle only; Filter
checks the pod fits with one matched reservation given back (and inside it under the ``Restricted``
policy); PreScore nominates, per node, the reservation the pod would consume (single candidate, else the
lowest ``reservation-order``, else the highest reservation score); Score prefers the node of the
best-ordered reservation (1000) or the fullest fitting reservation; Reserve assumes the pod into the
nominated reservation (shrinking what its reserve pod holds); PreBind writes ``reservation-allocated``.

Everything is rebuilt from the objects (``cache``); the controller (``controller``) expires, completes and
garbage-collects reservations and keeps their status true.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import format_resource_list
from koord_framework.api.selectors import RequiredNodeAffinity
from koord_framework.errors import ClusterError
from koord_framework.explain.hooks import ExplainSection, NodeExplainer
from koord_framework.plugin import PluginArgs
from koord_framework.scheduler.cycle_state import CycleState

# The vectorised NormalizeScore form is declared next to the runner, as the core plugins import it.
from koord_framework.scheduler.frameworkext import (
    ANNOTATION_IS_PRE_ALLOCATION,
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
    CycleExplainer,
    ExtendedHandle,
    NodeRestore,
    PreFilterTransformer,
    ReservationFilterPlugin,
    ReservationInfo,
    ReservationNominator,
    ReservationPreBindPlugin,
    ReservationScorePlugin,
    allow_reservation_preemption,
    has_nomination,
    has_pre_allocation_nomination,
    is_reserve_pod,
    nominated_pre_allocation,
    nominated_reservation,
    set_nominated_pre_allocation,
    set_nominated_reservation,
    set_pre_allocation_nominator,
    set_reservation_nominator,
)
from koord_framework.scheduler.interface import (
    BindPlugin,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeInfo,
    NodeScore,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    SchedulerPlugin,
    ScoreExtensions,
    ScorePlugin,
    VectorFilter,
    VectorNormalize,
    VectorScore,
)
from koord_framework.scheduler.status import MAX_NODE_SCORE, Code, Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_plugin_reservation.args import ReservationArgs
from koord_plugin_reservation.cache import Changes, ReservationCache
from koord_plugin_reservation.controller import ReservationController
from koord_plugin_reservation.fit import fits_node, fits_reservation, is_reservation_reason, score_reservation
from koord_plugin_reservation.model import (
    ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY,
    ANNOTATION_RESIZE_ALLOCATABLE,
    COND_READY,
    COND_SCHEDULED,
    LABEL_POD_PRE_ALLOCATABLE,
    LABEL_PRE_ALLOCATION_REQUIRED,
    PHASE_AVAILABLE,
    PRE_ALLOCATION_MODE_CLUSTER,
    REASON_AVAILABLE,
    REASON_SCHEDULED,
    ReservationAffinity,
    ReservationError,
    exact_match,
    exact_match_spec,
    is_reservation_ignored,
    parse_reservation_affinity,
)
from koord_plugin_reservation.preallocation import (
    ERR_REASON_CLUSTER_MODE_DISABLED,
    ERR_REASON_NO_PODS_MEET_PRE_ALLOCATION,
    ERR_REASON_PRE_ALLOCATION_REQUIRED,
    ERR_REASON_PRE_ALLOCATION_UNSUPPORTED,
    PreAllocation,
    candidate_accepts,
    filter_with_pre_allocatable,
    list_candidates,
    node_usage,
)

log = logging.getLogger(__name__)

ERR_REASON_RESERVATION_AFFINITY = "node(s) no reservations match reservation affinity"
ERR_REASON_NODE_NOT_MATCH_RESERVATION = "node(s) didn't match the nodeName specified by reservation"
ERR_REASON_ALLOCATE_POLICY_CONFLICT = "node(s) reservation allocate policy conflict"
ERR_REASON_NO_RESERVATIONS_MEET_REQUIREMENTS = "node(s) no reservation(s) to meet the requirements"
ERR_ALLOCATE_ONCE_USED = "reservation has allocateOnce enabled and has already been allocated"
ERR_REASON_PREEMPTION_FAILED = "node(s) preemption failed due to insufficient resources"
MOST_PREFERRED_SCORE = 1000
STATE_KEY = "Reservation"


# --- per-cycle state --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Diagnosis:
    """Why reservations on a node did or did not match the pod (``nodeDiagnosisState``)."""

    owner_matched: int = 0
    name_matched: int = 0
    name_unmatched: int = 0
    unschedulable_unmatched: int = 0
    affinity_unmatched: int = 0
    not_exact_matched: int = 0
    taints_unmatched: int = 0
    taint_reasons: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    """Reservation name -> why it did not match (``--explain``)."""


@dataclass(slots=True)
class NodeState:
    matched: list[ReservationInfo] = field(default_factory=list)
    restored: list[PodInfo] = field(default_factory=list)
    """The reserve pods taken off the node for this pod (matched reservations)."""


@dataclass(slots=True)
class PodState:
    """What BeforePreFilter found for one pod (``stateData``)."""

    reserve_pod: bool = False
    ignored: bool = False
    has_affinity: bool = False
    reservation_name: str = ""
    pod_requests: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, NodeState] = field(default_factory=dict)
    diagnosis: dict[str, Diagnosis] = field(default_factory=dict)
    preferred_node: str = ""
    assumed: ReservationInfo | None = None
    verdicts: dict[Any, Status] = field(default_factory=dict)
    """Memo of ``_filter_with_reservations`` by everything it reads: Filter (vectorised and per node, on
    the snapshot's and on the restored node) and nomination ask the same questions several times."""
    pre_allocation: PreAllocation | None = None
    """A pre-allocating reserve pod's candidates and choices (``preallocation``)."""
    removed_owners: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    """Preemption what-ifs (RemovePod/AddPod): node -> reservation uid -> requests of the owners removed."""
    regained: dict[str, dict[str, int]] = field(default_factory=dict)
    """Node -> what unmatched reservations hold again once those owners are gone (not free for this pod)."""

    def clone(self) -> PodState:
        return PodState(
            self.reserve_pod,
            self.ignored,
            self.has_affinity,
            self.reservation_name,
            self.pod_requests,
            self.nodes,
            self.diagnosis,
            self.preferred_node,
            self.assumed,
            self.verdicts,
            self.pre_allocation,
            # Preemption clones the state per node and what-if: these two must not be shared.
            {n: {u: dict(r) for u, r in by.items()} for n, by in self.removed_owners.items()},
            {n: dict(r) for n, r in self.regained.items()},
        )


def pod_state(state: CycleState) -> PodState | None:
    value = state.get(STATE_KEY)
    return value if isinstance(value, PodState) else None


# --- the plugin ----------------------------------------------------------------------------------------
class Reservation(
    SchedulerPlugin[ReservationArgs],
    PreFilterTransformer,
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    VectorFilter,
    PostFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    ScoreExtensions,
    VectorNormalize,
    ReservePlugin,
    PreBindPlugin,
    ReservationPreBindPlugin,
    BindPlugin,
    ReservationFilterPlugin,
    ReservationScorePlugin,
    ReservationNominator,
    CycleExplainer,
    EnqueueExtensions,
    NodeExplainer,
):
    """Reserve capacity with Reservation objects and hand it to their owners (see the module docstring)."""

    name: ClassVar[str] = "Reservation"
    Args: ClassVar[type[PluginArgs]] = ReservationArgs

    def __init__(self, args: ReservationArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        args = self.args
        self.rargs = args
        self.ignored = frozenset(args.ignored_resources)
        self.ignored_groups = frozenset(args.ignored_resource_groups)
        pa_config = args.pre_allocation_config
        self.cluster_mode = pa_config is not None and pa_config.enable_cluster_mode
        self.prefer_free = pa_config is not None and pa_config.prefer_no_pre_allocated_pods
        self.pre_allocatable_label = (pa_config and pa_config.cluster_label_key) or LABEL_POD_PRE_ALLOCATABLE
        self.pre_allocatable_priority = (
            pa_config and pa_config.cluster_priority_annotation_key
        ) or ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY
        # With one reservation matched, fitsNode repeats NodeResourcesFit's Filter: the gate skips it.
        self.skip_fits_node = handle.feature_enabled("SkipReservationFitsNode")
        self.cache = ReservationCache()
        self.controller = ReservationController(
            handle.cluster, handle.clock, self.cache, args, self._node_exists
        )
        self._extended = handle if isinstance(handle, ExtendedHandle) else None
        # Pods first: owners recorded before their reservation arrives are picked up when it does.
        handle.informer.add_handler("Pod", self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        handle.informer.add_handler(
            "Reservation", self._on_reservation_add, self._on_reservation_update, self._on_reservation_delete
        )
        self.controller.sync_all()

    # --- informer handlers ------------------------------------------------------------------------
    def _node_exists(self, name: str) -> bool:
        return self.handle.informer.get("Node", name) is not None

    def _apply(self, changes: Changes) -> None:
        ext = self._extended
        if ext is None:
            return
        queue = ext.reserve_pods
        for uid in changes.dequeue:
            queue.dequeue_reserve_pod(uid)
        for pod in changes.uncount:
            queue.uncount_reserve_pod(pod)
        for pod in changes.count:
            queue.count_reserve_pod(pod)
        for pod in changes.enqueue:
            queue.enqueue_reserve_pod(pod)

    def _on_reservation_add(self, obj: Mapping[str, Any]) -> None:
        self._apply(self.cache.upsert(obj))
        name = str((obj.get("metadata") or {}).get("name", ""))
        error = self.cache.errors.get(name)
        if error is not None:
            self._warn(name, str(error))
            return
        entry = self.cache.by_reservation_name(name)
        if entry is not None and entry.r.is_available and self.cache.owners_of(entry.r.uid):
            # Pre-allocated owners were bound before their reservation became Available: its status
            # (allocated, currentOwners) is written now rather than at the next resync.
            self.controller.sync_one(entry.r.uid)

    def _on_reservation_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self._on_reservation_add(obj)

    def _on_reservation_delete(self, obj: Mapping[str, Any]) -> None:
        self._apply(self.cache.delete(obj))

    def _warn(self, name: str, message: str) -> None:
        from koord_framework.cluster.port import EventRecord

        with contextlib.suppress(ClusterError):
            self.handle.cluster.record_event(
                EventRecord(
                    "Reservation",
                    "",
                    name,
                    "InvalidReservation",
                    message,
                    "Warning",
                    "koord-scheduler",
                    self.handle.clock.now(),
                )
            )

    def _owner_of(self, obj: Mapping[str, Any]) -> tuple[PodInfo, str | None] | None:
        """The pod and the reservation uid it consumes once bound, for a pod whose ownership changes;
        None when nothing changes (most pod events: no annotation, or the state already recorded)."""
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        raw = annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
        uid = str(meta.get("uid") or "")
        previous = self.cache.pod_owner.get(uid)
        if not raw and previous is None:
            return None
        named: str | None = None
        if raw:
            try:
                value = json.loads(raw)
                named = str(value["uid"]) if isinstance(value, dict) and value.get("uid") else None
            except ValueError:
                log.warning(
                    "pod %s/%s: annotation %s is not valid JSON; ignored",
                    meta.get("namespace"),
                    meta.get("name"),
                    ANNOTATION_RESERVATION_ALLOCATED,
                )
        terminal = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        bound = bool((obj.get("spec") or {}).get("nodeName")) and not terminal
        if not bound and not terminal and named is not None and named == previous:
            return None  # PreBind wrote the annotation; the assumption stands until the pod is bound
        target = named if bound else None
        if target is not None and target == previous and uid in self.cache.owners.get(target, {}):
            return None  # already counted as a bound owner
        return PodInfo.from_manifest(obj), target

    def _on_pod_add(self, obj: Mapping[str, Any]) -> None:
        found = self._owner_of(obj)
        if found is None:
            return
        pod, target = found
        before = self.cache.pod_owner.get(pod.uid)
        self._apply(self.cache.set_bound_owner(pod, target))
        for uid in {before, target} - {None}:
            assert uid is not None
            if uid in self.cache.entries:
                self.controller.sync_one(uid)

    def _on_pod_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self._on_pod_add(obj)

    def _on_pod_delete(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if uid not in self.cache.pod_owner:
            return
        pod = PodInfo.from_manifest(obj)
        before = self.cache.pod_owner.get(uid)
        self._apply(self.cache.set_bound_owner(pod, None))
        if before is not None and before in self.cache.entries:
            self.controller.sync_one(before)

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("Node", "Add|Update"),
            ClusterEvent("Reservation", "*"),
        ]

    # --- BeforePreFilter: match and restore --------------------------------------------------------
    def before_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[NodeRestore | None, Status]:
        self.controller.sync_due()
        if is_reserve_pod(pod):
            ps = PodState(reserve_pod=True, pod_requests=dict(pod.requests))
            state.write(STATE_KEY, ps)
            if self.rargs.enable_preemption:
                allow_reservation_preemption(state)
            if pod.annotations.get(ANNOTATION_IS_PRE_ALLOCATION) != "true":
                return None, Status()
            return self._prepare_pre_allocation(state, pod, ps)
        try:
            affinity = parse_reservation_affinity(pod)
            exact = exact_match_spec(pod)
        except ReservationError as exc:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (str(exc),))
        ps = PodState(
            ignored=is_reservation_ignored(pod),
            has_affinity=affinity is not None,
            reservation_name=affinity.name if affinity is not None else "",
            pod_requests=dict(pod.requests),
        )
        state.write(STATE_KEY, ps)
        entries = self.cache.all_available() if ps.ignored else self.cache.candidates_for(pod)
        if not entries:
            return None, Status()
        restore = NodeRestore()
        for entry in entries:
            r = entry.r
            node = r.node_name
            diag = ps.diagnosis.get(node)
            if diag is None:
                diag = ps.diagnosis[node] = Diagnosis()
            if ps.ignored:
                matched = True
            else:
                matched = self._matches(pod, r.name, entry, affinity, exact, ps.pod_requests, diag)
            if not matched:
                continue
            info = self.cache.info(r.uid)
            if info is None:
                continue
            ns = ps.nodes.get(node)
            if ns is None:
                ns = ps.nodes[node] = NodeState()
            ns.matched.append(info)
            if entry.counted is not None:
                ns.restored.append(entry.counted)
                restore.add(node, entry.counted)
        if ps.nodes and not ps.ignored:
            # Resource plugins read the nomination in their Reserve, which may come before this plugin's.
            set_reservation_nominator(state, lambda node_name: self._nominate_now(state, pod, node_name))
        ext = self._extended
        if ps.nodes and ext is not None and ext.reservation_extensions.has_restore_plugins:
            s = self._restore_hooks(state, pod, ps)
            if not s.is_success:
                return None, s
        return restore, Status()

    def _prepare_pre_allocation(
        self, state: CycleState, pod: PodInfo, ps: PodState
    ) -> tuple[NodeRestore | None, Status]:
        """``prepareMatchReservationStateForReservePod`` for a pre-allocating reservation: its candidates per
        node, taken off those nodes for this cycle (the Filter then judges each one precisely)."""
        entry = self.cache.by_reservation_name(pod.annotations.get(ANNOTATION_RESERVATION_NAME, ""))
        if entry is None:
            return None, Status()  # PreFilter names the missing reservation
        r = entry.r
        if r.allocate_policy != "Restricted":
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_PRE_ALLOCATION_UNSUPPORTED,))
        if r.pre_allocation_mode == PRE_ALLOCATION_MODE_CLUSTER and not self.cluster_mode:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CLUSTER_MODE_DISABLED,))
        info = self.cache.info(r.uid)
        if info is None:
            return None, Status()
        pa = PreAllocation(
            info=info,
            multiple=r.pre_allocation_multiple,
            required=pod.labels.get(LABEL_PRE_ALLOCATION_REQUIRED) == "true",
        )
        ps.pre_allocation = pa
        ext = self._extended.reservation_extensions if self._extended is not None else None
        if ext is not None:
            s = ext.run_pre_restore_reservation_pre_allocation(state, info)
            if not s.is_success:
                return None, s
        # Resource plugins ask for the nomination in their Reserve, which may run before this plugin's.
        set_pre_allocation_nominator(
            state, lambda node_name: self._pre_allocated_on(state, ps, pa, node_name)[0]
        )
        wanted = pod.annotations.get(ANNOTATION_RESERVATION_NODE, "")
        found = list_candidates(
            self.handle.node_infos(),
            r,
            self.cache.pod_owner,
            label_key=self.pre_allocatable_label,
            priority_key=self.pre_allocatable_priority,
        )
        restore = NodeRestore()
        # Only nodes the reserve pod may go to (template nodeName, nodeSelector, required node affinity).
        affinity = RequiredNodeAffinity.of(pod)
        for node_name, pods in found.items():
            if wanted and node_name != wanted:
                continue
            node = self.handle.node_info(node_name)
            if node is None or not affinity.match_node(node.node):
                continue
            labels = node.node.labels
            kept = [p for p in pods if candidate_accepts(p, r, labels)]
            if not kept:
                continue
            pa.candidates[node_name] = kept
            for p in kept:
                restore.add(node_name, p)
            if ext is not None:
                # What they hold in the resource plugins' terms: CPU sets, devices (Koordinator's
                # restoreReservationResourcesForNode).
                s = ext.run_restore_reservation_pre_allocation(state, info, kept, node)
                if not s.is_success:
                    return None, s
        return restore, Status()

    def _filter_pre_allocation(
        self, state: CycleState, ps: PodState, pa: PreAllocation, node: NodeInfo, only: PodInfo | None = None
    ) -> tuple[list[PodInfo], Status]:
        candidates = pa.candidates.get(node.name, [])
        ext = self._extended.reservation_extensions if self._extended is not None else None

        def hook(p: PodInfo) -> Status:
            if ext is None:
                return Status()
            return ext.run_filter_reservation(state, p, pa.info, node)

        requested, pods = node_usage(node, candidates)
        return filter_with_pre_allocatable(
            reservation_requests=ps.pod_requests,
            info=pa.info,
            allocatable=node.allocatable,
            requested=requested,
            pods=pods,
            candidates=[only] if only is not None else candidates,
            required=pa.required or only is not None,
            multiple=pa.multiple and only is None,
            prefer_free=self.prefer_free,
            hook=hook,
            ignored=self.ignored,
            ignored_groups=self.ignored_groups,
        )

    def _fits_without_pre_allocation(self, ps: PodState, pa: PreAllocation, node_name: str) -> Status:
        """Whether the reservation fits ``node_name`` on free capacity, every candidate still counted."""
        node = self.handle.node_info(node_name)
        if node is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("missing node",))
        requested, pods = node_usage(node, pa.candidates.get(node_name, []))
        return filter_with_pre_allocatable(
            reservation_requests=ps.pod_requests,
            info=pa.info,
            allocatable=node.allocatable,
            requested=requested,
            pods=pods,
            candidates=[],
            required=False,
            multiple=False,
            prefer_free=True,
            hook=lambda _p: Status(),
            ignored=self.ignored,
            ignored_groups=self.ignored_groups,
        )[1]

    def _pre_allocated_on(
        self, state: CycleState, ps: PodState, pa: PreAllocation, node_name: str
    ) -> tuple[list[PodInfo], Status]:
        """The nomination on ``node_name``, worked out once per cycle and recorded for the resource plugins
        (``nominated_pre_allocation``), whichever Reserve asks first."""
        if has_pre_allocation_nomination(state, node_name):
            return list(nominated_pre_allocation(state, node_name)), pa.nomination_errors.get(
                node_name, Status()
            )
        pods, s = self._nominate_pre_allocation(state, ps, pa, node_name)
        if not s.is_success:
            pa.nomination_errors[node_name] = s
            pods = []
        set_nominated_pre_allocation(state, node_name, pods)
        return pods, s

    def _nominate_pre_allocation(
        self, state: CycleState, ps: PodState, pa: PreAllocation, node_name: str
    ) -> tuple[list[PodInfo], Status]:
        """``NominatePreAllocation(s)``: the pods the reservation takes over on ``node_name``."""
        selected = pa.selected.get(node_name)
        if selected is None:
            node = self.handle.node_info(node_name)
            if node is None:
                return [], Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("missing node",))
            selected, s = self._filter_pre_allocation(state, ps, pa, node)
            if not s.is_success:
                return [], s
        if pa.multiple or not selected:
            return list(selected), Status()
        if len(selected) == 1 and pa.required:
            return [selected[0]], Status()
        ext = self._extended.reservation_extensions if self._extended is not None else None
        fitting = []
        for p in selected:
            if ext is not None:
                ok = ext.run_filter_nominate_reservation(state, p, pa.info, node_name).is_success
            else:
                ok = self.filter_nominate_reservation(state, p, pa.info, node_name).is_success
            if ok:
                fitting.append(p)
        if len(fitting) <= 1:
            return fitting, Status()
        scores: list[int] = []
        for p in fitting:
            if ext is not None:
                one, s = ext.run_score_reservation(state, p, [pa.info], node_name)
                if not s.is_success:
                    return [], s
                scores.append(one[0])
            else:
                scores.append(self.score_reservation(state, p, pa.info, node_name)[0])
        best = max(range(len(fitting)), key=lambda i: scores[i])  # the first of equals, as a stable sort
        return [fitting[best]], Status()

    def _matches(
        self,
        pod: PodInfo,
        name: str,
        entry: Any,
        affinity: ReservationAffinity | None,
        exact: list[str] | None,
        requests: Mapping[str, int],
        diag: Diagnosis,
    ) -> bool:
        """``checkReservationMatchedOrIgnored`` for one owner-indexed candidate."""
        r = entry.r
        if not any(m.matches(pod) for m in r.owners):
            return False
        diag.owner_matched += 1
        if affinity is not None and affinity.name:
            if affinity.name != name:
                diag.name_unmatched += 1
                diag.rejected[name] = "didn't match the requested reservation name"
                return False
            if not exact_match(requests, r.allocatable, exact):
                diag.not_exact_matched += 1
                diag.rejected[name] = "is not exact matched"
                return False
            diag.name_matched += 1
            return True
        if r.unschedulable and not (affinity is not None and affinity.tolerates_unschedulable):
            diag.unschedulable_unmatched += 1
            diag.rejected[name] = "is unschedulable"
            return False
        if r.taints:
            taint = (affinity or ReservationAffinity()).untolerated_taint(list(r.taints))
            if taint is not None:
                key = f"{{{taint.get('key', '')}: {taint.get('value', '')}}}"
                diag.taints_unmatched += 1
                diag.taint_reasons[key] = diag.taint_reasons.get(key, 0) + 1
                diag.rejected[name] = f"had untolerated taint {key}"
                return False
        if affinity is not None:
            node = self.handle.node_info(r.node_name)
            labels = {**(node.node.labels if node is not None else {}), **r.labels}
            if not affinity.matches(name, labels):
                diag.affinity_unmatched += 1
                diag.rejected[name] = "didn't match affinity rules"
                return False
        if not exact_match(requests, r.allocatable, exact):
            diag.not_exact_matched += 1
            diag.rejected[name] = "is not exact matched"
            return False
        return True

    def _restore_hooks(self, state: CycleState, pod: PodInfo, ps: PodState) -> Status:
        """The reservation restore hooks of resource plugins, on every node with matched reservations."""
        assert self._extended is not None
        ext = self._extended.reservation_extensions
        s = ext.run_pre_restore_reservation(state, pod)
        if not s.is_success:
            return s
        for node_name, ns in ps.nodes.items():
            node = self.handle.node_info(node_name)
            if node is None:
                continue
            matched_uids = {r.uid for r in ns.matched}
            unmatched = []
            for entry in self.cache.on_node(node_name):
                if entry.r.uid in matched_uids or not self.cache.owner_count(entry.r.uid):
                    continue
                info = self.cache.info(entry.r.uid)
                if info is not None:
                    unmatched.append(info)
            s = ext.run_restore_reservation(state, pod, ns.matched, unmatched, node)
            if not s.is_success:
                return s
        return Status()

    # --- PreFilter ---------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        ps = pod_state(state)
        if ps is None:
            return None, Status(Code.SKIP)
        if ps.reserve_pod:
            name = pod.annotations.get(ANNOTATION_RESERVATION_NAME, "")
            if self.cache.by_reservation_name(name) is None:
                error = self.cache.errors.get(name)
                reason = str(error) if error is not None else f"cannot get reservation {name}: not found"
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,))
            pa = ps.pre_allocation
            if pa is not None and pa.required:
                if not pa.candidates:
                    return None, Status(
                        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_PRE_ALLOCATION_REQUIRED,)
                    )
                return PreFilterResult(set(pa.candidates)), Status()
            return None, Status()
        if ps.has_affinity:
            if not ps.nodes:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_RESERVATION_AFFINITY,))
            return PreFilterResult(set(ps.nodes)), Status()
        if not ps.nodes and (ps.ignored or not self.cache.pod_owner):
            # Koordinator skips only when no node has a matched reservation or an unmatched one with owners
            # (those keep the plugin in the preemption what-ifs, see ``remove_pod``); koord asks only
            # whether any reservation has an owner (O(1)).
            return None, Status(Code.SKIP)
        return None, Status()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    # --- PreFilterExtensions: preemption what-ifs --------------------------------------------------
    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._what_if(state, to_add, node, -1)

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        return self._what_if(state, to_remove, node, 1)

    def _what_if(self, state: CycleState, victim: PodInfo, node: NodeInfo, sign: int) -> Status:
        """Koordinator's AddPod/RemovePod (``preemptibleInRRs``): an owner removed from the node gives its
        resources back to its reservation. If the preemptor does not match that reservation on this node,
        they stay held for the reservation's owners: ``regained`` counts them and Filter adds them back."""
        ps = pod_state(state)
        if ps is None or ps.reserve_pod or ps.ignored:
            return Status()
        uid = self.cache.pod_owner.get(victim.uid)
        entry = self.cache.entries.get(uid) if uid is not None else None
        if entry is None or uid is None or not entry.r.is_available or entry.r.node_name != node.name:
            return Status()
        by_r = ps.removed_owners.setdefault(node.name, {})
        removed = by_r.setdefault(uid, {})
        for k, v in victim.requests.items():
            removed[k] = removed.get(k, 0) + sign * v
        if "pods" not in victim.requests:
            removed["pods"] = removed.get("pods", 0) + sign
        ns = ps.nodes.get(node.name)
        matched = {r.uid for r in ns.matched} if ns is not None else set()
        allocated = self.cache.allocated(uid)
        regained: dict[str, int] = {}
        for r_uid, gone in by_r.items():
            r_entry = self.cache.entries.get(r_uid)
            if r_entry is None or r_uid in matched:
                # The preemptor may use a matched reservation: what it regains is the preemptor's (Filter
                # hands ``removed_owners`` to fitsReservation as Koordinator's preemptibleInRR).
                continue
            now = self.cache.allocated(r_uid) if r_uid != uid else allocated
            for k, cap in r_entry.r.allocatable.items():
                before = max(cap - now.get(k, 0), 0)
                after = max(cap - (now.get(k, 0) - gone.get(k, 0)), 0)
                if after > before:
                    regained[k] = regained.get(k, 0) + after - before
        ps.regained[node.name] = regained
        return Status()

    def _fits_with_regained(self, ps: PodState, node: NodeInfo, regained: Mapping[str, int]) -> Status:
        requested = dict(node.requested)
        for k, v in regained.items():
            requested[k] = requested.get(k, 0) + v
        short = fits_node(
            ps.pod_requests,
            node.allocatable,
            requested,
            None,
            None,
            0,
            len(node.pods),
            None,
            self.ignored,
            self.ignored_groups,
        )
        if short:
            return Status(Code.UNSCHEDULABLE, (ERR_REASON_PREEMPTION_FAILED,))
        return Status()

    # --- Filter ------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        ps = pod_state(state)
        if ps is None:
            return Status()
        if ps.reserve_pod:
            s = self._filter_reserve_pod(pod, node.name)
            pa = ps.pre_allocation
            if not s.is_success or pa is None:
                return s
            selected, s = self._filter_pre_allocation(state, ps, pa, node)
            pa.selected[node.name] = selected
            return s
        ns = ps.nodes.get(node.name)
        regained = ps.regained.get(node.name) if ps.regained else None
        if ns is None or not ns.matched:
            if ps.has_affinity:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_RESERVATION_AFFINITY,))
            if regained:
                return self._fits_with_regained(ps, node, regained)
            return Status()
        if ps.ignored:
            return Status()
        return self._filter_with_reservations(state, pod, node, ps, ns, ns.matched, ps.has_affinity)

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        ps = pod_state(state)
        mask = np.ones(rows.shape[0], dtype=np.bool_)
        if ps is None:
            return mask
        if ps.reserve_pod:
            interesting = set(self.cache.by_node)
            interesting |= {e.assumed_node for e in self.cache.snapshot() if e.assumed_node}
            if ps.pre_allocation is not None:
                interesting |= set(ps.pre_allocation.candidates)
            wanted = pod.annotations.get(ANNOTATION_RESERVATION_NODE, "")
        else:
            interesting = set(ps.nodes) | set(ps.regained)
            wanted = ""
        names, index = table.names, table.index
        if wanted:
            row = index.get(wanted, -1)
            mask &= rows == row
        if ps.has_affinity and not ps.reserve_pod:
            # Only nodes with matched reservations can pass (PreFilter narrowed the search to them).
            mask &= _rows_in(rows, interesting, index)
        for i in np.flatnonzero(mask & _rows_in(rows, interesting, index)).tolist():
            node = self.handle.node_info(names[int(rows[i])])
            mask[i] = node is not None and self.filter(state, pod, node).is_success
        return mask

    def _filter_reserve_pod(self, pod: PodInfo, node_name: str) -> Status:
        wanted = pod.annotations.get(ANNOTATION_RESERVATION_NODE, "")
        if wanted and wanted != node_name:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_NODE_NOT_MATCH_RESERVATION,))
        own = self.cache.by_reservation_name(pod.annotations.get(ANNOTATION_RESERVATION_NAME, ""))
        policy = own.r.allocate_policy if own is not None else ""
        for entry in self.cache.on_node(node_name):
            if own is not None and entry.r.uid == own.r.uid:
                continue
            other = entry.r.allocate_policy
            if (policy == "" or other == "") and policy != other:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_ALLOCATE_POLICY_CONFLICT,))
        return Status()

    @staticmethod
    def _full_usage(node: NodeInfo, ns: NodeState) -> tuple[dict[str, int], int]:
        """The node's requested resources and pod count *with* the matched reserve pods counted, whether
        ``node`` is the snapshot's NodeInfo or the cycle's restored one (Filter gives the same answer)."""
        requested = dict(node.requested)
        pods = len(node.pods)
        for p in ns.restored:
            if p.uid not in node.pods:
                for k, v in p.requests.items():
                    requested[k] = requested.get(k, 0) + v
                pods += 1
        return requested, pods

    def _filter_with_reservations(
        self,
        state: CycleState,
        pod: PodInfo,
        node: NodeInfo,
        ps: PodState,
        ns: NodeState,
        matched: Sequence[ReservationInfo],
        required: bool,
    ) -> Status:
        """``filterWithReservations``: the pod fits when one matched reservation, given back alone, lets it
        fit on the node (and, under ``Restricted``, inside the reservation)."""
        requested, pods = self._full_usage(node, ns)
        regained = ps.regained.get(node.name) if ps.regained else None
        if regained:
            for k, v in regained.items():
                requested[k] = requested.get(k, 0) + v
        removed = ps.removed_owners.get(node.name) if ps.removed_owners else None
        key = (
            node.name,
            frozenset(requested.items()),
            pods,
            required,
            tuple(r.uid for r in matched),
            tuple(len(r.allocated_pods) for r in matched),
            tuple(sorted((u, tuple(sorted(g.items()))) for u, g in removed.items())) if removed else (),
        )
        known = ps.verdicts.get(key)
        if known is not None:
            return known
        verdict = self._fit_verdict(state, pod, node, ps, ns, matched, required, requested, pods)
        ps.verdicts[key] = verdict
        return verdict

    def _fit_verdict(
        self,
        state: CycleState,
        pod: PodInfo,
        node: NodeInfo,
        ps: PodState,
        ns: NodeState,
        matched: Sequence[ReservationInfo],
        required: bool,
        requested: Mapping[str, int],
        pods: int,
    ) -> Status:
        allocatable = node.allocatable
        count = len(ns.matched)
        by_node: set[str] = set()
        by_reservation: list[str] = []
        pod_names = set(ps.pod_requests)
        fits_node_skipped = self.skip_fits_node and len(matched) <= 1
        for r in matched:
            if not ps.has_affinity and not pod_names.intersection(r.resource_names):
                continue
            if ps.reservation_name and ps.reservation_name != r.name:
                continue
            detailed = bool(ps.reservation_name) and ps.reservation_name == r.name
            short = (
                []
                if fits_node_skipped
                else fits_node(
                    ps.pod_requests,
                    allocatable,
                    requested,
                    None,
                    r.available(),
                    count,
                    pods,
                    None,
                    self.ignored,
                    self.ignored_groups,
                )
            )
            reasons: list[str] = []
            if r.allocate_policy == "Restricted":
                in_rr = ps.removed_owners.get(node.name, {}).get(r.uid) if ps.removed_owners else None
                reasons = fits_reservation(
                    ps.pod_requests, r, in_rr, detailed, self.ignored, self.ignored_groups
                )
            by_node.update(short)
            by_reservation += reasons
            if self._extended is not None:
                s = self._extended.reservation_extensions.run_filter_reservation(state, pod, r, node)
                if not s.is_success:
                    by_reservation += list(s.reasons)
                    continue
            if not short and not reasons:
                return Status()
        node_reasons = [f"Insufficient {r} by node" for r in sorted(by_node)]
        if required:
            reasons = node_reasons + by_reservation or [ERR_REASON_NO_RESERVATIONS_MEET_REQUIREMENTS]
            return Status(Code.UNSCHEDULABLE, tuple(reasons))
        if not by_node:
            alone = fits_node(
                ps.pod_requests,
                allocatable,
                requested,
                None,
                None,
                count,
                pods,
                None,
                self.ignored,
                self.ignored_groups,
            )
            node_reasons = [f"Insufficient {r} by node" for r in alone]
        if node_reasons:
            return Status(Code.UNSCHEDULABLE, tuple(node_reasons))
        return Status()

    # --- ReservationFilterPlugin (the plugin's own nomination rules) --------------------------------
    def filter_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node: NodeInfo
    ) -> Status:
        return Status()

    def filter_nominate_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> Status:
        if reservation.allocate_once and reservation.allocated_pods:
            return Status(Code.UNSCHEDULABLE, (ERR_ALLOCATE_ONCE_USED,))
        ps = pod_state(state)
        node = self.handle.node_info(node_name)
        if ps is None or node is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("missing node",))
        pa = ps.pre_allocation
        if pa is not None and reservation.uid == pa.info.uid:
            # Nominating a candidate pod of a pre-allocation: can the reservation take over this one?
            return self._filter_pre_allocation(state, ps, pa, node, only=pod)[1]
        ns = ps.nodes.get(node_name) or NodeState()
        return self._filter_with_reservations(state, pod, node, ps, ns, [reservation], True)

    # --- PostFilter --------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        ps = pod_state(state)
        if ps is None or ps.reserve_pod:
            return None, Status(Code.UNSCHEDULABLE)
        return None, Status(Code.UNSCHEDULABLE, tuple(post_filter_reasons(ps, filtered)))

    # --- nomination --------------------------------------------------------------------------------
    def nominate_reservation(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[ReservationInfo | None, Status]:
        ps = pod_state(state)
        if ps is None or ps.reserve_pod:
            return None, Status()
        ns = ps.nodes.get(node_name)
        if ns is None or not ns.matched:
            return None, Status()
        if len(ns.matched) == 1 and ps.has_affinity:
            return ns.matched[0], Status()
        if has_nomination(state, node_name):
            return nominated_reservation(state, node_name), Status()
        candidates = list(ns.matched)
        if self._extended is not None:
            ext = self._extended.reservation_extensions
            candidates = [
                r
                for r in candidates
                if ext.run_filter_nominate_reservation(state, pod, r, node_name).is_success
            ]
        else:
            candidates = [
                r for r in candidates if self.filter_nominate_reservation(state, pod, r, node_name).is_success
            ]
        if not candidates:
            return None, Status()
        if len(candidates) == 1:
            return candidates[0], Status()
        by_order = most_preferred_by_order(candidates)
        if by_order is not None:
            return by_order, Status()
        if self._extended is not None:
            scores, s = self._extended.reservation_extensions.run_score_reservation(
                state, pod, candidates, node_name
            )
            if not s.is_success:
                return None, s
        else:
            scores = [self.score_reservation(state, pod, r, node_name)[0] for r in candidates]
        best = max(range(len(candidates)), key=lambda i: scores[i])
        return candidates[best], Status()

    def _nominate_now(self, state: CycleState, pod: PodInfo, node_name: str) -> ReservationInfo | None:
        """The nomination a resource plugin's Reserve asks for before this plugin's Reserve ran (recorded
        as Reserve would; an error is left for Reserve to report)."""
        r, s = self.nominate_reservation(state, pod, node_name)
        if not s.is_success:
            return None
        set_nominated_reservation(state, node_name, r)
        return r

    # --- PreScore / Score --------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        ps = pod_state(state)
        if ps is None or ps.reserve_pod or ps.ignored or not ps.nodes:
            return Status(Code.SKIP)
        best_order: int | None = None
        # The preferred node is the first feasible one (in PreScore's order) holding the best-ordered
        # reservation; finding it needs the feasible list only when some matched reservation has an order.
        # Nominating on a matched node that is not feasible is harmless: Score never asks about it.
        if any(r.order > 0 for ns in ps.nodes.values() for r in ns.matched):
            feasible = {ni.name: i for i, ni in enumerate(nodes) if ni.name in ps.nodes}
            names = sorted(feasible, key=feasible.__getitem__)
        else:
            names = sorted(ps.nodes)
        for name in names:
            ns = ps.nodes[name]
            if not ns.matched:
                continue
            _, order = order_of(ns.matched)
            if order and (best_order is None or order < best_order):
                best_order, ps.preferred_node = order, name
            r, s = self.nominate_reservation(state, pod, name)
            if not s.is_success:
                return s
            if r is not None:
                set_nominated_reservation(state, name, r)
        return Status()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return self._score_node(state, pod, node.name)

    def _score_node(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[int, Status]:
        ps = pod_state(state)
        if ps is None or ps.reserve_pod:
            return 0, Status()
        if ps.preferred_node == node_name:
            return MOST_PREFERRED_SCORE, Status()
        r = nominated_reservation(state, node_name)
        if r is None:
            return 0, Status()
        return self.score_reservation(state, pod, r, node_name)

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        ps = pod_state(state)
        out = np.zeros(rows.shape[0], dtype=np.int64)
        if ps is None or ps.reserve_pod or not ps.nodes:
            return out
        names = table.names
        for i in np.flatnonzero(_rows_in(rows, ps.nodes, table.index)).tolist():
            out[i] = self._score_node(state, pod, names[int(rows[i])])[0]
        return out

    def score_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> tuple[int, Status]:
        return score_reservation(pod.requests, reservation), Status()

    def score_extensions(self) -> ScoreExtensions | None:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        if is_reserve_pod(pod):
            return Status()
        top = max((s.score for s in scores), default=0)
        if top == 0:
            return Status()
        for s in scores:
            s.score = MAX_NODE_SCORE * s.score // top
        return Status()

    def normalize_all(
        self, state: CycleState, pod: PodInfo, rows: Int64Array, scores: Int64Array
    ) -> Int64Array:
        """``normalize_score`` over arrays (kube-scheduler's DefaultNormalizeScore, max 100)."""
        if is_reserve_pod(pod) or scores.size == 0:
            return scores
        top = int(scores.max())
        if top <= 0:
            return scores
        return (scores * MAX_NODE_SCORE) // top

    # --- Reserve / Unreserve -----------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        ps = pod_state(state)
        if ps is None:
            return Status()
        if ps.reserve_pod:
            entry = self.cache.by_reservation_name(pod.annotations.get(ANNOTATION_RESERVATION_NAME, ""))
            if entry is None:
                return Status(Code.ERROR, ("reservation not found",))
            pa = ps.pre_allocation
            if pa is not None:
                pods, s = self._pre_allocated_on(state, ps, pa, node_name)
                if not s.is_success:
                    return s
                if not pods and pa.required:
                    return Status(Code.UNSCHEDULABLE, (ERR_REASON_NO_PODS_MEET_PRE_ALLOCATION,))
                if not pods and pa.selected.get(node_name):
                    # Filter let the reservation onto this node with candidates, and nomination (a resource
                    # plugin's say on CPUs or devices) kept none: free capacity alone must do.
                    s = self._fits_without_pre_allocation(ps, pa, node_name)
                    if not s.is_success:
                        return s
                try:
                    for p in pods:
                        self._apply(self.cache.assume(entry.r.uid, p))
                        pa.pre_allocated.append(p)
                except KeyError as exc:
                    self._forget_pre_allocated(entry.r.uid, pa)
                    return Status(Code.ERROR, (str(exc),))
            self.cache.assume_reservation(entry.r.uid, node_name)
            return Status()
        if ps.ignored:
            return Status()
        if has_nomination(state, node_name):
            r = nominated_reservation(state, node_name)
        else:
            r, s = self.nominate_reservation(state, pod, node_name)
            if not s.is_success:
                return s
            set_nominated_reservation(state, node_name, r)
        if r is None:
            if ps.has_affinity:
                return Status(Code.UNSCHEDULABLE, (ERR_REASON_RESERVATION_AFFINITY,))
            return Status()
        try:
            self._apply(self.cache.assume(r.uid, pod))
        except KeyError as exc:
            return Status(Code.ERROR, (str(exc),))
        ps.assumed = r
        return Status()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        ps = pod_state(state)
        if ps is None:
            return
        if ps.reserve_pod:
            entry = self.cache.by_reservation_name(pod.annotations.get(ANNOTATION_RESERVATION_NAME, ""))
            if entry is not None and not entry.r.node_name:
                self.cache.forget_reservation(entry.r.uid)
            pa = ps.pre_allocation
            if pa is not None and entry is not None:
                self._forget_pre_allocated(entry.r.uid, pa)
            return
        if ps.assumed is not None:
            self._apply(self.cache.forget(ps.assumed.uid, pod))
            ps.assumed = None

    def _forget_pre_allocated(self, reservation_uid: str, pa: PreAllocation) -> None:
        """Undo Reserve and PreBind of a pre-allocation: the pods stop being assumed owners and lose the
        ``reservation-allocated`` PreBind wrote (Koordinator's ``unreservePod``)."""
        for p in pa.pre_allocated:
            self._apply(self.cache.forget(reservation_uid, p))
        pa.pre_allocated = []
        for p in pa.patched:
            current = self.handle.informer.get("Pod", p.name, p.namespace)
            if current is None or (current.get("metadata") or {}).get("uid") != p.uid:
                continue
            with contextlib.suppress(ClusterError):
                self.handle.cluster.patch(
                    "Pod",
                    p.name,
                    p.namespace,
                    {"metadata": {"annotations": {ANNOTATION_RESERVATION_ALLOCATED: None}}},
                )
        pa.patched = []

    # --- PreBind / Bind ----------------------------------------------------------------------------
    def pre_bind_reservation(
        self, state: CycleState, reservation: Mapping[str, Any], node_name: str
    ) -> Status:
        """``PreBindReservation``: write ``reservation-allocated`` on the pods the reservation
        pre-allocated."""
        ps = pod_state(state)
        pa = ps.pre_allocation if ps is not None else None
        if pa is None or not pa.pre_allocated:
            return Status()
        spec = reservation.get("spec") or {}
        meta = reservation.get("metadata") or {}
        if spec.get("preAllocation") is not True:
            return Status(Code.ERROR, (ERR_REASON_PRE_ALLOCATION_UNSUPPORTED,))
        name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
        value = json.dumps({"name": name, "uid": uid}, separators=(",", ":"))
        for p in pa.pre_allocated:
            current = self.handle.informer.get("Pod", p.name, p.namespace)
            if current is None:
                return Status(Code.ERROR, (f"pre-allocated pod {p.key} of reservation {name} is gone",))
            cmeta = current.get("metadata") or {}
            if cmeta.get("uid") != p.uid:
                return Status(Code.ERROR, (ERR_REASON_PRE_ALLOCATION_UNSUPPORTED,))
            try:
                self.handle.cluster.patch(
                    "Pod",
                    p.name,
                    p.namespace,
                    {"metadata": {"annotations": {ANNOTATION_RESERVATION_ALLOCATED: value}}},
                )
            except ClusterError as exc:
                return Status.as_error(exc)
            pa.patched.append(p)
        return Status()

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        ps = pod_state(state)
        if ps is None or ps.reserve_pod or ps.assumed is None:
            return Status()
        value = json.dumps({"name": ps.assumed.name, "uid": ps.assumed.uid}, separators=(",", ":"))
        state.pod_mutation.annotations[ANNOTATION_RESERVATION_ALLOCATED] = value
        return Status()

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """A reserve pod's Bind: the Reservation becomes Available on the node."""
        if not is_reserve_pod(pod):
            return Status(Code.SKIP)
        name = pod.annotations.get(ANNOTATION_RESERVATION_NAME, "")
        entry = self.cache.by_reservation_name(name)
        if entry is None:
            return Status(Code.ERROR, (f"reservation {name} not found",))
        allocatable = dict(entry.r.template_requests)
        resize = entry.r.annotations.get(ANNOTATION_RESIZE_ALLOCATABLE)
        if resize:
            try:
                from koord_framework.api.resources import parse_resource_list

                allocatable.update(parse_resource_list(json.loads(resize).get("resources") or {}))
            except (ValueError, AttributeError) as exc:
                return Status(
                    Code.ERROR,
                    (f"reservation {name}: metadata.annotations[{ANNOTATION_RESIZE_ALLOCATABLE}]: {exc}",),
                )
        from koord_framework.cluster.clock import format_time

        now = format_time(self.handle.clock.now())
        status = {
            "nodeName": node_name,
            "phase": PHASE_AVAILABLE,
            "allocatable": format_resource_list(allocatable),
            "conditions": [
                {
                    "type": COND_SCHEDULED,
                    "status": "True",
                    "reason": REASON_SCHEDULED,
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": COND_READY,
                    "status": "True",
                    "reason": REASON_AVAILABLE,
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
            ],
        }
        try:
            self.handle.cluster.patch("Reservation", name, "", {"status": status}, status=True)
        except ClusterError as exc:
            return Status.as_error(exc)
        return Status()

    # --- reports -----------------------------------------------------------------------------------
    def explain_node(self, node_name: str) -> ExplainSection:
        """``koord explain node``: the reservations on the node, what they hold and who owns them."""
        from koord_plugin_reservation.explain import explain_node

        return explain_node(self, node_name)

    def explain_cycle(self, state: CycleState, pod: PodInfo, node_name: str | None) -> list[str]:
        """Lines for ``--explain``: the reservation nominated on the chosen node and why others were not."""
        ps = pod_state(state)
        if ps is None:
            return []
        if ps.reserve_pod:
            pa = ps.pre_allocation
            if pa is None:
                return []
            # Explaining runs before Reserve: say whom the nomination takes over on the chosen node.
            if node_name:
                pods, s = self._pre_allocated_on(state, ps, pa, node_name)
                if s.is_success and pods:
                    return [f"pre-allocates {', '.join(p.key for p in pods)} on node {node_name}"]
            nodes = ", ".join(sorted(pa.candidates)) or "none"
            return [f"pre-allocation candidates on nodes: {nodes}"]
        lines = []
        r = nominated_reservation(state, node_name) if node_name else None
        if r is not None:
            lines.append(f"nominated reservation {r.name} on node {node_name}")
        for node, ns in sorted(ps.nodes.items()):
            for other in ns.matched:
                if r is None or other.uid != r.uid:
                    lines.append(f"reservation {other.name} on {node} matched but was not nominated")
        for node, diag in sorted(ps.diagnosis.items()):
            for name, why in sorted(diag.rejected.items()):
                lines.append(f"reservation {name} on {node} {why}")
        return lines


# --- helpers ---------------------------------------------------------------------------------------
def _rows_in(rows: Int64Array, names: Iterable[str], index: Mapping[str, int]) -> BoolArray:
    """Which of ``rows`` belong to the nodes ``names`` (a few nodes among many rows)."""
    wanted = [index[n] for n in names if n in index]
    if not wanted:
        return np.zeros(rows.shape[0], dtype=np.bool_)
    if len(wanted) <= _FEW_ROWS:
        # An owner matches reservations on a node or two: a comparison per node costs a few microseconds,
        # ``np.isin`` (sort-based) ten times more.
        mask: BoolArray = rows == wanted[0]
        for row in wanted[1:]:
            mask |= rows == row
        return mask
    return np.isin(rows, np.asarray(wanted, dtype=np.int64))


_FEW_ROWS = 16
"""Up to this many wanted rows ``_rows_in`` compares row by row."""


def order_of(reservations: Sequence[ReservationInfo]) -> tuple[ReservationInfo | None, int]:
    """``findMostPreferredReservationByOrder``: the reservation with the lowest positive order label."""
    best: ReservationInfo | None = None
    best_order = 0
    for r in reservations:
        order = r.order
        if order > 0 and (best is None or order < best_order):
            best, best_order = r, order
    return best, best_order


def most_preferred_by_order(reservations: Sequence[ReservationInfo]) -> ReservationInfo | None:
    return order_of(reservations)[0]


def post_filter_reasons(ps: PodState, filtered: Mapping[str, Status]) -> list[str]:
    """``makePostFilterReasons``: why the pod's matching reservations did not help, counted over nodes."""
    owner_matched = name_matched = name_unmatched = affinity = unschedulable = not_exact = 0
    taints: dict[str, int] = {}
    by_node: dict[str, int] = {}
    for node, d in ps.diagnosis.items():
        owner_matched += d.owner_matched
        name_matched += d.name_matched
        name_unmatched += d.name_unmatched
        affinity += d.affinity_unmatched
        unschedulable += d.unschedulable_unmatched
        not_exact += d.not_exact_matched
        for key, n in d.taint_reasons.items():
            taints[key] = taints.get(key, 0) + n
        remain = (
            d.owner_matched
            - d.name_unmatched
            - d.unschedulable_unmatched
            - d.affinity_unmatched
            - d.not_exact_matched
            - d.taints_unmatched
        )
        if remain <= 0:
            continue
        counted: dict[str, int] = {}
        status = filtered.get(node)
        if status is not None:
            for reason in status.reasons:
                if is_reservation_reason(reason):
                    remain -= 1
                    continue
                counted[reason] = counted.get(reason, 0) + 1
        if remain <= 0:
            continue
        for reason, n in counted.items():
            by_node[reason] = by_node.get(reason, 0) + remain * n
    if owner_matched <= 0 and not ps.has_affinity:
        return []
    out: list[str] = []
    if name_matched:
        out.append(f"{name_matched} Reservation(s) exactly matches the requested reservation name")
    if name_unmatched:
        out.append(f"{name_unmatched} Reservation(s) didn't match the requested reservation name")
    if affinity:
        out.append(f"{affinity} Reservation(s) didn't match affinity rules")
    if unschedulable:
        out.append(f"{unschedulable} Reservation(s) is unschedulable")
    if not_exact:
        out.append(f"{not_exact} Reservation(s) is not exact matched")
    for key, n in sorted(taints.items()):
        out.append(f"{n} Reservation(s) had untolerated taint {key}")
    for reason, n in sorted(by_node.items()):
        out.append(f"{n} Reservation(s) for node reason that {reason}")
    out.append(f"{owner_matched} Reservation(s) matched owner total")
    return out


__all__ = [
    "ERR_REASON_RESERVATION_AFFINITY",
    "MOST_PREFERRED_SCORE",
    "NodeState",
    "PodState",
    "Reservation",
    "pod_state",
    "post_filter_reasons",
]
