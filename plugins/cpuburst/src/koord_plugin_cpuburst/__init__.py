"""koord-plugin-cpuburst: Koordinator's ``CPUBurst`` koordlet QoS strategy."""

from koord_plugin_cpuburst.plugin import CPUBurst, CPUBurstArgs

__all__ = ["CPUBurst", "CPUBurstArgs"]
