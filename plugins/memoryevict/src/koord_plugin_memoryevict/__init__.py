"""koord-plugin-memoryevict: Koordinator's ``BEMemoryEvict`` koordlet QoS strategy (plus the ``MemoryEvict``
and ``MemoryAllocatableEvict`` triggers)."""

from koord_plugin_memoryevict.plugin import BEMemoryEvict, BEMemoryEvictArgs

__all__ = ["BEMemoryEvict", "BEMemoryEvictArgs"]
