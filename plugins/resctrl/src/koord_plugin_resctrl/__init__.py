"""koord-plugin-resctrl: Koordinator's ``RdtResctrl`` koordlet QoS strategy (LLC and memory bandwidth)."""

from koord_plugin_resctrl.plugin import Resctrl, ResctrlArgs

__all__ = ["Resctrl", "ResctrlArgs"]
