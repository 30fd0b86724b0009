"""More of Koordinator's ``TestLowNodeLoad`` cases (``low_node_load_test.go`` at a7a1b76bbf81), pinned here
because the copied vectors lack them.

Every one of these upstream cases shares the cluster of vector D015 (nodes n1/n2/n3 with 4 cpu, pods
p1-p8 on n1 and p9 on n2, 400m each, pod metrics equal to the requests) and changes only the thresholds,
a few pod labels, the nodes, or the eviction limiter; so each test takes D015's inputs and applies that
change. The expected counts are the ones the Go test asserts.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from koord_plugin_defaultevictor import DefaultEvictor
from koord_plugin_lownodeload import LowNodeLoad

from koord_framework.cluster.clock import format_time
from koord_framework.testing.descheduler import DeschedulerHarness

DATA = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())
BASE = next(v for v in DATA["vectors"] if v["id"] == "D015")["inputs"]
NOW = 1_704_067_200.0
BATCH = {"koordinator.sh/priority-class": "koord-batch"}


def _pod(name: str, node: str) -> dict[str, Any]:
    """``test.BuildTestPod(name, 400, 0, node, test.SetRSOwnerRef)``, as D015 spells p1."""
    pod: dict[str, Any] = copy.deepcopy(next(p for p in BASE["pods"] if p["metadata"]["name"] == "p1"))
    pod["metadata"]["name"] = name
    pod["spec"]["nodeName"] = node
    return pod


def _run(
    thresholds: dict[str, dict[str, float]],
    *,
    deviation: bool = False,
    batch: tuple[str, ...] = (),
    nodes: list[dict[str, Any]] | None = None,
    extra_pods: dict[str, str] | None = None,
    max_total: int | None = None,
) -> list[str]:
    """One balance round of D015's cluster with the given changes; the names of the evicted pods."""
    args: dict[str, Any] = {
        "nodeFit": True,
        "useDeviationThresholds": deviation,
        "anomalyCondition": {"consecutiveAbnormalities": 1, "consecutiveNormalities": 1},
        **thresholds,
    }
    harness = DeschedulerHarness([(LowNodeLoad, args)], evictor=DefaultEvictor, now=NOW, max_total=max_total)
    for node in nodes if nodes is not None else BASE["nodes"]:
        harness.add({"apiVersion": "v1", "kind": "Node", **node})
    pods = copy.deepcopy(BASE["pods"])
    for name, node_name in (extra_pods or {}).items():
        pods.append(_pod(name, node_name))
    for pod in pods:
        labels = pod["metadata"].pop("labels", None)
        if pod["metadata"]["name"] in batch:
            labels = dict(BATCH)
        elif labels == BATCH:
            labels = None
        if labels:
            pod["metadata"]["labels"] = labels
        harness.add({"apiVersion": "v1", "kind": "Pod", **pod})
    metrics = copy.deepcopy(BASE["nodeMetrics"])
    by_node = {m["metadata"]["name"]: m for m in metrics}
    for name, node_name in (extra_pods or {}).items():
        by_node[node_name]["status"]["podsMetric"].append(
            {"namespace": "default", "name": name, "podUsage": {"resources": {"cpu": "400m", "memory": "0"}}}
        )
    for metric in metrics:
        metric["status"]["updateTime"] = format_time(NOW)
        harness.add({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", **metric})
    report = harness.balance([n["metadata"]["name"] for n in (nodes or BASE["nodes"])])
    assert report.errors == []
    return sorted(e.pod.split("/")[1] for e in report.evictions)


def test_node_under_thresholds_but_prod_over() -> None:
    """ "node && prod thresholds, node under thresholds, but prod over thresholds": n1 (8 pods, 3.2 cpu)
    is under the 90% node thresholds but its prod usage (p1, p2 and the three unevictable pods, 2 cpu)
    is over 40%; the two evictable prod pods move to n2."""
    evicted = _run(
        {
            "lowThresholds": {"cpu": 30, "pods": 30},
            "highThresholds": {"cpu": 90, "pods": 90},
            "prodLowThresholds": {"cpu": 20, "pods": 20},
            "prodHighThresholds": {"cpu": 40, "pods": 40},
        },
        batch=("p3", "p4", "p5"),
    )
    assert evicted == ["p1", "p2"]


def test_reschedule_prod_pods_only() -> None:
    """ "support reschedule prod pod only": 0% low and 100% high node thresholds never make a node low or
    high, so only the prod thresholds act: n1 is prod-high, n2 prod-low; 4 pods are evicted."""
    evicted = _run(
        {
            "lowThresholds": {"cpu": 0, "pods": 0},
            "highThresholds": {"cpu": 100, "pods": 100},
            "prodLowThresholds": {"cpu": 30, "pods": 30},
            "prodHighThresholds": {"cpu": 50, "pods": 50},
        }
    )
    assert len(evicted) == 4


def test_deviation_prod_rebalance_with_node_thresholds_off() -> None:
    """ "node is always appropriately for node usage, prod pod rebalance successful": deviation thresholds
    with 0 node deviations (node thresholds = capacity) and ±10 points around the mean prod usage; three
    schedulable 20-pod nodes; 3 pods leave n1."""
    nodes = copy.deepcopy(BASE["nodes"])
    for node in nodes:
        node["spec"] = {}
        for key in ("capacity", "allocatable"):
            node["status"][key]["pods"] = "20"
    evicted = _run(
        {
            "lowThresholds": {"cpu": 0, "pods": 0},
            "highThresholds": {"cpu": 100, "pods": 100},
            "prodLowThresholds": {"cpu": 10, "pods": 10},
            "prodHighThresholds": {"cpu": 10, "pods": 10},
        },
        deviation=True,
        nodes=nodes,
        extra_pods={"p10": "n3", "p11": "n3"},
    )
    assert len(evicted) == 3


def test_max_pods_to_evict_total() -> None:
    """ "maxPodsToEvictTotal": the limiter allows one eviction in the round; the plugin keeps trying the
    other pods (each refused) and stops when its own conditions say so."""
    evicted = _run(
        {"lowThresholds": {"cpu": 30, "pods": 30}, "highThresholds": {"cpu": 50, "pods": 50}},
        max_total=1,
    )
    assert len(evicted) == 1


def test_reset_of_a_detector_still_ok_keeps_its_count() -> None:
    """``resetNodesAsNormal`` calls ``BasicDetector.Reset``, which is ``setState(StateOK)``: a no-op on a
    detector already OK (``basic_detector.go`` setState returns early when the state is unchanged), so a
    node seen over its thresholds twice, then underloaded once, then over again keeps counting: with
    ``consecutiveAbnormalities: 3`` its fourth over-threshold observation makes it abnormal."""
    harness = DeschedulerHarness(
        [(LowNodeLoad, {"anomalyCondition": {"consecutiveAbnormalities": 3, "consecutiveNormalities": 1}})],
        evictor=DefaultEvictor,
        now=NOW,
    )
    plugin = harness.plugin("LowNodeLoad")
    assert isinstance(plugin, LowNodeLoad)
    condition = plugin.pools[0].anomaly_condition
    assert plugin.filter_real_abnormal_nodes(["n1"], condition) == []
    assert plugin.filter_real_abnormal_nodes(["n1"], condition) == []
    detector = plugin.node_detectors.get("n1")
    assert detector is not None
    detector.reset()
    assert detector.counter.consecutive_abnormalities == 2
    assert plugin.filter_real_abnormal_nodes(["n1"], condition) == []
    assert plugin.filter_real_abnormal_nodes(["n1"], condition) == ["n1"]
