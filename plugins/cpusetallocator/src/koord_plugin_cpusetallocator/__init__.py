"""Koordinator's CPUSetAllocator runtime hook."""

from koord_plugin_cpusetallocator.plugin import CPUSetAllocator, CPUSetAllocatorArgs
from koord_plugin_cpusetallocator.rule import CPUSetRule, ResourceStatus, parse_resource_status, parse_rule

__all__ = [
    "CPUSetAllocator",
    "CPUSetAllocatorArgs",
    "CPUSetRule",
    "ResourceStatus",
    "parse_resource_status",
    "parse_rule",
]
