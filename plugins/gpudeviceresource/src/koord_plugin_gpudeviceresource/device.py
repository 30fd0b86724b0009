"""Reading the Device object (``scheduling.koordinator.sh/v1alpha1``) of a node: its healthy devices of one
type and the sum of their resources, with errors naming the object and the field."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import to_int

__all__ = ["DeviceError", "healthy_devices", "sum_resources"]


class DeviceError(ValueError):
    """A Device object this calculator cannot read; the message names the object and the field."""


def _name(device: Mapping[str, Any]) -> str:
    return str((device.get("metadata") or {}).get("name") or "")


def healthy_devices(device: Mapping[str, Any], device_type: str) -> list[Mapping[str, Any]]:
    """``spec.devices`` entries of ``device_type`` whose ``health`` is true (a missing ``health`` is false,
    as Go's zero value)."""
    spec = device.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise DeviceError(f"Device {_name(device)!r}: spec is not an object")
    entries = spec.get("devices") or []
    if not isinstance(entries, list):
        raise DeviceError(f"Device {_name(device)!r}: spec.devices is not a list")
    found: list[Mapping[str, Any]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise DeviceError(f"Device {_name(device)!r}: spec.devices[{i}] is not an object")
        health = entry.get("health", False)
        if not isinstance(health, bool):
            raise DeviceError(f"Device {_name(device)!r}: spec.devices[{i}].health is not a boolean")
        if entry.get("type") == device_type and health:
            found.append(entry)
    return found


def sum_resources(device: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The sum of ``resources`` over ``entries`` (``Value()`` of each quantity, by resource name)."""
    totals: dict[str, int] = {}
    for entry in entries:
        where = f"Device {_name(device)!r}: spec.devices[uuid={entry.get('uuid')!r}].resources"
        resources = entry.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise DeviceError(f"{where} is not an object")
        for name, raw in resources.items():
            try:
                value = to_int(str(name), raw)
            except (QuantityError, ValueError, TypeError) as exc:
                raise DeviceError(f"{where}[{name!r}] is not a quantity: {exc}") from exc
            totals[str(name)] = totals.get(str(name), 0) + value
    return totals
