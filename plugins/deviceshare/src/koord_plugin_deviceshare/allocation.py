"""The ``scheduling.koordinator.sh/device-allocated`` annotation: what a pod got, device by device.

Shape (Koordinator's ``apiext.DeviceAllocations``)::

    {"gpu":  [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "100",
                                        "koordinator.sh/gpu-memory": "80Gi",
                                        "koordinator.sh/gpu-memory-ratio": "100"},
               "id": "GPU-8c25ea37-..."}],
     "rdma": [{"minor": 1, "resources": {"koordinator.sh/rdma": "1"}, "id": "0000:1f:00.0",
               "extension": {"vfs": [{"busID": "0000:1f:00.2"}]}}]}

``id`` and ``extension`` are omitted when empty, and so is a VF's ``minor`` when 0 (Go ``omitempty``).
Decoding is strict: a malformed annotation is an error naming the pod and the field, never a partial read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any

from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import parse_resource_list
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.requests import format_value

__all__ = [
    "AllocationError",
    "DeviceAllocation",
    "DeviceAllocations",
    "VFAllocation",
    "decode_allocations",
    "encode_allocations",
    "to_wire",
]


class AllocationError(ValueError):
    """A ``device-allocated`` annotation that cannot be read."""


@dataclass(frozen=True, slots=True)
class VFAllocation:
    bus_id: str
    minor: int = 0


@dataclass(slots=True)
class DeviceAllocation:
    minor: int
    resources: dict[str, int]
    id: str = ""
    vfs: tuple[VFAllocation, ...] = ()
    shared_resource_template: str = ""


DeviceAllocations = dict[str, list[DeviceAllocation]]


_WIRE_CACHE: dict[tuple[tuple[str, int], ...], dict[str, str]] = {}
_WIRE_CACHE_LIMIT = 4096


def _wire_resources(resources: Mapping[str, int]) -> dict[str, str]:
    """A device's resources as the annotation prints them; allocations repeat a few shapes (a whole GPU, a
    quarter of one, ...), so each is formatted once (a fresh dict per call: callers may keep it)."""
    key = tuple(sorted(resources.items()))
    wire = _WIRE_CACHE.get(key)
    if wire is None:
        if len(_WIRE_CACHE) >= _WIRE_CACHE_LIMIT:
            _WIRE_CACHE.clear()
        wire = _WIRE_CACHE[key] = {k: format_value(k, v) for k, v in key}
    return dict(wire)


def to_wire(allocations: Mapping[str, list[DeviceAllocation]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for device_type, allocs in allocations.items():
        rows = []
        for a in allocs:
            row: dict[str, Any] = {"minor": a.minor, "resources": _wire_resources(a.resources)}
            if a.id:
                row["id"] = a.id
            ext: dict[str, Any] = {}
            if a.vfs:
                ext["vfs"] = [
                    ({"minor": vf.minor} if vf.minor else {}) | ({"busID": vf.bus_id} if vf.bus_id else {})
                    for vf in a.vfs
                ]
            if a.shared_resource_template:
                ext["gpuSharedResourceTemplate"] = a.shared_resource_template
            if ext:
                row["extension"] = ext
            rows.append(row)
        out[device_type] = rows
    return out


_SEPARATORS = (",", ":")
_RESOURCES_JSON: dict[tuple[tuple[str, int], ...], str] = {}


def _resources_json(resources: Mapping[str, int]) -> str:
    """``_wire_resources`` already serialised: the same few shapes recur on every PreBind."""
    key = tuple(sorted(resources.items()))
    text = _RESOURCES_JSON.get(key)
    if text is None:
        if len(_RESOURCES_JSON) >= _WIRE_CACHE_LIMIT:
            _RESOURCES_JSON.clear()
        text = _RESOURCES_JSON[key] = json.dumps(
            {k: format_value(k, v) for k, v in key}, separators=_SEPARATORS
        )
    return text


def encode_allocations(allocations: Mapping[str, list[DeviceAllocation]]) -> str:
    """``json.dumps(to_wire(allocations))`` (compact), byte for byte, written directly: PreBind encodes one
    annotation per device pod, and building the wire dicts first cost more than the text itself."""
    quote = encode_basestring_ascii
    parts: list[str] = []
    for device_type, allocs in allocations.items():
        rows: list[str] = []
        for a in allocs:
            row = f'{{"minor":{int(a.minor)},"resources":{_resources_json(a.resources)}'
            if a.id:
                row += f',"id":{quote(a.id)}'
            if a.vfs or a.shared_resource_template:
                # Rare (RDMA VFs, shared templates): the generic path, same key order as ``to_wire``.
                ext = to_wire({"": [a]})[""][0]["extension"]
                row += f',"extension":{json.dumps(ext, separators=_SEPARATORS)}'
            rows.append(row + "}")
        parts.append(f"{quote(device_type)}:[{','.join(rows)}]")
    return "{" + ",".join(parts) + "}"


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AllocationError(f"{where}: expected an integer, got {value!r}")
    return value


def decode_allocations(raw: str, where: str = n.ANNOTATION_DEVICE_ALLOCATED) -> DeviceAllocations:
    """Parse the annotation value; ``AllocationError`` names the field at fault."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise AllocationError(f"{where}: not JSON: {err}") from err
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise AllocationError(f"{where}: expected an object of device type to allocations")
    out: DeviceAllocations = {}
    for device_type, rows in data.items():
        if rows is None:
            continue
        if not isinstance(rows, list):
            raise AllocationError(f"{where}.{device_type}: expected a list")
        allocs = []
        for i, row in enumerate(rows):
            rw = f"{where}.{device_type}[{i}]"
            if not isinstance(row, Mapping):
                raise AllocationError(f"{rw}: expected an object")
            try:
                resources = parse_resource_list(row.get("resources") or {}, path=f"{rw}.resources")
            except QuantityError as err:
                raise AllocationError(str(err)) from err
            ext = row.get("extension") or {}
            if not isinstance(ext, Mapping):
                raise AllocationError(f"{rw}.extension: expected an object")
            vfs = []
            for j, vf in enumerate(ext.get("vfs") or ()):
                if not isinstance(vf, Mapping):
                    raise AllocationError(f"{rw}.extension.vfs[{j}]: expected an object")
                vfs.append(
                    VFAllocation(str(vf.get("busID") or ""), _int(vf.get("minor", 0), f"{rw}.vfs[{j}].minor"))
                )
            allocs.append(
                DeviceAllocation(
                    minor=_int(row.get("minor", 0), f"{rw}.minor"),
                    resources=resources,
                    id=str(row.get("id") or ""),
                    vfs=tuple(vfs),
                    shared_resource_template=str(ext.get("gpuSharedResourceTemplate") or ""),
                )
            )
        out[str(device_type)] = allocs
    return out
