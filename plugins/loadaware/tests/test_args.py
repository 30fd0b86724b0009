"""LoadAwareSchedulingArgs: Koordinator's defaults (SetDefaults_LoadAwareSchedulingArgs) and validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from koord_plugin_loadaware import LoadAwareScheduling, LoadAwareSchedulingArgs
from pydantic import ValidationError

from koord_framework.config.loader import load_text
from koord_framework.errors import ValidationError as KoordValidationError
from koord_framework.registry import PluginRegistry


def parse(raw: dict[str, Any]) -> LoadAwareSchedulingArgs:
    return LoadAwareSchedulingArgs.model_validate(raw)


def test_defaults_are_koordinators() -> None:
    a = parse({})
    assert a.filter_expired_node_metrics is True
    assert a.node_metric_expiration_seconds == 180
    assert a.enable_schedule_when_node_metrics_expired is False
    assert a.resource_weights == {"cpu": 1, "memory": 1}
    assert a.dominant_resource_weight == 0
    assert a.usage_thresholds == {"cpu": 65, "memory": 95}
    assert a.prod_usage_thresholds == {}
    assert a.prod_usage_include_sys is False
    assert a.score_according_prod_usage is False
    assert a.estimator == ""
    assert a.estimated_scaling_factors == {"cpu": 85, "memory": 70}
    assert a.estimated_seconds_after_pod_scheduled is None
    assert a.estimated_seconds_after_initialized is None
    assert a.allow_customize_estimation is False
    assert a.aggregated is None
    assert a.supported_resources == []


def test_resource_weights_default_only_without_dominant_weight() -> None:
    assert parse({"dominantResourceWeight": 3}).resource_weights == {}
    assert parse({"dominantResourceWeight": 3, "resourceWeights": {"cpu": 2}}).resource_weights == {"cpu": 2}
    assert parse({"resourceWeights": {}}).resource_weights == {"cpu": 1, "memory": 1}
    assert parse({"resourceWeights": None}).resource_weights == {"cpu": 1, "memory": 1}


def test_empty_thresholds_mean_default_but_zeros_are_kept() -> None:
    assert parse({"usageThresholds": {}}).usage_thresholds == {"cpu": 65, "memory": 95}
    assert parse({"usageThresholds": {"cpu": 0, "memory": 0}}).usage_thresholds == {"cpu": 0, "memory": 0}
    assert parse({"usageThresholds": {"memory": 80}}).usage_thresholds == {"memory": 80}


def test_scaling_factors_are_completed_not_replaced() -> None:
    assert parse({"estimatedScalingFactors": {"cpu": 50}}).estimated_scaling_factors == {
        "cpu": 50,
        "memory": 70,
    }
    got = parse({"estimatedScalingFactors": {"nvidia.com/gpu": 100}}).estimated_scaling_factors
    assert got == {"cpu": 85, "memory": 70, "nvidia.com/gpu": 100}


def test_null_means_unset() -> None:
    a = parse({"aggregated": None, "estimatedSecondsAfterPodScheduled": None, "usageThresholds": None})
    assert a.aggregated is None and a.usage_thresholds == {"cpu": 65, "memory": 95}


def test_python_names_work_too() -> None:
    assert parse({"usage_thresholds": {"cpu": 10}, "dominant_resource_weight": 1}).resource_weights == {}


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        ({"usageThresholds": {"cpu": 101}}, ("usageThresholds", "cpu")),
        ({"usageThresholds": {"cpu": -1}}, ("usageThresholds", "cpu")),
        ({"prodUsageThresholds": {"memory": 150}}, ("prodUsageThresholds", "memory")),
        ({"aggregated": {"usageThresholds": {"cpu": 101}}}, ("aggregated", "usageThresholds", "cpu")),
        ({"resourceWeights": {"cpu": 0}}, ("resourceWeights", "cpu")),
        ({"resourceWeights": {"cpu": 101}}, ("resourceWeights", "cpu")),
        ({"dominantResourceWeight": -1}, ("dominantResourceWeight",)),
        ({"dominantResourceWeight": 101}, ("dominantResourceWeight",)),
        ({"estimatedScalingFactors": {"cpu": 0}}, ("estimatedScalingFactors", "cpu")),
        ({"estimatedScalingFactors": {"memory": 101}}, ("estimatedScalingFactors", "memory")),
        ({"nodeMetricExpirationSeconds": 0}, ("nodeMetricExpirationSeconds",)),
        ({"resourceWeights": {"nvidia.com/gpu": 1}}, ("estimatedScalingFactors",)),
        ({"aggregated": {"usageAggregationType": "p42"}}, ("aggregated", "usageAggregationType")),
        ({"aggregated": {"scoreAggregatedDuration": "-1m"}}, ("aggregated", "scoreAggregatedDuration")),
        ({"aggregated": {"scoreAggregatedDuration": 300}}, ("aggregated", "scoreAggregatedDuration")),
        ({"usageThresholds": {"cpu": "65"}}, ("usageThresholds", "cpu")),
        ({"filterExpiredNodeMetrics": "yes"}, ("filterExpiredNodeMetrics",)),
        ({"noSuchField": 1}, ("noSuchField",)),
    ],
)
def test_invalid_values_are_refused_at_their_path(raw: dict[str, Any], loc: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        parse(raw)
    assert [e["loc"] for e in info.value.errors()] == [loc]


def test_aggregated_durations_and_derived_views() -> None:
    a = parse(
        {
            "aggregated": {
                "usageThresholds": {"cpu": 60},
                "usageAggregationType": "p95",
                "usageAggregatedDuration": "5m0s",
                "scoreAggregationType": "p99",
            }
        }
    )
    assert a.aggregated_filter() == ({"cpu": 60}, "p95", 300.0)
    assert a.aggregated_score() == ("p99", 0.0)
    # Filtering on percentiles needs both thresholds and a type, as in NewUsageThresholdsFilterProfile.
    assert parse({"aggregated": {"usageAggregationType": "p95"}}).aggregated_filter() is None
    assert parse({"aggregated": {"usageThresholds": {"cpu": 60}}}).aggregated_filter() is None


def test_resource_names_are_sorted_union() -> None:
    a = parse(
        {
            "usageThresholds": {"memory": 90, "kubernetes.io/batch-cpu": 50},
            "prodUsageThresholds": {"ephemeral-storage": 10},
            "supportedResources": ["nvidia.com/gpu"],
        }
    )
    assert a.resource_names() == [
        "cpu",
        "ephemeral-storage",
        "kubernetes.io/batch-cpu",
        "memory",
        "nvidia.com/gpu",
    ]


def test_shipped_koordinator_args_load_unchanged() -> None:
    shipped = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "LoadAwareSchedulingArgs",
        "filterExpiredNodeMetrics": False,
        "nodeMetricExpirationSeconds": 300,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "usageThresholds": {"cpu": 0, "memory": 0},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    }
    a = parse(shipped)
    assert a.usage_thresholds == {"cpu": 0, "memory": 0}
    assert a.node_metric_expiration_seconds == 300 and a.filter_expired_node_metrics is False


_PROFILE_WITH_101 = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    pluginConfig:
      - name: LoadAwareScheduling
        args:
          usageThresholds:
            cpu: 101
"""


def test_a_profile_with_threshold_above_100_is_refused_with_the_yaml_path() -> None:
    registry = PluginRegistry.from_classes("koord.scheduler.plugins", [LoadAwareScheduling])
    with pytest.raises(KoordValidationError) as info:
        load_text(
            _PROFILE_WITH_101, "profile.yaml", component="scheduler", registries={"scheduler": registry}
        )
    paths = [p.path for p in info.value.problems]
    assert "profiles[0].pluginConfig[LoadAwareScheduling].args.usageThresholds.cpu" in paths
    assert "profile.yaml" in str(info.value)


def test_example_profile_args_are_valid() -> None:
    import yaml

    doc = yaml.safe_load((Path(__file__).parent.parent / "examples" / "profile.yaml").read_text())
    (cfg,) = [c for c in doc["profiles"][0]["pluginConfig"] if c["name"] == "LoadAwareScheduling"]
    a = parse(cfg["args"])
    assert a.usage_thresholds == {"cpu": 65, "memory": 95}
    assert a.aggregated_score() == ("p95", 300.0)
