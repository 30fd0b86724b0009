"""The GPU env-inject hook (PreCreateContainer): ``NVIDIA_VISIBLE_DEVICES`` from the GPUs the scheduler's
DeviceShare wrote into ``scheduling.koordinator.sh/device-allocated``, plus HAMi-core's env and mounts for
a shared GPU when the pod asks for that isolation provider."""

from __future__ import annotations

import json
import os
import posixpath
import shutil
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.koordlet.runtimehooks import (
    ContainerRequest,
    ContainerResponse,
    HookError,
    Mount,
    RuntimeHook,
    RuntimeHookArgs,
    hookimpl,
)

__all__ = ["ANNOTATION_DEVICE_ALLOCATED", "GPUEnvInject", "GPUEnvInjectArgs", "gpu_allocations"]

ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
LABEL_GPU_ISOLATION_PROVIDER = "koordinator.sh/gpu-isolation-provider"
HAMI_CORE = "HAMi-core"
GPU_ALLOC_ENV = "NVIDIA_VISIBLE_DEVICES"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
VGPU_LOCK_DIR = "/tmp/vgpulock"


class GPUEnvInjectArgs(RuntimeHookArgs):
    """GPUEnvInject's args (Koordinator's ``GPUEnvInject`` gate is off by default)."""

    hami_core_library_path: str = "/usr/local/vgpu/libvgpu.so"
    """HAMi-core's library on the host, preloaded into shared-GPU containers (Koordinator's
    ``HAMICoreLibraryDirectoryPath``)."""
    hami_core_vgpu_monitor: bool = False
    """Koordinator's ``HamiCoreVGPUMonitor`` gate: a per-container cache file and dir for HAMi's monitor."""
    create_monitor_dir: bool = Field(default=True)
    """Create the per-container monitor dir on the host (mode 0777) before the bind mount needs it."""


def _fail(message: str) -> HookError:
    return HookError(f"annotation {ANNOTATION_DEVICE_ALLOCATED}: {message}")


def gpu_allocations(annotations: Mapping[str, str]) -> list[dict[str, Any]]:
    """The ``gpu`` entries of the annotation, validated (``[]`` when the pod has none)."""
    raw = annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if raw is None:
        return []
    try:
        alloc = json.loads(raw)
    except (TypeError, ValueError) as err:
        raise _fail(f"not JSON: {err}") from None
    if not isinstance(alloc, dict):
        raise _fail("must be an object of device type to allocations")
    gpus = alloc.get("gpu")
    if gpus is None:
        return []
    if not isinstance(gpus, list):
        raise _fail("gpu must be a list")
    for i, d in enumerate(gpus):
        if not isinstance(d, dict):
            raise _fail(f"gpu[{i}] must be an object")
        minor = d.get("minor", 0)
        if not isinstance(minor, int) or isinstance(minor, bool) or minor < 0:
            raise _fail(f"gpu[{i}].minor must be a non-negative integer, got {minor!r}")
        if not isinstance(d.get("resources", {}), dict):
            raise _fail(f"gpu[{i}].resources must be an object")
    return gpus


def _quantity(resources: Mapping[str, Any], name: str) -> int | None:
    if name not in resources:
        return None
    try:
        return Quantity(str(resources[name])).value()
    except QuantityError as err:
        raise _fail(f"gpu[0].resources.{name}: {err}") from None


class GPUEnvInject(RuntimeHook[GPUEnvInjectArgs]):
    name: ClassVar[str] = "GPUEnvInject"
    Args = GPUEnvInjectArgs
    feature_gate: ClassVar[str] = "GPUEnvInject"

    @hookimpl
    def pre_create_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        gpus = gpu_allocations(request.pod_annotations)
        if not gpus:
            return
        env = response.add_env
        env[GPU_ALLOC_ENV] = ",".join(str(d.get("minor", 0)) for d in gpus)
        if request.pod_labels.get(LABEL_GPU_ISOLATION_PROVIDER) != HAMI_CORE:
            return
        resources = gpus[0].get("resources") or {}
        ratio = _quantity(resources, GPU_MEMORY_RATIO)
        if ratio is None:
            raise _fail(f"gpu[0].resources has no {GPU_MEMORY_RATIO} (needed by {HAMI_CORE})")
        if ratio >= 100:
            return  # a whole GPU: nothing to isolate
        memory = _quantity(resources, GPU_MEMORY)
        if memory is None:
            raise _fail(f"gpu[0].resources has no {GPU_MEMORY} (needed by {HAMI_CORE})")
        env["CUDA_DEVICE_MEMORY_LIMIT"] = str(memory)
        core = _quantity(resources, GPU_CORE)
        if core is not None:
            env["CUDA_DEVICE_SM_LIMIT"] = str(core)
        lib = self.args.hami_core_library_path
        env["LD_PRELOAD"] = lib
        response.add_mounts.append(Mount(lib, lib, "bind", ("rbind",)))
        # HAMi needs a shared lock dir (Project-HAMi/HAMi#696).
        response.add_mounts.append(Mount(VGPU_LOCK_DIR, VGPU_LOCK_DIR, "bind", ("rbind",)))
        if self.args.hami_core_vgpu_monitor:
            hami_dir = posixpath.dirname(lib)
            who = f"{request.pod_meta.uid}_{request.container_meta.name}"
            env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = f"{hami_dir}/{who}.cache"
            host_dir = f"{hami_dir}/containers/{who}"
            if self.args.create_monitor_dir:
                self._fresh_dir(host_dir)
            response.add_mounts.append(Mount(hami_dir, host_dir, "bind", ("rbind",)))

    @staticmethod
    def _fresh_dir(path: str) -> None:
        """An empty, world-writable dir for HAMi's monitor (what Koordinator creates before the mount)."""
        shutil.rmtree(path, ignore_errors=True)
        try:
            os.makedirs(path, mode=0o777, exist_ok=True)
            os.chmod(path, 0o777)
        except OSError as err:
            raise HookError(f"cannot create the HAMi monitor dir {path}: {err}") from None
