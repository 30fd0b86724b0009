"""Reading the Device object (``scheduling.koordinator.sh/v1alpha1``) of a node: its healthy devices of one
type and the sum of their resources, with errors naming the object and the field.

The sums are ``Quantity`` objects added the way Go's ``Quantity.Add`` adds them, because koord-manager
writes them to the node as Go serialises them: the sum keeps the suffix family of the running total
unless that total is still zero, when it takes the addend's (so two ``8Gi`` make ``16Gi`` and ``8000`` +
``10000`` make ``18k``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord_framework.api.quantity import Quantity, QuantityError

__all__ = ["DeviceError", "add_quantity", "healthy_devices", "sum_resources"]


class DeviceError(ValueError):
    """A Device object a calculator cannot read; the message names the object and the field."""


def _name(device: Mapping[str, Any]) -> str:
    return str((device.get("metadata") or {}).get("name") or "")


def add_quantity(total: Quantity, addend: Quantity) -> Quantity:
    """``total + addend`` with Go's ``Quantity.Add`` format rule (the total's family, or the addend's while
    the total is zero)."""
    fmt = addend.format if total.is_zero() else total.format
    return Quantity.from_nano(total.nano_value() + addend.nano_value(), fmt)


def healthy_devices(device: Mapping[str, Any], device_type: str) -> list[Mapping[str, Any]]:
    """``spec.devices`` entries of ``device_type`` whose ``health`` is true (a missing ``health`` is false,
    as Go's zero value); every entry is checked, whatever its type."""
    # ``is None`` rather than ``or``: an empty string or object where a list belongs is an error too.
    spec = device.get("spec")
    spec = {} if spec is None else spec
    if not isinstance(spec, Mapping):
        raise DeviceError(f"Device {_name(device)!r}: spec is not an object")
    entries = spec.get("devices")
    entries = [] if entries is None else entries
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


def sum_resources(device: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> dict[str, Quantity]:
    """The sum of ``resources`` over ``entries``, by resource name (Koordinator's ``AddResourceList``)."""
    totals: dict[str, Quantity] = {}
    for entry in entries:
        where = f"Device {_name(device)!r}: spec.devices[uuid={entry.get('uuid')!r}].resources"
        resources = entry.get("resources")
        resources = {} if resources is None else resources
        if not isinstance(resources, Mapping):
            raise DeviceError(f"{where} is not an object")
        for name, raw in resources.items():
            try:
                # JSON null decodes to a zero quantity in Go, as everywhere else in the project.
                value = Quantity.parse(raw if raw is not None else 0)
            except (QuantityError, ValueError, TypeError) as exc:
                raise DeviceError(f"{where}[{name!r}] is not a quantity: {exc}") from exc
            key = str(name)
            totals[key] = add_quantity(totals[key], value) if key in totals else value
    return totals
