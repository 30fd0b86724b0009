"""JSON merge patch against every example of RFC 7386's Appendix A, and the cluster's use of it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.merge_patch import copy_json, merge_patch
from koord_framework.errors import ClusterError, ConflictError, NotFoundError
from koord_framework.testing import FakeClock, make_node, make_pod

RFC_7386_APPENDIX_A: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), RFC_7386_APPENDIX_A)
def test_rfc7386_appendix_a(original: Any, patch: Any, expected: Any) -> None:
    before_original, before_patch = copy.deepcopy(original), copy.deepcopy(patch)
    assert merge_patch(original, patch) == expected
    assert original == before_original and patch == before_patch, "inputs must not be modified"


def test_result_shares_nothing_with_inputs() -> None:
    original: dict[str, Any] = {"keep": {"deep": [1, {"x": 1}]}, "change": {"a": 1}}
    patch = {"change": {"b": [2]}}
    result = merge_patch(original, patch)
    result["keep"]["deep"][1]["x"] = 99
    result["change"]["b"].append(3)
    assert original["keep"]["deep"][1]["x"] == 1
    assert patch == {"change": {"b": [2]}}


def test_copy_json_is_deep() -> None:
    value = {"a": [{"b": 1}], "c": "d"}
    copied = copy_json(value)
    copied["a"][0]["b"] = 2
    assert value == {"a": [{"b": 1}], "c": "d"}


@pytest.fixture
def cluster() -> MemoryCluster:
    c = MemoryCluster(FakeClock(), seed=7)
    c.create(make_node("n1", labels={"zone": "a", "rack": "r1"}))
    c.create(make_pod("p", cpu="1", labels={"app": "web"}))
    return c


def test_patch_merges_labels_and_deletes_with_null(cluster: MemoryCluster) -> None:
    out = cluster.patch("Node", "n1", "", {"metadata": {"labels": {"zone": "b", "rack": None, "new": "x"}}})
    labels = cluster.get("Node", "n1")["metadata"]["labels"]
    assert labels == {"kubernetes.io/hostname": "n1", "zone": "b", "new": "x"}
    assert out["metadata"]["labels"] == labels


def test_patch_replaces_lists_wholesale(cluster: MemoryCluster) -> None:
    cluster.patch("Node", "n1", "", {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
    cluster.patch("Node", "n1", "", {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}})
    assert cluster.get("Node", "n1")["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]


def test_patch_of_main_resource_leaves_status_alone(cluster: MemoryCluster) -> None:
    cluster.patch("Pod", "p", "default", {"status": {"phase": "Running"}, "metadata": {"labels": {"v": "2"}}})
    pod = cluster.get("Pod", "p", "default")
    assert pod["status"]["phase"] == "Pending"
    assert pod["metadata"]["labels"] == {"app": "web", "v": "2"}


def test_status_patch_changes_only_status(cluster: MemoryCluster) -> None:
    before = cluster.get("Pod", "p", "default")
    cluster.patch(
        "Pod", "p", "default", {"status": {"phase": "Running"}, "spec": {"nodeName": "n1"}}, status=True
    )
    after = cluster.get("Pod", "p", "default")
    assert after["status"]["phase"] == "Running"
    assert after["spec"] == before["spec"]
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])


def test_status_patch_of_kind_without_status_is_not_found(cluster: MemoryCluster) -> None:
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}})
    with pytest.raises(NotFoundError, match="no status subresource"):
        cluster.patch("ConfigMap", "cm", "default", {"status": {"x": 1}}, status=True)


def test_patch_with_stale_resource_version_conflicts(cluster: MemoryCluster) -> None:
    rv = cluster.get("Node", "n1")["metadata"]["resourceVersion"]
    cluster.patch("Node", "n1", "", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ConflictError, match="has been modified"):
        cluster.patch("Node", "n1", "", {"metadata": {"resourceVersion": rv, "labels": {"a": "2"}}})
    assert cluster.get("Node", "n1")["metadata"]["labels"]["a"] == "1"


def test_patch_cannot_rename(cluster: MemoryCluster) -> None:
    with pytest.raises(ClusterError, match=r"metadata\.name: field is immutable"):
        cluster.patch("Node", "n1", "", {"metadata": {"name": "n2"}})


def test_patch_that_changes_nothing_writes_nothing(cluster: MemoryCluster) -> None:
    rv = cluster.resource_version
    writes = cluster.write_count
    cluster.patch("Node", "n1", "", {"metadata": {"labels": {"zone": "a"}}})
    assert cluster.resource_version == rv
    assert cluster.write_count == writes


def test_patch_bumps_generation_on_spec_change_only(cluster: MemoryCluster) -> None:
    assert cluster.get("Node", "n1")["metadata"]["generation"] == 1
    cluster.patch("Node", "n1", "", {"metadata": {"labels": {"zone": "b"}}})
    assert cluster.get("Node", "n1")["metadata"]["generation"] == 1
    cluster.patch("Node", "n1", "", {"spec": {"unschedulable": True}})
    assert cluster.get("Node", "n1")["metadata"]["generation"] == 2
