"""koord-plugin-cpusuppress: Koordinator's ``BECPUSuppress`` koordlet QoS strategy."""

from koord_plugin_cpusuppress.plugin import BECPUSuppress, BECPUSuppressArgs

__all__ = ["BECPUSuppress", "BECPUSuppressArgs"]
