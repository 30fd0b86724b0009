"""koord-plugin-deviceshare: Koordinator's DeviceShare scheduler plugin (GPU/RDMA/FPGA allocation)."""

from koord_plugin_deviceshare.args import DeviceShareArgs
from koord_plugin_deviceshare.plugin import NAME, DeviceShare

__all__ = ["NAME", "DeviceShare", "DeviceShareArgs"]
