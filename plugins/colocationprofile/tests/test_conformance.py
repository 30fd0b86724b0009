"""The colocation-profile handlers against the admission-handler contracts (the framework's kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_colocationprofile import (
    ClusterColocationProfile,
    ExtendedResourceSpec,
    PodColocationValidation,
    ReservationColocationProfile,
)

from koord_framework.testing.conformance import AdmissionHandlerConformance

OBJECTS: dict[str, list[dict[str, Any]]] = {
    "ClusterColocationProfile": [
        {
            "metadata": {"name": "be"},
            "spec": {
                "selector": {"matchLabels": {"app": "a"}},
                "qosClass": "BE",
                "priorityClassName": "koord-batch",
            },
        },
        {"metadata": {"name": "everyone"}, "spec": {"koordinatorPriority": 5, "labels": {"x": "y"}}},
    ],
    "Namespace": [{"metadata": {"name": "default", "labels": {}}}],
    "PriorityClass": [{"metadata": {"name": "koord-batch"}, "value": 5500}],
}


class TestClusterColocationProfileConformance(AdmissionHandlerConformance):
    plugin_class = ClusterColocationProfile
    cluster_objects: ClassVar[dict[str, list[dict[str, Any]]]] = OBJECTS


class TestExtendedResourceSpecConformance(AdmissionHandlerConformance):
    plugin_class = ExtendedResourceSpec


class TestPodColocationValidationConformance(AdmissionHandlerConformance):
    plugin_class = PodColocationValidation


class TestReservationColocationProfileConformance(AdmissionHandlerConformance):
    plugin_class = ReservationColocationProfile
    cluster_objects: ClassVar[dict[str, list[dict[str, Any]]]] = OBJECTS
