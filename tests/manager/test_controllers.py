"""koord-manager's controllers on the embedded cluster: NodeSLO, NodeMetric, node resources."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_batchresource import BatchResource
from prometheus_client import CollectorRegistry

from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.manager.component import ManagerComponent
from koord_framework.manager.reconcilers import NodeSLOReconciler
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.builders import make_node_metric

NOW = 1_700_000_000.0
NS = "koordinator-system"


def config_map(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": NS},
        "data": {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()},
    }


@pytest.fixture
def cluster() -> MemoryCluster:
    c = MemoryCluster(VirtualClock(NOW), seed=0)
    c.create(make_node("n1", cpu="100", memory="120G", labels={"pool": "a"}))
    c.create(make_node("n2", cpu="100", memory="120G", labels={"pool": "b"}))
    c.create(make_pod("ls", cpu="20", memory="20G", node="n1", labels={"koordinator.sh/qosClass": "LS"}))
    c.create(
        make_node_metric(
            "n1",
            cpu="50",
            memory="55G",
            update_time=NOW,
            system={"cpu": "7", "memory": "12G"},
            pods=[{"name": "ls", "cpu": "11", "memory": "11G"}],
        )
    )
    return c


def manager(cluster: MemoryCluster) -> ManagerComponent:
    return ManagerComponent(cluster, CollectorRegistry(), config_namespace=NS, plugins=[BatchResource()])


def spec(cluster: MemoryCluster, kind: str, name: str) -> dict[str, Any]:
    return dict(cluster.get(kind, name)["spec"])


def test_every_node_gets_nodeslo_and_nodemetric_with_defaults(cluster: MemoryCluster) -> None:
    m = manager(cluster)
    m.sync_once()
    m.close()
    for name in ("n1", "n2"):
        slo = spec(cluster, "NodeSLO", name)
        assert slo["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65
        assert slo["cpuBurstStrategy"]["policy"] == "none"
        policy = spec(cluster, "NodeMetric", name)["metricCollectPolicy"]
        assert policy["aggregateDurationSeconds"] == 300 and policy["reportIntervalSeconds"] == 60
    # colocation off by default: no batch resources
    assert BATCH_CPU not in cluster.get("Node", "n1")["status"]["allocatable"]


def test_cluster_then_first_matching_node_strategy(cluster: MemoryCluster) -> None:
    cluster.create(
        config_map(
            {
                "resource-threshold-config": {
                    "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
                    "nodeStrategies": [
                        {
                            "name": "a",
                            "nodeSelector": {"matchLabels": {"pool": "a"}},
                            "cpuSuppressThresholdPercent": 50,
                        },
                        {
                            "name": "a2",
                            "nodeSelector": {"matchLabels": {"pool": "a"}},
                            "cpuSuppressThresholdPercent": 40,
                        },
                    ],
                }
            }
        )
    )
    m = manager(cluster)
    m.sync_once()
    m.close()
    a = spec(cluster, "NodeSLO", "n1")["resourceUsedThresholdWithBE"]
    b = spec(cluster, "NodeSLO", "n2")["resourceUsedThresholdWithBE"]
    assert (a["enable"], a["cpuSuppressThresholdPercent"]) == (True, 50)
    assert (b["enable"], b["cpuSuppressThresholdPercent"]) == (True, 60)
    assert a["memoryEvictThresholdPercent"] == 70  # default kept under both layers


def test_configmap_and_label_changes_are_followed_while_running(cluster: MemoryCluster) -> None:
    m = manager(cluster)
    m.sync_once()
    m._watch()
    cluster.create(
        config_map(
            {
                "cpu-burst-config": {
                    "nodeStrategies": [{"nodeSelector": {"matchLabels": {"burst": "on"}}, "policy": "auto"}]
                }
            }
        )
    )
    m.loop.run_once()  # the config controller runs first, then the nodes it re-enqueued
    assert spec(cluster, "NodeSLO", "n2")["cpuBurstStrategy"]["policy"] == "none"
    node = cluster.get("Node", "n2")
    node = {**node, "metadata": {**node["metadata"], "labels": {"pool": "b", "burst": "on"}}}
    cluster.update(node)
    m.loop.run_once()
    assert spec(cluster, "NodeSLO", "n2")["cpuBurstStrategy"]["policy"] == "auto"
    m.close()


def test_invalid_key_is_reported_and_last_good_value_kept(cluster: MemoryCluster) -> None:
    good = {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 55}}
    cluster.create(config_map({"resource-threshold-config": good}))
    m = manager(cluster)
    m.sync_once()
    m._watch()
    cm = cluster.get("ConfigMap", "slo-controller-config", NS)
    bad = {
        **cm,
        "data": {
            "resource-threshold-config": json.dumps(
                {"clusterStrategy": {"cpuSuppressThresholdPercent": "lots"}}
            ),
            "cpu-burst-config": json.dumps({"clusterStrategy": {"policy": "auto"}}),
        },
    }
    cluster.update(bad)
    m.loop.run_once()
    m.close()
    slo = spec(cluster, "NodeSLO", "n1")
    assert slo["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 55  # last good value
    assert slo["cpuBurstStrategy"]["policy"] == "auto"  # the other key moved on
    warnings = [e for e in cluster.events if e.kind == "ConfigMap" and e.type == "Warning"]
    assert len(warnings) == 1
    assert "resource-threshold-config: clusterStrategy.cpuSuppressThresholdPercent" in warnings[0].message


def test_batch_resources_written_then_reset_when_metric_goes_stale(cluster: MemoryCluster) -> None:
    cluster.create(
        config_map(
            {
                "colocation-config": {
                    "enable": True,
                    "cpuReclaimThresholdPercent": 65,
                    "memoryReclaimThresholdPercent": 65,
                }
            }
        )
    )
    m = manager(cluster)
    m.sync_once()
    alloc = cluster.get("Node", "n1")["status"]["allocatable"]
    # 100 - 35 - 7 - 11 cores; 120G - 42G - 12G - 11G
    assert (alloc[BATCH_CPU], alloc[BATCH_MEMORY]) == ("47000", "55000000000")
    assert BATCH_CPU not in cluster.get("Node", "n2")["status"]["allocatable"]  # no NodeMetric: degraded
    cluster.clock.advance(16 * 60)  # type: ignore[attr-defined]
    m.resources.reconcile("n1")
    m.close()
    assert BATCH_CPU not in cluster.get("Node", "n1")["status"]["allocatable"]


def test_small_changes_wait_for_the_update_interval(cluster: MemoryCluster) -> None:
    cluster.create(
        config_map(
            {
                "colocation-config": {
                    "enable": True,
                    "cpuReclaimThresholdPercent": 65,
                    "memoryReclaimThresholdPercent": 65,
                }
            }
        )
    )
    m = manager(cluster)
    m.sync_once()
    pods = [{"namespace": "default", "name": "ls", "podUsage": {"resources": {"cpu": "12", "memory": "11G"}}}]
    cluster.patch("NodeMetric", "n1", "", {"status": {"podsMetric": pods}}, status=True)
    m.resources.reconcile("n1")  # batch cpu 47 -> 46 cores: a change under 10 %, not written yet
    assert cluster.get("Node", "n1")["status"]["allocatable"][BATCH_CPU] == "47000"
    cluster.clock.advance(301)  # type: ignore[attr-defined]
    m.resources.reconcile("n1")
    m.close()
    assert cluster.get("Node", "n1")["status"]["allocatable"][BATCH_CPU] == "46000"


def test_a_failing_controller_never_blocks_the_others(
    cluster: MemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(self: NodeSLOReconciler, key: str) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(NodeSLOReconciler, "reconcile", boom)
    m = manager(cluster)
    m.sync_once()
    m.close()
    assert cluster.try_get("NodeSLO", "n1") is None
    assert cluster.try_get("NodeMetric", "n2") is not None  # created by the next controller all the same
    assert m.nodeslo.pending()  # retried later with backoff
