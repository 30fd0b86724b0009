"""The ``Device`` object (``scheduling.koordinator.sh/v1alpha1``, one per node), parsed and checked.

The framework only knows the kind; what a Device means is this plugin's business, so the checks live here:
every field DeviceShare reads is type-checked, a device must have a ``minor``, and no two devices of one type
may share a minor (the allocator and the ``device-allocated`` annotation address devices by minor; two
devices behind one minor would be handed out twice). Errors name the Device and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import parse_resource_list
from koord_plugin_deviceshare import names as n

__all__ = [
    "DeviceError",
    "DeviceInfo",
    "DeviceTopology",
    "GPUPartition",
    "ParsedDevice",
    "VirtualFunction",
    "VirtualFunctionGroup",
    "parse_device",
]


class DeviceError(ValueError):
    """A Device object DeviceShare cannot use; the message names the object and the field."""


@dataclass(frozen=True, slots=True)
class DeviceTopology:
    socket_id: int
    node_id: int
    pcie_id: str
    bus_id: str = ""


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    minor: int
    bus_id: str


@dataclass(frozen=True, slots=True)
class VirtualFunctionGroup:
    labels: Mapping[str, str]
    vfs: tuple[VirtualFunction, ...]


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One entry of ``spec.devices``."""

    type: str
    minor: int
    uuid: str = ""
    health: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, int] = field(default_factory=dict)
    topology: DeviceTopology | None = None
    vf_groups: tuple[VirtualFunctionGroup, ...] = ()
    module_id: int | None = None


@dataclass(frozen=True, slots=True)
class GPUPartition:
    """One row of a GPU partition table: GPUs that work well together (e.g. one NVLink island)."""

    minors: tuple[int, ...]
    minors_hash: int
    allocation_score: int = 0
    gpu_link_type: str = ""
    ring_bus_bandwidth: int | None = None


@dataclass(frozen=True, slots=True)
class ParsedDevice:
    name: str
    labels: Mapping[str, str]
    devices: tuple[DeviceInfo, ...]
    partition_table: dict[int, list[GPUPartition]] | None

    def of_type(self, device_type: str) -> list[DeviceInfo]:
        return [d for d in self.devices if d.type == device_type]

    @property
    def honor_gpu_partition(self) -> bool:
        return self.labels.get(n.LABEL_GPU_PARTITION_POLICY) == n.GPU_PARTITION_POLICY_HONOR

    @property
    def secondary_device_well_planned(self) -> bool:
        return self.labels.get(n.LABEL_SECONDARY_DEVICE_WELL_PLANNED) == "true"


def hash_minors(minors: Iterable[int]) -> int:
    """A bit per minor: partitions and used sets compare as integers."""
    out = 0
    for minor in minors:
        out |= 1 << minor
    return out


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DeviceError(f"{where}: expected an integer, got {value!r}")
    return value


