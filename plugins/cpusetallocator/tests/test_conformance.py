"""CPUSetAllocator against the platform's runtime-hook contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_cpusetallocator import CPUSetAllocator

from koord_framework.testing.runtimehooks import RuntimeHookConformance


class TestCPUSetAllocatorConformance(RuntimeHookConformance):
    plugin_class = CPUSetAllocator
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"enable": False},
        {"failurePolicy": "Fail"},
        {"failurePolicy": ""},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [{"failurePolicy": "Retry"}, {"enable": "sometimes"}]
