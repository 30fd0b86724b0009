"""Koordinator's GPUDeviceResource node-resource calculator (the node's GPU resources and labels from its
Device object)."""

from koord_plugin_gpudeviceresource.plugin import (
    LABELS,
    RESOURCE_NAMES,
    GPUDeviceResource,
    GPUDeviceResourceArgs,
)

__all__ = ["LABELS", "RESOURCE_NAMES", "GPUDeviceResource", "GPUDeviceResourceArgs"]
