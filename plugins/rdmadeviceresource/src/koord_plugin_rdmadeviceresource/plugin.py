"""``RDMADeviceResource``: the node's ``koordinator.sh/rdma`` from its Device object (Koordinator's
``noderesource/plugins/rdmadevicereource``).

Each healthy RDMA physical function on the node's Device object is worth 100 of ``koordinator.sh/rdma``
(the unit the DeviceShare scheduler plugin allocates in: a share of one NIC), written into the node's
capacity and allocatable. No Device, or no healthy RDMA device on it, removes the resource; the colocation
strategy does not matter (turning colocation off leaves it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from koord_framework.manager.noderesource import (
    ColocationStrategy,
    NodeResourcePlugin,
    ResourceItem,
    ResourceMetrics,
)
from koord_framework.plugin import NoArgs

__all__ = ["RESOURCE_RDMA", "RDMADeviceResource", "RDMADeviceResourceArgs"]

PLUGIN_NAME: Final = "RDMADeviceResource"
DEVICE_KIND: Final = "Device"
RESOURCE_RDMA: Final = "koordinator.sh/rdma"
RESOURCE_NAMES: Final = (RESOURCE_RDMA,)
RDMA_PER_DEVICE: Final = 100
"""``koordinator.sh/rdma`` advertised per healthy RDMA physical function."""

RESET_RESOURCES_MSG: Final = "reset node rdma resources"
UPDATE_RESOURCES_MSG: Final = "node rdma resources from device"
NEED_SYNC_FOR_RESOURCE_DIFF_MSG: Final = "rdma resource diff is big than threshold"


class RDMADeviceResourceArgs(NoArgs):
    """RDMADeviceResource takes no args: it counts what the node's Device object reports."""


def healthy_rdma_count(device: Mapping[str, Any]) -> int:
    """The healthy ``type: rdma`` entries of ``spec.devices``; raises ``ValueError`` naming the Device and
    the field when the spec is not the Device shape."""
    name = str((device.get("metadata") or {}).get("name") or "")
    spec = device.get("spec") or {}
    entries = (spec.get("devices") or []) if isinstance(spec, Mapping) else None
    if not isinstance(entries, list):
        raise ValueError(f"Device {name!r}: spec.devices is not a list")
    count = 0
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise ValueError(f"Device {name!r}: spec.devices[{i}] is not an object")
        health = entry.get("health", False)  # Go's zero value: unhealthy
        if not isinstance(health, bool):
            raise ValueError(f"Device {name!r}: spec.devices[{i}].health is not a boolean")
        if entry.get("type") == "rdma" and health:
            count += 1
    return count


class RDMADeviceResource(NodeResourcePlugin[RDMADeviceResourceArgs]):
    """Node ``koordinator.sh/rdma`` from the node's Device object."""

    name: ClassVar[str] = PLUGIN_NAME
    args_model: ClassVar[type[RDMADeviceResourceArgs]] = RDMADeviceResourceArgs
    resource_names: ClassVar[Sequence[str]] = RESOURCE_NAMES
    need_sync_message: ClassVar[str] = NEED_SYNC_FOR_RESOURCE_DIFF_MSG
    watches: ClassVar[Sequence[str]] = (DEVICE_KIND,)

    def wants_event(self, kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
        """A Device created or deleted, or one whose ``spec`` changed (``DeviceHandler``)."""
        if kind != DEVICE_KIND:
            return False
        if old is None or new is None:
            return True
        return old.get("spec") != new.get("spec")

    def reset(self, node: Mapping[str, Any], message: str) -> list[ResourceItem]:
        """Nothing: the NICs are the node's whatever the colocation strategy says (Koordinator's ``Reset``
        returns no item)."""
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
            raise RuntimeError("RDMADeviceResource used before bind()")
        device = self.context.get(DEVICE_KIND, str(name))
        count = healthy_rdma_count(device) if device is not None else 0
        if count == 0:
            return [ResourceItem(n, reset=True, message=RESET_RESOURCES_MSG) for n in RESOURCE_NAMES]
        return [ResourceItem(RESOURCE_RDMA, quantity=count * RDMA_PER_DEVICE, message=UPDATE_RESOURCES_MSG)]
