"""BEMemoryEvict against the platform's QoS-strategy contracts (the framework's conformance kit), with every
trigger switched on so the random hosts exercise all three eviction paths."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_memoryevict import BEMemoryEvict

from koord_framework.testing.conformance import QOSStrategyConformance


class TestBEMemoryEvictConformance(QOSStrategyConformance):
    plugin_class = BEMemoryEvict
    harness_args: ClassVar[dict[str, Any] | None] = {
        "coolTimeSeconds": 0,
        "triggers": ["BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict"],
    }
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"triggers": ["BEMemoryEvict", "MemoryEvict"], "coolTimeSeconds": 10}
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"triggers": ["BECPUEvict"]},
        {"triggers": []},
        {"coolTimeSeconds": -2},
    ]
