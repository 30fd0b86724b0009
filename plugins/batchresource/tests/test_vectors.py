"""Every ``slo-controller/batchresource`` vector through the plugin's public interface."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_batchresource import BatchResource

from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY
from koord_framework.cluster.clock import format_time
from koord_framework.manager.noderesource import ColocationStrategy, ResourceMetrics

NOW = 1_700_000_000.0
VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]


def _metric(raw: dict[str, Any]) -> dict[str, Any]:
    metric = copy.deepcopy(raw)
    status = metric.setdefault("status", {})
    if status.get("updateTime") == "now":
        status["updateTime"] = format_time(NOW)
    return metric


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    inputs, expected = vector["inputs"], vector["expected"]
    strategy = ColocationStrategy.from_mapping(inputs["strategy"])
    items = BatchResource().calculate(
        strategy, inputs["node"], inputs["podList"], ResourceMetrics(_metric(inputs["nodeMetric"]), NOW)
    )
    by_name = {i.name: i for i in items}
    assert by_name[BATCH_CPU].quantity == expected["batch-cpu"]
    assert by_name[BATCH_MEMORY].quantity == expected["batch-memory"]
    if "cpuMessage" in expected:
        assert by_name[BATCH_CPU].message == expected["cpuMessage"]
    if "memoryMessage" in expected:
        assert by_name[BATCH_MEMORY].message == expected["memoryMessage"]
