"""The device rule of koord-manager's pod validating webhook (Koordinator's ``verify_device_resource.go``:
``deviceResourceValidatingPod``; gate ``ValidatePodDeviceResource``, alpha, off by default, under
``PodValidatingWebhook``).

Per container, on CREATE and UPDATE: ``koordinator.sh/gpu`` and ``koordinator.sh/gpu.shared`` not both;
``gpu`` above zero and, above 100, a multiple of 100; ``gpu.shared`` above zero and -- unless the container
asks for ``huawei.com/npu-core`` -- exactly one of ``gpu-memory`` / ``gpu-memory-ratio``, with ``gpu-core``
and ``gpu-memory-ratio`` multiples of the shared count. Messages are Kubernetes field errors, as Koordinator
aggregates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.plugin import NoArgs
from koord_plugin_deviceshare.names import (
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    HUAWEI_NPU_CORE,
    KOORD_GPU,
)

__all__ = ["DeviceResourceValidation", "validate_device_resource"]

_PATH = "pod.spec.containers[*].resources.requests"


def _forbidden(detail: str) -> str:
    return f"{_PATH}: Forbidden: {detail}"


def _invalid(value: Quantity, detail: str) -> str:
    return f'{_PATH}: Invalid value: "{value}": {detail}'


def _requests(container: Any, i: int) -> Mapping[str, Quantity]:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    if not isinstance(requests, Mapping):
        return {}
    out = {}
    for name in (KOORD_GPU, GPU_SHARED, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, HUAWEI_NPU_CORE):
        if name in requests:
            try:
                out[name] = Quantity.parse(requests[name])
            except (QuantityError, TypeError) as exc:
                raise ValueError(f"spec.containers[{i}].resources.requests[{name}]: {exc}") from None
    return out


def _gpu_share(req: Mapping[str, Quantity]) -> list[str]:
    zero = Quantity.parse(0)
    errs = []
    shared = req[GPU_SHARED]
    if shared.value() == 0:
        errs.append(_invalid(shared, "the requested GPU must be greater than zero"))
    memory, ratio = req.get(GPU_MEMORY, zero), req.get(GPU_MEMORY_RATIO, zero)
    core, npu_core = req.get(GPU_CORE, zero), req.get(HUAWEI_NPU_CORE, zero)
    if npu_core.value() != 0:
        return errs  # an NPU share is described by its template, not by memory / ratio
    if memory.value() == 0 and ratio.value() == 0:
        errs.append(_forbidden("GPU memory and GPU memory ratio all is zero"))
    if memory.value() != 0 and ratio.value() != 0:
        errs.append(_forbidden("declare GPU memory and GPU memory ratio at same time"))
    if shared.value() != 0:
        if core.value() % shared.value() != 0:
            errs.append(_invalid(core, "the requested gpuCore must multiple of shared"))
        if ratio.value() % shared.value() != 0:
            errs.append(_invalid(ratio, "the requested gpuMemoryRatio must multiple of shared"))
    return errs


def validate_device_resource(pod: Mapping[str, Any]) -> list[str]:
    """``validateDeviceResource``: the field errors of ``pod``'s containers (empty: valid)."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    errs: list[str] = []
    for i, container in enumerate(containers if isinstance(containers, list) else []):
        req = _requests(container, i)
        if KOORD_GPU in req and GPU_SHARED in req:
            errs.append(_forbidden("Forbidden declare GPU and GPU share at same time"))
            continue
        if KOORD_GPU in req:
            gpu = req[KOORD_GPU]
            if gpu.value() == 0:
                errs.append(_invalid(gpu, "the requested GPU must be greater than zero"))
            if gpu.value() > 100 and gpu.value() % 100 != 0:
                errs.append(_invalid(gpu, "the requested GPU must be percentage of 100"))
        if GPU_SHARED in req:
            errs.extend(_gpu_share(req))
    return errs


class DeviceResourceValidation(AdmissionHandler[NoArgs]):
    """Refuses pods whose GPU requests the device scheduler could not read as one request."""

    name = "DeviceResourceValidation"
    Args = NoArgs
    path: ClassVar[str] = "/validate-pod"
    order: ClassVar[int] = 50  # after the quota rules, before the enhanced validator (Koordinator's order)
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    gate: ClassVar[str] = "PodValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if not self.gates.enabled("ValidatePodDeviceResource"):
            return
        if request.operation not in ("CREATE", "UPDATE"):
            return
        errs = validate_device_resource(obj)
        if errs:
            # field.ErrorList.ToAggregate(): one as is, several in brackets; Koordinator answers 400.
            raise Denied(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]", 400)
