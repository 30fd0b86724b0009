"""The ElasticQuota rules of ``/validate-pod``: Koordinator's ``TestQuotaTopology_AddPod_UpdatePod`` and
``TestQuotaTopology_getQuotaNameFromPod`` (pkg/webhook/elasticquota at a7a1b76b), and the kit's
conformance."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from koord_plugin_elasticquota.quota_object import ElasticQuotaSpec
from koord_plugin_elasticquota.webhook import ElasticQuotaPodValidation, quota_name_of_pod

from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    GroupVersionKind,
    GroupVersionResource,
)
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.testing.conformance import AdmissionHandlerConformance

NAME = "quota.scheduling.koordinator.sh/name"


def _quota(
    name: str, parent: str = "", is_parent: bool = False, namespace: str = "default", **ann: str
) -> dict[str, Any]:
    labels = {"quota.scheduling.koordinator.sh/is-parent": str(is_parent).lower()}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": dict(ann)},
        "spec": {"max": {"cpu": "120", "memory": "1Mi"}, "min": {"cpu": "60", "memory": "12800"}},
    }


TREE = [_quota("temp", is_parent=True), _quota("sub-1", "temp"), _quota("sub-2", "temp")]


class _Lister:
    def __init__(self, quotas: list[dict[str, Any]]) -> None:
        self.quotas = quotas

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        assert kind == "ElasticQuota"
        return self.quotas


def _pod(name: str, quota: str | None = None, namespace: str = "", **labels: str) -> dict[str, Any]:
    all_labels = dict(labels)
    if quota is not None:
        all_labels[NAME] = quota
    return {"metadata": {"name": name, "namespace": namespace, "labels": all_labels}, "spec": {}}


def _answer(new: dict[str, Any], old: dict[str, Any] | None = None, gates: str = "") -> dict[str, Any]:
    handler = ElasticQuotaPodValidation()
    handler.bind(_Lister(TREE), gates_for("manager").parse(gates))
    request = AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "Pod"),
        resource=GroupVersionResource("", "v1", "pods"),
        operation="UPDATE" if old is not None else "CREATE",
        object=new,
        old_object=old,
    )
    return Dispatcher.admit([handler], request)


def test_add_pod_update_pod() -> None:
    pod1 = _pod("pod1", "sub-1")
    assert _answer(pod1)["allowed"] is True
    assert _answer(_pod("pod1", "sub-2"), pod1)["allowed"] is True
    pod2 = _pod("pod2", "temp")
    response = _answer(pod2)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["message"] == "pod can not be linked to a parentQuotaGroup,quota:temp, pod:pod2"
    moved = _pod("pod2", "sub-2")
    assert _answer(moved, pod2)["allowed"] is True
    assert _answer(pod2, moved)["allowed"] is False  # back into the parent
    gate = "SupportParentQuotaSubmitPod=true"
    assert _answer(pod2, moved, gate)["allowed"] is True
    assert _answer(_pod("pod2", "default"), pod2, gate)["allowed"] is True


def test_the_preemptible_label_may_not_change() -> None:
    key = "quota.scheduling.koordinator.sh/preemptible"
    old = _pod("p", "sub-1", **{key: "true"})
    response = _answer(_pod("p", "sub-1", **{key: "false"}), old)
    assert response["allowed"] is False
    assert response["status"]["message"] == "Preemptible label is forbidden modify now."
    assert _answer(_pod("p", "sub-1", **{key: "true"}), old)["allowed"] is True


def _specs(quotas: list[dict[str, Any]]) -> list[ElasticQuotaSpec]:
    return [ElasticQuotaSpec.from_manifest(q) for q in quotas]


@pytest.mark.parametrize(
    ("case", "pod", "quotas", "disable_default", "expected"),
    [
        ("default quota", {}, [], False, "koordinator-default-quota"),
        (
            "quota name from label",
            _pod("test", "test-quota", "test-ns"),
            [_quota("test-quota", namespace="test-ns")],
            False,
            "test-quota",
        ),
        (
            "quota name from namespace",
            _pod("test", None, "test-ns"),
            [
                _quota("parent-quota", is_parent=True, namespace="test-ns"),
                _quota("test-ns", namespace="test-ns"),
            ],
            False,
            "test-ns",
        ),
        (
            "quota listing the namespace",
            _pod("test", None, "team-a"),
            [
                _quota(
                    "shared",
                    namespace="other",
                    **{"quota.scheduling.koordinator.sh/namespaces": json.dumps(["team-a", "team-b"])},
                )
            ],
            False,
            "shared",
        ),
        (
            "DisableDefaultQuota: the label only",
            _pod("test", None, "test-ns"),
            [_quota("test-ns", namespace="test-ns")],
            True,
            "",
        ),
    ],
)
def test_quota_name_from_pod(
    case: str, pod: dict[str, Any], quotas: list[dict[str, Any]], disable_default: bool, expected: str
) -> None:
    assert quota_name_of_pod(pod, _specs(quotas), disable_default) == expected, case


class TestElasticQuotaPodValidationConformance(AdmissionHandlerConformance):
    plugin_class = ElasticQuotaPodValidation
    cluster_objects: ClassVar[dict[str, list[dict[str, Any]]]] = {"ElasticQuota": TREE}
