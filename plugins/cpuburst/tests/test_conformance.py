"""CPUBurst against the platform's QoS-strategy contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_cpuburst import CPUBurst

from koord_framework.testing.conformance import QOSStrategyConformance


class TestCPUBurstConformance(QOSStrategyConformance):
    plugin_class = CPUBurst
    valid_args: ClassVar[list[dict[str, Any]]] = [{"intervalSeconds": 2}]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"intervalSeconds": 0},
        {"policy": "auto"},  # a NodeSLO / pod-annotation setting, not an arg
    ]
