"""The shipped example: ``examples/profile.yaml`` on ``examples/cluster.yaml`` through the simulator, with
``--explain`` detail, shows why the hot node was avoided (what ``koord simulate --explain`` prints)."""

from __future__ import annotations

from pathlib import Path

from koord_plugin_loadaware import LoadAwareScheduling

from koord_framework.registry import PluginRegistry
from koord_framework.scheduler.simulate import simulate
from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOW = 1_704_067_200.0  # 2024-01-01T00:00:00Z, when the example NodeMetrics were reported


def test_example_profile_avoids_the_hot_node_and_explains_why() -> None:
    # Stand-ins for PrioritySort and DefaultBinder keep this test free of other plugin distributions; the
    # defaults kube-scheduler would add are left out for the same reason.
    registry = PluginRegistry.from_classes(
        "koord.scheduler.plugins", [LoadAwareScheduling, HarnessQueueSort, HarnessBinder]
    )
    result, _ = simulate(
        [EXAMPLES / "cluster.yaml"], EXAMPLES / "profile.yaml", now=NOW, explain=True, registry=registry
    )
    pods = {p.pod: p for p in result.pods}
    web, batch = pods["default/web"], pods["default/batch-job"]
    # The prod pod goes first (PrioritySort) and is judged on prod usage (prodUsageThresholds), which is low
    # everywhere; it takes the node with the most free p95 capacity: cool.
    assert web.node == "cool" and web.filter == {}
    assert web.scores is not None and batch.scores is not None
    assert {n: s["LoadAwareScheduling"]["raw"] for n, s in web.scores.items()} == {
        "hot": 40,
        "warm": 49,
        "cool": 67,
    }
    # The batch pod is judged on node usage: hot (75% cpu) is filtered, with Koordinator's reason.
    assert batch.node == "cool"
    assert batch.filter == {
        "hot": {"plugin": "LoadAwareScheduling", "reason": "node(s) cpu usage exceed threshold"}
    }
    # cool now also carries the web pod's estimate (1700m, 2.8Gi) on top of its p95 usage.
    assert {n: s["LoadAwareScheduling"]["raw"] for n, s in batch.scores.items()} == {"warm": 44, "cool": 57}
