"""Koordinator's own unit-test cases for CPU burst (copied into ``data/vectors.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_cpuburst import CPUBurst
from koord_plugin_cpuburst.policy import BurstLimiter

from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.koordlet.system import ProcessorInfo
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness

VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def test_every_vector_is_exercised() -> None:
    assert all(v["function"].startswith(("burstLimiter.Allow", "getNodeStateForBurst")) for v in VECTORS)
    assert len(VECTORS) == 5


@pytest.mark.parametrize("vector", _by("burstLimiter.Allow"))
def test_burst_limiter(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    start = 1_700_000_000.0
    limiter = BurstLimiter(
        inp["burstPeriodSec"], inp["maxScalePercent"], start, init_ratio=inp["initSizeRatio"]
    )
    allowed, tokens = limiter.allow(start + inp["secondsSinceLastUpdate"], inp["currentUsageScalePercent"])
    assert (allowed, tokens) == (vector["expected"]["allow"], vector["expected"]["currentToken"])


def _pod(raw: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": raw["name"],
            "uid": raw["uid"],
            "labels": {"koordinator.sh/qosClass": raw["qos"]},
        },
        "spec": {
            "containers": [
                {"name": "main", "resources": {"requests": raw["requests"], "limits": raw["limits"]}}
            ]
        },
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize("vector", _by("getNodeStateForBurst"))
def test_node_state_for_burst(vector: dict[str, Any], tmp_path: Path) -> None:
    inp = vector["inputs"]
    tree = FakeHostTree(tmp_path / "host", version=1, cpus=4)
    h = QOSHarness(
        tree,
        pods=[_pod(p) for p in inp["pods"]],
        node_slo={"cpuBurstStrategy": {"sharePoolThresholdPercent": inp["sharePoolThresholdPercent"]}},
        create_cgroups=False,
    )
    h.set_cpu_info(
        [ProcessorInfo(p["cpuID"], p["coreID"], p["socketID"], p["nodeID"]) for p in inp["processorInfos"]]
    )
    now = h.clock.now()
    if inp["nodeCPUUsedCores"] is not None:
        h.metrics.append(MetricKind.NODE_CPU_USAGE, now, float(inp["nodeCPUUsedCores"]))
    for uid, used in inp["podCPUUsedCores"].items():
        h.metrics.append(MetricKind.POD_CPU_USAGE, now, float(used), uid)
    strategy = CPUBurst(CPUBurst.parse_args({}), h.context)
    got = strategy.node_state_for_burst(inp["sharePoolThresholdPercent"], h.state, now)
    assert got.value == vector["expected"]["state"]
