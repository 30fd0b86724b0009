"""Koordinator's RDMADeviceResource node-resource calculator (the node's ``koordinator.sh/rdma`` from its
Device object)."""

from koord_plugin_rdmadeviceresource.plugin import RESOURCE_RDMA, RDMADeviceResource, RDMADeviceResourceArgs

__all__ = ["RESOURCE_RDMA", "RDMADeviceResource", "RDMADeviceResourceArgs"]
