"""The colocation strategy (``slo-controller-config``'s ``colocation-config``): its model, Koordinator's
defaults (``sloconfig.DefaultColocationStrategy``) and the per-node merge.

The cluster strategy is overlaid on the defaults; then the **first** ``nodeConfigs`` entry whose
``nodeSelector`` matches the node's labels is overlaid on that (``GetNodeColocationStrategy``, through
``NodeStrategies``). Fields left out (or null) keep the value below them, as Go's merge of pointer fields
does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from koord_framework.manager.nodestrategies import NodeStrategies

__all__ = [
    "DEFAULT_COLOCATION",
    "ColocationStrategy",
    "colocation_strategies",
    "merged",
    "node_colocation_strategy",
    "overlay",
]

CalculatePolicy = Literal["usage", "request", "maxUsageRequest"]

DEFAULT_COLOCATION: Final[Mapping[str, Any]] = {
    "enable": False,
    "metricAggregateDurationSeconds": 300,
    "metricReportIntervalSeconds": 60,
    "metricAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
    "metricMemoryCollectPolicy": "usageWithoutPageCache",
    "cpuReclaimThresholdPercent": 60,
    "cpuCalculatePolicy": "usage",
    "memoryReclaimThresholdPercent": 65,
    "memoryCalculatePolicy": "usage",
    "degradeTimeMinutes": 15,
    "updateTimeThresholdSeconds": 300,
    "resourceDiffThreshold": 0.1,
    "midCPUThresholdPercent": 100,
    "midMemoryThresholdPercent": 100,
    "midUnallocatedPercent": 0,
    "midStaticCPUReservedPercent": 0,
    "midStaticMemoryReservedPercent": 0,
}
"""``DefaultColocationStrategy()`` at a7a1b76b, in the ConfigMap's JSON spelling."""


class ColocationStrategy(BaseModel):
    """One node's effective colocation strategy (``configuration.ColocationStrategy``)."""

    model_config = ConfigDict(
        frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True, strict=False
    )

    # Bounds: Koordinator's ``validate`` tags (``ColocationStrategy`` in apis/configuration), so that the
    # controller and the ConfigMap webhook refuse the same values.
    enable: bool = False
    """Whether colocation (batch resources, NodeMetric reporting for it) is on for the node."""
    metric_aggregate_duration_seconds: int = Field(300, ge=1)
    """Window the koordlet aggregates node usage over."""
    metric_report_interval_seconds: int = Field(60, ge=1)
    """How often the koordlet reports the NodeMetric."""
    metric_aggregate_policy: dict[str, Any] = Field(default_factory=dict)
    """``{durations: [...]}``: the aggregated usage windows the NodeMetric carries."""
    metric_memory_collect_policy: str = "usageWithoutPageCache"
    """``usageWithoutPageCache`` or ``usageWithHotPageCache`` / ``usageWithPageCache``."""
    cpu_reclaim_threshold_percent: int = Field(60, alias="cpuReclaimThresholdPercent", ge=0)
    """Share of node CPU capacity batch resources may be computed against (the rest is safety margin)."""
    cpu_calculate_policy: CalculatePolicy = "usage"
    """``usage`` or ``maxUsageRequest`` (batch CPU)."""
    memory_reclaim_threshold_percent: int = Field(65, ge=0)
    """Share of node memory capacity batch memory may be computed against."""
    memory_calculate_policy: CalculatePolicy = "usage"
    """``usage``, ``request`` or ``maxUsageRequest`` (batch memory)."""
    degrade_time_minutes: int = Field(15, ge=1)
    """A NodeMetric older than this resets the node's batch resources."""
    update_time_threshold_seconds: int = Field(300, ge=1)
    """The node status is written at least this often even when the values barely moved."""
    resource_diff_threshold: float = Field(0.1, gt=0, le=1)
    """Relative change of a batch resource that makes the node status be written at once."""
    mid_cpu_threshold_percent: int | None = Field(100, alias="midCPUThresholdPercent", ge=0, le=100)
    """Cap of mid CPU, percent of capacity."""
    mid_memory_threshold_percent: int | None = Field(100, ge=0, le=100)
    """Cap of mid memory, percent of capacity."""
    mid_unallocated_percent: int | None = Field(0, ge=0, le=100)
    """Share of unallocated resources counted as mid."""
    mid_reclaim_mode: str | None = None
    """``static``: mid resources are a fixed share of capacity (the two percents below); otherwise they
    follow the NodeMetric's prod-reclaimable resources."""
    mid_static_cpu_reserved_percent: int | None = Field(0, alias="midStaticCPUReservedPercent", ge=0, le=100)
    """``static`` mode: mid CPU as a percent of capacity."""
    mid_static_memory_reserved_percent: int | None = Field(0, ge=0, le=100)
    """``static`` mode: mid memory as a percent of capacity."""
    batch_cpu_threshold_percent: int | None = Field(None, alias="batchCPUThresholdPercent", ge=0)
    """Cap of batch CPU, percent of capacity (none: no cap)."""
    batch_memory_threshold_percent: int | None = Field(None, ge=0)
    """Cap of batch memory, percent of capacity (none: no cap)."""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ColocationStrategy:
        """The strategy from its JSON form overlaid on the defaults (raises pydantic's ValidationError)."""
        return cls.model_validate(overlay(copy.deepcopy(dict(DEFAULT_COLOCATION)), data))


def overlay(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` merged into ``base`` (in place): nulls skipped, objects merged key by key, the rest
    replaced."""
    for key, value in patch.items():
        if value is None:
            continue
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            overlay(current, value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def colocation_strategies(config: Mapping[str, Any]) -> NodeStrategies[dict[str, Any]]:
    """The JSON form of the cluster strategy (the config's top level, over the defaults) and of each
    ``nodeConfigs`` entry (over the cluster strategy). Raises ``ValueError`` for a bad ``nodeSelector``."""
    return NodeStrategies.parse(config, default=dict(DEFAULT_COLOCATION), read=dict, merge=merged)


def node_colocation_strategy(config: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """The JSON form of a node's strategy: defaults, then the cluster strategy (the config's top level),
    then the first matching ``nodeConfigs`` entry (a fresh copy)."""
    return copy.deepcopy(colocation_strategies(config).strategy_for(labels))


def merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` overlaid on a copy of ``base`` (``util.MergeCfg`` of JSON forms)."""
    return overlay(copy.deepcopy(dict(base)), over)
