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

from koord_lib_deviceresource import DeviceResourceCalculator

from koord_framework.api.quantity import Quantity
from koord_framework.manager.noderesource import ResourceItem
from koord_framework.plugin import NoArgs

__all__ = ["RESOURCE_RDMA", "RDMADeviceResource", "RDMADeviceResourceArgs"]

PLUGIN_NAME: Final = "RDMADeviceResource"
RESOURCE_RDMA: Final = "koordinator.sh/rdma"
RESOURCE_NAMES: Final = (RESOURCE_RDMA,)
RDMA_PER_DEVICE: Final = 100
"""``koordinator.sh/rdma`` advertised per healthy RDMA physical function."""

RESET_RESOURCES_MSG: Final = "reset node rdma resources"
UPDATE_RESOURCES_MSG: Final = "node rdma resources from device"
NEED_SYNC_FOR_RESOURCE_DIFF_MSG: Final = "rdma resource diff is big than threshold"


class RDMADeviceResourceArgs(NoArgs):
    """RDMADeviceResource takes no args: it counts what the node's Device object reports."""


class RDMADeviceResource(DeviceResourceCalculator[RDMADeviceResourceArgs]):
    """Node ``koordinator.sh/rdma`` from the node's Device object."""

    name: ClassVar[str] = PLUGIN_NAME
    args_model: ClassVar[type[RDMADeviceResourceArgs]] = RDMADeviceResourceArgs
    resource_names: ClassVar[Sequence[str]] = RESOURCE_NAMES
    need_sync_message: ClassVar[str] = NEED_SYNC_FOR_RESOURCE_DIFF_MSG
    device_type: ClassVar[str] = "rdma"
    reset_message: ClassVar[str] = RESET_RESOURCES_MSG

    def device_items(
        self, device: Mapping[str, Any], found: Sequence[Mapping[str, Any]]
    ) -> list[ResourceItem]:
        # Go's NewQuantity(n, DecimalSI): ten NICs are written as ``1k``.
        total = Quantity.from_int(len(found) * RDMA_PER_DEVICE)
        return [ResourceItem.of(RESOURCE_RDMA, total, UPDATE_RESOURCES_MSG)]
