"""ReservationFirst migration: reserve room elsewhere, evict once it is held, follow the replacement pod.

Koordinator's ``doMigrate`` past the object limiter, for jobs of mode ``ReservationFirst``. Each pass reads
the job and its Reservation again and goes as far as it can, so a restarted descheduler carries on from
the objects alone:

1. no ``spec.reservationOptions.reservationRef`` yet: create the Reservation (a copy of the pod, owned by
   its controller, away from its node, expiring with the job) and record it in the job; a Reservation of
   the job's name that exists already is taken over;
2. ``ReservationCreated``; a scheduling failure the scheduler reported is copied to
   ``ReservationScheduled=False`` (reason ``Unschedulable``); still Pending: look again in 3s; expired:
   Failed ``ReservationExpired``; neither pending nor scheduled: Failed ``Unschedulable``;
3. scheduled: ``status.nodeName`` and ``ReservationScheduled``; on the pod's own node: Failed
   ``ForbiddenMigratePod``;
4. evict the pod (Eviction condition, as EvictDirectly); a reservation consumed by another pod meanwhile
   fails the job;
5. wait for the replacement to consume the reservation (``PodBoundReservation=False``,
   ``WaitForPodBindReservation``), record it (``ReservationBound``, ``status.podRef``), wait for it to be
   Ready (``BoundPodReady``), then Succeeded: ``Bind Pod "ns/name" in Reservation "r"``.

A reservation whose owner is the pod itself (the pod was Pending, unschedulable) instead waits for that
pod to be scheduled. The descheduler never schedules the Reservation: the scheduler's Reservation plugin
does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from koord_framework.errors import ClusterError, ConflictError, KindNotServedError
from koord_plugin_migration import jobs, reservations

if TYPE_CHECKING:
    from koord_plugin_migration.controller import MigrationReconciler

REQUEUE_AFTER = 3.0


def _key(ref: Mapping[str, Any]) -> str:
    return f"{ref.get('namespace') or ''}/{ref.get('name') or ''}"


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


class ReservationFirst:
    """The ReservationFirst steps of one reconciler (which owns the job writes and the eviction)."""

    def __init__(self, reconciler: MigrationReconciler) -> None:
        self.r = reconciler
        self.cluster = reconciler.handle.cluster

    # --- helpers ----------------------------------------------------------------------------------------
    def _now(self) -> float:
        return self.r.handle.clock.now()

    def _requeue(self, job: Mapping[str, Any]) -> None:
        self.r.enqueue(jobs.name(job), self._now() + REQUEUE_AFTER)

    def _status(self, job: Mapping[str, Any]) -> dict[str, Any]:
        return dict(job.get("status") or {})

    def _get_reservation(self, ref: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.cluster.try_get(reservations.KIND, str(ref.get("name") or ""))

    def _missing_reservation(self, job: dict[str, Any], ref: Mapping[str, Any]) -> None:
        # NamespacedName of a cluster-scoped object prints as "/name", as in Koordinator's message.
        self.r.fail(
            job,
            jobs.REASON_MISSING_RESERVATION,
            f'Abort job caused by missing Reservation "{_key(ref)}"',
        )

    # --- the steps --------------------------------------------------------------------------------------
    def migrate(self, job: dict[str, Any]) -> None:
        ref = jobs.reservation_ref(job)
        if ref is None:
            self.create_reservation(job)
            return
        self._set_reservation_order(ref)
        self.r.update_condition(
            job,
            self._status(job),
            {"type": jobs.COND_RESERVATION_CREATED, "status": jobs.STATUS_TRUE},
        )
        obj = self._get_reservation(ref)
        if obj is None:
            self._missing_reservation(job, ref)
            return
        self._sync_schedule_failed(job, obj)
        if reservations.is_pending(obj):
            self._requeue(job)
            return
        if reservations.is_expired(obj):
            self.r.fail(job, jobs.REASON_RESERVATION_EXPIRED, "Reservation expired", event=False)
            return
        if not reservations.is_scheduled(obj):
            # Koordinator's reservations never need preemption: an unscheduled one ends the job.
            cond = reservations.unschedulable_condition(obj)
            message = str(cond.get("message") or "") if cond is not None else ""
            self.r.fail(job, jobs.REASON_UNSCHEDULABLE, message, event=False)
            return
        if not self._scheduled(job, obj):
            return
        if reservations.migrates_pending_pod(obj):
            self._wait_for_pending_pod_scheduled(job)
            return
        if not self.r.evict_pod(job):
            return
        if not self._wait_for_pod_bind_reservation(job, obj):
            return
        bound = reservations.bound_pod(obj)
        assert bound is not None  # _wait_for_pod_bind_reservation returned True
        self._reservation_bound(job, bound)
        if not self._wait_for_pod_ready(job, bound):
            return
        self._complete(job, obj, bound)

    def create_reservation(self, job: dict[str, Any]) -> None:
        """``createReservation``: the Reservation of the job's pod, then its reference in the job."""
        ref = jobs.pod_ref(job)
        pod = self.cluster.try_get("Pod", str(ref.get("name") or ""), str(ref.get("namespace") or ""))
        if pod is None:
            self.r.fail(job, jobs.REASON_MISSING_POD, f'Abort job caused by missing Pod "{_key(ref)}"')
            return
        ttl = (job.get("spec") or {}).get("ttl")
        options = reservations.reservation_options(
            job, pod, int(self._now() * 1000), ttl if isinstance(ttl, str) and ttl else None
        )
        obj = reservations.new_reservation(options)
        try:
            try:
                created = self.cluster.create(obj)
            except ConflictError:
                # Created by an earlier pass that could not record it: take it over.
                created = self.cluster.get(reservations.KIND, reservations.name(obj))
        except KindNotServedError:
            self.r.served_no_more()
            raise
        except ClusterError as err:
            cond = {
                "type": jobs.COND_RESERVATION_CREATED,
                "status": jobs.STATUS_FALSE,
                "reason": jobs.REASON_FAILED_CREATE_RESERVATION,
                "message": f"Failed to create Reservation caused by {err}",
            }
            status = self._status(job)
            self.r.update_condition(job, status, cond)
            self.r.event(job, "Warning", cond["reason"], cond["message"])
            raise
        options["reservationRef"] = reservations.reference(created)
        self.cluster.patch(jobs.KIND, jobs.name(job), "", {"spec": {"reservationOptions": options}})
        self.r.event(
            job,
            "Normal",
            jobs.COND_RESERVATION_CREATED,
            f'Successfully create Reservation "{reservations.name(created)}"',
        )

    def _set_reservation_order(self, ref: Mapping[str, Any]) -> None:
        """``setReservationOrder``: a reservation without a ``reservation-order`` label gets one (now)."""
        obj = self._get_reservation(ref)
        if obj is None:
            return  # the next step fails the job MissingReservation
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if reservations.LABEL_RESERVATION_ORDER in labels:
            return
        order = str(int(self._now() * 1000))
        self.cluster.patch(
            reservations.KIND,
            reservations.name(obj),
            "",
            {"metadata": {"labels": {reservations.LABEL_RESERVATION_ORDER: order}}},
        )

    def _sync_schedule_failed(self, job: dict[str, Any], obj: Mapping[str, Any]) -> None:
        """``syncReservationScheduleFailed``: the scheduler's Unschedulable message, shown on the job."""
        status = self._status(job)
        cond = jobs.condition(status, jobs.COND_RESERVATION_SCHEDULED)
        if cond is not None and cond.get("status") != jobs.STATUS_FALSE:
            return
        unschedulable = reservations.unschedulable_condition(obj)
        if unschedulable is None:
            return
        message = str(unschedulable.get("message") or "")
        new = {
            "type": jobs.COND_RESERVATION_SCHEDULED,
            "status": jobs.STATUS_FALSE,
            "reason": jobs.REASON_UNSCHEDULABLE,
            "message": message,
        }
        if self.r.update_condition(job, status, new):
            self.r.event(job, "Warning", jobs.REASON_UNSCHEDULABLE, message)

    def _scheduled(self, job: dict[str, Any], obj: Mapping[str, Any]) -> bool:
        """``prepareJobWithReservationScheduleSuccess``: record the reservation's node (False when the job
        failed: the scheduler put the reservation on the pod's own node)."""
        node = reservations.node_name(obj)
        status = self._status(job)
        if not node or status.get("nodeName"):
            return True
        cond = jobs.condition(status, jobs.COND_RESERVATION_SCHEDULED)
        if cond is not None and cond.get("status") == jobs.STATUS_TRUE:
            return True
        ref = jobs.pod_ref(job)
        pod = self.cluster.try_get("Pod", str(ref.get("name") or ""), str(ref.get("namespace") or ""))
        if pod is not None and (pod.get("spec") or {}).get("nodeName") == node:
            self.r.fail(
                job,
                jobs.REASON_FORBIDDEN,
                f'Scheduler assignes the Reservation "{reservations.name(obj)}" on the same node as the Pod',
            )
            return False
        status["nodeName"] = node
        if self.r.update_condition(
            job, status, {"type": jobs.COND_RESERVATION_SCHEDULED, "status": jobs.STATUS_TRUE}
        ):
            self.r.event(
                job,
                "Normal",
                jobs.COND_RESERVATION_SCHEDULED,
                f'Assigned Reservation "{reservations.name(obj)}" to node "{node}"',
            )
        return True

    def abort_if_bound_by_another_pod(self, job: dict[str, Any], pod: Mapping[str, Any] | None) -> bool:
        """``abortJobIfReservationBoundByAnotherPod``: True when the job failed (its reservation is gone,
        or was consumed by a pod other than ``pod``)."""
        ref = jobs.reservation_ref(job)
        if ref is None:
            return False
        obj = self._get_reservation(ref)
        if obj is None:
            self._missing_reservation(job, ref)
            return True
        if not reservations.is_succeeded(obj):
            return False
        if pod is not None:
            bound = reservations.bound_pod(obj)
            uid = (pod.get("metadata") or {}).get("uid")
            if bound is not None and bound.get("uid") == uid:
                return False
        self.r.fail(job, jobs.REASON_FORBIDDEN, "Reservation is already bound by another Pod")
        return True

    def _wait_for_pending_pod_scheduled(self, job: dict[str, Any]) -> None:
        """``waitForPendingPodScheduled``: the reservation was for a pending pod; done once it is placed."""
        ref = jobs.pod_ref(job)
        pod = self.cluster.try_get("Pod", str(ref.get("name") or ""), str(ref.get("namespace") or ""))
        if pod is None:
            self.r.fail(job, jobs.REASON_MISSING_POD, f'Abort job caused by missing Pod "{_key(ref)}"')
            return
        scheduled = next(
            (c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"),
            None,
        )
        if scheduled is None or scheduled.get("status") == "False":
            if self.abort_if_bound_by_another_pod(job, pod):
                return
            cond = {
                "type": jobs.COND_POD_SCHEDULED,
                "status": jobs.STATUS_FALSE,
                "reason": jobs.REASON_UNSCHEDULABLE,
                "message": str((scheduled or {}).get("message") or ""),
            }
            self.r.update_condition(job, self._status(job), cond)
            self._requeue(job)
            return
        status = self._status(job)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        status.update(
            phase=jobs.PHASE_SUCCEEDED,
            status="Complete",
            reason="",
            message=f'Assign Pod "{_key(ref)}" to node "{node}"',
        )
        if jobs.update_condition(
            status, {"type": jobs.COND_POD_SCHEDULED, "status": jobs.STATUS_TRUE}, self._now()
        ):
            job["status"] = self.r.write_status(job, status)
            self.r.event(job, "Normal", "Complete", status["message"])

    def _wait_for_pod_bind_reservation(self, job: dict[str, Any], obj: Mapping[str, Any]) -> bool:
        """``waitForPodBindReservation``: True once a pod consumed the reservation."""
        status = self._status(job)
        cond = jobs.condition(status, jobs.COND_POD_BOUND_RESERVATION)
        if cond is not None and cond.get("status") == jobs.STATUS_TRUE:
            return True
        if reservations.bound_pod(obj) is not None:
            return True
        waiting = {
            "type": jobs.COND_POD_BOUND_RESERVATION,
            "status": jobs.STATUS_FALSE,
            "reason": jobs.REASON_WAIT_FOR_POD_BIND_RESERVATION,
        }
        if self.r.update_condition(job, status, waiting):
            self.r.event(
                job, "Normal", jobs.REASON_WAIT_FOR_POD_BIND_RESERVATION, "Waiting for Pod bind Reservation"
            )
        self._requeue(job)
        return False

    def _reservation_bound(self, job: dict[str, Any], bound: Mapping[str, Any]) -> None:
        """``handleReservationBoundSuccess``: ``ReservationBound`` and the new pod in ``status.podRef``."""
        status = self._status(job)
        updated = jobs.update_condition(
            status, {"type": jobs.COND_RESERVATION_BOUND, "status": jobs.STATUS_TRUE}, self._now()
        )
        if status.get("podRef") is None or updated:
            status["podRef"] = dict(bound)
            job["status"] = self.r.write_status(job, status)
            self.r.event(job, "Normal", "PodBoundReservation", f'Reservation bound by pod "{_key(bound)}"')

    def _wait_for_pod_ready(self, job: dict[str, Any], bound: Mapping[str, Any]) -> bool:
        """``waitForPodReady``: True once the pod that took the reservation is Ready (or gone)."""
        status = self._status(job)
        cond = jobs.condition(status, jobs.COND_BOUND_POD_READY)
        if cond is not None and cond.get("status") == jobs.STATUS_TRUE:
            return True
        pod = self.cluster.try_get("Pod", str(bound.get("name") or ""), str(bound.get("namespace") or ""))
        if pod is None or _pod_ready(pod):
            return True
        waiting = {
            "type": jobs.COND_BOUND_POD_READY,
            "status": jobs.STATUS_FALSE,
            "reason": jobs.REASON_WAIT_FOR_BOUND_POD_READY,
        }
        if self.r.update_condition(job, status, waiting):
            self.r.event(
                job,
                "Normal",
                jobs.REASON_WAIT_FOR_BOUND_POD_READY,
                f"Waiting for Bound Pod {bound.get('namespace')}/{bound.get('name')} Ready",
            )
        self._requeue(job)
        return False

    def _complete(self, job: dict[str, Any], obj: Mapping[str, Any], bound: Mapping[str, Any]) -> None:
        key = _key(bound)
        self.r.event(job, "Normal", "BoundPodReady", f'Bind pod "{key}" is ready')
        status = self._status(job)
        self.r.update_condition(job, status, {"type": jobs.COND_BOUND_POD_READY, "status": jobs.STATUS_TRUE})
        status = self._status(job)
        message = f'Bind Pod "{key}" in Reservation "{reservations.name(obj)}"'
        status.update(
            podRef=dict(bound), phase=jobs.PHASE_SUCCEEDED, status="Complete", reason="", message=message
        )
        jobs.update_condition(
            status,
            {"type": jobs.COND_POD_BOUND_RESERVATION, "status": jobs.STATUS_TRUE, "message": message},
            self._now(),
        )
        job["status"] = self.r.write_status(job, status)
        self.r.event(job, "Normal", "Complete", message)
