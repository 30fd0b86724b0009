"""``create_no_result`` / ``patch_no_result``: the writes of callers that do not read the stored object
store exactly what ``create`` / ``patch`` store, on the embedded cluster and through a write fence."""

from __future__ import annotations

import pytest

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.fence import FencedCluster, FencedError, WriteFence
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import NotFoundError
from koord_framework.testing import make_node, make_node_metric


def _pair() -> tuple[MemoryCluster, MemoryCluster]:
    return MemoryCluster(VirtualClock(1000.0), seed=1), MemoryCluster(VirtualClock(1000.0), seed=1)


def test_the_same_objects_and_events_as_the_returning_writes() -> None:
    returning, quiet = _pair()
    seen: list[tuple[str, str]] = []
    quiet.subscribe(["Node", "NodeMetric"], lambda e: seen.append((e.type, e.obj["metadata"]["name"])))
    node, metric = make_node("n1", cpu="8", memory="16Gi"), make_node_metric("n1", cpu="1", memory="1Gi")
    for c in (returning, quiet):
        (c.create if c is returning else c.create_no_result)(node)
    returning.create(metric)
    quiet.create_no_result(metric)
    status = {"status": {"allocatable": {"kubernetes.io/batch-cpu": "1000"}}}
    spec = {"spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300}}}
    returning.patch("Node", "n1", "", status, status=True)
    quiet.patch_no_result("Node", "n1", "", status, status=True)
    returning.patch("NodeMetric", "n1", "", spec)
    quiet.patch_no_result("NodeMetric", "n1", "", spec)
    for kind in ("Node", "NodeMetric"):
        assert quiet.get(kind, "n1") == returning.get(kind, "n1")
    assert seen == [("ADDED", "n1"), ("ADDED", "n1"), ("MODIFIED", "n1"), ("MODIFIED", "n1")]
    # The caller's documents stay the caller's: changing them later changes nothing stored.
    status["status"]["allocatable"]["kubernetes.io/batch-cpu"] = "5"
    node["metadata"]["name"] = "changed"
    assert quiet.get("Node", "n1")["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "1000"


def test_errors_are_those_of_the_returning_writes() -> None:
    cluster = MemoryCluster(VirtualClock(0.0))
    with pytest.raises(NotFoundError):
        cluster.patch_no_result("Node", "absent", "", {"metadata": {"labels": {"a": "b"}}})


def test_a_closed_fence_refuses_them() -> None:
    cluster = MemoryCluster(VirtualClock(0.0))
    cluster.create(make_node("n1"))
    fence = WriteFence("koord-test")
    fenced = FencedCluster(cluster, fence)
    with pytest.raises(FencedError, match="create Node /n2 refused"):
        fenced.create_no_result(make_node("n2"))
    with pytest.raises(FencedError, match="patch Node /n1 refused"):
        fenced.patch_no_result("Node", "n1", "", {"metadata": {"labels": {"a": "b"}}})
    fence.open()
    fenced.create_no_result(make_node("n2"))
    fenced.patch_no_result("Node", "n1", "", {"metadata": {"labels": {"a": "b"}}})
    assert cluster.get("Node", "n1")["metadata"]["labels"]["a"] == "b"
    assert cluster.get("Node", "n2")["metadata"]["name"] == "n2"


def test_a_handed_over_object_is_stored_without_touching_the_callers_metadata() -> None:
    cluster = MemoryCluster(VirtualClock(0.0))
    section = {"enable": True, "cpuSuppressThresholdPercent": 65}  # shared by both, read-only
    meta = {"name": "n1"}
    cluster.create_no_result(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": meta,
            "spec": {"resourceUsedThresholdWithBE": section},
        },
        handover=True,
    )
    cluster.create_no_result(
        {"kind": "NodeSLO", "metadata": {"name": "n2"}, "spec": {"resourceUsedThresholdWithBE": section}},
        handover=True,
    )
    assert meta == {"name": "n1"}  # uid, resourceVersion ... went into the store's own metadata
    one, two = cluster.get("NodeSLO", "n1"), cluster.get("NodeSLO", "n2")
    assert one["spec"] == two["spec"] == {"resourceUsedThresholdWithBE": section}
    assert one["metadata"]["uid"] and one["metadata"]["resourceVersion"]
    one["spec"]["resourceUsedThresholdWithBE"]["enable"] = False  # a reader's copy: the store is untouched
    assert cluster.get("NodeSLO", "n2")["spec"]["resourceUsedThresholdWithBE"]["enable"] is True
