"""BECPUSuppress against the platform's QoS-strategy contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_cpusuppress import BECPUSuppress

from koord_framework.testing.conformance import QOSStrategyConformance


class TestBECPUSuppressConformance(QOSStrategyConformance):
    plugin_class = BECPUSuppress
    valid_args: ClassVar[list[dict[str, Any]]] = [{"intervalSeconds": 5}, {"intervalSeconds": 0.5}]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"intervalSeconds": 0},
        {"intervalSeconds": -1},
        {"cpuSuppressPolicy": "cpuset"},  # a NodeSLO setting, not an arg
    ]
