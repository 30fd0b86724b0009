"""``Coscheduling``: gang scheduling, pods bound all together or not at all (Koordinator ``coscheduling``).

Extension points (Koordinator's, in the order a gang member meets them):

* **PreEnqueue** - a gang member enters the active queue only when every gang of its group exists, is
  initialised and has its minimum of members, and only as the group's *representative* (one at a time);
  the other members wait for NextPod.
* **NextPod** (``NextPodPlugin``) - while a group is being scheduled, its pending members are handed to the
  scheduler one after another, ahead of the queue.
* **BeforePreFilter** (``PreFilterTransformer``, as Koordinator's) - the first member opens the group's
  scheduling context; after a member failed, the others fail fast with its message, before any plugin's
  PreFilter (and the Reservation's node restores) spends work on it. PreFilter itself plans nothing: its
  network-topology planning is not supported.
* **PostFilter** - Koordinator's PostFilter (no preemption) and AfterPostFilter: a Strict, unsatisfied gang
  rejects all its members waiting at Permit.
* **PreScore / Score** - network-topology ordering in Koordinator; without it (always, here) PreScore says
  Skip and Score is 0, so the shipped profile loads unchanged.
* **Reserve / Unreserve** - Reserve does nothing; Unreserve takes the pod out of the waiting members and, in
  Strict mode, rejects the whole group.
* **Permit** - Wait (with the gang's timeout) until every gang of the group has enough members under its
  match policy, then allow every waiting member at once.
* **PreBind** - the binding annotations (group id, member count) for pods bound as part of a gang.
* **PostBind** - count the member bound (a bound member makes the group once-satisfied).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from koord_framework.api.objects import PodInfo
from koord_framework.plugin import PluginArgs
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import NodeRestore, PreFilterTransformer
from koord_framework.scheduler.interface import (
    ClusterEvent,
    EnqueueExtensions,
    Handle,
    NextPodPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReportingPlugin,
    ReservePlugin,
    SchedulerPlugin,
    ScorePlugin,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import SUCCESS, Code, Status
from koord_plugin_coscheduling.args import CoschedulingArgs
from koord_plugin_coscheduling.cache import GangCache
from koord_plugin_coscheduling.constants import (
    ANNOTATION_BIND_GANG_GROUP_ID,
    ANNOTATION_BIND_GANG_MEMBER_COUNT,
    DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID,
    DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT,
    MSG_GANG_NOT_FOUND,
    NAME,
    PERMIT_POD_GROUP_NOT_FOUND,
    PERMIT_POD_GROUP_NOT_SPECIFIED,
    PERMIT_WAIT,
    POD_GROUP_LABEL,
)
from koord_plugin_coscheduling.controller import PodGroupController
from koord_plugin_coscheduling.gang import MemberPod, gang_name_of
from koord_plugin_coscheduling.manager import GangManager
from koord_plugin_coscheduling.report import GangReport, gang_reports

log = logging.getLogger(__name__)

__all__ = ["Coscheduling"]


class Coscheduling(
    SchedulerPlugin[CoschedulingArgs],
    PreEnqueuePlugin,
    NextPodPlugin,
    PreFilterPlugin,
    PreFilterTransformer,
    PostFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    PostBindPlugin,
    EnqueueExtensions,
    ReportingPlugin,
):
    """Gang scheduling over PodGroups and gang annotations."""

    name: ClassVar[str] = NAME
    report_columns: ClassVar[tuple[str, ...]] = (
        "gang",
        "minMember",
        "bound",
        "waiting",
        "pending",
        "verdict",
        "why",
    )
    Args: ClassVar[type[PluginArgs]] = CoschedulingArgs

    def __init__(self, args: CoschedulingArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        parsed = self.args
        self.cs_args: CoschedulingArgs = parsed
        clock = handle.clock
        self.cache = GangCache(parsed, clock.now)
        self._last_given: tuple[str, str] = ("", "")
        """(uid, key) of the member NextPod last gave: the scheduler reports a skip right after the answer."""
        self.manager = GangManager(parsed, self.cache, handle, now=clock.now)
        informer = handle.informer
        self.controller = PodGroupController(
            self.cache,
            handle.cluster,
            lambda ns, name: informer.get("PodGroup", name, ns),
            lambda ns, name: informer.get("Pod", name, ns),
            clock.now,
        )
        informer.add_handler(
            "PodGroup", self._on_pod_group_add, self._on_pod_group_update, self.cache.on_pod_group_delete
        )
        informer.add_handler("Pod", self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        # Only now: the informer replays what it holds while the handlers are added, before the scheduler
        # has a queue; those pods are queued (and judged by PreEnqueue) when the scheduler starts.
        self.cache.activate = self._activate

    # --- events: the gang cache, then the controller's dirty set -----------------------------------
    def _on_pod_group_add(self, obj: Mapping[str, Any]) -> None:
        self.cache.on_pod_group_add(obj)
        self.controller.on_pod_group(obj)

    def _on_pod_group_update(self, old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self.cache.on_pod_group_update(old, obj)
        self.controller.on_pod_group(obj)

    def _on_pod_add(self, obj: Mapping[str, Any]) -> None:
        self.cache.on_pod_add(obj)
        self._mark_pod_group(obj)

    def _on_pod_update(self, old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self.cache.on_pod_update(old, obj)
        self._mark_pod_group(obj)

    def _on_pod_delete(self, obj: Mapping[str, Any]) -> None:
        self.cache.on_pod_delete(obj)
        self._mark_pod_group(obj)

    def _mark_pod_group(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if name:
            self.controller.mark(str(meta.get("namespace") or "default"), name)

    def sync_pod_groups(self) -> int:
        """Bring the status of every PodGroup that changed up to date (the PodGroup controller's work)."""
        return self.controller.flush()

    # --- queueing -----------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEvent]:
        # A gang member this plugin held back is released by this plugin itself (NextPod, and activations
        # when a gang completes or its PodGroup arrives); only new room helps from outside. Not PodGroup
        # updates: the controller's status writes would move every held-back member on every bind.
        return [ClusterEvent("Node", "Add|Update")]

    def _activate(self, member: MemberPod) -> None:
        obj = self.handle.informer.get("Pod", member.name, member.namespace)
        if obj is None:
            return
        # A handle without a queue (a test double) cannot activate; nothing is lost, the pod stays queued.
        with contextlib.suppress(NotImplementedError):
            self.handle.activate_pods([PodInfo.from_manifest(obj)])

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not gang_name_of(pod.labels, pod.annotations):
            return SUCCESS  # no gang: nothing to count or to wait for (every pending pod at start-up)
        self.cache.ensure_member(pod)
        err = self.manager.pre_enqueue(pod)
        if err:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self._reasons(err, pod))
        return SUCCESS

    def next_pod(self) -> str | None:
        member = self.manager.next_pod()
        if member is None:
            return None
        self._last_given = (member.uid, member.key)
        return member.uid

    def next_pod_skipped(self, uid: str) -> None:
        given_uid, key = self._last_given
        if given_uid == uid:
            self.manager.next_pod_skipped(key)

    # --- PreFilter / PostFilter ---------------------------------------------------------------------
    def before_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[NodeRestore | None, Status]:
        """Koordinator's ``BeforePreFilter``: open the group's scheduling context or fail fast."""
        err = self.manager.before_pre_filter(pod)
        if err:
            # UnschedulableAndUnresolvable: preemption cannot help a gang that is not ready.
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self._reasons(err, pod))
        return None, Status()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        # Koordinator's own PreFilter only plans network-topology placements, which are not supported.
        return None, Status()

    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        status = self.manager.post_filter(pod, filtered)
        self.controller.flush()
        return None, status

    # --- PreScore / Score (network topology only in Koordinator) -------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        return Status(Code.SKIP)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return 0, Status()

    # --- Reserve / Permit ---------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return Status()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.manager.unreserve(pod)

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        wait, outcome = self.manager.permit(pod)
        if outcome == PERMIT_POD_GROUP_NOT_SPECIFIED:
            return Status(), 0.0
        if outcome == PERMIT_POD_GROUP_NOT_FOUND:
            self.manager.record(pod, "Unschedulable", MSG_GANG_NOT_FOUND)
            return Status(Code.UNSCHEDULABLE, (MSG_GANG_NOT_FOUND,)), 0.0
        if outcome == PERMIT_WAIT:
            self.manager.record(pod, "Wait", f"waiting for the gang group for at most {wait:g}s")
            return Status(Code.WAIT), wait
        released = self.manager.allow_gang_group(pod)
        self.manager.succeed_gang_scheduling()
        self.manager.record(pod, "Allow", f"gang group satisfied; {released} waiting member(s) released")
        return Status(), 0.0

    # --- binding --------------------------------------------------------------------------------------
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        info = self.manager.gang_binding_info(pod)
        if info is None:
            # Koordinator deletes stale binding annotations here; the batched patch can only set values,
            # so they are left alone (a pod bound outside a gang carries none).
            return Status()
        annotations = state.pod_mutation.annotations
        count = str(info.member_count)
        annotations[ANNOTATION_BIND_GANG_GROUP_ID] = info.gang_group_id
        annotations[ANNOTATION_BIND_GANG_MEMBER_COUNT] = count
        annotations[DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID] = info.gang_group_id
        annotations[DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT] = count
        return Status()

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for member in self.manager.post_bind(pod):
            self._activate(member)
        gang = self.manager.gang_of(pod)
        if gang is None or not gang.waiting_for_bind_children:
            # Once per batch of members bound together (not per pod): the statuses of every gang changed
            # since the last flush are written in one go.
            self.controller.flush()

    # --- reports ----------------------------------------------------------------------------------------
    def gang_reports(self) -> list[GangReport]:
        """Per gang: members bound, waiting, pending, the last rejection and the problems of its spec."""
        self.controller.flush()
        return gang_reports(self.manager)

    def report(self, explain: bool) -> list[dict[str, Any]]:
        """``koord simulate``'s gang section: one row per gang; ``explain`` adds its Permit decisions."""
        return [r.to_dict(explain) for r in self.gang_reports()]

    def _reasons(self, err: str, pod: PodInfo) -> tuple[str, ...]:
        """Koordinator's message first; then what was wrong with the gang's spec, if anything."""
        gang = self.manager.gang_of(pod)
        if gang is not None and gang.problems and not gang.has_gang_init:
            return (err, *gang.problems)
        return (err,)
