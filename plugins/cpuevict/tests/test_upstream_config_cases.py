"""``Test_isUsedThresholdConfigValid`` and ``Test_isAllocatableThresholdConfigValid`` of Koordinator's
``cpu_evict_test.go`` (snapshot a7a1b76b), error texts verbatim; the vector file does not carry them."""

from __future__ import annotations

from typing import Any

import pytest
from koord_lib_evictpolicy.evict_policy import check_allocatable_config
from koord_plugin_cpuevict.policy import ConfigInvalid, check_used_threshold_config

from koord_framework.api.resources import CPU
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy


def _t(raw: dict[str, Any] | None) -> ResourceThresholdStrategy | None:
    """The NodeSLO model already refuses some of these values at parse time (negative percents, a priority
    above koord-mid); upstream's Go struct takes anything, so those cases go in past validation to pin the
    check itself."""
    if raw is None:
        return None
    fields = ResourceThresholdStrategy.model_fields
    by_alias = {(f.alias or name): name for name, f in fields.items()}
    return ResourceThresholdStrategy.model_construct(**{by_alias[k]: v for k, v in raw.items()})


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (None, "ResourceThresholdStrategy not config"),
        ({}, "CPUEvictThresholdPercent not config"),
        ({"cpuEvictThresholdPercent": -1}, "threshold percent(-1) should greater than 0"),
        ({"cpuEvictThresholdPercent": 20, "evictEnabledPriorityThreshold": 0}, None),
        (
            {"cpuEvictThresholdPercent": 20, "cpuEvictLowerPercent": 30},
            "lower percent(30) should less than threshold percent(20)",
        ),
        (
            {"cpuEvictThresholdPercent": 20, "cpuEvictLowerPercent": 10},
            "EvictEnabledPriorityThreshold not config",
        ),
        (
            {"cpuEvictThresholdPercent": 20, "cpuEvictLowerPercent": 10, "evictEnabledPriorityThreshold": 0},
            None,
        ),
    ],
)
def test_used_threshold_config(raw: dict[str, Any] | None, error: str | None) -> None:
    if error is None:
        check_used_threshold_config(_t(raw))
        return
    with pytest.raises(ConfigInvalid) as info:
        check_used_threshold_config(_t(raw))
    assert str(info.value) == error


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (None, "ResourceThresholdStrategy not config"),
        ({}, "CPUAllocatableEvictThresholdPercent not config"),
        ({"cpuAllocatableEvictThresholdPercent": -1}, "threshold percent(-1) should equal or greater than 0"),
        (
            {"cpuAllocatableEvictThresholdPercent": 80, "allocatableEvictPriorityThreshold": 5999},
            "CPUAllocatableEvictLowerPercent not config",
        ),
        (
            {"cpuAllocatableEvictThresholdPercent": 80, "cpuAllocatableEvictLowerPercent": 90},
            "lower percent(90) should less than threshold percent(80)",
        ),
        (
            {"cpuAllocatableEvictThresholdPercent": 80, "cpuAllocatableEvictLowerPercent": 80},
            "lower percent(80) should less than threshold percent(80)",
        ),
        (
            {"cpuAllocatableEvictThresholdPercent": 80, "cpuAllocatableEvictLowerPercent": 70},
            "AllocatableEvictPriorityThreshold not config",
        ),
        (
            {
                "cpuAllocatableEvictThresholdPercent": 90,
                "cpuAllocatableEvictLowerPercent": 0,
                "allocatableEvictPriorityThreshold": 9999,
            },
            "priorityThresholdPercent(9999) should less than 7999, koor-prod pods should not be killed",
        ),
        (
            {
                "cpuAllocatableEvictThresholdPercent": 80,
                "cpuAllocatableEvictLowerPercent": 70,
                "allocatableEvictPriorityThreshold": 7000,
            },
            None,
        ),
        (
            {
                "cpuAllocatableEvictThresholdPercent": 85,
                "cpuAllocatableEvictLowerPercent": 75,
                "allocatableEvictPriorityThreshold": 7999,
            },
            None,
        ),
    ],
)
def test_allocatable_threshold_config(raw: dict[str, Any] | None, error: str | None) -> None:
    if error is None:
        check_allocatable_config(_t(raw), CPU)
        return
    with pytest.raises(ConfigInvalid) as info:
        check_allocatable_config(_t(raw), CPU)
    assert str(info.value) == error
