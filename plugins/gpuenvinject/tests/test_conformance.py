"""GPUEnvInject against the platform's runtime-hook contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_gpuenvinject import GPUEnvInject

from koord_framework.testing.runtimehooks import RuntimeHookConformance


class TestGPUEnvInjectConformance(RuntimeHookConformance):
    plugin_class = GPUEnvInject
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"enable": False},
        {"failurePolicy": "Fail"},
        {"failurePolicy": ""},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [{"failurePolicy": "Retry"}, {"enable": "sometimes"}]
