"""Resource names, annotations, labels and device types DeviceShare reads and writes (Koordinator's spelling).

Everything here is a wire name: pods, nodes and Device objects written for Koordinator carry exactly these
keys, so a cluster moves between the two schedulers unchanged.
"""

from __future__ import annotations

from typing import Final

# --- device types (Device CR ``spec.devices[].type``) ---------------------------------------------------
GPU: Final = "gpu"
RDMA: Final = "rdma"
FPGA: Final = "fpga"
DEVICE_TYPES: Final = (GPU, RDMA, FPGA)

# --- resource names -------------------------------------------------------------------------------------
NVIDIA_GPU: Final = "nvidia.com/gpu"
AMD_GPU: Final = "amd.com/gpu"
HYGON_DCU: Final = "dcu.com/gpu"
KOORD_GPU: Final = "koordinator.sh/gpu"
GPU_SHARED: Final = "koordinator.sh/gpu.shared"
GPU_CORE: Final = "koordinator.sh/gpu-core"
GPU_MEMORY: Final = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO: Final = "koordinator.sh/gpu-memory-ratio"
HUAWEI_NPU_CORE: Final = "huawei.com/npu-core"
HUAWEI_NPU_CPU: Final = "huawei.com/npu-cpu"
HUAWEI_NPU_DVPP: Final = "huawei.com/npu-dvpp"
RDMA_RESOURCE: Final = "koordinator.sh/rdma"
FPGA_RESOURCE: Final = "koordinator.sh/fpga"

DEVICE_RESOURCE_NAMES: Final[dict[str, tuple[str, ...]]] = {
    GPU: (
        NVIDIA_GPU,
        AMD_GPU,
        HYGON_DCU,
        KOORD_GPU,
        GPU_SHARED,
        GPU_CORE,
        GPU_MEMORY,
        GPU_MEMORY_RATIO,
        HUAWEI_NPU_CORE,
        HUAWEI_NPU_CPU,
        HUAWEI_NPU_DVPP,
    ),
    RDMA: (RDMA_RESOURCE,),
    FPGA: (FPGA_RESOURCE,),
}
"""Per device type, the pod resource names that request it."""

BYTE_RESOURCES: Final = frozenset({GPU_MEMORY})
"""Device resources counted in bytes (printed BinarySI, ``16Gi``); every other one is a bare integer."""

# --- annotations and labels -----------------------------------------------------------------------------
ANNOTATION_DEVICE_ALLOCATED: Final = "scheduling.koordinator.sh/device-allocated"
ANNOTATION_DEVICE_ALLOCATE_HINT: Final = "scheduling.koordinator.sh/device-allocate-hint"
ANNOTATION_DEVICE_JOINT_ALLOCATE: Final = "scheduling.koordinator.sh/device-joint-allocate"
ANNOTATION_GPU_PARTITION_SPEC: Final = "scheduling.koordinator.sh/gpu-partition-spec"
ANNOTATION_GPU_PARTITIONS: Final = "scheduling.koordinator.sh/gpu-partitions"

LABEL_GPU_PARTITION_POLICY: Final = "node.koordinator.sh/gpu-partition-policy"
LABEL_GPU_VENDOR: Final = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL: Final = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION: Final = "node.koordinator.sh/gpu-driver-version"
LABEL_SECONDARY_DEVICE_WELL_PLANNED: Final = "node.koordinator.sh/secondary-device-well-planned"
LABEL_GPU_ISOLATION_PROVIDER: Final = "koordinator.sh/gpu-isolation-provider"

GPU_VENDOR_NVIDIA: Final = "nvidia"
GPU_PARTITION_POLICY_HONOR: Final = "Honor"
GPU_PARTITION_POLICY_PREFER: Final = "Prefer"

# --- hint vocabulary ------------------------------------------------------------------------------------
APPLY_FOR_ALL: Final = "ApplyForAll"
REQUESTS_AS_COUNT: Final = "RequestsAsCount"
DEVICE_LEVEL_EXCLUSIVE: Final = "DeviceLevel"
PCIE_LEVEL_EXCLUSIVE: Final = "PCIeLevel"
SAME_PCIE_SCOPE: Final = "SamePCIe"

SCOPE_DEVICE: Final = "Device"
SCOPE_PCIE: Final = "PCIe"
SCOPE_NUMA_NODE: Final = "NUMANode"
SCOPE_NODE: Final = "Node"
TOPOLOGY_SCOPE_LEVEL: Final[dict[str, int]] = {
    SCOPE_DEVICE: 4,
    SCOPE_PCIE: 3,
    SCOPE_NUMA_NODE: 2,
    SCOPE_NODE: 1,
}
"""Deeper scopes have higher levels; a pod's ``requiredTopologyScope`` is the shallowest level it accepts."""

PARTITION_RESTRICTED: Final = "Restricted"
PARTITION_BEST_EFFORT: Final = "BestEffort"
