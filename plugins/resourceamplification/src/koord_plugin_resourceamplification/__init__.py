"""Koordinator's ResourceAmplification node-resource calculator
(``node.koordinator.sh/resource-amplification-ratio``)."""

from koord_plugin_resourceamplification.plugin import (
    ResourceAmplification,
    ResourceAmplificationArgs,
    ResourceAmplificationConfig,
    ResourceAmplificationStrategy,
)

__all__ = [
    "ResourceAmplification",
    "ResourceAmplificationArgs",
    "ResourceAmplificationConfig",
    "ResourceAmplificationStrategy",
]
