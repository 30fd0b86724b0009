"""LowNodeLoad beyond the vectors: args defaulting and validation, anomaly gating across cycles, pools,
expired metrics, namespaces and selectors, the report."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_lownodeload import LowNodeLoad, LowNodeLoadArgs
from pydantic import ValidationError

from koord_framework.testing.builders import make_node, make_node_metric, make_pod
from koord_framework.testing.conformance import PluginConformance
from koord_framework.testing.descheduler import DeschedulerHarness

T0 = 1_704_067_200.0
BASE = {
    "lowThresholds": {"cpu": 30, "memory": 100},
    "highThresholds": {"cpu": 60, "memory": 100},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}


class TestConformance(PluginConformance):
    plugin_class = LowNodeLoad
    group = "descheduler"
    valid_args = [
        BASE,
        {"useDeviationThresholds": True, "lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 10}},
        {
            "nodePools": [
                {
                    "name": "gpu",
                    "nodeSelector": {"matchLabels": {"gpu": "true"}},
                    "highThresholds": {"cpu": 80},
                    "lowThresholds": {"cpu": 20},
                }
            ]
        },
        {
            "evictableNamespaces": {"exclude": ["kube-system"]},
            "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}],
        },
    ]
    invalid_args = [
        {"numberOfNodes": -1},
        {"nodeMetricExpirationSeconds": 0},
        {"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}},
        {"lowThresholds": {"cpu": 70}, "highThresholds": {"cpu": 60}},
        {"lowThresholds": {"cpu": -1}},
        {"highThresholds": {"cpu": 50}, "prodHighThresholds": {"cpu": 60}},
        {"prodHighThresholds": {"cpu": 40}, "prodLowThresholds": {"cpu": 50}},
        {"anomalyCondition": {}},
        {
            "nodePools": [
                {
                    "anomalyCondition": {"consecutiveAbnormalities": 2},
                    "lowThresholds": {"cpu": 9},
                    "highThresholds": {"cpu": 8},
                }
            ]
        },
        {"lowThresholds": {"cpu": "45"}},
        {
            "podSelectors": [
                {"selector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}
            ]
        },
    ]


def test_defaults_follow_koordinator() -> None:
    args = LowNodeLoadArgs.model_validate(
        {"lowThresholds": {"cpu": 45, "pods": 10}, "highThresholds": {"cpu": 75}}
    )
    assert args.node_fit is True
    assert args.node_metric_expiration_seconds == 180
    assert float(args.detector_cache_timeout) == 300
    cond = args.anomaly_condition
    assert cond is not None
    assert (float(cond.timeout or 0), cond.consecutive_abnormalities, cond.consecutive_normalities) == (
        60,
        5,
        3,
    )
    assert args.resource_weights == {"cpu": 1, "memory": 1, "pods": 1}
    weights = LowNodeLoadArgs.model_validate(
        {"resourceWeights": {"cpu": 0, "memory": 3, "gpu": 2}}
    ).resource_weights
    assert weights == {"cpu": 1, "memory": 3, "gpu": 2}


def test_anomaly_condition_defaulting_quirk() -> None:
    only_abn = LowNodeLoadArgs.model_validate(
        {"anomalyCondition": {"consecutiveAbnormalities": 2}}
    ).anomaly_condition
    assert only_abn is not None and only_abn.consecutive_normalities == 3
    with pytest.raises(ValidationError, match="consecutiveNormalities must be greater than 0"):
        LowNodeLoadArgs.model_validate({"anomalyCondition": {"timeout": "30s"}})


def test_validation_paths_name_the_field() -> None:
    with pytest.raises(ValidationError) as err:
        LowNodeLoadArgs.model_validate(
            {"nodePools": [{"lowThresholds": {"cpu": 90}, "highThresholds": {"cpu": 80}}]}
        )
    (e,) = err.value.errors()
    assert e["loc"] == ("nodePools", 0, "lowThresholds", "cpu")
    assert e["msg"] == "low percentage must be less than or equal to highThresholds"


def test_every_threshold_problem_is_reported_in_upstream_order() -> None:
    with pytest.raises(ValidationError) as err:
        LowNodeLoadArgs.model_validate(
            {
                "highThresholds": {"cpu": -1, "memory": 50},
                "lowThresholds": {"cpu": -2, "memory": 60},
                "prodHighThresholds": {"cpu": -3, "memory": 70},
                "prodLowThresholds": {"cpu": -4, "memory": 80},
                "anomalyCondition": {"timeout": "30s"},
            }
        )
    negative = "percentage must be greater than or equal to 0"
    assert [(e["loc"], e["msg"]) for e in err.value.errors()] == [
        (("highThresholds", "cpu"), negative),
        (("lowThresholds", "cpu"), negative),
        (("lowThresholds", "memory"), "low percentage must be less than or equal to highThresholds"),
        (("prodHighThresholds", "cpu"), negative),
        (
            ("prodHighThresholds", "memory"),
            "node percentage must be greater than or equal to prodHighThresholds",
        ),
        (("prodLowThresholds", "cpu"), negative),
        (("prodLowThresholds", "memory"), "low percentage must be less than or equal to prodHighThresholds"),
        (("anomalyCondition", "consecutiveNormalities"), "consecutiveNormalities must be greater than 0"),
    ]


def test_pools_inherit_top_level_settings() -> None:
    args = LowNodeLoadArgs.model_validate(
        {**BASE, "nodePools": [{"name": "p", "useDeviationThresholds": True}]}
    )
    (pool,) = args.node_pools
    assert pool.low_thresholds == BASE["lowThresholds"] and pool.high_thresholds == BASE["highThresholds"]
    assert pool.anomaly_condition is args.anomaly_condition


# --- behaviour ---------------------------------------------------------------------------------------------
def _cluster(
    harness: DeschedulerHarness, *, hot_cpu: str = "6", labels: dict[str, str] | None = None
) -> None:
    """hot: 8 cores, one evictable pod measured at 1 core on top of ``hot_cpu`` system usage; cold: idle."""
    harness.add(
        make_node("hot", cpu="8", memory="16Gi", labels=labels),
        make_node("cold", cpu="8", memory="16Gi", labels=labels),
        make_pod("victim", namespace="apps", node="hot", owner_kind="ReplicaSet", labels={"app": "web"}),
        make_node_metric("cold", update_time=harness.clock.now()),
        make_node_metric(
            "hot",
            update_time=harness.clock.now(),
            system={"cpu": hot_cpu},
            pods=[{"name": "victim", "namespace": "apps", "cpu": "1"}],
        ),
    )


def test_anomaly_needs_more_than_n_consecutive_observations() -> None:
    args = {**BASE, "anomalyCondition": {"consecutiveAbnormalities": 2, "consecutiveNormalities": 1}}
    harness = DeschedulerHarness([(LowNodeLoad, args)], now=T0, descheduling_interval=10)
    _cluster(harness)
    for _ in range(2):
        report = harness.run_once()
        assert report.high == ["hot"] and report.evictions == []
        harness.clock.advance(10)
    assert [e.pod for e in harness.run_once().evictions] == ["apps/victim"]


def test_expired_node_metrics_are_ignored() -> None:
    harness = DeschedulerHarness([(LowNodeLoad, {**BASE, "nodeMetricExpirationSeconds": 60})], now=T0)
    _cluster(harness)
    harness.clock.advance(60)
    report = harness.run_once()
    assert report.high == [] and report.low == [] and report.evictions == []


@pytest.mark.parametrize(
    ("extra", "evicted"),
    [
        ({"evictableNamespaces": {"exclude": ["apps"]}}, []),
        ({"evictableNamespaces": {"include": ["apps"]}}, ["apps/victim"]),
        ({"podSelectors": [{"name": "db", "selector": {"matchLabels": {"app": "db"}}}]}, []),
        ({"podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}]}, ["apps/victim"]),
        ({"paused": True}, []),
        ({"numberOfNodes": 1}, []),
    ],
)
def test_pod_and_namespace_selection(extra: dict[str, Any], evicted: list[str]) -> None:
    harness = DeschedulerHarness([(LowNodeLoad, {**BASE, **extra})], now=T0)
    _cluster(harness)
    assert [e.pod for e in harness.run_once().evictions] == evicted


def test_evictions_carry_plugin_and_reason_and_go_to_the_evict_plugin() -> None:
    harness = DeschedulerHarness([(LowNodeLoad, BASE)], now=T0)
    _cluster(harness)
    report = harness.run_once()
    (e,) = report.evictions
    assert (e.pod, e.node, e.plugin) == ("apps/victim", "hot", "LowNodeLoad")
    assert e.reason == "node is overutilized, node cpu usage(87.50%)>threshold(60.00%)"
    (recorded,) = harness.recorder.evictions
    assert (recorded.plugin, recorded.reason) == ("LowNodeLoad", e.reason)
    assert (report.high, report.low) == (["hot"], ["cold"])


def test_a_pool_takes_only_its_nodes() -> None:
    args = {
        "nodeSelector": {"matchLabels": {"pool": "none"}},
        "nodePools": [
            {
                "name": "a",
                "nodeSelector": {"matchLabels": {"pool": "a"}},
                "lowThresholds": BASE["lowThresholds"],
                "highThresholds": BASE["highThresholds"],
                "anomalyCondition": {"consecutiveAbnormalities": 1, "consecutiveNormalities": 1},
            }
        ],
    }
    harness = DeschedulerHarness([(LowNodeLoad, args)], now=T0)
    _cluster(harness, labels={"pool": "a"})
    assert [e.pod for e in harness.run_once().evictions] == ["apps/victim"]

    other = DeschedulerHarness([(LowNodeLoad, args)], now=T0)
    _cluster(other, labels={"pool": "b"})
    assert other.run_once().evictions == []


def test_node_fit_requires_room_on_a_target() -> None:
    harness = DeschedulerHarness([(LowNodeLoad, BASE)], now=T0)
    harness.add(
        make_node("hot", cpu="8", memory="16Gi"),
        make_node("cold", cpu="8", memory="16Gi", taints=["dedicated=batch:NoSchedule"]),
        make_pod("victim", node="hot", owner_kind="ReplicaSet"),
        make_node_metric("cold", update_time=T0),
        make_node_metric("hot", update_time=T0, system={"cpu": "6"}, pods=[{"name": "victim", "cpu": "1"}]),
    )
    assert harness.run_once().evictions == []  # the only target is tainted


def test_deviation_thresholds_use_the_pool_mean() -> None:
    args = {
        "useDeviationThresholds": True,
        "lowThresholds": {"cpu": 10},
        "highThresholds": {"cpu": 10},
        "anomalyCondition": {"consecutiveAbnormalities": 1},
    }
    harness = DeschedulerHarness([(LowNodeLoad, args)], now=T0)
    harness.add(
        *[make_node(n, cpu="10", memory="16Gi") for n in ("a", "b", "c")],
        make_pod("x", node="a", owner_kind="ReplicaSet"),
        make_node_metric("a", update_time=T0, system={"cpu": "5"}, pods=[{"name": "x", "cpu": "2"}]),  # 70%
        make_node_metric("b", update_time=T0, system={"cpu": "4"}),  # 40%
        make_node_metric("c", update_time=T0, system={"cpu": "1"}),  # 10%: mean 40%, window 30..50%
    )
    report = harness.run_once()
    assert (report.high, report.low) == (["a"], ["c"])
    assert [e.pod for e in report.evictions] == ["default/x"]
