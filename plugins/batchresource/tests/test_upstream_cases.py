"""Koordinator's plugin_test.go cases the vectors lack: degradation, reset, the diff threshold, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_batchresource import BatchResource

from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY
from koord_framework.cluster.clock import format_time
from koord_framework.manager.noderesource import ColocationStrategy, ResourceMetrics

NOW = 1_700_000_000.0
BASE = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"][0]["inputs"]
STRATEGY = ColocationStrategy.from_mapping(BASE["strategy"])


def _metric(update: float | None) -> dict[str, Any]:
    metric = json.loads(json.dumps(BASE["nodeMetric"]))
    if update is None:
        metric["status"].pop("updateTime")
    else:
        metric["status"]["updateTime"] = format_time(update)
    return metric


@pytest.mark.parametrize(
    "metric",
    [None, _metric(None), _metric(NOW - 16 * 60)],
    ids=["no NodeMetric", "no updateTime", "older than degradeTimeMinutes"],
)
def test_degraded_metric_resets_batch_resources(metric: dict[str, Any] | None) -> None:
    items = BatchResource().calculate(STRATEGY, BASE["node"], BASE["podList"], ResourceMetrics(metric, NOW))
    assert {i.name for i in items} == {BATCH_CPU, BATCH_MEMORY}
    assert all(i.reset and i.quantity is None and "degradedByBatchResource" in i.message for i in items)


def test_metric_just_inside_degrade_time_is_used() -> None:
    items = BatchResource().calculate(
        STRATEGY, BASE["node"], BASE["podList"], ResourceMetrics(_metric(NOW - 14 * 60), NOW)
    )
    assert [i.quantity for i in items] == [25000, 33_000_000_000]


@pytest.mark.parametrize(
    ("old", "new", "sync"),
    [
        ({BATCH_CPU: "1000"}, {BATCH_CPU: "1050"}, False),  # 5% < 10%
        ({BATCH_CPU: "1000"}, {BATCH_CPU: "1200"}, True),
        ({BATCH_CPU: "1000"}, {}, True),  # removed
        ({}, {BATCH_MEMORY: "1Gi"}, True),  # added
        ({BATCH_CPU: "0"}, {BATCH_CPU: "0"}, False),
        ({BATCH_CPU: "0"}, {BATCH_CPU: "1"}, True),  # from zero, any change
    ],
)
def test_need_sync_follows_the_diff_threshold(old: dict[str, str], new: dict[str, str], sync: bool) -> None:
    got, _ = BatchResource().need_sync(
        STRATEGY, {"status": {"allocatable": old}}, {"status": {"allocatable": new}}
    )
    assert got is sync


def test_malformed_reservation_annotation_names_node_and_annotation() -> None:
    node = json.loads(json.dumps(BASE["node"]))
    node["metadata"]["annotations"] = {"node.koordinator.sh/reservation": "{not json"}
    with pytest.raises(ValueError, match=r"test-node1: annotation node\.koordinator\.sh/reservation"):
        BatchResource().calculate(STRATEGY, node, BASE["podList"], ResourceMetrics(_metric(NOW), NOW))


def test_dangling_batch_metrics_are_ignored_and_others_count() -> None:
    metric = _metric(NOW)
    metric["status"]["podsMetric"] += [
        {"namespace": "gone", "name": "hp", "podUsage": {"resources": {"cpu": "3", "memory": "3G"}}},
        {
            "namespace": "gone",
            "name": "be",
            "priority": "koord-batch",
            "podUsage": {"resources": {"cpu": "5", "memory": "5G"}},
        },
    ]
    items = BatchResource().calculate(STRATEGY, BASE["node"], BASE["podList"], ResourceMetrics(metric, NOW))
    assert [i.quantity for i in items] == [22000, 30_000_000_000]
