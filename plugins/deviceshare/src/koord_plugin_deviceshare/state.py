"""PreFilter's reading of a pod: device requests, hints, joint allocation, GPU requirements (``preparePod``).

Everything here is computed once per pod per cycle and stored in the cycle state; Filter, Score, Reserve and
preemption's AddPod/RemovePod read it. ``preemptible`` is the one mutable part: preemption what-ifs return a
victim's devices to it per node (and ``clone`` copies it, so one what-if never leaks into another).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import parse_resource_list
from koord_framework.api.selectors import LabelSelector, SelectorError, parse_label_selector
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import DeviceAllocations
from koord_plugin_deviceshare.nodedevice import DeviceResources, copy_resources
from koord_plugin_deviceshare.requests import (
    DeviceRequestError,
    GPURequirements,
    calc_desired_requests_and_count_for_gpu,
    get_pod_device_requests,
)

__all__ = [
    "ERR_NO_MATCHED_GPU_SHARED_RESOURCE_TEMPLATE",
    "DeviceHint",
    "JointAllocate",
    "PodDeviceState",
    "prepare_pod",
]

ERR_NO_MATCHED_GPU_SHARED_RESOURCE_TEMPLATE = "no matched GPU shared resource template"


@dataclass(frozen=True, slots=True)
class DeviceHint:
    """One device type's entry of ``device-allocate-hint``."""

    selector: LabelSelector | None = None
    vf_selector: LabelSelector | None = None
    allocate_strategy: str = ""
    required_topology_scope: str = ""
    exclusive_policy: str = ""


@dataclass(frozen=True, slots=True)
class JointAllocate:
    device_types: tuple[str, ...]
    required_scope: str = ""


@dataclass(slots=True)
class PodDeviceState:
    """Koordinator's ``preFilterState``."""

    skip: bool = True
    pod_requests: dict[str, dict[str, int]] = field(default_factory=dict)
    hints: dict[str, DeviceHint] = field(default_factory=dict)
    has_selectors: bool = False
    joint_allocate: JointAllocate | None = None
    primary_device_type: str = ""
    pod_fits_secondary_device_well_planned: bool = False
    gpu_requirements: GPURequirements | None = None
    allocation_result: DeviceAllocations | None = None
    preemptible: dict[str, dict[str, DeviceResources]] = field(default_factory=dict)
    """node -> type -> minor -> resources returned by preemption victims."""
    shape: tuple[object, ...] = ()
    """What Filter/Score verdicts depend on besides the node: pods of one shape share memoised verdicts."""

    def fresh(self) -> PodDeviceState:
        """A new cycle's state for a pod of this shape: the parsed request shared (read-only after
        PreFilter), no allocation and no preemption what-ifs yet."""
        return PodDeviceState(
            self.skip,
            self.pod_requests,
            self.hints,
            self.has_selectors,
            self.joint_allocate,
            self.primary_device_type,
            self.pod_fits_secondary_device_well_planned,
            self.gpu_requirements,
            None,
            {},
            self.shape,
        )

    def clone(self) -> PodDeviceState:
        copied = {
            node: {t: copy_resources(r) for t, r in per.items()} for node, per in self.preemptible.items()
        }
        return PodDeviceState(
            self.skip,
            self.pod_requests,
            self.hints,
            self.has_selectors,
            self.joint_allocate,
            self.primary_device_type,
            self.pod_fits_secondary_device_well_planned,
            self.gpu_requirements,
            self.allocation_result,
            copied,
            self.shape,
        )


