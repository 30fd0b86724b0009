"""What a pod asks of devices: validation, conversion to per-device units, and the GPU count.

Koordinator accepts many spellings of a GPU request (``nvidia.com/gpu: 2``, ``koordinator.sh/gpu: 50``,
``gpu-core`` + ``gpu-memory-ratio``, ``gpu.shared`` + ...). Each resource name sets one bit; only the bit
combinations listed in ``VALID_COMBINATIONS`` are accepted, each with a check of its own, and every accepted
combination converts to the canonical names the allocator works in (``gpu-core``, ``gpu-memory``,
``gpu-memory-ratio``, ...). Resource lists are ``dict[str, int]`` in ``Value()`` units (bytes for
``gpu-memory``, percent for the others).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from koord_plugin_deviceshare import names as n

__all__ = [
    "FLAGS",
    "VALID_COMBINATIONS",
    "DeviceRequestError",
    "GPURequirements",
    "calc_desired_requests_and_count_for_gpu",
    "combination_flags",
    "convert_device_request",
    "explain_invalid_request",
    "get_pod_device_requests",
    "memory_bytes_to_ratio",
    "memory_ratio_to_bytes",
    "validate_device_request",
]

NVIDIA_GPU: Final = 1 << 0
AMD_GPU: Final = 1 << 1
HYGON_DCU: Final = 1 << 2
KOORD_GPU: Final = 1 << 3
GPU_SHARED: Final = 1 << 4
GPU_CORE: Final = 1 << 5
GPU_MEMORY: Final = 1 << 6
GPU_MEMORY_RATIO: Final = 1 << 7
HUAWEI_NPU_CORE: Final = 1 << 8
HUAWEI_NPU_CPU: Final = 1 << 9
HUAWEI_NPU_DVPP: Final = 1 << 10
FPGA: Final = 1 << 11
RDMA: Final = 1 << 12

FLAGS: Final[dict[str, int]] = {
    n.NVIDIA_GPU: NVIDIA_GPU,
    n.AMD_GPU: AMD_GPU,
    n.HYGON_DCU: HYGON_DCU,
    n.KOORD_GPU: KOORD_GPU,
    n.GPU_SHARED: GPU_SHARED,
    n.GPU_CORE: GPU_CORE,
    n.GPU_MEMORY: GPU_MEMORY,
    n.GPU_MEMORY_RATIO: GPU_MEMORY_RATIO,
    n.HUAWEI_NPU_CORE: HUAWEI_NPU_CORE,
    n.HUAWEI_NPU_CPU: HUAWEI_NPU_CPU,
    n.HUAWEI_NPU_DVPP: HUAWEI_NPU_DVPP,
    n.FPGA_RESOURCE: FPGA,
    n.RDMA_RESOURCE: RDMA,
}
_FLAG_NAMES: Final = (
    (NVIDIA_GPU, "NvidiaGPU"),
    (AMD_GPU, "AMDGPU"),
    (HYGON_DCU, "HygonDCU"),
    (KOORD_GPU, "KoordGPU"),
    (GPU_SHARED, "GPUShared"),
    (GPU_CORE, "GPUCore"),
    (GPU_MEMORY, "GPUMemory"),
    (GPU_MEMORY_RATIO, "GPUMemoryRatio"),
    (HUAWEI_NPU_CORE, "HuaweiNPUCore"),
    (HUAWEI_NPU_CPU, "HuaweiNPUCPU"),
    (HUAWEI_NPU_DVPP, "HuaweiNPUDVPP"),
    (FPGA, "FPGA"),
    (RDMA, "RDMA"),
)

ResourceList = Mapping[str, int]


def combination_flags(combination: int) -> str:
    """``GPUCore|GPUMemory`` for 96: the flag names of a combination, lowest bit first."""
    parts = [name for bit, name in _FLAG_NAMES if combination & bit]
    return "|".join(parts) if parts else "0"


def percentage_valid(value: int) -> bool:
    """A percent of a device: at most one device (<= 100) or whole devices (a multiple of 100)."""
    return not (value > 100 and value % 100 != 0)


def _shared_valid(req: ResourceList) -> bool:
    shared = req.get(n.GPU_SHARED)
    if shared is None:
        return False
    for name in (n.GPU_CORE, n.GPU_MEMORY_RATIO):
        value = req.get(name)
        if value is not None and (value % shared != 0 or value // shared > 100):
            return False
    return True


def _npu_shared_valid(req: ResourceList) -> bool:
    shared = req.get(n.GPU_SHARED)
    if shared is None or shared > 1:
        return False
    dvpp = req.get(n.HUAWEI_NPU_DVPP)
    return dvpp is None or dvpp <= 100


def _percentage_combination_valid(req: ResourceList) -> bool:
    return all(percentage_valid(req[name]) for name in (n.GPU_CORE, n.GPU_MEMORY_RATIO) if name in req)


def _always(_req: ResourceList) -> bool:
    return True


VALID_COMBINATIONS: Final[dict[int, Callable[[ResourceList], bool]]] = {
    NVIDIA_GPU: _always,
    AMD_GPU: _always,
    HYGON_DCU: _always,
    KOORD_GPU: _always,
    GPU_MEMORY: _percentage_combination_valid,
    GPU_MEMORY_RATIO: _percentage_combination_valid,
    GPU_CORE | GPU_MEMORY: _percentage_combination_valid,
    GPU_CORE | GPU_MEMORY_RATIO: _percentage_combination_valid,
    HUAWEI_NPU_CORE | GPU_MEMORY_RATIO: _percentage_combination_valid,
    GPU_SHARED | GPU_MEMORY: _shared_valid,
    GPU_SHARED | GPU_MEMORY_RATIO: _shared_valid,
    GPU_SHARED | GPU_CORE | GPU_MEMORY: _shared_valid,
    GPU_SHARED | GPU_CORE | GPU_MEMORY_RATIO: _shared_valid,
    GPU_SHARED | HUAWEI_NPU_CORE | HUAWEI_NPU_CPU | GPU_MEMORY: _npu_shared_valid,
    GPU_SHARED | HUAWEI_NPU_CORE | HUAWEI_NPU_CPU | HUAWEI_NPU_DVPP | GPU_MEMORY: _npu_shared_valid,
    FPGA: _always,
    RDMA: _always,
}
"""Accepted flag combinations and the check of each (Koordinator's ``ValidDeviceResourceCombinations``)."""

_PERCENTAGE_RESOURCES: Final = frozenset({n.KOORD_GPU, n.FPGA_RESOURCE, n.RDMA_RESOURCE})


def format_value(name: str, value: int) -> str:
    """A device quantity as Koordinator prints it: BinarySI for gpu-memory, a bare integer otherwise."""
    if name in n.BYTE_RESOURCES:
        from koord_framework.api.quantity import format_bytes

        return format_bytes(value)
    return str(value)


class DeviceRequestError(ValueError):
    """A pod's device request Koordinator would refuse.

    ``reason`` is Koordinator's message (the Filter/PreFilter reason, unchanged); ``detail`` says which field
    broke which rule, for a human reading ``--explain``.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason if not detail else f"{reason} ({detail})")
        self.reason = reason
        self.detail = detail


def validate_device_request(request: ResourceList) -> int:
    """The flag combination of a device request (one device type's names), or ``DeviceRequestError``."""
    if not request:
        raise DeviceRequestError("pod request should not be empty")
    combination = 0
    for name, value in request.items():
        combination |= FLAGS.get(name, 0)
        if name in _PERCENTAGE_RESOURCES and not percentage_valid(value):
            raise DeviceRequestError(
                f"invalid resource unit {name}: {format_value(name, value)}",
                f"{name} must be at most 100 (part of one device) or a multiple of 100 (whole devices)",
            )
    check = VALID_COMBINATIONS.get(combination)
    if check is None or not check(request):
        raise DeviceRequestError(
            f"invalid resource device requests: [{' '.join(sorted(request))}]",
            explain_invalid_request(request, combination),
        )
    return combination


def explain_invalid_request(request: ResourceList, combination: int) -> str:
    """Which rule a refused request breaks, in words (Koordinator only lists the names)."""
    if combination not in VALID_COMBINATIONS:
        if combination & GPU_CORE and not combination & (GPU_MEMORY | GPU_MEMORY_RATIO):
            return f"{n.GPU_CORE} needs {n.GPU_MEMORY} or {n.GPU_MEMORY_RATIO} alongside"
        if combination & GPU_SHARED and combination & KOORD_GPU:
            return f"{n.KOORD_GPU} and {n.GPU_SHARED} cannot be combined"
        if combination & GPU_MEMORY and combination & GPU_MEMORY_RATIO:
            return f"ask for {n.GPU_MEMORY} or {n.GPU_MEMORY_RATIO}, not both"
        return f"combination {combination_flags(combination)} is not one Koordinator accepts"
    shared = request.get(n.GPU_SHARED)
    for name in (n.GPU_CORE, n.GPU_MEMORY_RATIO):
        value = request.get(name)
        if value is None:
            continue
        if shared is None and not percentage_valid(value):
            return f"{name} {value} must be at most 100 (part of one GPU) or a multiple of 100 (whole GPUs)"
        if shared is not None and shared > 0 and (value % shared or value // shared > 100):
            return f"{name} {value} must be a multiple of {n.GPU_SHARED} {shared} and at most 100 per GPU"
    if shared is not None and combination & HUAWEI_NPU_CORE:
        return f"{n.GPU_SHARED} must be 1 and {n.HUAWEI_NPU_DVPP} at most 100 for a shared NPU"
    return f"combination {combination_flags(combination)} fails its check"


def _whole_devices(count: int) -> dict[str, int]:
    return {n.GPU_CORE: count * 100, n.GPU_MEMORY_RATIO: count * 100}


def convert_device_request(request: ResourceList, combination: int) -> dict[str, int] | None:
    """The canonical request of a validated combination (Koordinator's ``ConvertDeviceRequest``)."""
    if not request:
        return None
    if combination in (NVIDIA_GPU, AMD_GPU, HYGON_DCU):
        name = {NVIDIA_GPU: n.NVIDIA_GPU, AMD_GPU: n.AMD_GPU, HYGON_DCU: n.HYGON_DCU}[combination]
        return _whole_devices(request[name])
    if combination == KOORD_GPU:
        return {n.GPU_CORE: request[n.KOORD_GPU], n.GPU_MEMORY_RATIO: request[n.KOORD_GPU]}
    if combination not in VALID_COMBINATIONS:
        return None
    # Every other accepted combination keeps exactly the names that make it up.
    return {name: value for name, value in request.items() if FLAGS.get(name, 0) & combination}


def get_pod_device_requests(requests: ResourceList) -> dict[str, dict[str, int]]:
    """Per device type, the pod's canonical device request (types it does not ask for are absent)."""
    out: dict[str, dict[str, int]] = {}
    for device_type, resource_names in n.DEVICE_RESOURCE_NAMES.items():
        masked = {name: requests[name] for name in resource_names if requests.get(name)}
        if not masked:
            continue
        combination = validate_device_request(masked)
        converted = convert_device_request(masked, combination)
        if converted:
            out[device_type] = converted
    return out


def calc_desired_requests_and_count_for_gpu(gpu_requests: ResourceList) -> tuple[dict[str, int], int, bool]:
    """(requests per GPU, number of GPUs, shared?) of a canonical GPU request.

    The count is ``gpu.shared`` when set, else ``ratio / 100`` for whole-GPU ratios above 100, else 1; each
    per-GPU value is the total divided by the count (integer division, as Koordinator). A GPU is shared when
    the pod takes less than all of its memory.
    """
    count = 1
    shared_count = gpu_requests.get(n.GPU_SHARED, 0)
    ratio = gpu_requests.get(n.GPU_MEMORY_RATIO)
    if shared_count > 0:
        count = shared_count
    elif ratio is not None and ratio > 100 and ratio % 100 == 0:
        count = ratio // 100
    per_gpu: dict[str, int] = {}
    for name in (n.GPU_CORE, n.HUAWEI_NPU_CORE, n.HUAWEI_NPU_CPU, n.HUAWEI_NPU_DVPP):
        if name in gpu_requests:
            per_gpu[name] = gpu_requests[name] // count
    shared = False
    if ratio is not None:
        per_gpu[n.GPU_MEMORY_RATIO] = ratio // count
        shared = per_gpu[n.GPU_MEMORY_RATIO] < 100
    elif n.GPU_MEMORY in gpu_requests:
        shared = True
        per_gpu[n.GPU_MEMORY] = gpu_requests[n.GPU_MEMORY] // count
    return per_gpu, count, shared


def memory_ratio_to_bytes(ratio: int, total_memory: int) -> int:
    return ratio * total_memory // 100


def memory_bytes_to_ratio(memory: int, total_memory: int) -> int:
    # Go truncates float64(bytes)/float64(total)*100 toward zero.
    return int(float(memory) / float(total_memory) * 100)


@dataclass(slots=True)
class GPURequirements:
    """How the pod's GPU request is to be met (Koordinator's ``GPURequirements``)."""

    number_of_gpus: int
    requests_per_gpu: dict[str, int]
    gpu_shared: bool
    honor_gpu_partition: bool = False
    restricted_gpu_partition: bool = False
    ring_bus_bandwidth: int | None = None
    required_topology_scope: str = ""
    required_topology_scope_level: int = 0
