"""Koordinator's unit-test cases of the pod validating webhook (``pkg/webhook/pod/validating/
cluster_colocation_profile_test.go`` at a7a1b76b, ``TestClusterColocationProfileValidatingPod``), through the
handler: each case's allowed / reason."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_colocationprofile import PodColocationValidation

from koord_framework.manager.webhook.admission import AdmissionRequest, Denied, GroupVersionResource

PROD_MAX, MID_MAX, BATCH_MIN, BATCH_MAX, FREE_MAX = 9999, 7999, 5000, 5999, 3999
QOS, PRIO = "koordinator.sh/qosClass", "koordinator.sh/priority"


class Gates:
    def __init__(self, **on: bool) -> None:
        self.on = on

    def enabled(self, name: str) -> bool:
        return self.on.get(name, False)


def pod(
    labels: dict[str, str] | None = None, priority: int | None = None, **resources: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if priority is not None:
        spec["priority"] = priority
    if resources:
        spec["containers"] = [{"name": "test-container-a", "resources": resources}]
    return {"metadata": {"labels": labels} if labels else {}, "spec": spec}


BATCH_RES = {"kubernetes.io/batch-cpu": "1", "kubernetes.io/batch-memory": "4Gi"}

CASES: list[tuple[str, str, dict[str, Any] | None, dict[str, Any], bool, str, bool]] = [
    # (name, operation, old, new, allowed, reason, skip-priority gate)
    ("non-colocation empty pod", "CREATE", None, {}, True, "", False),
    (
        "validate immutable QoS",
        "UPDATE",
        pod({QOS: "BE"}),
        pod({QOS: "LS"}),
        False,
        'labels.koordinator.sh/qosClass: Invalid value: "LS": field is immutable',
        False,
    ),
    (
        "validate remove QoS",
        "UPDATE",
        pod({QOS: "BE"}),
        pod(),
        False,
        'labels.koordinator.sh/qosClass: Invalid value: "": field is immutable',
        False,
    ),
    (
        "validate defined QoS",
        "CREATE",
        None,
        pod({QOS: "BE"}, BATCH_MIN, limits=BATCH_RES, requests=BATCH_RES),
        True,
        "",
        False,
    ),
    (
        "forbidden not defined QoS",
        "CREATE",
        None,
        pod(None, 6666, limits=BATCH_RES, requests=BATCH_RES),
        False,
        "labels.koordinator.sh/qosClass: Required value: must specify koordinator QoS BE with koordinator "
        "colocation resources",
        False,
    ),
    (
        "validate immutable priorityClass",
        "UPDATE",
        pod(None, BATCH_MIN),
        pod(None, PROD_MAX),
        False,
        'spec.priority: Invalid value: "koord-prod": field is immutable',
        False,
    ),
    (
        "validate remove priorityClass",
        "UPDATE",
        pod(None, BATCH_MIN),
        pod(),
        False,
        'spec.priority: Invalid value: "": field is immutable',
        False,
    ),
    (
        "validate koordinator priority with defaultSkipValidatingPriority=false",
        "UPDATE",
        pod({PRIO: "9999"}),
        pod({PRIO: "8888"}),
        False,
        'labels.koordinator.sh/priority: Invalid value: "8888": field is immutable',
        False,
    ),
    (
        "validate koordinator priority with defaultSkipValidatingPriority=true",
        "UPDATE",
        pod({PRIO: "9999"}),
        pod({PRIO: "8888"}),
        True,
        "",
        True,
    ),
    (
        "validate remove koordinator priority",
        "UPDATE",
        pod({PRIO: "9999"}),
        pod(),
        False,
        'labels.koordinator.sh/priority: Invalid value: "": field is immutable',
        False,
    ),
    (
        "allowed QoS and priorityClass combination: BE And NonProd",
        "CREATE",
        None,
        pod({QOS: "BE"}, BATCH_MIN),
        True,
        "",
        False,
    ),
    (
        "allowed QoS and priorityClass combination: LSR And Prod",
        "CREATE",
        None,
        pod({QOS: "LSR"}, PROD_MAX, requests={"cpu": "1"}),
        True,
        "",
        False,
    ),
    (
        "forbidden QoS and priorityClass combination: BE And Prod",
        "CREATE",
        None,
        pod({QOS: "BE"}, PROD_MAX),
        False,
        "Pod: Forbidden: koordinator.sh/qosClass=BE and priorityClass=koord-prod "
        "cannot be used in combination",
        False,
    ),
    (
        "forbidden QoS and priorityClass combination: LSR And Batch",
        "CREATE",
        None,
        pod({QOS: "LSR"}, BATCH_MAX, requests={"cpu": "1"}),
        False,
        "Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass=koord-batch "
        "cannot be used in combination",
        False,
    ),
    (
        "forbidden QoS and priorityClass combination: LSR And Mid",
        "CREATE",
        None,
        pod({QOS: "LSR"}, MID_MAX, requests={"cpu": "1"}),
        False,
        "Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass=koord-mid "
        "cannot be used in combination",
        False,
    ),
    (
        "forbidden QoS and priorityClass combination: LSR And Free",
        "CREATE",
        None,
        pod({QOS: "LSR"}, FREE_MAX, requests={"cpu": "1"}),
        False,
        "Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass=koord-free "
        "cannot be used in combination",
        False,
    ),
    (
        "validate resources - LSR And Prod",
        "CREATE",
        None,
        pod(
            {QOS: "LS"},
            PROD_MAX,
            limits={"cpu": "1", "memory": "4Gi"},
            requests={"cpu": "1", "memory": "4Gi"},
        ),
        True,
        "",
        False,
    ),
    (
        "forbidden resources - LSR And Prod: unset CPUs",
        "CREATE",
        None,
        pod({QOS: "LSR"}, PROD_MAX, limits={"memory": "4Gi"}, requests={"memory": "0Gi"}),
        False,
        "pod.spec.containers[*].resources.requests: Required value: LSR Pod must declare the requested CPUs",
        False,
    ),
    (
        "forbidden resources - LSR And Prod: non-integer CPUs",
        "CREATE",
        None,
        pod(
            {QOS: "LSR"},
            PROD_MAX,
            limits={"cpu": "100m", "memory": "4Gi"},
            requests={"cpu": "100m", "memory": "0Gi"},
        ),
        False,
        'pod.spec.containers[*].resources.requests: Invalid value: "100m": '
        "the requested CPUs of LSR Pod must be integer",
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "op", "old", "new", "allowed", "reason", "skip"), CASES, ids=[c[0] for c in CASES]
)
def test_cluster_colocation_profile_validating_pod(
    name: str,
    op: str,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    allowed: bool,
    reason: str,
    skip: bool,
) -> None:
    handler = PodColocationValidation()
    handler.bind(None, Gates(ColocationProfileSkipValidatingPriority=skip))  # type: ignore[arg-type]
    request = AdmissionRequest(
        uid="u",
        kind=None,
        resource=GroupVersionResource("", "v1", "pods"),  # type: ignore[arg-type]
        operation=op,
        object=new,
        old_object=old,  # type: ignore[arg-type]
    )
    if allowed:
        handler.admit(request, new)
        return
    with pytest.raises(Denied) as denied:
        handler.admit(request, new)
    assert denied.value.reason == reason


def test_several_problems_are_aggregated_in_brackets() -> None:
    handler = PodColocationValidation()
    new = pod({QOS: "LSR"}, BATCH_MAX, requests={"cpu": "100m"})
    request = AdmissionRequest(
        uid="u",
        kind=None,
        resource=GroupVersionResource("", "v1", "pods"),  # type: ignore[arg-type]
        operation="CREATE",
        object=new,
    )
    with pytest.raises(Denied) as denied:
        handler.admit(request, new)
    assert denied.value.reason.startswith("[Pod: Forbidden: ") and "must be integer]" in denied.value.reason


def test_an_unreadable_quantity_is_a_bad_request() -> None:
    handler = PodColocationValidation()
    new = pod({QOS: "BE"}, BATCH_MIN, requests={"kubernetes.io/batch-cpu": "lots"})
    request = AdmissionRequest(
        uid="u",
        kind=None,
        resource=GroupVersionResource("", "v1", "pods"),  # type: ignore[arg-type]
        operation="CREATE",
        object=new,
    )
    with pytest.raises(ValueError, match=r"spec.containers\[0\].resources.requests.kubernetes.io/batch-cpu"):
        handler.admit(request, new)


def test_a_denial_answers_400_as_koordinators_errored() -> None:
    # PodValidatingHandler.Handle: admission.Errored(http.StatusBadRequest, err) for every sub-handler error.
    from koord_framework.manager.webhook.dispatch import Dispatcher

    handler = PodColocationValidation()
    handler.bind(None, Gates(ColocationProfileSkipValidatingPriority=False))  # type: ignore[arg-type]
    new = pod({QOS: "LSR"}, BATCH_MAX, requests={"cpu": "100m"})
    request = AdmissionRequest(
        uid="u",
        kind=None,  # type: ignore[arg-type]
        resource=GroupVersionResource("", "v1", "pods"),
        operation="CREATE",
        object=new,
    )
    response = Dispatcher.admit([handler], request)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400 and response["status"]["message"].startswith("[Pod: Forbidden")
