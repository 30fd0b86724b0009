"""Koordinator's own LowNodeLoad test vectors (``tests/data/vectors.json``, copied from the shared set),
run through the plugin's public interface: a descheduler profile with ``DefaultEvictor`` as Filter and
Evict plugin and ``LowNodeLoad`` as Balance plugin, over an in-memory cluster.

The vectors give ``LowNodeLoadArgs`` in Koordinator's *internal* form (one node pool, no defaulting). A
user writes the v1alpha2 form, which the plugin defaults; ``v1alpha2_args`` translates. Two internal
values have no v1alpha2 spelling: ``nodeMetricExpirationSeconds: null`` (never expire; v1alpha2 defaults
it to 180s) — the NodeMetrics get a fresh ``updateTime`` instead, which has the same effect — and
``resourceWeights: null`` (all weights 0; v1alpha2 defaults cpu and memory to 1) — the notes of each
vector say the weights do not decide its outcome.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_defaultevictor import DefaultEvictor
from koord_plugin_lownodeload import LowNodeLoad

from koord_framework.cluster.clock import format_time
from koord_framework.testing.builders import make_node, make_node_metric, make_pod
from koord_framework.testing.descheduler import DeschedulerHarness

DATA = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())
VECTORS = {v["id"]: v for v in DATA["vectors"]}
NOW = 1_704_067_200.0


def _by_function(prefix: str) -> list[dict[str, Any]]:
    return [v for v in DATA["vectors"] if v["function"].startswith(prefix)]


def v1alpha2_args(internal: dict[str, Any]) -> dict[str, Any]:
    pool = internal["nodePools"][0]
    out: dict[str, Any] = {
        "paused": internal["paused"],
        "dryRun": internal["dryRun"],
        "numberOfNodes": internal["numberOfNodes"],
        "nodeFit": internal["nodeFit"],
        "podSelectors": internal["podSelectors"] or [],
        "detectorCacheTimeout": internal["detectorCacheTimeout"],
        "useDeviationThresholds": pool["useDeviationThresholds"],
    }
    if internal.get("evictableNamespaces") is not None:
        ns = internal["evictableNamespaces"]
        out["evictableNamespaces"] = {k: v for k, v in ns.items() if v}
    if internal.get("nodeMetricExpirationSeconds") is not None:
        out["nodeMetricExpirationSeconds"] = internal["nodeMetricExpirationSeconds"]
    for key in (
        "lowThresholds",
        "highThresholds",
        "prodLowThresholds",
        "prodHighThresholds",
        "resourceWeights",
        "nodeSelector",
    ):
        if pool.get(key) is not None:
            out[key] = pool[key]
    cond = pool.get("anomalyCondition")
    if cond is not None:
        out["anomalyCondition"] = cond
    return out


def evictor_args(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if v is not None}


RUN_BALANCE = _by_function("Profile with Evict+Filter=DefaultEvictor")


@pytest.mark.parametrize("vector", RUN_BALANCE, ids=[v["id"] for v in RUN_BALANCE])
def test_run_balance_vectors(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    limiter = inputs["evictionLimiter"]
    harness = DeschedulerHarness(
        [(LowNodeLoad, v1alpha2_args(inputs["lowNodeLoadArgs"]))],
        evictor=(DefaultEvictor, evictor_args(inputs["defaultEvictorArgs"])),
        now=NOW,
        dry_run=inputs["frameworkDryRun"],
        max_per_node=limiter["maxPerNode"],
        max_per_namespace=limiter["maxPerNamespace"],
        max_total=limiter["maxTotal"],
    )
    for node in inputs["nodes"]:
        harness.add({"apiVersion": "v1", "kind": "Node", **node})
    for pod in inputs["pods"]:
        harness.add({"apiVersion": "v1", "kind": "Pod", **pod})
    expires = inputs["lowNodeLoadArgs"]["nodeMetricExpirationSeconds"] is None
    for metric in inputs["nodeMetrics"]:
        metric = copy.deepcopy(metric)
        if expires and metric["status"].get("updateTime") is None:
            metric["status"]["updateTime"] = format_time(NOW)
        harness.add({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", **metric})

    report = harness.balance([n["metadata"]["name"] for n in inputs["nodes"]])

    assert report.errors == []
    expected = vector["expected"]
    assert len(report.evictions) == expected["podsEvicted"], [e.pod for e in report.evictions]
    if "evictedPods" in expected:
        assert sorted(e.pod.split("/")[1] for e in report.evictions) == sorted(expected["evictedPods"])
    for e in report.evictions:
        assert e.plugin == "LowNodeLoad"
        assert e.reason.startswith("node is overutilized, ")
    if not inputs["frameworkDryRun"]:
        evicted_in_cluster = {f"{r.namespace}/{r.name}" for r in harness.cluster.evictions}
        assert evicted_in_cluster == {e.pod for e in report.evictions}


# --- eviction reasons (TestOverUtilizedEvictionReason), through a Balance call ---------------------------
def _reason_scenario(vector: dict[str, Any]) -> DeschedulerHarness:
    """The vector's node as an overloaded source whose usage equals the vector's, with one evictable pod
    that fits an empty target node; the first eviction's reason is the reason the vector asserts."""
    inputs = vector["inputs"]
    prod = inputs["prod"]
    node = inputs["node"]
    annotations = node["metadata"]["annotations"]
    alloc = node["status"]["allocatable"]
    args: dict[str, Any] = {
        "highThresholds": inputs["highThresholds"],
        # Explicit low thresholds keep newThresholds from overwriting the high ones (spec §6.3).
        "lowThresholds": {name: 1 for name in inputs["highThresholds"]},
        "anomalyCondition": {"consecutiveAbnormalities": 1, "consecutiveNormalities": 1},
    }
    if inputs["prodHighThresholds"] is not None:
        args["prodHighThresholds"] = inputs["prodHighThresholds"]
        args["prodLowThresholds"] = {name: 1 for name in inputs["prodHighThresholds"]}
    harness = DeschedulerHarness([(LowNodeLoad, args)], evictor=DefaultEvictor, now=NOW)
    source = node["metadata"]["name"]
    harness.add(
        make_node(source, cpu=alloc["cpu"], memory=alloc["memory"], annotations=annotations),
        make_node("target", cpu=alloc["cpu"], memory=alloc["memory"], annotations=annotations),
        make_node_metric("target", update_time=NOW, system={"cpu": "0", "memory": "0"}),
    )
    from koord_framework.api.resources import parse_resource_list

    usage = parse_resource_list(inputs["usage"])
    victim = {"cpu": 1000, "memory": 1 << 30}
    pods_metric = []
    if prod:
        prod_usage = parse_resource_list(inputs["prodUsage"])
        # Two prod pods carry the prod usage; only the small one fits the target.
        big = {k: prod_usage[k] - victim[k] for k in victim}
        harness.add(
            make_pod("victim", node=source, qos="LS", owner_kind="ReplicaSet", cpu="1m"),
            make_pod("big", node=source, qos="LS", owner_kind="ReplicaSet", cpu="1m"),
        )
        pods_metric = [
            {"name": "victim", "cpu": f"{victim['cpu']}m", "memory": victim["memory"]},
            {"name": "big", "cpu": f"{big['cpu']}m", "memory": big["memory"]},
        ]
        system = {k: usage[k] - prod_usage[k] for k in victim}
    else:
        harness.add(make_pod("victim", node=source, qos="BE", owner_kind="ReplicaSet"))
        pods_metric = [{"name": "victim", "cpu": f"{victim['cpu']}m", "memory": victim["memory"]}]
        system = {k: usage[k] - victim[k] for k in victim}
    harness.add(
        make_node_metric(
            source,
            update_time=NOW,
            pods=pods_metric,
            system={"cpu": f"{system['cpu']}m", "memory": system["memory"]},
        )
    )
    return harness


