"""BatchResource against the node-resource calculator contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_batchresource import BatchResource

from koord_framework.testing.conformance import NodeResourcePluginConformance


class TestBatchResourceConformance(NodeResourcePluginConformance):
    plugin_class = BatchResource
    valid_args: ClassVar[list[dict[str, Any]]] = [{}]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"cpuReclaimThresholdPercent": 60}
    ]  # a config key, not an arg
