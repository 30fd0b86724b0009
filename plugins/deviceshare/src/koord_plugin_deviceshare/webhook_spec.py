"""The device step of koord-manager's ``/mutate-pod`` (Koordinator's ``device_resource_spec.go``:
``deviceResourceSpecMutatingPod``, on CREATE; on by default, off with ``DisableDeviceResourceSpec``).

Per container asking for any GPU resource (requests or limits): ``koordinator.sh/gpu: N`` becomes
``gpu-core: N`` and ``gpu-memory-ratio: N`` (requests and limits, ``gpu`` removed); then, unless the
container requests ``koordinator.sh/gpu.shared``, it gets ``gpu.shared`` in requests and limits: the
memory ratio (else the core) divided by 100 when that is a multiple of 100 above 100, else 1. The scheduler's
DeviceShare plugin reads the shared count to place the pod on that many GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest
from koord_framework.plugin import NoArgs
from koord_plugin_deviceshare.names import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED, KOORD_GPU

__all__ = ["DeviceResourceSpec", "mutate_device_resources"]

_GPU_RESOURCES = (KOORD_GPU, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED)


def _quantity(resources: Mapping[str, Any], name: str, where: str) -> Quantity | None:
    if name not in resources:
        return None
    try:
        return Quantity.parse(resources[name])
    except (QuantityError, TypeError) as exc:
        raise ValueError(f"{where}[{name}]: {exc}") from None


def _resources(container: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    resources = container.get("resources")
    if resources is None:
        return {}, {}
    if not isinstance(resources, dict):
        raise ValueError(f"{where}.resources: expected an object")
    out = []
    for key in ("requests", "limits"):
        value = resources.get(key)
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"{where}.resources.{key}: expected an object")
        out.append(value if value is not None else {})
    return out[0], out[1]


def _set(container: dict[str, Any], key: str, name: str, value: Quantity) -> None:
    container.setdefault("resources", {}).setdefault(key, {})[name] = str(value)


def _shared_count(requests: Mapping[str, Any], where: str) -> int:
    ratio = _quantity(requests, GPU_MEMORY_RATIO, where)
    core = _quantity(requests, GPU_CORE, where)
    basis = ratio if ratio is not None else core
    if basis is not None and basis.value() > 100 and basis.value() % 100 == 0:
        return basis.value() // 100
    return 1


def mutate_device_resources(pod: dict[str, Any]) -> bool:
    """``mutateByDeviceResources`` on ``pod`` in place; whether anything changed."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or [] if isinstance(spec, dict) else []
    if not isinstance(containers, list):
        raise ValueError("spec.containers: expected a list")
    mutated = False
    for i, container in enumerate(containers):
        where = f"spec.containers[{i}]"
        if not isinstance(container, dict):
            raise ValueError(f"{where}: expected an object")
        requests, limits = _resources(container, where)
        if not any(n in requests or n in limits for n in _GPU_RESOURCES):
            continue
        had_shared = GPU_SHARED in requests
        if KOORD_GPU in requests:
            count = _quantity(requests, KOORD_GPU, f"{where}.resources.requests")
            assert count is not None
            value = Quantity.from_int(count.value())
            for key in ("requests", "limits"):
                _set(container, key, GPU_CORE, value)
                _set(container, key, GPU_MEMORY_RATIO, value)
            container["resources"]["requests"].pop(KOORD_GPU, None)
            container["resources"]["limits"].pop(KOORD_GPU, None)
            mutated = True
        if not had_shared:
            shared = Quantity.from_int(_shared_count(container["resources"].get("requests") or {}, where))
            for key in ("requests", "limits"):
                _set(container, key, GPU_SHARED, shared)
            mutated = True
    return mutated


class DeviceResourceSpec(AdmissionHandler[NoArgs]):
    """Turns a pod's whole-GPU and GPU-share requests into the resources DeviceShare schedules by."""

    name = "DeviceResourceSpec"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-pod"
    mutating: ClassVar[bool] = True
    order: ClassVar[int] = 40  # Koordinator's handleCreate runs it last, after the multi-quota-tree step
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    gate: ClassVar[str] = "PodMutatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        # Koordinator's handleUpdate mutates nothing: only pods being created.
        if request.operation != "CREATE" or self.gates.enabled("DisableDeviceResourceSpec"):
            return
        mutate_device_resources(obj)
