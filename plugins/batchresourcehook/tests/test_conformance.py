"""BatchResource against the platform's runtime-hook contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_batchresourcehook import BatchResource

from koord_framework.testing.runtimehooks import RuntimeHookConformance


class TestBatchResourceConformance(RuntimeHookConformance):
    plugin_class = BatchResource
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"enable": False},
        {"failurePolicy": "Fail"},
        {"failurePolicy": ""},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [{"failurePolicy": "Retry"}, {"enable": "sometimes"}]
