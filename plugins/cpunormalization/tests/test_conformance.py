"""CPUNormalization against the platform's runtime-hook contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_cpunormalization import CPUNormalization

from koord_framework.testing.runtimehooks import RuntimeHookConformance


class TestCPUNormalizationConformance(RuntimeHookConformance):
    plugin_class = CPUNormalization
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"enable": False},
        {"failurePolicy": "Fail"},
        {"failurePolicy": ""},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [{"failurePolicy": "Retry"}, {"enable": "sometimes"}]
