"""The ``cpu-normalization-config`` key of ``slo-controller-config`` (``configuration.CPUNormalizationCfg``)
and the CPU basic info the koordlet reports on the NodeResourceTopology (``extension.CPUBasicInfo``).

    {"enable": true, "defaultRatio": 1.2,
     "ratioModel": {"Intel(R) Xeon(R) Platinum XXX": {"baseRatio": 1.5, "hyperThreadEnabledRatio": 1.0,
                                                       "turboEnabledRatio": 1.8,
                                                       "hyperThreadTurboEnabledRatio": 1.2}},
     "nodeConfigs": [{"name": "pool-a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "enable": false}]}

The cluster strategy is overlaid on the default (off, no models); each node strategy is overlaid on the
cluster strategy as Koordinator's ``util.MergeCfg`` does it (a JSON round trip: fields left out keep the value
below, ``ratioModel`` entries are merged by CPU model and each model's entry is replaced whole). A node takes
the strategy of the first node config whose ``nodeSelector`` matches its labels (a missing selector matches
no node, an empty one every node), else the cluster strategy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from koord_framework.manager.nodestrategies import NodeStrategies

__all__ = [
    "ANNOTATION_CPU_BASIC_INFO",
    "LABEL_CPU_NORMALIZATION_ENABLED",
    "CPUBasicInfo",
    "CPUNormalizationConfig",
    "CPUNormalizationStrategy",
    "ModelRatio",
]

ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
"""NodeResourceTopology annotation with the node's CPU model, hyper-threading and turbo status."""
LABEL_CPU_NORMALIZATION_ENABLED = "node.koordinator.sh/cpu-normalization-enabled"
"""Node label that, when set, overrides the strategy's ``enable``."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True)


class ModelRatio(_Model):
    """The ratios of one CPU model (``configuration.ModelRatioCfg``)."""

    base_ratio: float | None = None
    """Hyper-threading off, turbo off."""
    hyper_thread_enabled_ratio: float | None = None
    """Hyper-threading on, turbo off."""
    turbo_enabled_ratio: float | None = None
    """Hyper-threading off, turbo on."""
    hyper_thread_turbo_enabled_ratio: float | None = None
    """Hyper-threading on, turbo on."""


class CPUNormalizationStrategy(_Model):
    """``configuration.CPUNormalizationStrategy``."""

    enable: bool | None = None
    """Whether the node's ratio is computed (off: the ratio is reset to ``1.00``)."""
    default_ratio: float | None = None
    """The ratio of a CPU model the ratio model lacks."""
    ratio_model: dict[str, ModelRatio] | None = None
    """CPU model (``CPUBasicInfo.cpuModel``) -> its ratios."""


DEFAULT_STRATEGY = CPUNormalizationStrategy(enable=False, ratio_model={})
"""``DefaultCPUNormalizationCfg``: off, and no CPU model preset."""


def merge(base: CPUNormalizationStrategy, over: CPUNormalizationStrategy) -> CPUNormalizationStrategy:
    """``util.MergeCfg(base, over)``: fields ``over`` sets replace; ``ratioModel`` merges by model."""
    fields = over.model_dump(exclude_none=True)
    merged = base.model_dump()
    if "ratio_model" in fields:
        merged["ratio_model"] = {**(merged.get("ratio_model") or {}), **fields.pop("ratio_model")}
    merged.update(fields)
    return CPUNormalizationStrategy.model_validate(merged)


@dataclass(frozen=True)
class CPUNormalizationConfig(NodeStrategies[CPUNormalizationStrategy]):
    """The parsed key: the cluster strategy (merged over the default) and the node strategies (each merged
    over the cluster strategy) with their selectors; ``strategy_for(labels)`` is ``GetStrategyCopy``."""

    cluster: CPUNormalizationStrategy = DEFAULT_STRATEGY

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> CPUNormalizationConfig:
        """Raises ``ValueError`` (pydantic's ``ValidationError`` or a selector error) naming the field."""
        return cls.parse_models(data, default=DEFAULT_STRATEGY, merge=merge)


class CPUBasicInfo(_Model):
    """``extension.CPUBasicInfo`` (the fields the ratio depends on)."""

    cpu_model: str = Field("", alias="cpuModel")
    hyper_thread_enabled: bool = False
    turbo_enabled: bool = False

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str] | None) -> CPUBasicInfo | None:
        """``GetCPUBasicInfo``: ``None`` when the annotation is absent; raises ``ValueError`` when it is not
        the JSON of a CPUBasicInfo."""
        text = (annotations or {}).get(ANNOTATION_CPU_BASIC_INFO)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"unmarshal cpu basic info failed, err: {exc}") from exc
        if not isinstance(data, Mapping):
            raise ValueError("unmarshal cpu basic info failed, err: not an object")
        return cls.model_validate(data)
