"""Koordinator's CPUNormalization node-resource calculator
(``node.koordinator.sh/cpu-normalization-ratio``)."""

from koord_plugin_cpunormalizationratio.config import (
    CPUBasicInfo,
    CPUNormalizationConfig,
    CPUNormalizationStrategy,
    ModelRatio,
)
from koord_plugin_cpunormalizationratio.plugin import (
    CPUNormalization,
    CPUNormalizationArgs,
    cpu_normalization_ratio,
    ratio_from_model,
)

__all__ = [
    "CPUBasicInfo",
    "CPUNormalization",
    "CPUNormalizationArgs",
    "CPUNormalizationConfig",
    "CPUNormalizationStrategy",
    "ModelRatio",
    "cpu_normalization_ratio",
    "ratio_from_model",
]
