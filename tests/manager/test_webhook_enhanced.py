"""The pod enhanced validator: Koordinator's ``TestPodEnhancedValidate`` cases and the kit's conformance."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    GroupVersionKind,
    GroupVersionResource,
)
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.manager.webhook.enhanced import PodEnhancedValidation
from koord_framework.testing.conformance import AdmissionHandlerConformance

QUOTA = "quota.scheduling.koordinator.sh/name"


def _cm(rules: str, enable: str = "true", rv: str = "1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "pod-enhanced-validator-config",
            "namespace": "koordinator-system",
            "resourceVersion": rv,
        },
        "data": {"enable": enable, "rules": rules},
    }


QUOTA_REQUIRED = _cm(
    '[{"name":"quota-label-required","requiredLabels":["' + QUOTA + '"],'
    '"namespaceWhitelist":["kube-system","koordinator-system"]}]'
)
MULTIPLE = _cm('[{"name":"multiple-labels-required","requiredLabels":["product","app"]}]')
TWO_RULES = _cm(
    '[{"name":"quota-label-required","requiredLabels":["' + QUOTA + '"]},'
    '{"name":"app-label-required","requiredLabels":["app"]}]'
)


class _Lister:
    def __init__(self, cm: dict[str, Any] | None) -> None:
        self.cm = cm

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        assert (kind, name, namespace) == ("ConfigMap", "pod-enhanced-validator-config", "koordinator-system")
        return self.cm

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return []


def _handler(cm: dict[str, Any] | None, gate: bool = True) -> PodEnhancedValidation:
    handler = PodEnhancedValidation()
    handler.bind(_Lister(cm), gates_for("manager").parse(f"EnablePodEnhancedValidator={str(gate).lower()}"))
    return handler


def _answer(
    handler: PodEnhancedValidation, op: str, namespace: str, labels: dict[str, str]
) -> dict[str, Any]:
    pod = {"metadata": {"name": "pod1", "namespace": namespace, "labels": labels}, "spec": {}}
    request = AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "Pod"),
        resource=GroupVersionResource("", "v1", "pods"),
        operation=op,  # type: ignore[arg-type]
        namespace=namespace,
        object=pod if op != "DELETE" else None,
        old_object=pod if op != "CREATE" else None,
    )
    return Dispatcher.admit([handler], request)


@pytest.mark.parametrize(
    ("case", "op", "namespace", "labels", "cm", "error"),
    [
        ("no config map: should allow all pods", "CREATE", "ns1", {}, None, ""),
        ("validation disabled", "CREATE", "ns1", {}, _cm(QUOTA_REQUIRED["data"]["rules"], "false"), ""),
        ("empty rules", "CREATE", "ns1", {}, _cm("[]"), ""),
        ("create pod with quota label", "CREATE", "ns1", {QUOTA: "q"}, QUOTA_REQUIRED, ""),
        ("update pod with quota label", "UPDATE", "ns1", {QUOTA: "q"}, QUOTA_REQUIRED, ""),
        (
            "pod without quota label",
            "CREATE",
            "ns1",
            {},
            QUOTA_REQUIRED,
            f"required label '{QUOTA}' is missing",
        ),
        (
            "update without quota label",
            "UPDATE",
            "ns1",
            {},
            QUOTA_REQUIRED,
            f"required label '{QUOTA}' is missing",
        ),
        ("whitelisted namespace", "CREATE", "kube-system", {}, QUOTA_REQUIRED, ""),
        (
            "skip-enhanced-validation label",
            "CREATE",
            "ns1",
            {"pod.koordinator.sh/skip-enhanced-validation": "true"},
            QUOTA_REQUIRED,
            "",
        ),
        ("another whitelisted namespace", "CREATE", "koordinator-system", {}, QUOTA_REQUIRED, ""),
        ("with required labels", "CREATE", "ns1", {"product": "p", "app": "a"}, MULTIPLE, ""),
        ("missing app", "CREATE", "ns1", {"product": "p"}, MULTIPLE, "required label 'app' is missing"),
        ("missing product", "CREATE", "ns1", {"app": "a"}, MULTIPLE, "required label 'product' is missing"),
        ("missing both", "CREATE", "ns1", {}, MULTIPLE, "required labels are missing: [product app]"),
        ("multiple rules: all pass", "CREATE", "ns1", {QUOTA: "q", "app": "a"}, TWO_RULES, ""),
        (
            "multiple rules: second fails",
            "CREATE",
            "ns1",
            {QUOTA: "q"},
            TWO_RULES,
            "required label 'app' is missing",
        ),
        ("delete is not validated", "DELETE", "ns1", {}, QUOTA_REQUIRED, ""),
    ],
)
def test_pod_enhanced_validate(
    case: str, op: str, namespace: str, labels: dict[str, str], cm: dict[str, Any] | None, error: str
) -> None:
    response = _answer(_handler(cm), op, namespace, labels)
    if op == "DELETE":
        # Koordinator validates creations and updates only.
        assert response["allowed"] is True
        return
    assert response["allowed"] is (not error), (case, response)
    if error:
        assert response["status"]["code"] == 400 and response["status"]["message"] == error


def test_the_feature_gate_switches_it() -> None:
    assert _answer(_handler(QUOTA_REQUIRED, gate=False), "CREATE", "ns1", {})["allowed"] is True


def test_rules_that_do_not_parse_keep_the_last_good_ones() -> None:
    lister = _Lister(QUOTA_REQUIRED)
    handler = PodEnhancedValidation()
    handler.bind(lister, gates_for("manager").parse("EnablePodEnhancedValidator=true"))
    assert _answer(handler, "CREATE", "ns1", {})["allowed"] is False
    lister.cm = _cm("{not json", rv="2")
    assert _answer(handler, "CREATE", "ns1", {})["allowed"] is False  # still the quota rule
    lister.cm = _cm("[]", rv="3")
    assert _answer(handler, "CREATE", "ns1", {})["allowed"] is True  # a good change applies at once
    lister.cm = None
    assert _answer(handler, "CREATE", "ns1", {})["allowed"] is True  # gone: disabled


class TestPodEnhancedValidationConformance(AdmissionHandlerConformance):
    plugin_class = PodEnhancedValidation
    cluster_objects: ClassVar[dict[str, list[dict[str, Any]]]] = {"ConfigMap": [QUOTA_REQUIRED]}