class PodDeviceError(ValueError):
    """A pod's device request or device annotations cannot be used; ``reason`` is the status reason."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason if not detail else f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _selector(raw: Any, where: str) -> LabelSelector | None:
    if raw is None:
        return None
    try:
        return parse_label_selector(raw, where)
    except (SelectorError, ValueError, TypeError, AttributeError) as err:
        raise PodDeviceError(f"invalid {where.rsplit('.', 1)[-1]} of DeviceHint", str(err)) from err


def parse_hints(annotations: Mapping[str, str]) -> dict[str, DeviceHint]:
    raw = annotations.get(n.ANNOTATION_DEVICE_ALLOCATE_HINT)
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise PodDeviceError("invalid DeviceAllocateHint annotation", f"err: {err}") from err
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise PodDeviceError(
            "invalid DeviceAllocateHint annotation", "expected an object of device type to hint"
        )
    out: dict[str, DeviceHint] = {}
    for device_type, hint in data.items():
        if hint is None:
            continue
        if not isinstance(hint, Mapping):
            raise PodDeviceError(
                "invalid DeviceAllocateHint annotation", f"{device_type}: expected an object"
            )
        where = f"{n.ANNOTATION_DEVICE_ALLOCATE_HINT}.{device_type}"
        out[str(device_type)] = DeviceHint(
            selector=_selector(hint.get("selector"), f"{where}.Selector"),
            vf_selector=_selector(hint.get("vfSelector"), f"{where}.VFSelector"),
            allocate_strategy=str(hint.get("allocateStrategy") or ""),
            required_topology_scope=str(hint.get("requiredTopologyScope") or ""),
            exclusive_policy=str(hint.get("exclusivePolicy") or ""),
        )
    return out


def parse_joint_allocate(annotations: Mapping[str, str]) -> JointAllocate | None:
    raw = annotations.get(n.ANNOTATION_DEVICE_JOINT_ALLOCATE)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise PodDeviceError("invalid DeviceJointAllocate annotation", f"err: {err}") from err
    if not isinstance(data, Mapping):
        raise PodDeviceError("invalid DeviceJointAllocate annotation", "expected an object")
    types = data.get("deviceTypes") or []
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise PodDeviceError(
            "invalid DeviceJointAllocate annotation", "deviceTypes: expected a list of strings"
        )
    return JointAllocate(tuple(types), str(data.get("requiredScope") or ""))


def parse_partition_spec(annotations: Mapping[str, str]) -> tuple[str, int | None] | None:
    """(allocatePolicy, ringBusBandwidth) of ``gpu-partition-spec``; policy defaults to BestEffort."""
    raw = annotations.get(n.ANNOTATION_GPU_PARTITION_SPEC)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        if not isinstance(data, Mapping):
            raise ValueError("expected an object")
        bandwidth = data.get("ringBusBandwidth")
        bw = None if bandwidth is None else parse_resource_list({"bw": bandwidth})["bw"]
    except (json.JSONDecodeError, ValueError, QuantityError) as err:
        raise PodDeviceError("invalid GPUPartitionSpec annotation", f"err: {err}") from err
    return str(data.get("allocatePolicy") or n.PARTITION_BEST_EFFORT), bw


def prepare_pod(
    requests: Mapping[str, int],
    annotations: Mapping[str, str],
    template_matched_resources: tuple[str, ...] = (),
) -> PodDeviceState:
    """The pod's device state, or ``PodDeviceError`` (an UnschedulableAndUnresolvable reason)."""
    state = PodDeviceState()
    try:
        pod_requests = get_pod_device_requests(requests)
    except DeviceRequestError as err:
        raise PodDeviceError(err.reason, err.detail) from err
    state.pod_requests = pod_requests
    state.skip = not pod_requests
    if state.skip:
        return state
    hints = parse_hints(annotations)
    joint = parse_joint_allocate(annotations)
    if joint is not None:
        kept = tuple(
            t
            for t in joint.device_types
            if not (t in hints and hints[t].allocate_strategy == n.APPLY_FOR_ALL) and pod_requests.get(t)
        )
        joint = JointAllocate(kept, joint.required_scope)
    state.hints = hints
    state.has_selectors = any(h.selector is not None for h in hints.values())
    state.joint_allocate = joint
    if joint is not None and joint.device_types:
        state.primary_device_type = joint.device_types[0]
    state.gpu_requirements = _gpu_requirements(
        pod_requests, hints.get(n.GPU), annotations, template_matched_resources
    )
    state.pod_fits_secondary_device_well_planned = (
        state.gpu_requirements is not None and not state.gpu_requirements.gpu_shared
    )
    return state


def _gpu_requirements(
    pod_requests: Mapping[str, Mapping[str, int]],
    hint: DeviceHint | None,
    annotations: Mapping[str, str],
    template_matched_resources: tuple[str, ...],
) -> GPURequirements | None:
    gpu = pod_requests.get(n.GPU)
    if not gpu:
        return None
    spec = parse_partition_spec(annotations)
    per_gpu, count, shared = calc_desired_requests_and_count_for_gpu(gpu)
    req = GPURequirements(number_of_gpus=count, requests_per_gpu=per_gpu, gpu_shared=shared)
    if spec is not None:
        req.honor_gpu_partition = True
        req.restricted_gpu_partition = spec[0] == n.PARTITION_RESTRICTED
        req.ring_bus_bandwidth = spec[1]
    if hint is not None:
        req.required_topology_scope = hint.required_topology_scope
        req.required_topology_scope_level = n.TOPOLOGY_SCOPE_LEVEL.get(hint.required_topology_scope, 0)
    if shared and set(per_gpu) & set(template_matched_resources):
        # Koordinator then insists on a shared-resource template of the node's model; this plugin reads no
        # template ConfigMap yet, so no template can match (the same answer Koordinator gives without one).
        raise PodDeviceError(ERR_NO_MATCHED_GPU_SHARED_RESOURCE_TEMPLATE)
    return req
