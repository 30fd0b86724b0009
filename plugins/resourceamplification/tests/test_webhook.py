"""Koordinator's ``pkg/webhook/node/plugins/resourceamplification`` test cases (a7a1b76b): the node-status
mutating webhook amplifying allocatable cpu / memory and keeping the raw allocatable."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_resourceamplification import NodeResourceAmplificationPlugin

from koord_framework.api.resources import to_int
from koord_framework.manager.webhook.admission import AdmissionRequest, GroupVersionKind, GroupVersionResource

RATIO = "node.koordinator.sh/resource-amplification-ratio"
RAW = "node.koordinator.sh/raw-allocatable"


def node(annotations: dict[str, str] | None, allocatable: dict[str, str] | None) -> dict[str, Any]:
    n: dict[str, Any] = {
        "metadata": {"name": "test-node", "annotations": dict(annotations or {})},
        "status": {},
    }
    if allocatable is not None:
        n["status"]["allocatable"] = dict(allocatable)
    return n


def raw_cpu(n: dict[str, Any]) -> int | None:
    text = n["metadata"].get("annotations", {}).get(RAW)
    return None if text is None else to_int("cpu", json.loads(text).get("cpu", "0"))


@pytest.mark.parametrize(
    ("annotations", "want_alloc", "want_raw"),
    [
        ({RATIO: '{"cpu": 1.5}'}, 1500, 1000),  # normal
        ({RATIO: '{"cpu": 0.5}'}, 1000, 1000),  # disable1: a ratio <= 1 is skipped
        ({RATIO: '{"cpu": 1}'}, 1000, 1000),  # disable2
        ({RAW: "{}"}, 1000, None),  # disabling amplification removes the raw allocatable
        ({RATIO: '{"eni": 2}'}, 1000, 1000),  # unsupported resources are ignored
        ({RATIO: '{"cpu": 2}', RAW: '{"cpu":"1"}'}, 2000, 1000),  # the raw value from the annotation
    ],
)
def test_handle_update(annotations: dict[str, str], want_alloc: int, want_raw: int | None) -> None:
    n = node(annotations, {"cpu": "1000m"})
    NodeResourceAmplificationPlugin().amplify(None, n)
    assert to_int("cpu", n["status"]["allocatable"]["cpu"]) == want_alloc
    assert raw_cpu(n) == want_raw


def _request(
    op: str, obj: dict[str, Any], old: dict[str, Any] | None, sub: str = "status"
) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "Node"),
        resource=GroupVersionResource("", "v1", "nodes"),
        operation=op,  # type: ignore[arg-type]
        name="test-node",
        sub_resource=sub,
        object=obj,
        old_object=old,
    )


def test_admit_only_on_update() -> None:
    plugin = NodeResourceAmplificationPlugin()
    created = node({RATIO: '{"cpu": 2}'}, {"cpu": "1"})
    plugin.admit(_request("CREATE", created, None), created)
    assert created["status"]["allocatable"]["cpu"] == "1"
    updated = node({RATIO: '{"cpu": 2}'}, {"cpu": "1"})
    plugin.admit(_request("UPDATE", updated, node({RATIO: '{"cpu": 2}'}, {"cpu": "1"})), updated)
    assert updated["status"]["allocatable"]["cpu"] == "2"


def test_handles_node_status_only() -> None:
    plugin = NodeResourceAmplificationPlugin()
    assert plugin.handles(_request("UPDATE", {}, {}, sub="status"))
    assert not plugin.handles(_request("UPDATE", {}, {}, sub=""))


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (None, {"cpu": "4", "memory": "8Gi"}, False),  # oldNode is nil
        ({"cpu": "4", "memory": "8Gi"}, {"cpu": "4", "memory": "8Gi"}, False),  # unchanged
        ({"cpu": "4"}, {"cpu": "4", "memory": "8Gi"}, True),  # add resource
        ({"cpu": "4", "memory": "8Gi"}, {"cpu": "4"}, True),  # remove resource
        ({"cpu": "4", "memory": "8Gi"}, {"cpu": "5", "memory": "8Gi"}, True),  # updated
        (
            {"cpu": "4", "ephemeral-storage": "80"},
            {"cpu": "4", "ephemeral-storage": "100"},
            False,
        ),  # unsupported
    ],
)
def test_is_supported_resource_changed(
    old: dict[str, str] | None, new: dict[str, str], changed: bool
) -> None:
    from koord_plugin_resourceamplification.webhook import _supported

    old_node = node(None, old) if old is not None else None
    current = _supported(new, "new")
    assert NodeResourceAmplificationPlugin._changed(old_node, current, "node test-node") is changed


def test_kubelet_update_refreshes_the_raw_allocatable() -> None:
    """Kubelet reports a new allocatable (reserved resources changed): the raw value follows it."""
    old = node(
        {RATIO: '{"cpu": 2, "memory": 1.5}', RAW: '{"cpu":"4","memory":"8Gi"}'},
        {"cpu": "8", "memory": "12Gi"},
    )
    new = node(
        {RATIO: '{"cpu": 2, "memory": 1.5}', RAW: '{"cpu":"4","memory":"8Gi"}'}, {"cpu": "3", "memory": "8Gi"}
    )
    NodeResourceAmplificationPlugin().amplify(old, new)
    assert json.loads(new["metadata"]["annotations"][RAW]) == {"cpu": "3", "memory": "8Gi"}
    assert to_int("cpu", new["status"]["allocatable"]["cpu"]) == 6000
    assert to_int("memory", new["status"]["allocatable"]["memory"]) == 12 * 2**30


def test_unreadable_annotations_are_errors_naming_them() -> None:
    with pytest.raises(ValueError, match=RATIO):
        NodeResourceAmplificationPlugin().amplify(None, node({RATIO: "{bad"}, {"cpu": "1"}))
    with pytest.raises(ValueError, match=RAW):
        NodeResourceAmplificationPlugin().amplify(
            None, node({RATIO: '{"cpu": 2}', RAW: "null"}, {"cpu": "1"})
        )
