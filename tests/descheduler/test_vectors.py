"""Koordinator's vectors for the descheduler framework pieces: the eviction limiter (also through the
framework's evictor), the pod sorter and scorers, and the anomaly detector."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from koord_lib_descheduling.sorter import (
    most_requested_score,
    pod_usage_score,
    resource_usage_score,
    sort_pods_by_usage,
)
from koord_plugin_lownodeload.anomaly import BasicDetector, State

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.cluster.clock import VirtualClock, format_time
from koord_framework.descheduler.interface import EvictOptions
from koord_framework.descheduler.limiter import EvictionLimiter
from koord_framework.testing.builders import make_node, make_pod
from koord_framework.testing.descheduler import DeschedulerHarness

DATA = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())
VECTORS = {v["id"]: v for v in DATA["vectors"]}
T0 = 1_704_067_200.0


def _of(function_prefix: str) -> list[dict[str, Any]]:
    return [v for v in DATA["vectors"] if v["function"].startswith(function_prefix)]


# --- limiter ------------------------------------------------------------------------------------------------
LIMITER = _of("EvictionLimiter(")


class _Pod:
    def __init__(self, namespace: str, node_name: str) -> None:
        self.namespace = namespace
        self.node_name = node_name


@pytest.mark.parametrize("vector", LIMITER, ids=[v["id"] for v in LIMITER])
def test_limiter_vectors(vector: dict[str, Any]) -> None:
    i = vector["inputs"]
    limiter = EvictionLimiter(i["maxPerNode"], i["maxPerNamespace"], i["maxTotal"])
    allowed = []
    for p in i["evictSequence"]:
        pod = _Pod(p["namespace"], p["nodeName"])
        ok = limiter.allow_evict(pod)
        if ok:
            limiter.done(pod)
        allowed.append(ok)
    expected = vector["expected"]
    assert allowed == expected["allow"]
    assert {n: limiter.node_evicted(n) for n in expected["nodeEvicted"]} == expected["nodeEvicted"]
    assert {n: limiter.namespace_evicted(n) for n in expected["namespaceEvicted"]} == expected[
        "namespaceEvicted"
    ]
    assert limiter.total_evicted() == expected["totalEvicted"]


@pytest.mark.parametrize("vector", LIMITER, ids=[v["id"] for v in LIMITER])
def test_limiter_vectors_through_the_evictor(vector: dict[str, Any]) -> None:
    """The same sequences through ``handle.evictor().evict`` of a profile with those limits."""
    i = vector["inputs"]
    harness = DeschedulerHarness(
        [],
        max_per_node=i["maxPerNode"],
        max_per_namespace=i["maxPerNamespace"],
        max_total=i["maxTotal"],
        now=T0,
    )
    nodes = sorted({p["nodeName"] for p in i["evictSequence"]})
    harness.add(*[make_node(n) for n in nodes])
    pods = [
        make_pod(p["name"], namespace=p["namespace"], node=p["nodeName"], owner_kind="ReplicaSet")
        for p in i["evictSequence"]
    ]
    harness.add(*pods)
    evictor = harness.handle.evictor()
    allowed = [evictor.evict(PodInfo.from_manifest(p), EvictOptions("Test", "vector")) for p in pods]
    assert allowed == vector["expected"]["allow"]
    assert len(harness.recorder.evictions) == vector["expected"]["totalEvicted"]
    refused = [f for r in harness.reports for f in r.failures]
    assert all(f.result == "refused" for f in refused)


NODE_LIMIT = _of("EvictionLimiter.NodeLimitExceeded")


@pytest.mark.parametrize("vector", NODE_LIMIT, ids=[v["id"] for v in NODE_LIMIT])
def test_node_limit_exceeded_vectors(vector: dict[str, Any]) -> None:
    i = vector["inputs"]
    limiter = EvictionLimiter(max_per_node=i["maxPerNode"])
    for _ in range(i["evictedOnNode1"]):
        pod = _Pod("default", "node-1")
        assert limiter.allow_evict(pod)
        limiter.done(pod)
    assert limiter.node_limit_exceeded("node-1") is vector["expected"]["exceeded"]


# --- sorter ------------------------------------------------------------------------------------------------
_T = re.compile(r"^T\+(\d+)s$")


def _pod(manifest: dict[str, Any]) -> PodInfo:
    obj = json.loads(json.dumps(manifest))
    ts = obj["metadata"].get("creationTimestamp")
    if isinstance(ts, str) and (m := _T.match(ts)):
        obj["metadata"]["creationTimestamp"] = format_time(T0 + int(m.group(1)))
    return PodInfo.from_manifest({"kind": "Pod", **obj})


def _group_sequence(order: list[str], tie_groups: list[list[str]]) -> list[int | str]:
    group = {name: i for i, g in enumerate(tie_groups) for name in g}
    out: list[int | str] = []
    for name in order:
        g = group.get(name, name)
        if not out or out[-1] != g or g == name:
            out.append(g)
    return out


@pytest.mark.parametrize("vid", ["D030", "D031"])
def test_sort_pods_by_usage_vectors(vid: str) -> None:
    vector = VECTORS[vid]
    i = vector["inputs"]
    pods = [_pod(p) for p in i["pods"]]
    metrics = {k: parse_resource_list(v) for k, v in i["podMetrics"].items()}
    excess = parse_resource_list(i.get("resourcesThatExceedThresholds") or {})
    weights = i.get("weights") or {"cpu": 1, "memory": 1, "pods": 1}
    sort_pods_by_usage(excess, pods, metrics, weights)
    order = [p.name for p in pods]
    expected = vector["expected"]
    ties = expected.get("tie_groups", [])
    assert _group_sequence(order, ties) == _group_sequence(expected["order"], ties)
    for name, score in expected.get("scores", {}).items():
        assert pod_usage_score(weights, metrics[f"default/{name}"], excess) == pytest.approx(score, rel=1e-12)


def test_resource_usage_scorer_vector() -> None:
    vector = VECTORS["D054"]
    i = vector["inputs"]
    requested, allocatable = parse_resource_list(i["requested"]), parse_resource_list(i["allocatable"])
    assert resource_usage_score(i["weights"], requested, allocatable) == vector["expected"]["score"]
    assert [most_requested_score(a, b) for a, b in i["mostRequestedScore_calls"]] == vector["expected"][
        "mostRequestedScore"
    ]
    assert resource_usage_score({}, requested, allocatable) == vector["expected"]["score_with_zero_weights"]


# --- anomaly ----------------------------------------------------------------------------------------------
def test_basic_detector_vector() -> None:
    vector = VECTORS["D052"]
    i = vector["inputs"]
    clock = VirtualClock(T0)
    detector = BasicDetector(
        "node",
        clock,
        timeout=3.0,
        anomaly_condition=lambda c: c.consecutive_abnormalities >= 2,
        normal_condition=lambda c: c.consecutive_normalities > 2,
    )
    states = [str(detector.mark(normal)) for normal in i["marks"]]
    assert states == vector["expected"]["states"]


def test_basic_detector_anomaly_expires_after_timeout() -> None:
    clock = VirtualClock(T0)
    detector = BasicDetector(
        "node", clock, timeout=3.0, anomaly_condition=lambda c: c.consecutive_abnormalities >= 1
    )
    assert detector.mark(False) is State.ANOMALY
    clock.advance(2.9)
    states = [detector.state]
    clock.advance(0.2)
    states.append(detector.state)
    assert states == [State.ANOMALY, State.OK]
    assert detector.counter.consecutive_abnormalities == 0
