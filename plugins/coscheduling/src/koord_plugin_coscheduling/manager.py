"""``GangManager``: the gang decisions of every extension point (Koordinator's ``core.PodGroupManager``).

The plugin class is a thin adapter over this; tests drive it directly, as Koordinator's ``core_test.go``
drives ``PodGroupManager``.

**Scheduling context.** When the first pod of a gang group passes ``before_pre_filter`` it opens the group's
*gang scheduling context* (one at a time per profile): ``next_pod`` then hands the scheduler the group's
other pending members one by one, so a gang is tried as a block instead of interleaved with the rest of the
queue. Members that the context has not handed out yet are kept out of the queue by ``pre_enqueue``. A member
that fails records the failure in the context; later members fail fast with the same message. The context
ends when Permit lets the group go, when every pending member was tried (the group's waiting pods are then
rejected), or when the gang disappears.

**All or nothing.** Permit holds each member (``Wait``, with the gang's timeout) until every gang of the
group counts enough members under its match policy, then allows all the group's waiting pods at once.
In Strict mode a member that cannot be placed (PostFilter) or that is unreserved rejects every waiting
member of the group, so nothing of a failed gang keeps resources.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.interface import Handle, WaitingPod
from koord_framework.scheduler.status import Status
from koord_plugin_coscheduling.args import CoschedulingArgs
from koord_plugin_coscheduling.cache import GangCache
from koord_plugin_coscheduling.constants import (
    ERR_POD_HAS_NOT_BEEN_ATTEMPTED,
    ERR_POD_IS_NOT_EXISTS_IN_GANG_CACHE,
    ERR_REPRESENTATIVE_POD_ALREADY_EXISTS,
    GANG_MODE_STRICT,
    MATCH_POLICY_ONCE_SATISFIED,
    NAME,
    PERMIT_POD_GROUP_NOT_FOUND,
    PERMIT_POD_GROUP_NOT_SPECIFIED,
    PERMIT_SUCCESS,
    PERMIT_WAIT,
    REASON_ALL_PENDING_PODS_ALREADY_ATTEMPTED,
    REASON_GANG_IS_NIL,
    REASON_GANG_IS_SUCCEED,
    REASON_MEMBERS_HELD_BACK,
)
from koord_plugin_coscheduling.gang import Gang, MemberPod, gang_id, gang_name_of

log = logging.getLogger(__name__)

__all__ = ["DECISIONS_KEPT", "GangBindingInfo", "GangManager", "GangSchedulingContext", "PermitDecision"]

DECISIONS_KEPT = 64
"""Permit decisions kept per gang: enough to explain the last rounds, bounded for a long-running scheduler."""


@dataclass(slots=True)
class GangSchedulingContext:
    """The gang group being scheduled as a block (Koordinator's ``GangSchedulingContext``)."""

    first_pod: str
    """``namespace/name`` of the member that opened the context."""
    gang: str
    """The gang of ``first_pod``."""
    gang_group: frozenset[str]
    gang_group_id: str
    started: float
    already_attempted: set[str] = field(default_factory=set)
    failed_message: str = ""
    trigger_pod: str = ""
    held_back: set[str] = field(default_factory=set)
    """Members ``next_pod`` gave that the scheduler could not take (held back by another plugin)."""


@dataclass(frozen=True, slots=True)
class GangBindingInfo:
    """The gang group a bound pod belongs to and how many members it has."""

    gang_group_id: str
    member_count: int


@dataclass(frozen=True, slots=True)
class PermitDecision:
    """One Permit answer, kept for ``--explain`` and the gang report."""

    pod: str
    gang: str
    outcome: str
    """``Wait``, ``Allow`` (this pod completed the group), ``Success`` (not a gang pod) or a rejection."""
    message: str
    at: float


def _pod_gang_id(pod: PodInfo) -> str:
    name = gang_name_of(pod.labels, pod.annotations)
    return gang_id(pod.namespace, name) if name else ""


def go_quote(text: str) -> str:
    """Go's ``%q`` for the messages Koordinator formats with it (close enough for printable text)."""
    return json.dumps(text, ensure_ascii=False)


class GangManager:
    """Gang decisions over a ``GangCache``; ``handle`` is None in unit tests (no waiting pods to touch)."""

    def __init__(
        self,
        args: CoschedulingArgs,
        cache: GangCache,
        handle: Handle | None = None,
        *,
        now: Callable[[], float] | None = None,
    ) -> None:
        self.args = args
        self.cache = cache
        self.handle = handle
        self._now = now or (lambda: 0.0)
        self.context: GangSchedulingContext | None = None
        self.decisions: dict[str, deque[PermitDecision]] = {}
        """Gang → its latest Permit decisions (oldest first, at most ``DECISIONS_KEPT``), for reports."""
        self.rejections: dict[str, str] = {}
        """Gang group id → why its waiting pods were last rejected."""
        self.record_decisions = True

    # --- lookups ------------------------------------------------------------------------------------
    def gang_of(self, pod: PodInfo) -> Gang | None:
        gid = _pod_gang_id(pod)
        return self.cache.gangs.get(gid) if gid else None

    # --- NextPod ------------------------------------------------------------------------------------
    def next_pod(self) -> MemberPod | None:
        """The next member of the gang group being scheduled, or None (the scheduler pops its queue)."""
        with self.cache.lock:
            ctx = self.context
            if ctx is None:
                return None
            gang = self.cache.gangs.get(ctx.gang)
            if gang is None:
                self._reject_group(ctx.gang_group, REASON_GANG_IS_NIL)
                self._clear_context(REASON_GANG_IS_NIL)
                return None
            for member_id in gang.gang_group:
                member = self.cache.gangs.get(member_id)
                if member is None:
                    continue
                for key, pod in member.pending_children.items():
                    if key not in ctx.already_attempted:
                        ctx.already_attempted.add(key)
                        return pod
            if ctx.held_back:
                # Some members could not be tried (another plugin holds them back): they are not failures.
                # The members already waiting keep waiting, up to the gang's timeout, for them to come.
                self._clear_context(REASON_MEMBERS_HELD_BACK)
                return None
            self._reject_group(ctx.gang_group, REASON_ALL_PENDING_PODS_ALREADY_ATTEMPTED)
            self._clear_context(REASON_ALL_PENDING_PODS_ALREADY_ATTEMPTED)
            return None

    def next_pod_skipped(self, pod_key: str) -> None:
        """The scheduler could not take the member ``next_pod`` gave (held back by another plugin)."""
        with self.cache.lock:
            if self.context is not None:
                self.context.held_back.add(pod_key)

    def _clear_context(self, reason: str) -> None:
        if self.context is not None:
            log.debug("gang scheduling context of %s ends: %s", self.context.gang_group_id, reason)
        self.context = None

    # --- PreEnqueue / BeforePreFilter ---------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> str:
        """'' to admit the pod to the active queue, else why not (Koordinator's messages)."""
        gid = _pod_gang_id(pod)
        if not gid:
            return ""
        with self.cache.lock:
            gang = self.cache.gangs.get(gid)
            err = self._admission_check(gang, gid, pod)
            if err is not None:
                return err
            assert gang is not None
            if gang.match_policy == MATCH_POLICY_ONCE_SATISFIED and gang.once_resource_satisfied:
                return ""
            err = self._basic_check(gang, pod)
            if err:
                gang.group_info.delete_if_representative(pod.key)
                return err
            ctx = self.context
            if ctx is not None and gang.name in ctx.gang_group and pod.key not in ctx.already_attempted:
                return ERR_POD_HAS_NOT_BEEN_ATTEMPTED.format(gang.gang_group_id)
            if pod.key not in gang.pending_children:
                # Guards against a representative that would never be scheduled (and never released).
                return ERR_POD_IS_NOT_EXISTS_IN_GANG_CACHE.format(pod.key)
            representative = gang.group_info.record_if_no_representative(pod.key)
            if representative != pod.key:
                return ERR_REPRESENTATIVE_POD_ALREADY_EXISTS.format(representative, gang.gang_group_id)
            return ""

    def before_pre_filter(self, pod: PodInfo) -> str:
        """Open the group's scheduling context on its first member; later members fail fast after a failure.

        Koordinator runs this as a BeforePreFilter transformer; the plugin calls it first thing in PreFilter
        (see ``Coscheduling.pre_filter``).
        """
        gid = _pod_gang_id(pod)
        if not gid:
            return ""
        with self.cache.lock:
            gang = self.cache.gangs.get(gid)
            err = self._admission_check(gang, gid, pod)
            if err is not None:
                return err
            assert gang is not None
            if gang.match_policy == MATCH_POLICY_ONCE_SATISFIED and gang.once_resource_satisfied:
                return ""
            err = self._basic_check(gang, pod)
            if err:
                gang.group_info.delete_if_representative(pod.key)
                return err
            ctx = self.context
            if ctx is None:
                self.context = GangSchedulingContext(
                    pod.key, gang.name, frozenset(gang.gang_group), gang.gang_group_id, self._now(), {pod.key}
                )
                # The representative is in scheduling now; the next round elects another one.
                gang.group_info.representative_pod_key = ""
                return ""
            if ctx.failed_message:
                return ctx.failed_message
            return ""

    def _admission_check(self, gang: Gang | None, gid: str, pod: PodInfo) -> str | None:
        if gang is None:
            return f"can't find gang, gangName: {gid}, podName: {pod.key}"
        if not gang.has_gang_init:
            return f"gang has not init, gangName: {gang.name}, podName: {pod.key}"
        return None

    def _basic_check(self, gang: Gang, pod: PodInfo) -> str:
        group = gang.gang_group
        missing: list[str] = []
        not_init: list[str] = []
        short = False
        for member_id in group:
            member = self.cache.gangs.get(member_id)
            if member is None:
                missing.append(member_id)
            elif not member.has_gang_init:
                not_init.append(member_id)
            elif len(member.children) < member.min_required:
                short = True
        failed: list[str] = []
        if missing:
            failed.append(f"memberGangs {_go_list(missing)} doesn't exists")
        if not_init:
            failed.append(f"memberGangs {_go_list(not_init)} has not init")
        if short:
            failed.append(f"memberGangs {_go_list(group)} child pod not collect enough")
        if not failed:
            return ""
        return (
            f"gangGroup {_go_list(group)} basic check: {', '.join(failed)}, current gang: {gang.name}, "
            f"podName: {pod.key}"
        )

    # --- PostFilter ---------------------------------------------------------------------------------
    def post_filter(self, pod: PodInfo, filtered: Mapping[str, Status]) -> Status:
        """Koordinator's PostFilter (preemption off: Unschedulable) followed by its AfterPostFilter: a Strict
        gang that is not satisfied rejects all its waiting members with the recorded failure."""
        gid = _pod_gang_id(pod)
        if not gid:
            return Status.unschedulable()
        with self.cache.lock:
            gang = self.cache.gangs.get(gid)
            if gang is None:
                return Status.unschedulable(f"Pod {go_quote(pod.key)} cannot find Gang {go_quote(gid)}")
            if gang.match_policy == MATCH_POLICY_ONCE_SATISFIED and gang.once_resource_satisfied:
                return Status.unschedulable()
            message = self._summary_and_record_failure(pod, filtered)
            self.rejections[gang.gang_group_id] = message
            if gang.mode == GANG_MODE_STRICT:
                gang.group_info.clear_waiting_gang()
                self._reject_group(frozenset(gang.gang_group), message)
                return Status.unschedulable(
                    f"Gang {go_quote(gang.name)} gets rejected due to pod is unschedulable"
                )
            return Status.unschedulable()

    def _summary_and_record_failure(self, pod: PodInfo, filtered: Mapping[str, Status]) -> str:
        ctx = self.context
        if ctx is None:
            return f"gets rejected due to member pod {go_quote(pod.key)} is unschedulable"
        if ctx.failed_message:
            return ctx.failed_message
        waiting = len(self.cache.waiting_pods(ctx.gang_group))
        fit = _fit_error(self._num_nodes(filtered), filtered)
        ctx.failed_message = (
            f"GangGroup {go_quote(ctx.gang_group_id)} gets rejected due to member Pod {go_quote(pod.key)} is "
            f"unschedulable with reason {go_quote(fit)}, alreadyWaitForBound: {waiting}"
        )
        ctx.trigger_pod = pod.key
        return ctx.failed_message

    def _num_nodes(self, filtered: Mapping[str, Status]) -> int:
        if self.handle is not None:
            return len(self.handle.node_infos())
        return len(filtered)

    # --- Permit -------------------------------------------------------------------------------------
    def permit(self, pod: PodInfo) -> tuple[float, str]:
        """(wait seconds, outcome): PodGroup not specified, PodGroup not found, Wait or Success."""
        gid = _pod_gang_id(pod)
        if not gid:
            return 0.0, PERMIT_POD_GROUP_NOT_SPECIFIED
        with self.cache.lock:
            gang = self.cache.gangs.get(gid)
            if gang is None:
                return 0.0, PERMIT_POD_GROUP_NOT_FOUND
            gang.add_assumed_pod(_member(pod))
            for member_id in gang.gang_group:
                member = self.cache.gangs.get(member_id)
                if member is None or not member.is_valid_for_permit():
                    gang.group_info.add_waiting_gang()
                    return gang.wait_time, PERMIT_WAIT
            return 0.0, PERMIT_SUCCESS

    def allow_gang_group(self, pod: PodInfo) -> int:
        """Let every waiting pod of the pod's gang group go on; returns how many were released."""
        with self.cache.lock:
            gang = self.gang_of(pod)
            if gang is None:
                return 0
            group = set(gang.gang_group)
            info = gang.group_info
            self.rejections.pop(gang.gang_group_id, None)
            if not info.binding_member_pods:
                info.binding_member_pods = {p.uid for p in self.cache.waiting_pods(gang.gang_group)}
            waiting = self._waiting_of(group)
        for wp in waiting:
            wp.allow(NAME)
        return len(waiting)

    def succeed_gang_scheduling(self) -> None:
        with self.cache.lock:
            self._clear_context(REASON_GANG_IS_SUCCEED)

    # --- Unreserve / PostBind -------------------------------------------------------------------------
    def unreserve(self, pod: PodInfo) -> None:
        gid = _pod_gang_id(pod)
        if not gid:
            return
        with self.cache.lock:
            gang = self.cache.gangs.get(gid)
            if gang is None:
                return
            gang.del_assumed_pod(pod.key)
            satisfied = gang.match_policy == MATCH_POLICY_ONCE_SATISFIED and gang.once_resource_satisfied
            if not satisfied and gang.mode == GANG_MODE_STRICT:
                message = (
                    f"Gang {go_quote(gang.name)} gets rejected due to Pod {go_quote(pod.name)} in Unreserve"
                )
                self.rejections.setdefault(gang.gang_group_id, message)
                self._reject_group(frozenset(gang.gang_group), message)

    def post_bind(self, pod: PodInfo) -> list[MemberPod]:
        """Count the pod bound; returns the group's members that may now pass PreEnqueue (to activate)."""
        gid = _pod_gang_id(pod)
        if not gid:
            return []
        with self.cache.lock:
            gang = self.cache.gangs.get(gid)
            if gang is None:
                return []
            return self.cache.mark_bound(gang, _member(pod, pod.node_name))

    # --- PreBind ------------------------------------------------------------------------------------
    def gang_binding_info(self, pod: PodInfo) -> GangBindingInfo | None:
        with self.cache.lock:
            gang = self.gang_of(pod)
            if gang is None:
                return None
            members = gang.group_info.binding_member_pods or set()
            if len(members) <= 1 or pod.uid not in members:
                return None
            return GangBindingInfo(gang.gang_group_id, len(members))

    # --- rejecting ------------------------------------------------------------------------------------
    def _waiting_of(self, group: Iterable[str]) -> list[WaitingPod]:
        if self.handle is None:
            return []
        wanted = set(group)
        out: list[WaitingPod] = []

        def pick(wp: WaitingPod) -> None:
            if _pod_gang_id(wp.pod) in wanted:
                out.append(wp)

        self.handle.iterate_waiting_pods(pick)
        return out

    def _reject_group(self, group: frozenset[str], message: str) -> None:
        waiting = self._waiting_of(group)
        if waiting:
            self.rejections[",".join(sorted(group))] = message
        for wp in waiting:
            self.record(wp.pod, "Reject", message)
            wp.reject(NAME, message)

    # --- decisions (explain / report) -------------------------------------------------------------------
    def record(self, pod: PodInfo, outcome: str, message: str) -> None:
        if not self.record_decisions:
            return
        gid = _pod_gang_id(pod)
        if not gid:
            return
        with self.cache.lock:
            kept = self.decisions.get(gid)
            if kept is None:
                if len(self.decisions) >= 2 * len(self.cache.gangs) + 16:
                    self._forget_gone_gangs()
                kept = self.decisions[gid] = deque(maxlen=DECISIONS_KEPT)
            kept.append(PermitDecision(pod.key, gid, outcome, message, self._now()))

    def _forget_gone_gangs(self) -> None:
        """Drop the decisions and rejections of gangs no longer in the cache (a long-running scheduler sees
        jobs come and go); amortised over the records that trigger it."""
        gangs = self.cache.gangs
        for gid in [g for g in self.decisions if g not in gangs]:
            del self.decisions[gid]
        live_groups = {g.gang_group_id for g in gangs.values()}
        for group in [g for g in self.rejections if g not in live_groups]:
            del self.rejections[group]


def _member(pod: PodInfo, node_name: str = "") -> MemberPod:
    return MemberPod(pod.namespace, pod.name, pod.uid, node_name, pod.phase)


def _go_list(items: Iterable[str]) -> str:
    """Go's ``%v`` of a string slice: ``[a b c]``."""
    return "[" + " ".join(items) + "]"


def _fit_error(num_nodes: int, filtered: Mapping[str, Status]) -> str:
    """kube-scheduler's ``FitError.Error()`` without the PostFilter part: ``0/N nodes are available: ...``."""
    counts: dict[str, int] = {}
    for status in filtered.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    histogram = sorted(f"{n} {reason}" for reason, n in counts.items())
    msg = f"0/{num_nodes} nodes are available:"
    if histogram:
        msg += f" {', '.join(histogram)}."
    return msg
