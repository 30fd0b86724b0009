"""koord-plugin-cpuevict: Koordinator's ``BECPUEvict`` koordlet QoS strategy (plus the ``CPUEvict`` and
``CPUAllocatableEvict`` triggers)."""

from koord_plugin_cpuevict.plugin import BECPUEvict, BECPUEvictArgs

__all__ = ["BECPUEvict", "BECPUEvictArgs"]
