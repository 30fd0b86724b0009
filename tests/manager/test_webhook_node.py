"""The node webhooks: Koordinator's cases of ``resource_amplification_test.go``, ``slo_plugin_test.go`` and
the node handlers' tests, plus the kit's conformance."""

from __future__ import annotations

import base64
import json
from typing import Any, ClassVar

import pytest

from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    GroupVersionKind,
    GroupVersionResource,
)
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.manager.webhook.jsonpatch import create_patch
from koord_framework.manager.webhook.node import (
    NodeResourceAmplification,
    NodeSLOConfigConflict,
    amplify_node,
    supported_changed,
)
from koord_framework.testing.conformance import AdmissionHandlerConformance

RATIO = "node.koordinator.sh/resource-amplification-ratio"
RAW = "node.koordinator.sh/raw-allocatable"


def _node(
    alloc: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    node: dict[str, Any] = {"metadata": {"name": "test-node"}}
    if annotations is not None:
        node["metadata"]["annotations"] = annotations
    if labels is not None:
        node["metadata"]["labels"] = labels
    if alloc is not None:
        node["status"] = {"allocatable": alloc}
    return node


def _request(
    op: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None,
    sub: str = "status",
    resource: str = "nodes",
) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "Node"),
        resource=GroupVersionResource("", "v1", resource),
        operation=op,  # type: ignore[arg-type]
        name="test-node",
        sub_resource=sub,
        object=obj,
        old_object=old,
    )


# --- TestNodeResourceAmplificationPlugin_isSupportedResourceChanged -------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (None, _node(), False),
        (_node(), None, False),
        (None, None, False),
        (_node({"cpu": "4", "memory": "8Gi"}), _node({"cpu": "4", "memory": "8Gi"}), False),
        (_node({"cpu": "4"}), _node({"cpu": "4", "memory": "8Gi"}), True),
        (_node({"cpu": "4", "memory": "8Gi"}), _node({"cpu": "4"}), True),
        (_node({"cpu": "4", "memory": "8Gi"}), _node({"cpu": "5", "memory": "8Gi"}), True),
        (
            _node({"cpu": "4", "ephemeral-storage": "80"}),
            _node({"cpu": "4", "ephemeral-storage": "100"}),
            False,
        ),
        (_node({"cpu": "4000m"}), _node({"cpu": "4"}), False),  # equal in value
    ],
)
def test_supported_resource_changed(old: Any, new: Any, changed: bool) -> None:
    assert supported_changed(old, new) is changed


# --- TestNodeResourceAmplificationPlugin_Admit and handleUpdate ------------------------------------------


def test_create_and_empty_update_change_nothing() -> None:
    handler = NodeResourceAmplification()
    for op in ("CREATE", "UPDATE"):
        node = _node()
        handler.admit(_request(op, node, _node()), node)
        assert node == _node()


def test_first_amplification_saves_the_raw_allocatable() -> None:
    node = _node({"cpu": "4", "memory": "8Gi", "pods": "110"}, {RATIO: '{"cpu":1.5,"memory":2}'})
    amplify_node(node, _node({"cpu": "4", "memory": "8Gi", "pods": "110"}))
    assert json.loads(node["metadata"]["annotations"][RAW]) == {"cpu": "4", "memory": "8Gi"}
    assert node["status"]["allocatable"] == {"cpu": "6", "memory": "16Gi", "pods": "110"}


def test_unchanged_kubelet_values_amplify_the_saved_raw_allocatable() -> None:
    # The node already carries amplified values; the raw annotation stays the base.
    annotations = {RATIO: '{"cpu":2}', RAW: '{"cpu":"4","memory":"8Gi"}'}
    old = _node({"cpu": "8", "memory": "8Gi"}, dict(annotations))
    node = _node({"cpu": "8", "memory": "8Gi"}, dict(annotations))
    amplify_node(node, old)
    assert node["status"]["allocatable"]["cpu"] == "8"
    assert node["metadata"]["annotations"][RAW] == '{"cpu":"4","memory":"8Gi"}'


def test_kubelet_changing_allocatable_refreshes_the_raw_value() -> None:
    annotations = {RATIO: '{"cpu":2}', RAW: '{"cpu":"4","memory":"8Gi"}'}
    old = _node({"cpu": "8", "memory": "8Gi"}, dict(annotations))
    node = _node({"cpu": "3", "memory": "8Gi"}, dict(annotations))  # the administrator reserved more
    amplify_node(node, old)
    assert json.loads(node["metadata"]["annotations"][RAW]) == {"cpu": "3", "memory": "8Gi"}
    assert node["status"]["allocatable"]["cpu"] == "6"


def test_ratios_of_one_or_less_and_missing_resources_are_left_alone() -> None:
    node = _node({"cpu": "4"}, {RATIO: '{"cpu":1,"memory":3}'})
    amplify_node(node, None)
    assert node["status"]["allocatable"] == {"cpu": "4"}


def test_milli_truncation_keeps_the_format() -> None:
    node = _node({"cpu": "3", "memory": "1Gi"}, {RATIO: '{"cpu":1.333,"memory":1.5}'})
    amplify_node(node, None)
    assert node["status"]["allocatable"] == {"cpu": "3999m", "memory": "1536Mi"}


