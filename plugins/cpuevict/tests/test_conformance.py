"""BECPUEvict against the platform's QoS-strategy contracts (the framework's conformance kit), with every
trigger switched on so the random hosts exercise all three eviction paths."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_cpuevict import BECPUEvict

from koord_framework.testing.conformance import QOSStrategyConformance


class TestBECPUEvictConformance(QOSStrategyConformance):
    plugin_class = BECPUEvict
    harness_args: ClassVar[dict[str, Any] | None] = {
        "coolTimeSeconds": 0,
        "triggers": ["BECPUEvict", "CPUAllocatableEvict", "CPUEvict"],
    }
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"coolTimeSeconds": 5, "triggers": ["BECPUEvict", "CPUEvict"]},
        {"triggers": ["CPUAllocatableEvict"]},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"triggers": []},
        {"triggers": ["NoSuchTrigger"]},
        {"triggers": ["BEMemoryEvict"]},
        {"coolTimeSeconds": -1},
    ]
