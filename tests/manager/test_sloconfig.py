"""slo-controller-config parsing and merging (Koordinator's sloconfig / nodeslo cm handler cases)."""

from __future__ import annotations

import json

from koord_framework.manager.colocation import ColocationStrategy
from koord_framework.manager.sloconfig import SLOConfig


def test_defaults_without_configmap() -> None:
    c = SLOConfig()
    s = c.colocation({})
    assert (s.enable, s.cpu_reclaim_threshold_percent, s.memory_reclaim_threshold_percent) == (False, 60, 65)
    assert (s.degrade_time_minutes, s.update_time_threshold_seconds, s.resource_diff_threshold) == (
        15,
        300,
        0.1,
    )
    assert s.batch_cpu_threshold_percent is None


def test_colocation_first_matching_node_config_wins() -> None:
    c = SLOConfig()
    assert not c.update(
        {
            "colocation-config": json.dumps(
                {
                    "enable": True,
                    "cpuReclaimThresholdPercent": 70,
                    "nodeConfigs": [
                        {
                            "name": "x",
                            "nodeSelector": {"matchLabels": {"x": "1"}},
                            "cpuReclaimThresholdPercent": 80,
                        },
                        {"name": "y", "nodeSelector": {"matchLabels": {"x": "1"}}, "enable": False},
                    ],
                }
            )
        }
    )
    assert c.colocation({"x": "1"}) == ColocationStrategy.from_mapping(
        {"enable": True, "cpuReclaimThresholdPercent": 80}
    )
    assert c.colocation({}).cpu_reclaim_threshold_percent == 70


def test_node_strategy_without_selector_matches_nothing() -> None:
    c = SLOConfig()
    c.update({"cpu-burst-config": json.dumps({"nodeStrategies": [{"policy": "auto"}]})})
    assert c.node_slo_spec({"any": "label"})["cpuBurstStrategy"]["policy"] == "none"


def test_removed_key_goes_back_to_defaults() -> None:
    c = SLOConfig()
    c.update({"resource-threshold-config": json.dumps({"clusterStrategy": {"enable": True}})})
    assert c.node_slo_spec({})["resourceUsedThresholdWithBE"]["enable"] is True
    c.update({})
    assert c.node_slo_spec({})["resourceUsedThresholdWithBE"]["enable"] is False


def test_problems_name_key_and_field_and_keep_last_good() -> None:
    c = SLOConfig()
    c.update({"colocation-config": json.dumps({"enable": True})})
    problems = c.update(
        {
            "colocation-config": json.dumps(
                {
                    "nodeConfigs": [
                        {"nodeSelector": {"matchLabels": {"a": "b"}}, "memoryCalculatePolicy": "sometimes"}
                    ]
                }
            ),
            "cpu-burst-config": "{not json",
            "resource-qos-config": json.dumps({"nodeStrategies": {"oops": 1}}),
        }
    )
    text = [str(p) for p in problems]
    assert any("colocation-config: nodeConfigs[0].memoryCalculatePolicy" in t for t in text)
    assert any("cpu-burst-config" in t and "not JSON" in t for t in text)
    assert any("resource-qos-config: nodeStrategies: must be a list" in t for t in text)
    assert all(t.endswith("keeping the last good value") for t in text)
    assert c.colocation({}).enable is True


def test_host_applications_and_metric_collect_policy() -> None:
    c = SLOConfig()
    apps = [{"name": "nginx", "priority": "koord-prod", "qos": "LS"}]
    c.update(
        {
            "host-application-config": json.dumps({"clusterStrategy": {"applications": apps}}),
            "colocation-config": json.dumps(
                {"metricReportIntervalSeconds": 20, "metricMemoryCollectPolicy": "usageWithHotPageCache"}
            ),
        }
    )
    assert c.node_slo_spec({})["hostApplications"] == apps
    policy = c.metric_collect_policy({})
    assert policy["reportIntervalSeconds"] == 20
    assert policy["nodeMemoryCollectPolicy"] == "usageWithHotPageCache"
