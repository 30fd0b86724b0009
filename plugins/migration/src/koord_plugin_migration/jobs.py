"""PodMigrationJob objects (``scheduling.koordinator.sh/v1alpha1``): names, phases, conditions, reasons.

Jobs cross the cluster port as dicts, like every object; these helpers read and build them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.clock import format_time, parse_time
from koord_framework.config.common import format_duration

KIND = "PodMigrationJob"
API_VERSION = "scheduling.koordinator.sh/v1alpha1"

PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
PHASE_ABORTED = "Aborted"
ACTIVE_PHASES = ("", PHASE_PENDING, PHASE_RUNNING)

COND_EVICTION = "Eviction"
COND_RESERVATION_CREATED = "ReservationCreated"
COND_RESERVATION_SCHEDULED = "ReservationScheduled"
COND_POD_SCHEDULED = "PodScheduled"
COND_POD_BOUND_RESERVATION = "PodBoundReservation"
COND_BOUND_POD_READY = "BoundPodReady"
COND_RESERVATION_BOUND = "ReservationBound"
STATUS_TRUE = "True"
STATUS_FALSE = "False"

REASON_TIMEOUT = "Timeout"
REASON_MISSING_POD = "MissingPod"
REASON_FORBIDDEN = "ForbiddenMigratePod"
REASON_EVICTING = "Evicting"
REASON_EVICT_COMPLETE = "EvictComplete"
REASON_FAILED_CREATE_RESERVATION = "FailedCreateReservation"
REASON_RESERVATION_EXPIRED = "ReservationExpired"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_MISSING_RESERVATION = "MissingReservation"
REASON_WAIT_FOR_POD_BIND_RESERVATION = "WaitForPodBindReservation"
REASON_WAIT_FOR_BOUND_POD_READY = "WaitForBoundPodReady"

ANNOTATION_EVICT_REASON = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER = "koordinator.sh/evict-trigger"
ANNOTATION_JOB_CREATED_BY = "koordinator.sh/job-created-by"
ANNOTATION_PASSED_ARBITRATION = "descheduler.koordinator.sh/passed-arbitration"
LABEL_EVICT_POLICY = "koordinator.sh/evict-policy"
ANNOTATION_SOFT_EVICTION = "scheduling.koordinator.sh/soft-eviction"


def new_job(
    name: str,
    *,
    namespace: str,
    pod_name: str,
    pod_uid: str,
    mode: str,
    ttl: float,
    reason: str,
    trigger: str,
    created_by: str,
    delete_options: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """``CreatePodMigrationJob``'s object: a Pending job for one pod, carrying why and who asked."""
    spec: dict[str, Any] = {
        "podRef": {"namespace": namespace, "name": pod_name, "uid": pod_uid},
        "mode": mode,
        "ttl": format_duration(ttl),
    }
    if delete_options is not None:
        spec["deleteOptions"] = dict(delete_options)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "annotations": {
                ANNOTATION_EVICT_REASON: reason,
                ANNOTATION_EVICT_TRIGGER: trigger,
                ANNOTATION_JOB_CREATED_BY: created_by,
            },
        },
        "spec": spec,
        "status": {"phase": PHASE_PENDING},
    }


def phase(job: Mapping[str, Any]) -> str:
    """The job's phase; an unset phase means Pending."""
    return str((job.get("status") or {}).get("phase") or PHASE_PENDING)


def is_active(job: Mapping[str, Any]) -> bool:
    return phase(job) in (PHASE_PENDING, PHASE_RUNNING)


def pod_ref(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return (job.get("spec") or {}).get("podRef") or {}


def reservation_ref(job: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``spec.reservationOptions.reservationRef``: the Reservation the job created, once it did."""
    ref = ((job.get("spec") or {}).get("reservationOptions") or {}).get("reservationRef")
    return ref if ref else None


def job_annotations(job: Mapping[str, Any]) -> Mapping[str, str]:
    return (job.get("metadata") or {}).get("annotations") or {}


def name(job: Mapping[str, Any]) -> str:
    return str((job.get("metadata") or {}).get("name") or "")


def uid(job: Mapping[str, Any]) -> str:
    return str((job.get("metadata") or {}).get("uid") or "")


def created(job: Mapping[str, Any]) -> float:
    return parse_time((job.get("metadata") or {}).get("creationTimestamp")) or 0.0


def condition(status: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or ():
        if cond.get("type") == kind:
            return dict(cond)
    return None


def update_condition(status: dict[str, Any], cond: dict[str, Any], now: float) -> bool:
    """``util.UpdateCondition``: add or replace the condition of its type; True when anything changed.
    The transition time moves only when the condition's status changes."""
    cond = dict(cond)
    cond["lastTransitionTime"] = format_time(now)
    conditions = [dict(c) for c in status.get("conditions") or ()]
    for i, old in enumerate(conditions):
        if old.get("type") == cond["type"]:
            if cond.get("status") == old.get("status"):
                cond["lastTransitionTime"] = old.get("lastTransitionTime")
            same = all(
                cond.get(k) == old.get(k)
                for k in ("status", "reason", "message", "lastProbeTime", "lastTransitionTime")
            )
            conditions[i] = cond
            status["conditions"] = conditions
            return not same
    conditions.append(cond)
    status["conditions"] = conditions
    return True


def trigger_and_reason(job: Mapping[str, Any]) -> tuple[str, str]:
    """``GetEvictionTriggerAndReason``: the reason falls back to the trigger, then to ``NotSet``."""
    ann = job_annotations(job)
    trigger = ann.get(ANNOTATION_EVICT_TRIGGER, "")
    reason = ann.get(ANNOTATION_EVICT_REASON, "") or trigger or "NotSet"
    return trigger, reason
