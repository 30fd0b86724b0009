"""ElasticQuotaValidation: the checks of ``validation.validate_quota`` served as an admission webhook."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_elasticquota.webhook import ElasticQuotaValidation

from koord_framework.manager.webhook.admission import AdmissionRequest, Denied, GroupVersionResource
from koord_framework.testing.conformance import AdmissionHandlerConformance


class TestElasticQuotaValidationConformance(AdmissionHandlerConformance):
    plugin_class = ElasticQuotaValidation


def quota(
    name: str, min_cpu: str, max_cpu: str, parent: str | None = None, is_parent: bool = False
) -> dict[str, Any]:
    labels = {"quota.scheduling.koordinator.sh/is-parent": "true" if is_parent else "false"}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"min": {"cpu": min_cpu}, "max": {"cpu": max_cpu}},
    }


class Lister:
    def __init__(self, quotas: list[dict[str, Any]]) -> None:
        self.quotas = quotas

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.quotas if kind == "ElasticQuota" else []


def admit(obj: dict[str, Any], existing: list[dict[str, Any]]) -> None:
    handler = ElasticQuotaValidation()
    handler.bind(Lister(existing))
    request = AdmissionRequest(
        uid="u",
        kind=None,
        resource=GroupVersionResource("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas"),  # type: ignore[arg-type]
        operation="CREATE",
        object=obj,
    )
    handler.admit(request, obj)


def test_a_good_quota_is_allowed() -> None:
    admit(quota("a", "1", "2"), [])


def test_min_above_max_is_denied_naming_quota_and_field() -> None:
    with pytest.raises(Denied, match=r"ElasticQuota a: .*min"):
        admit(quota("a", "4", "2"), [])


def test_children_min_above_the_parent_is_denied() -> None:
    parent = quota("p", "2", "10", is_parent=True)
    sibling = quota("s", "2", "4", parent="p")
    with pytest.raises(Denied, match="ElasticQuota"):
        admit(quota("c", "1", "4", parent="p"), [parent, sibling])


def test_a_refused_quota_answers_400_as_koordinators_errored() -> None:
    from koord_framework.manager.webhook.dispatch import Dispatcher

    handler = ElasticQuotaValidation()
    handler.bind(Lister([]))
    obj = quota("a", "4", "2")
    request = AdmissionRequest(
        uid="u",
        kind=None,  # type: ignore[arg-type]
        resource=GroupVersionResource("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas"),
        operation="CREATE",
        object=obj,
    )
    response = Dispatcher.admit([handler], request)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400 and "ElasticQuota a" in response["status"]["message"]
