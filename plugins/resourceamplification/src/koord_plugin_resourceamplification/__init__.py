"""Koordinator's ResourceAmplification node-resource calculator
(``node.koordinator.sh/resource-amplification-ratio``)."""

from koord_plugin_resourceamplification.plugin import (
    ResourceAmplification,
    ResourceAmplificationArgs,
    ResourceAmplificationConfig,
    ResourceAmplificationStrategy,
)
from koord_plugin_resourceamplification.webhook import NodeResourceAmplificationPlugin

__all__ = [
    "NodeResourceAmplificationPlugin",
    "ResourceAmplification",
    "ResourceAmplificationArgs",
    "ResourceAmplificationConfig",
    "ResourceAmplificationStrategy",
]
