"""``/mutate-reservation``: Koordinator's ``TestClusterColocationProfileMutatingReservation`` cases
(pkg/webhook/reservation/mutating at a7a1b76b)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from koord_plugin_colocationprofile import ReservationColocationProfile

from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    GroupVersionKind,
    GroupVersionResource,
)
from koord_framework.manager.webhook.dispatch import Dispatcher

PROD = {"metadata": {"name": "koordinator-prod"}, "value": 9000, "preemptionPolicy": "fakePreemptionPolicy"}


def _reservation() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {
            "namespace": "default",
            "name": "test-reservation-1",
            "labels": {"koordinator-colocation-reservation": "true"},
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "test-container-a",
                            "resources": {
                                "limits": {"cpu": "1", "memory": "4Gi"},
                                "requests": {"cpu": "1", "memory": "4Gi"},
                            },
                        }
                    ],
                    "overhead": {"cpu": "1", "memory": "2Gi"},
                    "schedulerName": "nonExistSchedulerName",
                }
            }
        },
    }


def _profile(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "test-profile"},
        "spec": {"selector": {"matchLabels": {"koordinator-colocation-reservation": "true"}}, **spec},
    }


FULL = _profile(
    labels={"testLabelA": "valueA"},
    annotations={"testAnnotationA": "valueA"},
    schedulerName="koordinator-scheduler",
    koordinatorPriority=1111,
    priorityClassName="koordinator-prod",
    qosClass="LS",
    patch={
        "metadata": {
            "labels": {"test-patch-label": "patch-a"},
            "annotations": {"test-patch-annotation": "patch-b"},
        }
    },
)


def _mutated() -> dict[str, Any]:
    r = _reservation()
    r["metadata"]["labels"].update(
        {
            "testLabelA": "valueA",
            "test-patch-label": "patch-a",
            "koordinator.sh/qosClass": "LS",
            "koordinator.sh/priority": "1111",
        }
    )
    r["metadata"]["annotations"] = {"testAnnotationA": "valueA", "test-patch-annotation": "patch-b"}
    spec = r["spec"]["template"]["spec"]
    spec.update(
        {
            "schedulerName": "koordinator-scheduler",
            "priorityClassName": "koordinator-prod",
            "priority": 9000,
            "preemptionPolicy": "fakePreemptionPolicy",
        }
    )
    return r


class _Lister:
    def __init__(self, profiles: list[dict[str, Any]]) -> None:
        self.objects = {"ClusterColocationProfile": profiles, "PriorityClass": [PROD]}

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return next((o for o in self.objects.get(kind, []) if o["metadata"]["name"] == name), None)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.objects.get(kind, [])


def _admit(profile: dict[str, Any], rand: int | None = None, op: str = "CREATE") -> dict[str, Any]:
    handler = ReservationColocationProfile()
    handler.bind(_Lister([profile]))
    if rand is not None:
        handler.rand_intn = lambda _n: rand
    reservation = _reservation()
    request = AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("scheduling.koordinator.sh", "v1alpha1", "Reservation"),
        resource=GroupVersionResource("scheduling.koordinator.sh", "v1alpha1", "reservations"),
        operation=op,  # type: ignore[arg-type]
        name="test-reservation-1",
        object=reservation,
        old_object=reservation if op == "UPDATE" else None,
    )
    response = Dispatcher.admit([handler], request)
    if not response["allowed"]:
        return response
    out = copy.deepcopy(reservation)
    for op_ in json.loads(base64.b64decode(response.get("patch") or "W10=")):
        _apply(out, op_)
    return out


def _apply(doc: dict[str, Any], op: dict[str, Any]) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    target: Any = doc
    for p in parts[:-1]:
        target = target[int(p)] if isinstance(target, list) else target[p]
    if op["op"] == "remove":
        del target[parts[-1]]
    else:
        target[parts[-1]] = op["value"]


def test_mutating_reservation() -> None:
    assert _admit(FULL) == _mutated()


@pytest.mark.parametrize(
    ("percent", "rand", "applied"), [(100, None, True), (0, None, False), (50, 30, True), (50, 70, False)]
)
def test_probability(percent: int, rand: int | None, applied: bool) -> None:
    profile = copy.deepcopy(FULL)
    profile["spec"]["probability"] = percent
    assert _admit(profile, rand) == (_mutated() if applied else _reservation())


def test_advanced_attributes_key_mappings_and_suffixes() -> None:
    profile = _profile(
        labels={"a": "1"},
        labelKeysMapping={"koordinator-colocation-reservation": "copied"},
        annotationKeysMapping={"missing": "empty"},
        labelSuffixes={"a": "-x"},
    )
    out = _admit(profile)
    assert out["metadata"]["labels"] == {
        "koordinator-colocation-reservation": "true",
        "a": "1-x",
        "copied": "true",
    }
    assert out["metadata"]["annotations"] == {"empty": ""}


def test_a_selector_that_does_not_match_leaves_it_alone() -> None:
    profile = copy.deepcopy(FULL)
    profile["spec"]["selector"] = {"matchLabels": {"other": "x"}}
    assert _admit(profile) == _reservation()


def test_mutating_failed_on_an_unknown_priority_class() -> None:
    response = _admit(_profile(priorityClassName="unknown-priority-class"))
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert "unknown-priority-class" in response["status"]["message"]


def test_only_creation_is_mutated() -> None:
    assert _admit(FULL, op="UPDATE") == _reservation()


def test_without_a_template_only_metadata_changes() -> None:
    handler = ReservationColocationProfile()
    handler.bind(_Lister([FULL]))
    r = _reservation()
    del r["spec"]["template"]
    handler.admit(
        AdmissionRequest(
            uid="u",
            kind=GroupVersionKind(),
            resource=GroupVersionResource("scheduling.koordinator.sh", "v1alpha1", "reservations"),
            operation="CREATE",
            object=r,
        ),
        r,
    )
    assert r["spec"] == {} and r["metadata"]["labels"]["koordinator.sh/priority"] == "1111"
