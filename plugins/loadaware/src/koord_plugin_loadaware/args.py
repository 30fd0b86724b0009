"""``LoadAwareSchedulingArgs``: Koordinator's v1 args type, field for field, with its defaults and validation.

Field names, JSON spellings and defaulting follow ``pkg/scheduler/apis/config/v1`` (``types.go``,
``defaults.go``) and the checks follow ``validation/validation_pluginargs.go``, so a Koordinator ConfigMap
loads unchanged and means the same thing. Two defaults are conditional in Koordinator and stay so here:
``resourceWeights`` is only filled in when ``dominantResourceWeight`` is 0, and ``estimatedScalingFactors``
keeps the user's entries and only adds the missing ``cpu``/``memory`` ones.

One deliberate tightening: Koordinator does not range-check ``prodUsageThresholds`` or the per-node threshold
annotation; a prod threshold above 100 can never trigger, so a profile that sets one is refused like any
other threshold above 100.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from koord_framework.config.common import ConfigModel, Duration
from koord_framework.plugin import PluginArgs

__all__ = [
    "AGGREGATION_TYPES",
    "DEFAULT_ESTIMATED_SCALING_FACTORS",
    "DEFAULT_NODE_METRIC_EXPIRATION_SECONDS",
    "DEFAULT_RESOURCE_WEIGHTS",
    "DEFAULT_USAGE_THRESHOLDS",
    "AggregationType",
    "LoadAwareSchedulingAggregatedArgs",
    "LoadAwareSchedulingArgs",
]

DEFAULT_NODE_METRIC_EXPIRATION_SECONDS: Final = 180
DEFAULT_RESOURCE_WEIGHTS: Final[Mapping[str, int]] = {"cpu": 1, "memory": 1}
DEFAULT_USAGE_THRESHOLDS: Final[Mapping[str, int]] = {"cpu": 65, "memory": 95}
DEFAULT_ESTIMATED_SCALING_FACTORS: Final[Mapping[str, int]] = {"cpu": 85, "memory": 70}

AggregationType = Literal["", "avg", "p50", "p90", "p95", "p99"]
"""Koordinator's ``extension.AggregationType`` values that NodeMetric reports; "" means not set."""
AGGREGATION_TYPES: Final = ("avg", "p50", "p90", "p95", "p99")

Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
Percent = Annotated[int, Field(ge=0, le=100)]
"""A usage threshold in percent of allocatable: 0 disables the check for that resource."""
Weight = Annotated[int, Field(gt=0, le=100)]
ScalingFactor = Annotated[int, Field(gt=0, le=100)]


def _pick(data: Mapping[str, Any], alias: str, name: str) -> tuple[str, Any]:
    """The key a caller used for a field (its camelCase alias or its Python name) and the value there."""
    if alias in data:
        return alias, data[alias]
    if name in data:
        return name, data[name]
    return alias, None


class LoadAwareSchedulingAggregatedArgs(ConfigModel):
    """Percentile-based filtering and scoring (Koordinator's ``LoadAwareSchedulingAggregatedArgs``).

    Filtering switches to aggregated usage only when both ``usageThresholds`` (non-empty) and
    ``usageAggregationType`` are set; scoring switches when ``scoreAggregationType`` is set.
    """

    usage_thresholds: dict[str, Percent] = {}
    """Thresholds (percent of allocatable, 0..100) on the aggregated usage. Default: none."""
    usage_aggregation_type: AggregationType = ""
    """Which percentile of NodeMetric's aggregated usage Filter compares (avg, p50, p90, p95, p99).
    Default: ""."""
    usage_aggregated_duration: Duration | None = None
    """Aggregation window Filter reads (Go duration, e.g. ``5m``). Default: unset, meaning the longest
    window the node reports."""
    score_aggregation_type: AggregationType = ""
    """Which percentile Score reads instead of the instant usage (avg, p50, p90, p95, p99).
    Default: "" (off)."""
    score_aggregated_duration: Duration | None = None
    """Aggregation window Score reads (Go duration). Default: unset, meaning the longest window the node
    reports."""

    @field_validator("usage_aggregated_duration", "score_aggregated_duration")
    @classmethod
    def _not_negative(cls, v: Duration | None) -> Duration | None:
        if v is not None and v < 0:
            raise PydanticCustomError("duration", "duration must be >= 0")
        return v


