"""The ElasticQuota mutating webhook (``ElasticQuotaMutation``): Koordinator's
``TestElasticQuotaMutatingHandler_Handle`` and ``TestQuotaTopology_fillQuotaDefaultInformation``
(pkg/webhook/elasticquota at a7a1b76b), and bad input."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from koord_plugin_elasticquota.webhook import ElasticQuotaMutation, fill_quota_defaults

from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook.admission import AdmissionRequest, Denied, GroupVersionResource
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.testing.conformance import AdmissionHandlerConformance

PARENT = "quota.scheduling.koordinator.sh/parent"
TREE = "quota.scheduling.koordinator.sh/tree-id"
WEIGHT = "quota.scheduling.koordinator.sh/shared-weight"
ROOT = "koordinator-root-quota"
CPU_MEM = {"cpu": "120", "memory": "1048576"}


class TestElasticQuotaMutationConformance(AdmissionHandlerConformance):
    plugin_class = ElasticQuotaMutation


def quota(
    name: str,
    max_: dict[str, str] | None,
    parent: str = "",
    tree: str = "",
    weight: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {}
    if parent:
        labels[PARENT] = parent
    if tree:
        labels[TREE] = tree
    annotations = {WEIGHT: json.dumps(weight)} if weight is not None else {}
    obj: dict[str, Any] = {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {},
    }
    if max_ is not None:
        obj["spec"]["max"] = max_
    return obj


FILL_CASES = [
    (
        "parent quota without treeID",
        [
            (quota("temp2", CPU_MEM), ROOT, '{"cpu":"120","memory":"1048576"}', ""),
            (quota("temp2-bu1", CPU_MEM, parent="temp2"), "temp2", '{"cpu":"120","memory":"1048576"}', ""),
        ],
    ),
    (
        "parent quota with treeID",
        [
            (quota("temp2", CPU_MEM, tree="tree-1"), ROOT, '{"cpu":"120","memory":"1048576"}', "tree-1"),
            (
                quota("temp2-bu1", CPU_MEM, parent="temp2"),
                "temp2",
                '{"cpu":"120","memory":"1048576"}',
                "tree-1",
            ),
        ],
    ),
    (
        "SharedWeight.keys == maxQuota.keys",
        [
            (
                quota("temp2", CPU_MEM, tree="tree-1", weight={"cpu": "0", "memory": "0"}),
                ROOT,
                '{"cpu": "0", "memory": "0"}',
                "tree-1",
            )
        ],
    ),
    (
        "SharedWeight.keys > maxQuota.keys",
        [
            (
                quota("temp2", {"memory": "1048576"}, tree="tree-1", weight={"cpu": "0", "memory": "0"}),
                ROOT,
                '{"memory":"0"}',
                "tree-1",
            )
        ],
    ),
    (
        "SharedWeight.keys < maxQuota.keys",
        [
            (
                quota("temp2", CPU_MEM, tree="tree-1", weight={"cpu": "0"}),
                ROOT,
                '{"cpu":"0","memory":"1048576"}',
                "tree-1",
            )
        ],
    ),
    (
        "same count, different keys",
        [
            (
                quota("temp2", {"memory": "1048576"}, tree="tree-1", weight={"cpu": "0"}),
                ROOT,
                '{"memory":"1048576"}',
                "tree-1",
            )
        ],
    ),
]


@pytest.mark.parametrize("steps", [c[1] for c in FILL_CASES], ids=[c[0] for c in FILL_CASES])
def test_fill_quota_default_information(steps: list[tuple[dict[str, Any], str, str, str]]) -> None:
    existing: list[dict[str, Any]] = []
    for obj, parent, weight, tree in steps:
        fill_quota_defaults(obj, existing)
        labels, annotations = obj["metadata"]["labels"], obj["metadata"]["annotations"]
        assert labels[PARENT] == parent
        # Koordinator's unchanged annotation stays as written; a filled or fixed one is Go's json.Marshal.
        assert json.loads(annotations[WEIGHT]) == json.loads(weight)
        if '": "' not in weight:
            assert annotations[WEIGHT] == weight
        assert labels.get(TREE, "") == tree
        existing.append(obj)


def test_the_root_quota_is_left_alone() -> None:
    obj = quota(ROOT, CPU_MEM)
    fill_quota_defaults(obj, [])
    assert obj["metadata"]["labels"] == {} and obj["metadata"]["annotations"] == {}


def test_an_unknown_parent_is_refused_naming_the_quota() -> None:
    with pytest.raises(Denied, match=r"^fill quota child failed, parent not exist$") as denied:
        fill_quota_defaults(quota("child", CPU_MEM, parent="nobody"), [])
    assert denied.value.code == 400


def test_a_malformed_shared_weight_is_refused() -> None:
    obj = quota("q", CPU_MEM)
    obj["metadata"]["annotations"][WEIGHT] = "{cpu"
    with pytest.raises(Denied, match="fillDefaultQuotaInfo unmarshal sharedWeight failed"):
        fill_quota_defaults(obj, [])


def _request(resource: str, op: str, obj: dict[str, Any] | None, sub: str = "") -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        kind=None,  # type: ignore[arg-type]
        resource=GroupVersionResource("", "v1", resource),
        operation=op,  # type: ignore[arg-type]
        sub_resource=sub,
        object=obj,
    )


class Quotas:
    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return []


HANDLE_CASES = [
    ("not a elasticQuota", _request("configmaps", "CREATE", None), True, 0),
    ("elasticQuota with subresource", _request("elasticquotas", "CREATE", None, "status"), True, 0),
    ("elasticQuota with empty object", _request("elasticquotas", "CREATE", None), False, 400),
    (
        "elasticQuota update, oldObj empty",
        _request("elasticquotas", "UPDATE", {"metadata": {"name": "pod1"}}),
        True,
        0,
    ),
    (
        "elasticQuota with object",
        _request("elasticquotas", "CREATE", {"metadata": {"name": "quota1"}}),
        True,
        0,
    ),
    ("create root quota", _request("elasticquotas", "CREATE", {"metadata": {"name": ROOT}}), True, 0),
]


@pytest.mark.parametrize(
    ("request_", "allowed", "code"), [c[1:] for c in HANDLE_CASES], ids=[c[0] for c in HANDLE_CASES]
)
def test_handle(request_: AdmissionRequest, allowed: bool, code: int) -> None:
    handler = ElasticQuotaMutation()
    handler.bind(Quotas(), gates_for("manager").parse(""))
    response = Dispatcher.admit([handler], request_)
    assert response["allowed"] is allowed
    if not allowed:
        assert response["status"]["code"] == code


def test_the_patch_fills_parent_and_shared_weight() -> None:
    handler = ElasticQuotaMutation()
    handler.bind(Quotas(), gates_for("manager").parse(""))
    obj = {"metadata": {"name": "quota1"}, "spec": {"max": {"cpu": "2"}}}
    response = Dispatcher.admit([handler], _request("elasticquotas", "CREATE", obj))
    patch = json.loads(base64.b64decode(response["patch"]))
    values = {op["path"]: op["value"] for op in patch}
    assert values["/metadata/labels"] == {PARENT: ROOT}
    assert values["/metadata/annotations"] == {WEIGHT: '{"cpu":"2"}'}