REASONS = _by_function("overUtilizedEvictionReason")


@pytest.mark.parametrize("vector", REASONS, ids=[v["id"] for v in REASONS])
def test_eviction_reason_vectors(vector: dict[str, Any]) -> None:
    harness = _reason_scenario(vector)
    report = harness.run_once()
    assert report.errors == []
    assert [e.pod for e in report.evictions] == ["default/victim"]
    assert report.evictions[0].reason == vector["expected"]["reason"]
    # The reason is also what the eviction recorded on the pod's Event.
    events = [e for e in harness.cluster.events if e.reason == "Descheduled"]
    assert [e.message for e in events] == [f"pod evicted by {vector['expected']['reason']}"]


# --- anomaly filtering (Test_filterRealAbnormalNodes) ---------------------------------------------------
ABNORMAL = _by_function("filterRealAbnormalNodes")


@pytest.mark.parametrize("vector", ABNORMAL, ids=[v["id"] for v in ABNORMAL])
def test_filter_real_abnormal_nodes_vectors(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    cond = inputs["anomalyCondition"]
    args = {
        "anomalyCondition": {
            "timeout": "0s",
            "consecutiveAbnormalities": cond["consecutiveAbnormalities"],
            "consecutiveNormalities": cond["consecutiveNormalities"],
        }
    }
    harness = DeschedulerHarness([(LowNodeLoad, args)], now=NOW)
    harness.add(make_node("a"), make_node("b"))
    plugin = harness.plugin("LowNodeLoad")
    assert isinstance(plugin, LowNodeLoad)
    condition = plugin.pools[0].anomaly_condition
    for _ in range(cond["consecutiveAbnormalities"]):
        plugin.filter_real_abnormal_nodes(inputs["alreadyAbnormalNodes"], condition)
    for _ in range(inputs["detectCounts"]):
        plugin.filter_real_abnormal_nodes(inputs["sourceNodes"], condition)
    result = plugin.filter_real_abnormal_nodes(inputs["sourceNodes"], condition)
    assert result == vector["expected"]["abnormalNodes"]


# --- ordering: pods on an overloaded node, nodes by usage, usage percentages ----------------------------
def test_sort_pods_on_one_overloaded_node_vector() -> None:
    from koord_plugin_lownodeload.balance import sort_pods_on_overloaded_node
    from koord_plugin_lownodeload.classify import NodeLoad, NodeThresholds

    from koord_framework.api.objects import NodeRecord, PodInfo
    from koord_framework.api.resources import parse_resource_list
    from koord_framework.descheduler.node_usage import NodeUsage

    vector = VECTORS["D029"]
    inputs = vector["inputs"]
    pods = [PodInfo.from_manifest({"kind": "Pod", **p}) for p in inputs["pods"]]
    metrics = {k: parse_resource_list(v) for k, v in inputs["podMetrics"].items()}
    alloc = parse_resource_list(inputs["nodeAllocatable"])
    high = parse_resource_list(inputs["highResourceThreshold"])
    node = NodeRecord.from_manifest(
        {"metadata": {"name": "node0"}, "status": {"allocatable": inputs["nodeAllocatable"]}}
    )
    load = NodeLoad(
        NodeUsage(node, alloc, pods, [], parse_resource_list(inputs["usage"]), {}, metrics),
        NodeThresholds({}, high, {}, {}),
    )
    sort_pods_on_overloaded_node(load, pods, inputs["resourceWeights"], prod=False)
    assert [p.name for p in pods] == vector["expected"]["order"]


def test_sort_nodes_by_usage_vector() -> None:
    from koord_lib_descheduling.sorter import resource_usage_score, sort_by_score

    from koord_framework.api.resources import parse_resource_list

    vector = VECTORS["D032"]
    inputs = vector["inputs"]
    alloc = parse_resource_list(inputs["allocatable"])
    scores = {
        name: resource_usage_score(inputs["weights"], parse_resource_list(usage), alloc)
        for name, usage in inputs["usage"].items()
    }
    assert scores == vector["expected"]["scores"]
    assert (
        sort_by_score(inputs["input_order"], scores, ascending=inputs["ascending"])
        == vector["expected"]["order"]
    )


def test_resource_usage_percentages_vector() -> None:
    import math

    from koord_framework.api.resources import parse_resource_list
    from koord_framework.descheduler.node_usage import usage_percentages

    vector = VECTORS["D034"]
    inputs = vector["inputs"]
    pct = usage_percentages(parse_resource_list(inputs["usage"]), parse_resource_list(inputs["allocatable"]))
    assert {k: math.floor(v) for k, v in pct.items()} == vector["expected"]["floor_percent"]
