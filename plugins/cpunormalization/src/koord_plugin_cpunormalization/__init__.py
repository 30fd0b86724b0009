"""Koordinator's CPUNormalization runtime hook."""

from koord_plugin_cpunormalization.plugin import CPUNormalization, CPUNormalizationArgs, is_cpu_share_pod

__all__ = ["CPUNormalization", "CPUNormalizationArgs", "is_cpu_share_pod"]
