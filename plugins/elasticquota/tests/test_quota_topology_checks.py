"""The ElasticQuota validating webhook's tree-id and delete checks: Koordinator's
``TestQuotaTopology_checkTreeID`` and ``TestQuotaTopology_ValidDeleteQuota`` (pkg/webhook/elasticquota at
a7a1b76b), through ``ElasticQuotaValidation`` with its 400 answers."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_elasticquota.webhook import ElasticQuotaValidation, delete_problem, tree_id_problem

from koord_framework.manager.webhook.admission import AdmissionRequest, GroupVersionResource
from koord_framework.manager.webhook.dispatch import Dispatcher

PARENT = "quota.scheduling.koordinator.sh/parent"
TREE = "quota.scheduling.koordinator.sh/tree-id"
IS_PARENT = "quota.scheduling.koordinator.sh/is-parent"
NAME = "quota.scheduling.koordinator.sh/name"


def quota(name: str, parent: str = "", tree: str = "", is_parent: bool = False) -> dict[str, Any]:
    labels = {IS_PARENT: str(is_parent).lower()}
    if parent:
        labels[PARENT] = parent
    if tree:
        labels[TREE] = tree
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"max": {"cpu": "10", "memory": "20"}, "min": {"cpu": "10", "memory": "20"}},
    }


TREE_CASES = [
    ("satisfy no tree id", "", "", "", False),
    ("satisfy with tree id", "tree-1", "tree-1", "tree-1", False),
    ("parent no tree id", "", "tree-1", "tree-1", True),
    ("self no tree id", "tree-1", "", "tree-1", True),
    ("child no tree id", "tree-1", "tree-1", "", True),
]


@pytest.mark.parametrize(
    ("parent", "self_", "child", "fails"), [c[1:] for c in TREE_CASES], ids=[c[0] for c in TREE_CASES]
)
def test_check_tree_id(parent: str, self_: str, child: str, fails: bool) -> None:
    quotas = [
        quota("parent", tree=parent, is_parent=True),
        quota("temp", "parent", self_, is_parent=True),
        quota("child", "temp", child),
    ]
    assert bool(tree_id_problem(quotas[1], None, quotas)) is fails


def test_the_tree_id_may_not_change() -> None:
    assert tree_id_problem(quota("q", tree="b"), quota("q", tree="a"), []) == "q tree id changed [a] vs [b]"


def test_valid_delete_quota() -> None:
    temp, temp2 = quota("temp", is_parent=True), quota("temp2", is_parent=True)
    sub1 = quota("sub-1", "temp")
    quotas = [temp, temp2, sub1]
    assert delete_problem(temp, quotas, []) == "delete quota failed, quota temp has 1 child quotas"
    assert delete_problem(temp2, quotas, []) == ""
    quotas.remove(temp2)
    pods = [
        {"metadata": {"name": f"pod{i}", "namespace": "sub-1", "labels": {NAME: "sub-1"}}} for i in (1, 2, 3)
    ]
    assert delete_problem(sub1, quotas, pods[:1]) == "delete quota failed, quota sub-1 has 1 child pods: pod1"
    assert (
        delete_problem(sub1, quotas, pods)
        == "delete quota failed, quota sub-1 has 3 child pods: pod1, pod2, ..."
    )
    assert delete_problem(sub1, quotas, []) == ""
    quotas.remove(sub1)
    assert delete_problem(temp, quotas, []) == ""
    assert delete_problem(quota("system"), quotas, []) == "not found quota:system"
    assert delete_problem(quota("koordinator-root-quota"), quotas, []) == (
        "can not delete quotaGroup :koordinator-root-quota"
    )


class Lister:
    def __init__(self, quotas: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.objects = {"ElasticQuota": quotas, "Pod": pods}

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.objects[kind]


def test_the_webhook_refuses_a_delete_with_400() -> None:
    temp, sub = quota("temp", is_parent=True), quota("sub-1", "temp")
    handler = ElasticQuotaValidation()
    handler.bind(Lister([temp, sub], []))
    request = AdmissionRequest(
        uid="u",
        kind=None,  # type: ignore[arg-type]
        resource=GroupVersionResource("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas"),
        operation="DELETE",
        old_object=temp,
    )
    response = Dispatcher.admit([handler], request)
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert response["status"]["message"] == "delete quota failed, quota temp has 1 child quotas"
    request = AdmissionRequest(
        uid="u",
        kind=None,  # type: ignore[arg-type]
        resource=GroupVersionResource("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas"),
        operation="DELETE",
        old_object=sub,
    )
    assert Dispatcher.admit([handler], request)["allowed"] is True
