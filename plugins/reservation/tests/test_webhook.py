"""The Reservation rule of ``/validate-pod``: Koordinator's ``TestClusterReservationValidatingPod`` and the
kit's conformance."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_reservation.webhook import ReservationPodValidation

from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    GroupVersionKind,
    GroupVersionResource,
)
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.testing.conformance import AdmissionHandlerConformance


def _answer(op: str, annotations: dict[str, str] | None) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}
    if annotations is not None:
        pod["metadata"]["annotations"] = annotations
    request = AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "Pod"),
        resource=GroupVersionResource("", "v1", "pods"),
        operation=op,  # type: ignore[arg-type]
        namespace="default",
        object=pod if op != "DELETE" else None,
        old_object=pod if op != "CREATE" else None,
    )
    return Dispatcher.admit([ReservationPodValidation()], request)


@pytest.mark.parametrize("op", ["CREATE", "UPDATE"])
def test_forbidden_reserve_pod_annotation(op: str) -> None:
    response = _answer(op, {"scheduling.koordinator.sh/reserve-pod": ""})
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 400,
        "message": "annotations.scheduling.koordinator.sh/reserve-pod: Forbidden: cannot set in annotations",
        "reason": "BadRequest",
    }


@pytest.mark.parametrize(
    ("op", "annotations"),
    [("CREATE", None), ("CREATE", {"other": "x"}), ("DELETE", {"scheduling.koordinator.sh/reserve-pod": ""})],
)
def test_other_pods_and_deletions_are_allowed(op: str, annotations: dict[str, str] | None) -> None:
    assert _answer(op, annotations)["allowed"] is True


class TestReservationPodValidationConformance(AdmissionHandlerConformance):
    plugin_class = ReservationPodValidation
