"""Platform conformance on random clusters whose nodes carry NodeResourceTopologies and whose pods ask for
cpusets and NUMA alignment."""

from __future__ import annotations

import random
from typing import Any, ClassVar

import pytest
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.testing import lsr_pod, node, nrt

from koord_framework.testing.conformance import SchedulerPluginConformance
from koord_framework.testing.scheduler import SchedulerHarness


def numa_cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    objects: list[dict[str, Any]] = []
    for i in range(rng.randint(3, 8)):
        sockets, per_socket, cores, threads = rng.choice(
            [(1, 1, 4, 2), (2, 1, 8, 2), (2, 2, 4, 2), (1, 2, 6, 1)]
        )
        total = sockets * per_socket * cores * threads
        labels = {}
        if rng.random() < 0.3:
            labels["node.koordinator.sh/numa-topology-policy"] = rng.choice(
                ["SingleNUMANode", "Restricted", "BestEffort"]
            )
        if rng.random() < 0.2:
            labels["node.koordinator.sh/cpu-bind-policy"] = rng.choice(["FullPCPUsOnly", "SpreadByPCPUs"])
        record = node(f"n{i}", total, "64Gi", labels)
        if rng.random() < 0.25:
            record["metadata"]["annotations"] = {
                "node.koordinator.sh/resource-amplification-ratio": rng.choice(
                    ['{"cpu": 1.5}', '{"cpu": 2}', "{bad"]
                )
            }
        objects.append(record)
        if rng.random() < 0.85:
            objects.append(nrt(f"n{i}", sockets, per_socket, cores, threads, memory_per_numa="16Gi"))
    pending = [
        lsr_pod(
            f"p{k}",
            str(rng.choice([1, 2, 4, 6])),
            rng.choice(["1Gi", "4Gi"]),
            spec=rng.choice(
                [None, {"requiredCPUBindPolicy": "FullPCPUs"}, {"preferredCPUBindPolicy": "SpreadByPCPUs"}]
            ),
            numa=rng.choice([None, {"numaTopologyPolicy": "SingleNUMANode"}]),
            qos=rng.choice(["LSR", "LSE", "LS"]),
        )
        for k in range(6)
    ]
    pending.append(
        lsr_pod("memory-only", "0", "2Gi", numa=rng.choice([None, {"numaTopologyPolicy": "Restricted"}]))
    )
    return objects, pending


class TestConformance(SchedulerPluginConformance):
    plugin_class = NodeNUMAResource
    random_clusters: ClassVar[int] = 12
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {},
        {"defaultCPUBindPolicy": "SpreadByPCPUs"},
        {"defaultCPUBindPolicy": ""},
        {
            "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 2}]},
            "numaScoringStrategy": {"type": "MostAllocated"},
        },
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"defaultCPUBindPolicy": "Default"},
        {"defaultCPUBindPolicy": "ConstrainedBurst"},
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        {"numaScoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}},
    ]

    def make_objects(self, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return numa_cluster(rng)


@pytest.mark.parametrize("seed", range(4))
def test_vector_forms_agree_while_pods_are_pinned(seed: int) -> None:
    """As pods are placed (cpusets taken, NUMA resources used), the vectorised forms keep agreeing."""
    rng = random.Random(100 + seed)
    harness = SchedulerHarness([NodeNUMAResource])
    objects, pending = numa_cluster(rng)
    harness.add(*objects)
    for pod in pending:
        harness.schedule_one(pod)
        for probe in pending[:3]:
            harness.check_vector_forms(probe, NodeNUMAResource.name)
