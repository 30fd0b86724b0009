"""LowNodeLoad against the platform's descheduler contracts (the framework's conformance kit).

The kit's random clusters run light (pods use at most what they request); thresholds of 10% / 20% cpu make
many nodes overloaded and some underloaded, so the eviction checks see real evictions.
"""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_lownodeload import LowNodeLoad

from koord_framework.testing.conformance import DeschedulerPluginConformance


class TestLowNodeLoadConformance(DeschedulerPluginConformance):
    plugin_class = LowNodeLoad
    harness_args: ClassVar[dict[str, Any] | None] = {
        "lowThresholds": {"cpu": 10, "memory": 100},
        "highThresholds": {"cpu": 20, "memory": 100},
        "anomalyCondition": {"consecutiveAbnormalities": 1},
    }
    expect_evictions: ClassVar[bool] = True
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"lowThresholds": {"cpu": 30, "memory": 50}, "highThresholds": {"cpu": 60, "memory": 80}},
        {"useDeviationThresholds": True, "lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 10}},
        {"evictableNamespaces": {"exclude": ["kube-system"]}, "detectorCacheTimeout": "10m"},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"numberOfNodes": -1},
        {"nodeMetricExpirationSeconds": 0},
        {"lowThresholds": {"cpu": 70}, "highThresholds": {"cpu": 60}},
        {"anomalyCondition": {}},
        {"detectorCacheTimeout": 300},
    ]
