"""The skeleton of a device-resource calculator (Koordinator's ``gpudeviceresource`` and
``rdmadevicereource`` share it line for line): recalculate on a Device's creation, deletion or spec
change; nothing to reset when colocation is off (devices are the node's whatever the strategy); check the
node, read its Device, and reset the calculator's resources when there is no Device or no healthy device
of the calculator's type on it."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from koord_framework.manager.noderesource import (
    ColocationStrategy,
    NodeResourcePlugin,
    ResourceItem,
    ResourceMetrics,
)
from koord_framework.plugin import ArgsT
from koord_lib_deviceresource.device import healthy_devices

__all__ = ["DEVICE_KIND", "DeviceResourceCalculator"]

DEVICE_KIND: Final = "Device"


class DeviceResourceCalculator(NodeResourcePlugin[ArgsT]):
    """Base of a calculator deriving node resources from the node's Device object. A subclass names its
    ``device_type`` (``gpu``, ``rdma``), ``resource_names`` and ``reset_message`` and builds the items
    from the healthy devices in ``device_items``."""

    device_type: ClassVar[str] = ""
    """The ``spec.devices[].type`` this calculator counts."""
    reset_message: ClassVar[str] = ""
    """The message of the items removing ``resource_names`` (Koordinator's ``ResetResourcesMsg``)."""
    watches: ClassVar[Sequence[str]] = (DEVICE_KIND,)

    def wants_event(self, kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
        """A Device created or deleted, or one whose ``spec`` changed (its labels alone do not
        re-calculate, as Koordinator's ``DeviceHandler.Update``)."""
        if kind != DEVICE_KIND:
            return False
        if old is None or new is None:
            return True
        return old.get("spec") != new.get("spec")

    def reset(self, node: Mapping[str, Any], message: str) -> list[ResourceItem]:
        """Nothing: the devices are the node's whatever the colocation strategy says (Koordinator's
        ``Reset`` returns no item)."""
        return []

    def calculate(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
    ) -> list[ResourceItem]:
        name = (node.get("metadata") or {}).get("name")
        if not name or (node.get("status") or {}).get("allocatable") is None:
            raise ValueError(
                f"node {name!r}: missing essential arguments (metadata.name, status.allocatable)"
            )
        if self.context is None:
            raise RuntimeError(f"{type(self).name} used before bind()")
        device = self.context.get(DEVICE_KIND, str(name))
        if device is None:
            return self.reset_items()
        # DeviceError is a ValueError naming the Device and the field: the controller's bad-input path.
        found = healthy_devices(device, self.device_type)
        if not found:
            return self.reset_items()
        return self.device_items(device, found)

    def reset_items(self) -> list[ResourceItem]:
        """Items removing every one of ``resource_names``."""
        return [ResourceItem(n, reset=True, message=self.reset_message) for n in self.resource_names]

    @abc.abstractmethod
    def device_items(
        self, device: Mapping[str, Any], found: Sequence[Mapping[str, Any]]
    ) -> list[ResourceItem]:
        """The items from ``found``, the Device's healthy devices of ``device_type`` (never empty)."""
