"""``/mutate-pod``'s multi-quota-tree step (``MultiQuotaTreeAffinity``): Koordinator's
``TestAddNodeAffinityForMultiQuotaTree`` (pkg/webhook/pod/mutating/multi_quota_tree_affinity_test.go at
a7a1b76b), the gate, and the ElasticQuotaProfile kind."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from koord_plugin_elasticquota.kinds import check_elastic_quota_profile
from koord_plugin_elasticquota.tree_affinity import MultiQuotaTreeAffinity, selector_requirements

from koord_framework.cluster.kinds import KindProblem
from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook.admission import AdmissionRequest, GroupVersionResource
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.testing.conformance import AdmissionHandlerConformance

TREE = "quota.scheduling.koordinator.sh/tree-id"
NAME = "quota.scheduling.koordinator.sh/name"
PARENT = "quota.scheduling.koordinator.sh/parent"
IS_PARENT = "quota.scheduling.koordinator.sh/is-parent"
NAMESPACES = "quota.scheduling.koordinator.sh/namespaces"


class TestMultiQuotaTreeAffinityConformance(AdmissionHandlerConformance):
    plugin_class = MultiQuotaTreeAffinity


def _profile(name: str, tree: str, quota: str, pool: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "kube-system", "name": name, "labels": {TREE: tree}},
        "spec": {"quotaName": quota, "nodeSelector": {"matchLabels": {"node-pool": pool}}},
    }


def _quota(
    name: str, namespace: str = "kube-system", annotations: dict[str, str] | None = None, **labels: str
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "labels": labels, "annotations": annotations or {}}
    }


PROFILES = [
    _profile("profileA", "tree1", "root-quota-a", "nodePoolA"),
    _profile("profileB", "tree2", "root-quota-b", "nodePoolB"),
]
QUOTAS = [
    _quota("other-quota"),
    _quota("root-quota-a", **{TREE: "tree1", IS_PARENT: "true"}),
    _quota("root-quota-a-child1", **{TREE: "tree1", PARENT: "root-quota-a"}),
    _quota("namespace1", "namespace1", **{TREE: "tree1", PARENT: "root-quota-a"}),
    _quota("root-quota-b", annotations={NAMESPACES: '["namespace2"]'}, **{TREE: "tree2", IS_PARENT: "true"}),
    _quota("root-quota-b-child1", **{TREE: "tree2", PARENT: "root-quota-b"}),
]


class Lister:
    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return {"ElasticQuota": QUOTAS, "ElasticQuotaProfile": PROFILES}[kind]


def _pod(
    namespace: str = "default", quota: str = "", affinity: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"namespace": namespace, "name": "test-pod-1"}, "spec": {}}
    if quota:
        pod["metadata"]["labels"] = {NAME: quota}
    if affinity is not None:
        pod["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": affinity}]
                }
            }
        }
    return pod


ZONE = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["cn-hangzhou-a"]}


def _pool(pool: str) -> dict[str, Any]:
    return {"key": "node-pool", "operator": "In", "values": [pool]}


CASES = [
    ("no quota label", _pod(), _pod()),
    ("no quota profile", _pod(quota="other-quota"), _pod(quota="other-quota")),
    (
        "add node affinity",
        _pod(quota="root-quota-a-child1"),
        _pod(quota="root-quota-a-child1", affinity=[_pool("nodePoolA")]),
    ),
    (
        "append node affinity",
        _pod(quota="root-quota-a-child1", affinity=[ZONE]),
        _pod(quota="root-quota-a-child1", affinity=[ZONE, _pool("nodePoolA")]),
    ),
    (
        "multi quotas",
        _pod(quota="root-quota-b-child1"),
        _pod(quota="root-quota-b-child1", affinity=[_pool("nodePoolB")]),
    ),
    (
        "default quota",
        _pod(namespace="namespace1"),
        _pod(namespace="namespace1", affinity=[_pool("nodePoolA")]),
    ),
    (
        "default quota 2",
        _pod(namespace="namespace2"),
        _pod(namespace="namespace2", affinity=[_pool("nodePoolB")]),
    ),
]


def admit(pod: dict[str, Any], gates: str = "MultiQuotaTree=true", op: str = "CREATE") -> dict[str, Any]:
    handler = MultiQuotaTreeAffinity()
    handler.bind(Lister(), gates_for("manager").parse(gates))
    request = AdmissionRequest(
        uid="u",
        kind=None,  # type: ignore[arg-type]
        resource=GroupVersionResource("", "v1", "pods"),
        operation=op,  # type: ignore[arg-type]
        namespace=pod["metadata"]["namespace"],
        object=pod,
    )
    handler.admit(request, pod)
    return pod


@pytest.mark.parametrize(("pod", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_add_node_affinity_for_multi_quota_tree(pod: dict[str, Any], want: dict[str, Any]) -> None:
    assert admit(pod) == want


def test_off_without_the_gate_and_on_update() -> None:
    pod = _pod(quota="root-quota-a-child1")
    assert admit(copy.deepcopy(pod), gates="") == pod
    assert admit(copy.deepcopy(pod), op="UPDATE") == pod


def test_expressions_follow_the_labels() -> None:
    selector = {
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [{"key": "gpu", "operator": "Exists"}],
    }
    assert selector_requirements(selector) == [
        {"key": "a", "operator": "In", "values": ["1"]},
        {"key": "b", "operator": "In", "values": ["2"]},
        {"key": "gpu", "operator": "Exists"},
    ]


def test_a_malformed_affinity_is_a_400_naming_the_field() -> None:
    handler = MultiQuotaTreeAffinity()
    handler.bind(Lister(), gates_for("manager").parse("MultiQuotaTree=true"))
    pod = _pod(quota="root-quota-a-child1")
    pod["spec"]["affinity"] = {"nodeAffinity": "far"}
    request = AdmissionRequest(
        uid="u",
        kind=None,
        resource=GroupVersionResource("", "v1", "pods"),
        operation="CREATE",
        object=pod,  # type: ignore[arg-type]
    )
    response = Dispatcher.admit([handler], request)
    assert response["status"]["code"] == 400 and "spec.affinity.nodeAffinity" in response["status"]["message"]


def test_the_profile_kind_checks_its_fields() -> None:
    check_elastic_quota_profile(PROFILES[0])
    bad = copy.deepcopy(PROFILES[0])
    bad["spec"]["nodeSelector"] = {"matchLabels": {"a": 1}}
    with pytest.raises(KindProblem, match=r"spec\.nodeSelector\.matchLabels"):
        check_elastic_quota_profile(bad)
