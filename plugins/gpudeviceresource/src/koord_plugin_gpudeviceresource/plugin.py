"""``GPUDeviceResource``: the node's GPU resources and GPU labels from its Device object (Koordinator's
``noderesource/plugins/gpudeviceresource``).

The koordlet (or ``koord device-daemon``) reports the node's devices on the cluster-scoped Device object of
the node's name. This calculator sums the resources of the healthy GPUs into the node's capacity and
allocatable (``koordinator.sh/gpu-core``, ``gpu-memory``, ``gpu-memory-ratio``, Huawei's NPU resources, and
the ``koordinator.sh/gpu`` wrapper for NVIDIA or unnamed vendors; ``koordinator.sh/gpu.shared`` behind the
manager gate ``EnableSyncGPUSharedResource``) and copies the Device's vendor, model and driver labels onto
the node. No Device, or no healthy GPU on it, removes the resources; the labels are never removed (as
Koordinator: "TBD"). The colocation strategy does not matter: turning colocation off leaves them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from koord_lib_deviceresource import DeviceResourceCalculator, sum_resources

from koord_framework.api.quantity import Quantity
from koord_framework.manager.noderesource import ColocationStrategy, ResourceItem
from koord_framework.plugin import NoArgs

__all__ = [
    "GATE_SYNC_GPU_SHARED",
    "LABELS",
    "RESOURCE_NAMES",
    "GPUDeviceResource",
    "GPUDeviceResourceArgs",
]

PLUGIN_NAME: Final = "GPUDeviceResource"

RESOURCE_GPU: Final = "koordinator.sh/gpu"
RESOURCE_GPU_SHARED: Final = "koordinator.sh/gpu.shared"
RESOURCE_GPU_CORE: Final = "koordinator.sh/gpu-core"
RESOURCE_GPU_MEMORY: Final = "koordinator.sh/gpu-memory"
RESOURCE_GPU_MEMORY_RATIO: Final = "koordinator.sh/gpu-memory-ratio"
RESOURCE_HUAWEI_NPU_CORE: Final = "huawei.com/npu-core"
RESOURCE_HUAWEI_NPU_CPU: Final = "huawei.com/npu-cpu"
RESOURCE_HUAWEI_NPU_DVPP: Final = "huawei.com/npu-dvpp"

RESOURCE_NAMES: Final = (
    RESOURCE_GPU,
    RESOURCE_GPU_CORE,
    RESOURCE_HUAWEI_NPU_CORE,
    RESOURCE_HUAWEI_NPU_CPU,
    RESOURCE_HUAWEI_NPU_DVPP,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_GPU_SHARED,
)
"""The node resources this calculator reconciles from the Device (Koordinator's order, used for resets)."""

LABEL_GPU_VENDOR: Final = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL: Final = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION: Final = "node.koordinator.sh/gpu-driver-version"
LABELS: Final = (LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION)
"""The Device labels copied onto the node."""

GPU_VENDOR_NVIDIA: Final = "nvidia"
GATE_SYNC_GPU_SHARED: Final = "EnableSyncGPUSharedResource"
GPU_SHARED_PER_DEVICE: Final = 100
"""``koordinator.sh/gpu.shared`` advertised per healthy GPU."""

RESET_RESOURCES_MSG: Final = "reset node gpu resources"
UPDATE_RESOURCES_MSG: Final = "node gpu resources from device"
UPDATE_LABELS_MSG: Final = "node gpu labels from device"
NEED_SYNC_FOR_RESOURCE_DIFF_MSG: Final = "gpu resource diff is big than threshold"
NEED_SYNC_FOR_GPU_MODEL_MSG_FMT: Final = "gpu device label {} changed"


class GPUDeviceResourceArgs(NoArgs):
    """GPUDeviceResource takes no args: it copies what the node's Device object says; the only switch is
    koord-manager's feature gate ``EnableSyncGPUSharedResource``."""


class GPUDeviceResource(DeviceResourceCalculator[GPUDeviceResourceArgs]):
    """Node GPU resources and labels from the node's Device object."""

    name: ClassVar[str] = PLUGIN_NAME
    args_model: ClassVar[type[GPUDeviceResourceArgs]] = GPUDeviceResourceArgs
    resource_names: ClassVar[Sequence[str]] = RESOURCE_NAMES
    need_sync_message: ClassVar[str] = NEED_SYNC_FOR_RESOURCE_DIFF_MSG
    device_type: ClassVar[str] = "gpu"
    reset_message: ClassVar[str] = RESET_RESOURCES_MSG

    def device_items(
        self, device: Mapping[str, Any], found: Sequence[Mapping[str, Any]]
    ) -> list[ResourceItem]:
        totals = sum_resources(device, found)
        labels = dict((device.get("metadata") or {}).get("labels") or {})
        vendor = labels.get(LABEL_GPU_VENDOR, "")
        # Only NVIDIA GPUs have the koordinator.sh/gpu wrapper resource; an unnamed vendor keeps the old
        # behaviour (Koordinator's compatibility rule). Go starts that sum from a DecimalSI zero.
        if vendor in ("", GPU_VENDOR_NVIDIA):
            totals[RESOURCE_GPU] = totals.get(RESOURCE_GPU_CORE, Quantity.from_int(0))
        assert self.context is not None
        if self.context.feature_enabled(GATE_SYNC_GPU_SHARED):
            totals[RESOURCE_GPU_SHARED] = Quantity.from_int(len(found) * GPU_SHARED_PER_DEVICE)
        # Each quantity keeps the spelling Go gives it on the node (``16Gi``, ``18k``).
        items = [ResourceItem.of(name, q, UPDATE_RESOURCES_MSG) for name, q in sorted(totals.items())]
        node_labels = {k: str(labels[k]) for k in LABELS if k in labels}
        if node_labels:
            items.append(ResourceItem(PLUGIN_NAME, labels=node_labels, message=UPDATE_LABELS_MSG))
        return items

    def prepare_labels(
        self, strategy: ColocationStrategy, node: dict[str, Any], labels: Mapping[str, str]
    ) -> None:
        """The vendor, model and driver labels the items carry; a label absent from them is left as it is."""
        target = node["metadata"]["labels"]
        for key in LABELS:
            if key in labels:
                target[key] = labels[key]

    def need_sync_meta(
        self, strategy: ColocationStrategy | None, old_node: Mapping[str, Any], new_node: Mapping[str, Any]
    ) -> tuple[bool, str]:
        """One of the GPU labels differs (the first in Koordinator's order is named)."""
        old = (old_node.get("metadata") or {}).get("labels") or {}
        new = (new_node.get("metadata") or {}).get("labels") or {}
        for key in LABELS:
            if old.get(key) != new.get(key):
                return True, NEED_SYNC_FOR_GPU_MODEL_MSG_FMT.format(key)
        return False, ""
