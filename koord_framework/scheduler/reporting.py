"""What the scheduler tells users about a pod: Events and the ``PodScheduled`` condition.

As kube-scheduler v1.20 (``scheduler.go``: ``recordSchedulingFailure``, ``updatePod``, ``bind``):

* a pod bound → a ``Normal`` ``Scheduled`` Event, ``Successfully assigned <ns>/<name> to <node>``
  (action ``Binding``);
* a scheduling attempt that failed → a ``Warning`` ``FailedScheduling`` Event with the error's text (the
  ``FitError`` ``0/N nodes are available: ...`` when no node fit; action ``Scheduling``) and the pod's
  ``PodScheduled`` condition set to ``False`` with reason ``Unschedulable`` (the scheduling cycle found no
  node, or a plugin rejected the pod) or ``SchedulerError`` (Reserve, Permit, PreBind or Bind failed with an
  error), written through the status subresource only when status, reason or message changed;
* a Reservation the scheduler cannot place → the same ``FailedScheduling`` Event about the Reservation and,
  as Koordinator's ``SetReservationUnschedulable``, a ``Scheduled=False``/``Unschedulable`` condition on its
  status (an existing ``Scheduled=True`` is left alone). Koordinator rewrites the condition on every attempt
  (its ``lastProbeTime`` moves); koord writes it only when reason or message changed, as for pods.

The events go through the cluster's recorder (correlated and rate-limited, never blocking); the condition
patch is a synchronous write, as kube-scheduler's, but skipped when nothing changed, so a pod that keeps
failing the same way costs one write.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.clock import format_time
from koord_framework.cluster.port import ClusterPort, EventRecord, Obj
from koord_framework.errors import ClusterError

__all__ = [
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "FailureReporter",
    "condition_update",
]

log = logging.getLogger(__name__)

REASON_UNSCHEDULABLE = "Unschedulable"
"""``v1.PodReasonUnschedulable``."""
REASON_SCHEDULER_ERROR = "SchedulerError"
"""kube-scheduler's ``SchedulerError`` reason (a failure after a node was chosen)."""
POD_SCHEDULED = "PodScheduled"
RESERVATION_SCHEDULED = "Scheduled"


def condition_update(
    conditions: Any, type_: str, status: str, reason: str, message: str, now: float, *, probe: bool = False
) -> list[dict[str, Any]] | None:
    """The conditions with ``type_`` set as kube's ``UpdatePodCondition`` sets it, or None when unchanged.

    ``lastTransitionTime`` moves only when the status changes; ``probe`` also stamps ``lastProbeTime``
    (Reservations carry one, pods' PodScheduled does not).
    """
    current = [dict(c) for c in conditions or () if isinstance(c, Mapping)]
    stamp = format_time(now)
    for i, cond in enumerate(current):
        if cond.get("type") != type_:
            continue
        if cond.get("status") == status and cond.get("reason") == reason and cond.get("message") == message:
            return None
        updated = {**cond, "status": status, "reason": reason, "message": message}
        if cond.get("status") != status:
            updated["lastTransitionTime"] = stamp
        if probe:
            updated["lastProbeTime"] = stamp
        current[i] = updated
        return current
    new: dict[str, Any] = {"type": type_, "status": status}
    if probe:
        new["lastProbeTime"] = stamp
    new.update({"lastTransitionTime": stamp, "reason": reason, "message": message})
    current.append(new)
    return current


class FailureReporter:
    """Records the scheduler's Events and conditions on ``cluster``; ``informer`` answers the current
    object (read-only) so that unchanged conditions are not written."""

    def __init__(self, cluster: ClusterPort, get_cached: Any) -> None:
        self.cluster = cluster
        self._get_cached = get_cached

    # --- pods ------------------------------------------------------------------------------------------
    def scheduled(self, scheduler_name: str, namespace: str, name: str, uid: str, node: str) -> None:
        self.cluster.record_event(
            EventRecord(
                kind="Pod",
                namespace=namespace,
                name=name,
                reason="Scheduled",
                message=f"Successfully assigned {namespace}/{name} to {node}",
                type="Normal",
                component=scheduler_name,
                extra={"uid": uid},
                action="Binding",
            )
        )

    def pod_failed(
        self, scheduler_name: str, namespace: str, name: str, uid: str, reason: str, message: str
    ) -> None:
        """``recordSchedulingFailure``: the Warning Event, then the condition when it changed."""
        self.cluster.record_event(
            EventRecord(
                kind="Pod",
                namespace=namespace,
                name=name,
                reason="FailedScheduling",
                message=message,
                type="Warning",
                component=scheduler_name,
                extra={"uid": uid},
                action="Scheduling",
            )
        )
        current: Obj | None = self._get_cached("Pod", name, namespace)
        if current is None or (current.get("spec") or {}).get("nodeName"):
            return  # gone, or bound meanwhile: nothing to say on it
        if str((current.get("metadata") or {}).get("uid") or "") not in ("", uid):
            return  # another pod under the same name
        status = current.get("status") or {}
        conditions = condition_update(
            status.get("conditions"), POD_SCHEDULED, "False", reason, message, self.cluster.clock.now()
        )
        if conditions is None:
            return
        try:
            self.cluster.patch("Pod", name, namespace, {"status": {"conditions": conditions}}, status=True)
        except ClusterError as err:
            log.warning("could not update the PodScheduled condition of pod %s/%s: %s", namespace, name, err)

    # --- reservations ------------------------------------------------------------------------------------
    def reservation_failed(self, scheduler_name: str, name: str, uid: str, message: str) -> None:
        """Koordinator's reservation failure handler: the Event, and ``Scheduled=False`` on its status."""
        self.cluster.record_event(
            EventRecord(
                kind="Reservation",
                namespace="",
                name=name,
                reason="FailedScheduling",
                message=message,
                type="Warning",
                component=scheduler_name,
                extra={"uid": uid} if uid else {},
                action="Scheduling",
            )
        )
        current: Obj | None = self._get_cached("Reservation", name, "")
        if current is None:
            return
        status = current.get("status") or {}
        if status.get("nodeName"):
            return  # placed meanwhile
        for cond in status.get("conditions") or ():
            if (
                isinstance(cond, Mapping)
                and cond.get("type") == RESERVATION_SCHEDULED
                and cond.get("status") == "True"
            ):
                return  # SetReservationUnschedulable keeps a Scheduled=True condition
        conditions = condition_update(
            status.get("conditions"),
            RESERVATION_SCHEDULED,
            "False",
            REASON_UNSCHEDULABLE,
            message,
            self.cluster.clock.now(),
            probe=True,
        )
        if conditions is None:
            return
        try:
            self.cluster.patch("Reservation", name, "", {"status": {"conditions": conditions}}, status=True)
        except ClusterError as err:
            log.warning("could not mark reservation %s unschedulable: %s", name, err)
