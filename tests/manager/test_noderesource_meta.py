"""The node-resource controller's metadata path (``prepare_meta`` / ``need_sync_meta``), the calculators'
context and the batch-cpu amplification by the cpu-normalization ratio, with Koordinator's calculators
(CPUNormalization, ResourceAmplification, MidResource, BatchResource) on the embedded cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_batchresource import BatchResource
from koord_plugin_cpunormalizationratio import CPUNormalization
from koord_plugin_midresource import MidResource
from koord_plugin_resourceamplification import ResourceAmplification
from prometheus_client import CollectorRegistry

from koord_framework.api.resources import BATCH_CPU, MID_CPU, MID_MEMORY, to_int
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.manager.component import ManagerComponent
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.builders import make_node_metric

NOW = 1_700_000_000.0
NS = "koordinator-system"
NORMALIZATION = "node.koordinator.sh/cpu-normalization-ratio"
AMPLIFICATION = "node.koordinator.sh/resource-amplification-ratio"
BASIC_INFO = "node.koordinator.sh/cpu-basic-info"


def config_map(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": NS},
        "data": {k: json.dumps(v) for k, v in data.items()},
    }


def nrt(model: str) -> dict[str, Any]:
    info = json.dumps({"cpuModel": model, "hyperThreadEnabled": True, "turboEnabled": False})
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "n1", "annotations": {BASIC_INFO: info}},
        "zones": [],
    }


COLOCATION = {"enable": True, "midUnallocatedPercent": 0}
NORMALIZATION_CONFIG = {"enable": True, "ratioModel": {"M1": {"hyperThreadEnabledRatio": 1.5}}}


@pytest.fixture
def cluster() -> MemoryCluster:
    c = MemoryCluster(VirtualClock(NOW), seed=0)
    c.create(make_node("n1", cpu="100", memory="120G"))
    c.create(make_pod("ls", cpu="20", memory="20G", node="n1", labels={"koordinator.sh/qosClass": "LS"}))
    c.create(
        make_node_metric(
            "n1",
            cpu="50",
            memory="55G",
            update_time=NOW,
            system={"cpu": "7", "memory": "12G"},
            pods=[{"name": "ls", "cpu": "11", "memory": "11G"}],
            status={"prodReclaimableMetric": {"resource": {"resources": {"cpu": "6", "memory": "4G"}}}},
        )
    )
    c.create(nrt("M1"))
    return c


def manager(cluster: MemoryCluster) -> ManagerComponent:
    plugins = [CPUNormalization(), ResourceAmplification(), MidResource(), BatchResource()]
    return ManagerComponent(cluster, CollectorRegistry(), config_namespace=NS, plugins=plugins)


def sync(cluster: MemoryCluster) -> dict[str, Any]:
    m = manager(cluster)
    try:
        m.sync_once()
    finally:
        m.close()
    return cluster.get("Node", "n1")


def annotations(node: dict[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


def test_ratios_written_and_batch_cpu_amplified(cluster: MemoryCluster) -> None:
    cluster.create(config_map({"colocation-config": COLOCATION}))
    plain = int(sync(cluster)["status"]["allocatable"][BATCH_CPU])
    # normalization off by default: the ratio is reset to 1.00 and nothing is amplified
    assert annotations(cluster.get("Node", "n1"))[NORMALIZATION] == "1.00"
    assert AMPLIFICATION not in annotations(cluster.get("Node", "n1"))
    cm = config_map({"colocation-config": COLOCATION, "cpu-normalization-config": NORMALIZATION_CONFIG})
    cluster.update({**cluster.get("ConfigMap", "slo-controller-config", NS), "data": cm["data"]})
    node = sync(cluster)
    assert annotations(node)[NORMALIZATION] == "1.50"
    assert int(node["status"]["allocatable"][BATCH_CPU]) == int(plain * 1.5)
    assert int(node["status"]["capacity"][BATCH_CPU]) == int(plain * 1.5)
    # ResourceAmplification reads the node's ratio: it follows on the next pass (the node update)
    node = sync(cluster)
    assert annotations(node)[AMPLIFICATION] == '{"cpu":1.50}'
    # mid resources: min(prodReclaimable, unused) with the default thresholds
    assert node["status"]["allocatable"][MID_CPU] == "6000"
    assert to_int(MID_MEMORY, node["status"]["allocatable"][MID_MEMORY]) == 4 * 10**9


def test_cpu_model_change_moves_the_ratio(cluster: MemoryCluster) -> None:
    config = dict(NORMALIZATION_CONFIG)
    config["ratioModel"] = {**config["ratioModel"], "M2": {"hyperThreadEnabledRatio": 2.0}}
    cluster.create(config_map({"colocation-config": COLOCATION, "cpu-normalization-config": config}))
    assert annotations(sync(cluster))[NORMALIZATION] == "1.50"
    current = cluster.get("NodeResourceTopology", "n1")
    assert CPUNormalization().wants_event(
        "NodeResourceTopology",
        current,
        {**nrt("M2"), "metadata": {**nrt("M2")["metadata"], "resourceVersion": "changed"}},
    )
    cluster.update(
        {**current, "metadata": {**current["metadata"], "annotations": nrt("M2")["metadata"]["annotations"]}}
    )
    assert annotations(sync(cluster))[NORMALIZATION] == "2.00"


def test_colocation_off_removes_amplification_and_keeps_normalization(cluster: MemoryCluster) -> None:
    cluster.create(
        config_map({"colocation-config": COLOCATION, "cpu-normalization-config": NORMALIZATION_CONFIG})
    )
    sync(cluster)
    assert AMPLIFICATION in annotations(sync(cluster))
    cm = config_map(
        {"colocation-config": {"enable": False}, "cpu-normalization-config": NORMALIZATION_CONFIG}
    )
    cluster.update({**cluster.get("ConfigMap", "slo-controller-config", NS), "data": cm["data"]})
    node = sync(cluster)
    assert AMPLIFICATION not in annotations(node)
    assert annotations(node)[NORMALIZATION] == "1.50"
    assert BATCH_CPU not in node["status"]["allocatable"] and MID_CPU not in node["status"]["allocatable"]


def test_a_failing_calculator_leaves_the_annotation_alone(cluster: MemoryCluster) -> None:
    cluster.create(
        config_map({"colocation-config": COLOCATION, "cpu-normalization-config": NORMALIZATION_CONFIG})
    )
    assert annotations(sync(cluster))[NORMALIZATION] == "1.50"
    cluster.delete("NodeResourceTopology", "n1")
    node = sync(cluster)  # no NRT: CPUNormalization reports an error, the ratio stays
    assert annotations(node)[NORMALIZATION] == "1.50"
    assert BATCH_CPU in node["status"]["allocatable"]
