"""Koordinator's own unit-test cases for memory eviction (copied into ``data/vectors.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_memoryevict import BEMemoryEvict
from koord_plugin_memoryevict.policy import release_by_allocatable, release_by_used_threshold

from koord_framework.api.resources import to_int
from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.states import PodMeta
from koord_framework.testing import MemoryCluster
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness

VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]
LAYOUT = CgroupLayout(HostPaths.under("/nonexistent"), CgroupVersion.V1, CgroupDriver.SYSTEMD)


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def test_every_vector_is_exercised() -> None:
    handled = (
        "memoryEvict()",
        "calculateReleaseByUsedThresholdPercent",
        "calculateReleaseByAllocatableThresholdPercent",
    )
    assert all(v["function"].startswith(handled) for v in VECTORS)
    assert len(VECTORS) == 9


@pytest.mark.parametrize("vector", _by("calculateReleaseByUsedThresholdPercent"))
def test_release_by_used_threshold(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    t = ResourceThresholdStrategy.model_validate(inp["thresholdConfig"])
    got = release_by_used_threshold(
        t, to_int("memory", inp["nodeCapacity"]["memory"]), float(to_int("memory", inp["nodeMemUsed"]))
    )
    assert got == vector["expected"]["releaseMemoryBytes"]


@pytest.mark.parametrize("vector", _by("calculateReleaseByAllocatableThresholdPercent"))
def test_release_by_allocatable(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    t = ResourceThresholdStrategy.model_validate(inp["thresholdConfig"])
    pods = [PodMeta.from_manifest(p, LAYOUT) for p in inp["pods"]]
    assert release_by_allocatable(t, inp["node"], pods) == vector["expected"]["release"]


@pytest.mark.parametrize("vector", _by("memoryEvict()"))
def test_memory_evict(vector: dict[str, Any], tmp_path: Path) -> None:
    """The whole strategy: node and pod usage in the metric cache, pods in an in-memory cluster, the
    evictions it makes through the cluster's Eviction API (in eviction order)."""
    inp = vector["inputs"]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "test-node"}, **inp["node"]}
    pods = [{"apiVersion": "v1", "kind": "Pod", **p} for p in inp["pods"]]
    tree = FakeHostTree(tmp_path / "host", version=1, driver="systemd", cpus=4)
    slo = {"resourceUsedThresholdWithBE": inp["thresholdConfig"]}
    h = QOSHarness.with_cluster(tree, node=node, pods=pods, node_slo=slo)
    cluster = h.cluster
    assert isinstance(cluster, MemoryCluster)
    now = h.clock.now()
    h.metrics.append(MetricKind.NODE_MEMORY_USAGE, now, float(to_int("memory", inp["nodeMemUsed"])))
    for uid, used in inp["podMemUsed"].items():
        h.metrics.append(MetricKind.POD_MEMORY_USAGE, now, float(to_int("memory", used)), uid)
    strategy = BEMemoryEvict(BEMemoryEvict.parse_args({}), h.context)
    assert strategy.enabled(h.state.node_slo)
    strategy.tick(now)
    assert [e.name for e in cluster.evictions] == vector["expected"]["evictedPods"]
    assert all(e.requested_by == "koordlet" and "BEMemoryEvict" in e.reason for e in cluster.evictions)