def test_turning_the_feature_off_drops_the_raw_annotation() -> None:
    node = _node({"cpu": "8"}, {RAW: '{"cpu":"4"}', "other": "x"})
    amplify_node(node, None)
    assert node["metadata"]["annotations"] == {"other": "x"}
    assert node["status"]["allocatable"] == {"cpu": "8"}


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({RATIO: "{bad"}, "amplification ratio"),
        ({RATIO: '{"cpu":"x"}'}, "amplification ratio"),
        ({RATIO: '{"cpu":2}', RAW: "{bad"}, "raw allocatable"),
    ],
)
def test_unreadable_annotations_fail_the_request(annotations: dict[str, str], message: str) -> None:
    node = _node({"cpu": "8"}, annotations)
    response = Dispatcher.admit([NodeResourceAmplification()], _request("UPDATE", node, node))
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert message in response["status"]["message"]


# --- TestNodeMutatingHandler_Handle -------------------------------------------------------------------


def test_the_status_handler_patches_only_node_status_updates() -> None:
    handler = NodeResourceAmplification()
    node = _node({"cpu": "4"}, {RATIO: '{"cpu":2}'})
    response = Dispatcher.admit([handler], _request("UPDATE", node, node))
    patch = json.loads(base64.b64decode(response["patch"]))
    expected = json.loads(json.dumps(node))
    amplify_node(expected, node)
    assert patch == create_patch(node, expected)
    # other resources, the node itself (no subresource) and deletions are allowed untouched
    for request in (
        _request("UPDATE", node, node, resource="pods"),
        _request("UPDATE", node, node, sub=""),
        _request("DELETE", None, node),
    ):
        assert Dispatcher.admit([handler], request) == {"uid": "u", "allowed": True}


# --- slo_plugin_test.go: SLOControllerConfigConflict -------------------------------------------------------


def _config(node_configs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": {"colocation-config": json.dumps({"enable": True, "nodeConfigs": node_configs})},
    }


CONFLICTING = _config(
    [
        {"name": "a", "nodeSelector": {"matchLabels": {"xxx": "xxx"}}},
        {"name": "b", "nodeSelector": {"matchLabels": {"yyy": "yyy"}}},
    ]
)


class _Lister:
    def __init__(self, config: dict[str, Any] | None) -> None:
        self.config = config

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        assert (kind, name, namespace) == ("ConfigMap", "slo-controller-config", "koordinator-system")
        return self.config

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return []


def _validate(
    op: str, labels: dict[str, str], old_labels: dict[str, str] | None, config: Any = CONFLICTING
) -> dict[str, Any]:
    handler = NodeSLOConfigConflict()
    handler.bind(_Lister(config))
    node = _node(labels=labels)
    old = _node(labels=old_labels) if old_labels is not None else None
    return Dispatcher.admit([handler], _request(op, node, old, sub=""))


@pytest.mark.parametrize(
    ("case", "op", "labels", "old_labels", "config", "allowed"),
    [
        (
            "create with a conflict is only logged",
            "CREATE",
            {"xxx": "xxx", "yyy": "yyy"},
            None,
            CONFLICTING,
            True,
        ),
        (
            "update into a conflict",
            "UPDATE",
            {"xxx": "xxx", "yyy": "yyy"},
            {"xxx": "xxx"},
            CONFLICTING,
            False,
        ),
        ("update without a conflict", "UPDATE", {"yyy": "yyy"}, {"xxx": "xxx"}, CONFLICTING, True),
        (
            "labels unchanged are not checked",
            "UPDATE",
            {"xxx": "xxx", "yyy": "yyy"},
            {"xxx": "xxx", "yyy": "yyy"},
            CONFLICTING,
            True,
        ),
        ("no slo-controller-config", "UPDATE", {"xxx": "xxx", "yyy": "yyy"}, {}, None, True),
        (
            "one node strategy cannot conflict",
            "UPDATE",
            {"xxx": "xxx"},
            {},
            _config([{"name": "a", "nodeSelector": {"matchLabels": {"xxx": "xxx"}}}]),
            True,
        ),
        (
            "an unparsable key is skipped",
            "UPDATE",
            {"xxx": "xxx"},
            {},
            {"data": {"colocation-config": "{bad"}},
            True,
        ),
    ],
)
def test_node_label_conflicts(
    case: str, op: str, labels: dict[str, str], old_labels: Any, config: Any, allowed: bool
) -> None:
    response = _validate(op, labels, old_labels, config)
    assert response["allowed"] is allowed, (case, response)
    if not allowed:
        assert response["status"]["code"] == 400
        assert json.loads(response["status"]["message"][3:-3]) == {
            "reason": "ExistNodeConfict",
            "message": {
                "config": "colocation-config",
                "strategies": ["a", "b"],
                "exampleNodes": ["test-node"],
            },
        }


class TestNodeResourceAmplificationConformance(AdmissionHandlerConformance):
    plugin_class = NodeResourceAmplification


class TestNodeSLOConfigConflictConformance(AdmissionHandlerConformance):
    plugin_class = NodeSLOConfigConflict
    cluster_objects: ClassVar[dict[str, list[dict[str, Any]]]] = {"ConfigMap": [CONFLICTING]}
