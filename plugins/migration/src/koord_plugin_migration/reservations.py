"""The reservation interpreter of ReservationFirst migration (Koordinator's
``pkg/descheduler/controllers/migration/reservation``): the Reservation a job creates for its pod, and how
the controller reads a Reservation's progress.

Reservations cross the cluster port as dicts; the scheduler's Reservation plugin schedules them (the
descheduler never does), so the controller only creates, reads and deletes them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

KIND = "Reservation"
API_VERSION = "scheduling.koordinator.sh/v1alpha1"
REF_API_VERSION = "v1alpha1"
"""What Koordinator writes as the ``reservationRef``'s apiVersion: the GroupVersionKind's version only."""

DEFAULT_CREATOR = "koord-descheduler"
LABEL_CREATED_BY = "app.kubernetes.io/created-by"
LABEL_RESERVATION_ORDER = "scheduling.koordinator.sh/reservation-order"

PHASE_PENDING = "Pending"
PHASE_AVAILABLE = "Available"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
COND_SCHEDULED = "Scheduled"
COND_READY = "Ready"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_EXPIRED = "Expired"

OBJECT_NAME_FIELD = "metadata.name"


# --- building ---------------------------------------------------------------------------------------------
def reserve_owners(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``GenerateReserveResourceOwners``: a pod the scheduler could not place owns the reservation itself;
    otherwise its controller (with the pod's namespace) does. A pod without a controller gets no owners."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if status.get("phase") == "Pending":
        for cond in status.get("conditions") or ():
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return [
                    {
                        "object": {
                            "uid": meta.get("uid", ""),
                            "kind": "Pod",
                            "name": meta.get("name", ""),
                            "namespace": meta.get("namespace", ""),
                        }
                    }
                ]
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return [{"controller": {**copy.deepcopy(dict(ref)), "namespace": meta.get("namespace", "")}}]
    return []


def _skip_node_affinity(template_spec: dict[str, Any], node_name: str) -> None:
    """``appendSkipNodeAffinity``: every required node-affinity term also excludes the pod's current node
    (by ``metadata.name``); without terms, one term that only excludes it."""
    if not node_name:
        return
    affinity = template_spec.get("affinity") or {}
    template_spec["affinity"] = affinity
    node_affinity = affinity.get("nodeAffinity") or {}
    affinity["nodeAffinity"] = node_affinity
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    skip = {"key": OBJECT_NAME_FIELD, "operator": "NotIn", "values": [node_name]}
    terms = required.get("nodeSelectorTerms") or []
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), dict(skip, values=[node_name])]
    if not terms:
        terms = [{"matchFields": [skip]}]
    required["nodeSelectorTerms"] = terms


def reservation_options(
    job: Mapping[str, Any], pod: Mapping[str, Any], now_ms: int, ttl: str | None
) -> dict[str, Any]:
    """``CreateOrUpdateReservationOptions``: the job's ``spec.reservationOptions`` completed for ``pod``.

    The template defaults to the pod itself (metadata and spec), named after the job's uid and owned by
    the pod's controller; whatever the job gave is kept. Always: allocated once, unbound (no nodeName),
    away from the pod's node, labelled as created by the descheduler with a ``reservation-order`` of now,
    and expiring with the job (its ``ttl``) unless the template says when.
    """
    spec = (job.get("spec") or {}).get("reservationOptions") or {}
    options = copy.deepcopy(dict(spec))
    job_uid = str((job.get("metadata") or {}).get("uid") or "")
    pod_template = {
        "metadata": copy.deepcopy(dict(pod.get("metadata") or {})),
        "spec": copy.deepcopy(dict(pod.get("spec") or {})),
    }
    template = options.get("template")
    if not template:
        template = {
            "metadata": {"name": job_uid},
            "spec": {"template": pod_template, "owners": reserve_owners(pod)},
        }
    else:
        meta = template.setdefault("metadata", {})
        if not meta.get("name"):
            meta["name"] = job_uid
        tspec = template.setdefault("spec", {})
        if not tspec.get("template"):
            tspec["template"] = pod_template
        if not tspec.get("owners"):
            tspec["owners"] = reserve_owners(pod)
    options["template"] = template
    tspec = template["spec"]
    tspec["allocateOnce"] = True
    pod_spec = tspec["template"].setdefault("spec", {})
    pod_spec.pop("nodeName", None)
    labels = template["metadata"].setdefault("labels", {})
    labels[LABEL_CREATED_BY] = DEFAULT_CREATOR
    labels[LABEL_RESERVATION_ORDER] = str(now_ms)
    if not tspec.get("ttl") and not tspec.get("expires") and ttl:
        tspec["ttl"] = ttl
    _skip_node_affinity(pod_spec, str((pod.get("spec") or {}).get("nodeName") or ""))
    return options


def new_reservation(options: Mapping[str, Any]) -> dict[str, Any]:
    """The Reservation object of ``options``' template (``CreateReservation``)."""
    template = options.get("template") or {}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": copy.deepcopy(dict(template.get("metadata") or {})),
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }


def reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ``reservationRef`` a job keeps of its Reservation."""
    meta = obj.get("metadata") or {}
    ref = {
        "kind": KIND,
        "apiVersion": REF_API_VERSION,
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


# --- reading ----------------------------------------------------------------------------------------------
def name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def phase(obj: Mapping[str, Any]) -> str:
    return str((obj.get("status") or {}).get("phase") or "")


def node_name(obj: Mapping[str, Any]) -> str:
    """``GetScheduledNodeName``."""
    return str((obj.get("status") or {}).get("nodeName") or "")


def condition(obj: Mapping[str, Any], kind: str, reason: str = "") -> Mapping[str, Any] | None:
    """``GetReservationCondition``: the first condition of ``kind`` (and ``reason``, when given)."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind and (not reason or cond.get("reason") == reason):
            return dict(cond)
    return None


def unschedulable_condition(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return condition(obj, COND_SCHEDULED, REASON_UNSCHEDULABLE)


def is_scheduled(obj: Mapping[str, Any]) -> bool:
    if not node_name(obj):
        return False
    cond = condition(obj, COND_SCHEDULED, REASON_SCHEDULED)
    return cond is not None and cond.get("status") == "True"


def is_pending(obj: Mapping[str, Any]) -> bool:
    return phase(obj) in ("", PHASE_PENDING)


def is_available(obj: Mapping[str, Any]) -> bool:
    return bool(node_name(obj)) and phase(obj) == PHASE_AVAILABLE


def is_succeeded(obj: Mapping[str, Any]) -> bool:
    return phase(obj) == PHASE_SUCCEEDED


def is_expired(obj: Mapping[str, Any]) -> bool:
    return phase(obj) == PHASE_FAILED and condition(obj, COND_READY, REASON_EXPIRED) is not None


def bound_pod(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """``GetBoundPod``: the first current owner (the pod that consumed the reservation)."""
    owners = (obj.get("status") or {}).get("currentOwners") or []
    return dict(owners[0]) if owners else None


def migrates_pending_pod(obj: Mapping[str, Any]) -> bool:
    """``IsMigratePendingPod``: an owner naming only an object (the pending pod itself)."""
    return any(
        o.get("object") is not None and o.get("controller") is None and o.get("labelSelector") is None
        for o in (obj.get("spec") or {}).get("owners") or ()
    )
