"""NVML behind a small interface: the one real implementation imports ``pynvml`` (``nvidia-ml-py``) lazily.

The device daemon asks NVML only what koordlet asks it, per GPU PCI address: UUID, minor number, total
memory, product name, and the driver version. A machine without the NVIDIA driver (no ``libnvidia-ml``) or
without ``nvidia-ml-py`` installed raises ``NVMLUnavailable`` from ``open`` and the daemon falls back to
sysfs; any other NVML failure raises ``NVMLError`` for the call that failed, so one broken GPU (or a driver
that dies mid-scan) marks those GPUs unhealthy instead of stopping the daemon.
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["NVML", "GPUInfo", "NVMLError", "NVMLUnavailable", "PynvmlNVML"]


class NVMLError(RuntimeError):
    """One NVML call failed (the GPU is reported unhealthy with this message)."""


class NVMLUnavailable(NVMLError):
    """No NVML on this machine: no driver library or no ``nvidia-ml-py``."""


@dataclass(frozen=True, slots=True)
class GPUInfo:
    uuid: str
    minor: int
    memory_total: int
    """Bytes."""
    name: str
    """Product name as NVML reports it, e.g. ``NVIDIA H100 80GB HBM3``."""


class NVML(abc.ABC):
    """What the daemon needs from NVML."""

    @abc.abstractmethod
    def open(self) -> None:
        """Initialise; ``NVMLUnavailable`` when there is no NVML here."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def driver_version(self) -> str: ...

    @abc.abstractmethod
    def gpu(self, bus_id: str) -> GPUInfo:
        """The GPU at a PCI address (``0000:3b:00.0``); ``NVMLError`` if NVML cannot answer for it."""


class PynvmlNVML(NVML):
    """The real NVML through ``pynvml`` (package ``nvidia-ml-py``), imported on first use."""

    def __init__(self) -> None:
        self._nvml: Any = None

    def open(self) -> None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError as err:
            raise NVMLUnavailable("nvidia-ml-py is not installed") from err
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            raise NVMLUnavailable(f"NVML init failed: {err}") from err
        self._nvml = nvml

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            finally:
                self._nvml = None

    def _call(self, fn: str, *args: Any) -> Any:
        if self._nvml is None:
            raise NVMLError("NVML is not initialised")
        try:
            value = getattr(self._nvml, fn)(*args)
        except self._nvml.NVMLError as err:
            raise NVMLError(f"{fn}: {err}") from err
        return value.decode() if isinstance(value, bytes) else value

    def driver_version(self) -> str:
        return str(self._call("nvmlSystemGetDriverVersion"))

    def gpu(self, bus_id: str) -> GPUInfo:
        handle = self._call("nvmlDeviceGetHandleByPciBusId", bus_id)
        memory = self._call("nvmlDeviceGetMemoryInfo", handle)
        return GPUInfo(
            uuid=str(self._call("nvmlDeviceGetUUID", handle)),
            minor=int(self._call("nvmlDeviceGetMinorNumber", handle)),
            memory_total=int(memory.total),
            name=str(self._call("nvmlDeviceGetName", handle)),
        )
