"""The node-resource controller's pre-update step on the embedded cluster: BatchResource writes the
NUMA-level batch resources into the node's NodeResourceTopology next to the node's own values."""

from __future__ import annotations

import json
from typing import Any

from koord_plugin_batchresource import BatchResource
from prometheus_client import CollectorRegistry

from koord_framework.api.quantity import Quantity
from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import ClusterError
from koord_framework.manager.component import ManagerComponent
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.builders import make_node_metric

NOW = 1_700_000_000.0
NS = "koordinator-system"


def _zone(name: str, cpu: str, memory: str) -> dict[str, object]:
    return {
        "name": name,
        "type": "Node",
        "resources": [
            {"name": "cpu", "capacity": cpu, "allocatable": cpu, "available": cpu},
            {"name": "memory", "capacity": memory, "allocatable": memory, "available": memory},
        ],
    }


def test_manager_writes_zone_batch_resources_on_the_nrt() -> None:
    cluster = MemoryCluster(VirtualClock(NOW), seed=0)
    cluster.create(make_node("n1", cpu="100", memory="120G"))
    cluster.create(
        make_pod("ls", cpu="20", memory="20G", node="n1", labels={"koordinator.sh/qosClass": "LS"})
    )
    cluster.create(
        make_node_metric(
            "n1",
            cpu="50",
            memory="55G",
            update_time=NOW,
            system={"cpu": "7", "memory": "12G"},
            pods=[{"name": "ls", "cpu": "11", "memory": "11G"}],
        )
    )
    cluster.create(
        {
            "apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology",
            "metadata": {"name": "n1"},
            "topologyPolicies": ["None"],
            "zones": [_zone("node-0", "50", "60G"), _zone("node-1", "50", "60G")],
        }
    )
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": NS},
            "data": {"colocation-config": json.dumps({"enable": True})},
        }
    )
    manager = ManagerComponent(cluster, CollectorRegistry(), config_namespace=NS, plugins=[BatchResource()])
    manager.sync_once()
    manager.close()
    allocatable = cluster.get("Node", "n1")["status"]["allocatable"]
    zones = {
        z["name"]: {r["name"]: Quantity.parse(r["allocatable"]).value() for r in z["resources"]}
        for z in cluster.get("NodeResourceTopology", "n1")["zones"]
    }
    # node: 100 - 40 (60% reclaim) - 7 - 11 = 42 cores; each zone: 50 - 20 - 3.5 - 5.5 = 21 cores
    assert Quantity.parse(allocatable[BATCH_CPU]).value() == 42000
    assert zones["node-0"][BATCH_CPU] == zones["node-1"][BATCH_CPU] == 21000
    # memory: each zone 60G - 21G (65% reclaim) - 6G - 5.5G
    assert zones["node-0"][BATCH_MEMORY] == zones["node-1"][BATCH_MEMORY] == 27_500_000_000
    assert sum(z[BATCH_CPU] for z in zones.values()) == Quantity.parse(allocatable[BATCH_CPU]).value()


class _FailingPreUpdate(BatchResource):
    def pre_update(self, strategy: Any, node: Any, items: Any, cluster: Any) -> None:
        raise ClusterError("NodeResourceTopology n1: the server is gone")


def test_a_failing_pre_update_does_not_stop_the_node_update() -> None:
    cluster = MemoryCluster(VirtualClock(NOW), seed=0)
    cluster.create(make_node("n1", cpu="100", memory="120G"))
    cluster.create(
        make_node_metric("n1", cpu="10", memory="10G", update_time=NOW, system={"cpu": "7", "memory": "12G"})
    )
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": NS},
            "data": {"colocation-config": json.dumps({"enable": True})},
        }
    )
    manager = ManagerComponent(
        cluster, CollectorRegistry(), config_namespace=NS, plugins=[_FailingPreUpdate()]
    )
    manager.sync_once()
    manager.close()
    assert BATCH_CPU in cluster.get("Node", "n1")["status"]["allocatable"]