def _str(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DeviceError(f"{where}: expected a string, got {value!r}")
    return value


def _labels(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise DeviceError(f"{where}: expected a map of strings")
    return dict(value)


def _topology(raw: Any, where: str) -> DeviceTopology | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise DeviceError(f"{where}: expected an object")
    return DeviceTopology(
        socket_id=_int(raw.get("socketID", 0), f"{where}.socketID"),
        node_id=_int(raw.get("nodeID", 0), f"{where}.nodeID"),
        pcie_id=_str(raw.get("pcieID"), f"{where}.pcieID"),
        bus_id=_str(raw.get("busID"), f"{where}.busID"),
    )


def _vf_groups(raw: Any, where: str) -> tuple[VirtualFunctionGroup, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise DeviceError(f"{where}: expected a list")
    groups = []
    for i, group in enumerate(raw):
        gw = f"{where}[{i}]"
        if not isinstance(group, Mapping):
            raise DeviceError(f"{gw}: expected an object")
        vfs = []
        for j, vf in enumerate(group.get("vfs") or ()):
            if not isinstance(vf, Mapping):
                raise DeviceError(f"{gw}.vfs[{j}]: expected an object")
            vfs.append(
                VirtualFunction(
                    _int(vf.get("minor", 0), f"{gw}.vfs[{j}].minor"),
                    _str(vf.get("busID"), f"{gw}.vfs[{j}].busID"),
                )
            )
        groups.append(VirtualFunctionGroup(_labels(group.get("labels"), f"{gw}.labels"), tuple(vfs)))
    return tuple(groups)


def _device_info(raw: Any, where: str) -> DeviceInfo:
    if not isinstance(raw, Mapping):
        raise DeviceError(f"{where}: expected an object")
    if raw.get("minor") is None:
        raise DeviceError(f"{where}.minor: required (devices are allocated by minor)")
    minor = _int(raw["minor"], f"{where}.minor")
    if minor < 0:
        raise DeviceError(f"{where}.minor: must not be negative, got {minor}")
    health = raw.get("health", False)
    if not isinstance(health, bool):
        raise DeviceError(f"{where}.health: expected true or false, got {health!r}")
    try:
        resources = parse_resource_list(raw.get("resources") or {}, path=f"{where}.resources")
    except QuantityError as err:
        raise DeviceError(str(err)) from err
    module = raw.get("moduleID")
    return DeviceInfo(
        type=_str(raw.get("type"), f"{where}.type"),
        minor=minor,
        uuid=_str(raw.get("id"), f"{where}.id"),
        health=health,
        labels=_labels(raw.get("labels"), f"{where}.labels"),
        resources=resources,
        topology=_topology(raw.get("topology"), f"{where}.topology"),
        vf_groups=_vf_groups(raw.get("vfGroups"), f"{where}.vfGroups"),
        module_id=None if module is None else _int(module, f"{where}.moduleID"),
    )


def _partition_table(raw: str, where: str) -> dict[int, list[GPUPartition]]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise DeviceError(f"{where}: not JSON: {err}") from err
    if not isinstance(data, Mapping):
        raise DeviceError(f"{where}: invalid gpu partitions in device cr: {raw}")
    table: dict[int, list[GPUPartition]] = {}
    for key, rows in data.items():
        try:
            count = int(key)
        except ValueError as err:
            raise DeviceError(f"{where}: key {key!r} is not a number of GPUs") from err
        if not isinstance(rows, Sequence):
            raise DeviceError(f"{where}[{key}]: expected a list of partitions")
        parsed = []
        for i, row in enumerate(rows):
            rw = f"{where}[{key}][{i}]"
            if not isinstance(row, Mapping):
                raise DeviceError(f"{rw}: expected an object")
            minors = tuple(_int(m, f"{rw}.minors") for m in row.get("minors") or ())
            bandwidth = row.get("ringBusBandwidth")
            bw: int | None = None
            if bandwidth is not None:
                try:
                    bw = parse_resource_list({"bw": bandwidth})["bw"]
                except QuantityError as err:
                    raise DeviceError(f"{rw}.ringBusBandwidth: {err}") from err
            parsed.append(
                GPUPartition(
                    minors=minors,
                    minors_hash=hash_minors(minors),
                    allocation_score=_int(row.get("allocationScore", 0), f"{rw}.allocationScore"),
                    gpu_link_type=_str(row.get("gpuLinkType"), f"{rw}.gpuLinkType"),
                    ring_bus_bandwidth=bw,
                )
            )
        table[count] = parsed
    return table


def parse_device(obj: Mapping[str, Any]) -> ParsedDevice:
    """Parse and check a Device manifest; ``DeviceError`` names the object and the field at fault."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    prefix = f"Device {name or '<unnamed>'}"
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise DeviceError(f"{prefix}: spec: expected an object")
    raw_devices = spec.get("devices") or []
    if not isinstance(raw_devices, Sequence) or isinstance(raw_devices, str):
        raise DeviceError(f"{prefix}: spec.devices: expected a list")
    devices: list[DeviceInfo] = []
    seen: dict[tuple[str, int], int] = {}
    for i, raw in enumerate(raw_devices):
        try:
            info = _device_info(raw, f"spec.devices[{i}]")
        except DeviceError as err:
            raise DeviceError(f"{prefix}: {err}") from err
        first = seen.setdefault((info.type, info.minor), i)
        if first != i:
            raise DeviceError(
                f"{prefix}: spec.devices[{i}].minor: duplicate minor {info.minor} of type {info.type} "
                f"(also spec.devices[{first}])"
            )
        devices.append(info)
    annotations = meta.get("annotations") or {}
    table = None
    raw_table = annotations.get(n.ANNOTATION_GPU_PARTITIONS) if isinstance(annotations, Mapping) else None
    if raw_table:
        try:
            table = _partition_table(raw_table, f"metadata.annotations[{n.ANNOTATION_GPU_PARTITIONS}]")
        except DeviceError as err:
            raise DeviceError(f"{prefix}: {err}") from err
    labels = meta.get("labels") or {}
    return ParsedDevice(name, dict(labels) if isinstance(labels, Mapping) else {}, tuple(devices), table)