class LoadAwareSchedulingArgs(PluginArgs):
    """Arguments of ``LoadAwareScheduling`` (Koordinator's ``LoadAwareSchedulingArgs``, v1)."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)

    filter_expired_node_metrics: bool = True
    """Reject nodes whose NodeMetric is older than ``nodeMetricExpirationSeconds`` (or never updated).
    Default: true."""
    node_metric_expiration_seconds: Annotated[int, Field(gt=0, le=2**63 - 1)] = (
        DEFAULT_NODE_METRIC_EXPIRATION_SECONDS
    )
    """Seconds after ``status.updateTime`` at which a NodeMetric counts as expired: such a node scores 0 and,
    with ``filterExpiredNodeMetrics``, is filtered. Default: 180."""
    enable_schedule_when_node_metrics_expired: bool = False
    """With ``filterExpiredNodeMetrics``, let nodes with an expired NodeMetric pass Filter anyway.
    Default: false."""
    resource_weights: dict[str, Weight] = Field(default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS))
    """Score weight per resource (1..100). Default: ``{cpu: 1, memory: 1}``, but only when
    ``dominantResourceWeight`` is 0; with a dominant weight and no weights, only the dominant term scores."""
    dominant_resource_weight: Annotated[int, Field(ge=0, le=100)] = 0
    """Weight (0..100) of the least free resource's score, Dominant Resource Fairness style.
    Default: 0 (off)."""
    usage_thresholds: dict[str, Percent] = Field(default_factory=lambda: dict(DEFAULT_USAGE_THRESHOLDS))
    """Filter threshold per resource, in percent of allocatable (0..100); 0 disables that resource. An empty
    map means the default ``{cpu: 65, memory: 95}``; ``{cpu: 0, memory: 0}`` disables usage filtering."""
    prod_usage_thresholds: dict[str, Percent] = {}
    """Thresholds (percent, 0..100) on the usage of prod pods alone, applied to prod pods instead of
    ``usageThresholds``. Default: none (prod pods use the node thresholds)."""
    prod_usage_include_sys: bool = False
    """Count the node's system usage (not used by pods) in the prod usage. Default: false."""
    score_according_prod_usage: bool = False
    """Score prod pods by the prod usage of the node instead of its whole usage. Default: false."""
    estimator: str = ""
    """Name of the estimator that predicts a pod's usage before the node reports it; unknown names and "" use
    ``defaultEstimator``. Default: ""."""
    estimated_scaling_factors: dict[str, ScalingFactor] = Field(
        default_factory=lambda: dict(DEFAULT_ESTIMATED_SCALING_FACTORS)
    )
    """Percent (1..100) of max(request, limit) the default estimator expects a pod to use, per resource.
    Default: ``{cpu: 85, memory: 70}``; missing cpu/memory entries are filled in with these."""
    estimated_seconds_after_pod_scheduled: Int64 | None = None
    """Keep estimating a pod's usage for this many seconds after PodScheduled, even once the node reports it.
    Default: unset."""
    estimated_seconds_after_initialized: Int64 | None = None
    """Keep estimating a pod's usage for this many seconds after Initialized (takes precedence over
    ``estimatedSecondsAfterPodScheduled`` once the pod is initialized). Default: unset."""
    allow_customize_estimation: bool = False
    """Read per-pod scaling factors and estimation seconds from the pod's
    ``scheduling.koordinator.sh/load-estimated-*`` annotations. Default: false."""
    aggregated: LoadAwareSchedulingAggregatedArgs | None = None
    """Percentile-based filtering and scoring; see the aggregated fields below. Default: unset (off)."""
    supported_resources: list[str] = []
    """Extra resource names to track that appear only in node annotations (cpu, memory and every resource
    named elsewhere in these args are always tracked). Default: none."""

    @model_validator(mode="before")
    @classmethod
    def _koordinator_defaulting(cls, data: Any) -> Any:
        # null means "unset" (a nil Go pointer/map); and resourceWeights is only defaulted when
        # dominantResourceWeight is 0 (SetDefaults_LoadAwareSchedulingArgs), which needs both fields at once.
        if not isinstance(data, Mapping):
            return data
        out = {k: v for k, v in data.items() if v is not None}
        w_key, weights = _pick(out, "resourceWeights", "resource_weights")
        _, dominant = _pick(out, "dominantResourceWeight", "dominant_resource_weight")
        if weights is None or (isinstance(weights, Mapping) and not weights):
            has_dominant = isinstance(dominant, int) and not isinstance(dominant, bool) and dominant != 0
            out[w_key] = {} if has_dominant else dict(DEFAULT_RESOURCE_WEIGHTS)
        # Always present, so that the weights-need-factors check below runs and reports at this key.
        f_key, factors = _pick(out, "estimatedScalingFactors", "estimated_scaling_factors")
        if factors is None:
            out[f_key] = {}
        return out

    @field_validator("usage_thresholds")
    @classmethod
    def _empty_thresholds_mean_default(cls, v: dict[str, int]) -> dict[str, int]:
        return v if v else dict(DEFAULT_USAGE_THRESHOLDS)

    @field_validator("estimated_scaling_factors")
    @classmethod
    def _fill_factors_and_cover_weights(cls, v: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        factors = {**DEFAULT_ESTIMATED_SCALING_FACTORS, **v}
        # Koordinator refuses a weighted resource it cannot estimate: Score would add the incoming pod's
        # usage as 0 for it. Reported at estimatedScalingFactors, as ValidateLoadAwareSchedulingArgs does.
        weights = info.data.get("resource_weights") or {}
        missing = sorted(name for name in weights if name not in factors)
        if missing:
            raise PydanticCustomError(
                "missing_scaling_factor",
                "no scaling factor for weighted resource(s) {names}: every resourceWeights entry needs one",
                {"names": ", ".join(missing)},
            )
        return factors

    # --- derived views the plugin reads -------------------------------------------------------------
    def aggregated_filter(self) -> tuple[dict[str, int], str, float] | None:
        """(thresholds, type, duration seconds) when Filter runs on aggregated usage, else None."""
        agg = self.aggregated
        if agg is None or not agg.usage_thresholds or not agg.usage_aggregation_type:
            return None
        return (
            dict(agg.usage_thresholds),
            agg.usage_aggregation_type,
            float(agg.usage_aggregated_duration or 0),
        )

    def aggregated_score(self) -> tuple[str, float] | None:
        """(type, duration seconds) when Score reads aggregated usage, else None."""
        agg = self.aggregated
        if agg is None or not agg.score_aggregation_type:
            return None
        return agg.score_aggregation_type, float(agg.score_aggregated_duration or 0)

    def resource_names(self) -> list[str]:
        """The resources the plugin tracks, sorted by name (``NewResourceVectorizerFromArgs``)."""
        names = {"cpu", "memory"}
        names.update(self.usage_thresholds, self.prod_usage_thresholds, self.resource_weights)
        names.update(self.estimated_scaling_factors, self.supported_resources)
        if self.aggregated is not None:
            names.update(self.aggregated.usage_thresholds)
        return sorted(names)
