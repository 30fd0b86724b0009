"""``DeviceShareArgs``: Koordinator's v1 args type, field for field, with its defaults and validation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from koord_framework.plugin import PluginArgs
from koord_plugin_deviceshare import names as n

__all__ = [
    "DeviceShareArgs",
    "GPUShareUnsupportedModel",
    "GPUSharedResourceTemplatesConfig",
    "ResourceSpec",
    "ScoringStrategy",
]


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )


class ResourceSpec(_Model):
    name: str
    """Resource name scored (``koordinator.sh/gpu-memory-ratio``, ...)."""
    weight: int = Field(default=1, ge=1, le=100)
    """Weight of the resource in the average (1..100)."""


def _default_resources() -> list[ResourceSpec]:
    return [
        ResourceSpec(name=n.GPU_MEMORY_RATIO, weight=1),
        ResourceSpec(name=n.GPU_MEMORY, weight=1),
        ResourceSpec(name=n.RDMA_RESOURCE, weight=1),
        ResourceSpec(name=n.FPGA_RESOURCE, weight=1),
    ]


class ScoringStrategy(_Model):
    type: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"
    """How devices and nodes are ranked: ``LeastAllocated`` spreads, ``MostAllocated`` packs."""
    resources: list[ResourceSpec] = Field(default_factory=_default_resources)
    """Weighted resources the score averages. Default: gpu-memory-ratio, gpu-memory, rdma, fpga, weight 1."""


class GPUSharedResourceTemplatesConfig(_Model):
    config_map_namespace: str = "koordinator-system"
    """Namespace of the ConfigMap of GPU shared-resource templates."""
    config_map_name: str = "gpu-shared-resource-templates"
    """Name of that ConfigMap."""
    matched_resources: list[str] = Field(default_factory=lambda: [n.HUAWEI_NPU_CORE])
    """Shared requests naming one of these resources must match a template."""


class GPUShareUnsupportedModel(_Model):
    vendor: str
    """``node.koordinator.sh/gpu-vendor`` value."""
    model: str
    """``node.koordinator.sh/gpu-model`` value on which GPU sharing is refused."""


class DeviceShareArgs(PluginArgs):
    """Arguments of DeviceShare (Koordinator ``DeviceShareArgs``)."""

    allocator: str = ""
    """Deprecated in Koordinator and ignored (the allocator is always the autopilot one)."""
    scoring_strategy: ScoringStrategy = Field(default_factory=ScoringStrategy)
    """Device and node scoring. Default: LeastAllocated over gpu-memory-ratio, gpu-memory, rdma, fpga."""
    disable_device_numa_topology_alignment: bool = Field(
        default=False, alias="disableDeviceNUMATopologyAlignment"
    )
    """Do not restrict devices to the NUMA nodes the topology manager chose. Default: false."""
    gpu_shared_resource_templates_config: GPUSharedResourceTemplatesConfig = Field(
        default_factory=GPUSharedResourceTemplatesConfig, alias="gpuSharedResourceTemplatesConfig"
    )
    """Where GPU shared-resource templates come from and which requests must match one."""
    gpu_share_unsupported_models: list[GPUShareUnsupportedModel] = Field(
        default_factory=list, alias="gpuShareUnsupportedModels"
    )
    """Vendor/model pairs on which shared-GPU requests are refused. Default: none."""
