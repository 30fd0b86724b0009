"""The Reservation rule of koord-manager's pod validating webhook (Koordinator's
``clusterReservationValidatingPod``, the first step of ``/validate-pod``).

``scheduling.koordinator.sh/reserve-pod`` marks the placeholder pod the scheduler makes of a Reservation; a
real pod carrying it would be taken for one, so a pod created or updated with it is refused.
"""

from __future__ import annotations

from typing import Any, ClassVar

from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.plugin import NoArgs

__all__ = ["ANNOTATION_RESERVE_POD", "ReservationPodValidation"]

ANNOTATION_RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"
FORBIDDEN_ANNOTATIONS = (ANNOTATION_RESERVE_POD,)
"""Koordinator's ``forbidAnnotations``."""


class ReservationPodValidation(AdmissionHandler[NoArgs]):
    """Refuses pods that set the reserve-pod annotation."""

    name = "ReservationPodValidation"
    Args = NoArgs
    path: ClassVar[str] = "/validate-pod"
    order: ClassVar[int] = 10  # Koordinator runs it before the colocation-profile rules
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    gate: ClassVar[str] = "PodValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation not in ("CREATE", "UPDATE"):
            return
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        # field.Forbidden(field.NewPath("annotations", key), ...).Error(), aggregated as Koordinator does.
        errors = [
            f"annotations.{key}: Forbidden: cannot set in annotations"
            for key in FORBIDDEN_ANNOTATIONS
            if key in annotations
        ]
        if errors:
            # Koordinator answers admission.Errored(400, err).
            raise Denied(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]", 400)
