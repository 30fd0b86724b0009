"""koord-manager: one full pass of the SLO controllers (NodeSLO, NodeMetric, batch resources) over a large
embedded cluster. ``python -m bench.manager [NODES] [PODS_PER_NODE]`` (default 5,000 x 30 = 150,000 pods)."""

from __future__ import annotations

import json
import sys
import time

from prometheus_client import CollectorRegistry

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.manager.component import ManagerComponent
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.builders import make_node_metric

NOW = 1_700_000_000.0


def build(nodes: int, per_node: int) -> MemoryCluster:
    cluster = MemoryCluster(VirtualClock(NOW), seed=0)
    for i in range(nodes):
        node = f"node-{i}"
        cluster.create(make_node(node, cpu="64", memory="256Gi"))
        usage = []
        for j in range(per_node):
            qos = "LS" if j % 2 else "BE"
            cluster.create(
                make_pod(
                    f"p-{i}-{j}", cpu="1", memory="2Gi", node=node, labels={"koordinator.sh/qosClass": qos}
                )
            )
            usage.append({"name": f"p-{i}-{j}", "cpu": "500m", "memory": "1Gi"})
        cluster.create(
            make_node_metric(
                node,
                cpu="20",
                memory="60Gi",
                update_time=NOW,
                system={"cpu": "2", "memory": "4Gi"},
                pods=usage,
            )
        )
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
            "data": {"colocation-config": json.dumps({"enable": True})},
        }
    )
    return cluster


def main(argv: list[str]) -> None:
    from koord_plugin_batchresource import BatchResource  # the bench measures the shipped calculator

    nodes = int(argv[0]) if argv else 5000
    per_node = int(argv[1]) if len(argv) > 1 else 30
    cluster = build(nodes, per_node)
    manager = ManagerComponent(
        cluster, CollectorRegistry(), config_namespace="koordinator-system", plugins=[BatchResource()]
    )
    start = time.perf_counter()
    manager.sync_once()
    elapsed = time.perf_counter() - start
    manager.close()
    print(f"manager pass: {nodes} nodes, {nodes * per_node} pods: {elapsed:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
