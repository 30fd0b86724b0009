"""Device discovery for `koord device-daemon`: GPUs (NVML or sysfs) and RDMA NICs into a Device object."""

from koord_framework.devices.daemon import DeviceDaemon, SyncResult
from koord_framework.devices.discovery import Discovery, discover
from koord_framework.devices.nvml import NVML, GPUInfo, NVMLError, NVMLUnavailable, PynvmlNVML

__all__ = [
    "NVML",
    "DeviceDaemon",
    "Discovery",
    "GPUInfo",
    "NVMLError",
    "NVMLUnavailable",
    "PynvmlNVML",
    "SyncResult",
    "discover",
]
