"""The NodeMetric status the koordlet reports: Koordinator's shape, windows, cold start, prod prediction,
and the write to the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from koord_framework.cluster.clock import VirtualClock, format_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.metrics.cache import MetricCache, MetricKind
from koord_framework.koordlet.metrics.reporter import (
    CollectPolicy,
    NodeMetricReporter,
    format_go_duration,
    parse_go_duration,
    replacement_patch,
)
from koord_framework.koordlet.states import NodeState, build_state
from koord_framework.testing.hosttree import make_running_pod

GI = 1024**3
NOW = 1_700_000_000.0
LAYOUT = CgroupLayout(HostPaths.under("/nonexistent"), CgroupVersion.V1, CgroupDriver.SYSTEMD)
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n"},
    "status": {"capacity": {"cpu": "8", "memory": "32Gi"}, "allocatable": {"cpu": "8", "memory": "32Gi"}},
}
OLD = "2020-01-01T00:00:00Z"
PROD = make_running_pod(
    "web", namespace="b", qos="LS", requests={"cpu": "2", "memory": "4Gi"}, creation_timestamp=OLD
)
BATCH = make_running_pod("job", namespace="a", qos="BE", requests={"kubernetes.io/batch-cpu": "1000"})


def state(pods: list[dict[str, Any]] | None = None, metric_spec: dict[str, Any] | None = None) -> NodeState:
    nm = {"metadata": {"name": "n"}, "spec": metric_spec or {}}
    return build_state("n", LAYOUT, node=NODE, pods=pods or [PROD, BATCH], node_slo=None, node_metric=nm)


def cache_with(seconds: int) -> MetricCache:
    cache = MetricCache()
    for i in range(seconds):
        t = NOW - seconds + 1 + i
        cache.append(MetricKind.NODE_CPU_USAGE, t, 1.0 + (i % 10) / 10)  # 1.0 .. 1.9 cores
        cache.append(MetricKind.NODE_MEMORY_USAGE, t, 8.0 * GI)
        cache.append(MetricKind.SYSTEM_CPU_USAGE, t, 0.25)
        cache.append(MetricKind.SYSTEM_MEMORY_USAGE, t, 1.0 * GI)
        cache.append(MetricKind.POD_CPU_USAGE, t, 0.5, "uid-web")
        cache.append(MetricKind.POD_MEMORY_USAGE, t, 2.0 * GI, "uid-web")
        cache.append(MetricKind.POD_CPU_USAGE, t, 0.25, "uid-job")
        cache.append(MetricKind.POD_MEMORY_USAGE, t, 1.0 * GI, "uid-job")
    return cache


def test_status_shape_and_values() -> None:
    reporter = NodeMetricReporter(cache_with(400), cold_start_seconds=3600)
    status = reporter.build_status(state(), NOW)
    assert status["updateTime"] == format_time(NOW)
    node = status["nodeMetric"]
    # average over the 300 s aggregate window, both ends included: 301 samples of 1.0..1.9 cycling, 1.9 once
    # more -> (30 x 14.5 + 1.9) / 301 = 1.4515 cores -> int(x 1000) = 1451m
    assert node["nodeUsage"] == {"resources": {"cpu": "1451m", "memory": "8Gi"}}
    assert node["systemUsage"] == {"resources": {"cpu": "250m", "memory": "1Gi"}}
    aggregated = node["aggregatedNodeUsages"]
    assert [a["duration"] for a in aggregated] == ["5m0s", "10m0s", "30m0s"]
    five = aggregated[0]["usage"]
    assert set(five) == {"avg", "p50", "p90", "p95", "p99"}
    assert five["p50"]["resources"]["cpu"] == "1400m"
    assert five["p90"]["resources"]["cpu"] == "1800m"
    assert five["p99"]["resources"]["cpu"] == "1900m"
    assert aggregated[1]["usage"]["avg"] != {}  # 400 s cover more than half of 10 min
    assert aggregated[2]["usage"] == {k: {} for k in ("avg", "p50", "p90", "p95", "p99")}  # cold start
    assert status["podsMetric"] == [
        {
            "namespace": "a",
            "name": "job",
            "podUsage": {"resources": {"cpu": "250m", "memory": "1Gi"}},
            "priority": "koord-batch",
            "qos": "BE",
        },
        {
            "namespace": "b",
            "name": "web",
            "podUsage": {"resources": {"cpu": "500m", "memory": "2Gi"}},
            "priority": "koord-prod",
            "qos": "LS",
        },
    ]
    assert status["hostApplicationMetric"] == []
    # prod (web): peak = p95 0.5 cpu / p98 2Gi x 1.1; reclaimable = request - peak
    assert status["prodReclaimableMetric"] == {
        "resource": {"resources": {"cpu": "1450m", "memory": f"{4 * GI - int(2 * GI * 1.1)}"}}
    }
    assert status["prodPeakMetric"] == {
        "resource": {"resources": {"cpu": "550m", "memory": str(int(2 * GI * 1.1))}}
    }


def test_cold_start_pods_count_with_their_request() -> None:
    young = make_running_pod(
        "web", qos="LS", requests={"cpu": "2", "memory": "4Gi"}, creation_timestamp=format_time(NOW - 60)
    )
    status = NodeMetricReporter(cache_with(100)).build_status(state([young]), NOW)
    assert status["prodPeakMetric"]["resource"]["resources"] == {"cpu": "2", "memory": "4Gi"}
    assert status["prodReclaimableMetric"]["resource"]["resources"] == {"cpu": "0", "memory": "0"}


def test_no_samples_means_empty_usage() -> None:
    status = NodeMetricReporter(MetricCache()).build_status(state(), NOW)
    assert status["nodeMetric"]["nodeUsage"] == {}
    assert status["podsMetric"] == []


def test_collect_policy_from_the_nodemetric_spec() -> None:
    p = CollectPolicy.from_spec(
        {
            "metricCollectPolicy": {
                "aggregateDurationSeconds": 10,
                "reportIntervalSeconds": 5,
                "nodeAggregatePolicy": {"durations": ["1m", "1h30m"]},
            }
        }
    )
    assert (p.aggregate_seconds, p.report_interval_seconds, p.durations) == (60, 30, (60.0, 5400.0))
    assert CollectPolicy.from_spec({}, default_interval=45).report_interval_seconds == 45
    assert (
        format_go_duration(300) == "5m0s"
        and format_go_duration(5400) == "1h30m0s"
        and format_go_duration(7) == "7s"
    )
    assert parse_go_duration("1.5s") == 1.5
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration("5 minutes")


def test_report_replaces_the_status_in_the_cluster() -> None:
    cluster = MemoryCluster(VirtualClock(NOW))
    cluster.create(NODE)
    cluster.create(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "n"},
            "spec": {},
        }
    )
    cluster.patch(
        "NodeMetric", "n", "", {"status": {"stale": {"x": 1}, "nodeMetric": {"old": True}}}, status=True
    )
    reporter = NodeMetricReporter(cache_with(400))
    written = reporter.report(cluster, state(), NOW)
    assert written is not None
    stored = cluster.get("NodeMetric", "n")["status"]
    assert "stale" not in stored and "old" not in stored["nodeMetric"]
    assert stored["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "1451m", "memory": "8Gi"}}


def test_report_without_nodemetric_skips_or_creates() -> None:
    cluster = MemoryCluster(VirtualClock(NOW))
    reporter = NodeMetricReporter(cache_with(10))
    assert reporter.report(cluster, state(), NOW) is None
    assert cluster.try_get("NodeMetric", "n") is None
    assert reporter.report(cluster, state(), NOW, create=True) is not None
    assert cluster.get("NodeMetric", "n")["status"]["updateTime"] == format_time(NOW)


def test_replacement_patch() -> None:
    assert replacement_patch({"a": 1, "b": {"c": 1, "d": 2}}, {"b": {"c": 3}}) == {
        "a": None,
        "b": {"c": 3, "d": None},
    }
    assert replacement_patch(None, {"a": 1}) == {"a": 1}
