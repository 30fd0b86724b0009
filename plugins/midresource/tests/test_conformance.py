"""MidResource against the node-resource calculator contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_midresource import MidResource

from koord_framework.testing.conformance import NodeResourcePluginConformance


class TestMidResourceConformance(NodeResourcePluginConformance):
    plugin_class = MidResource
    valid_args: ClassVar[list[dict[str, Any]]] = [{}]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"midCPUThresholdPercent": 50}
    ]  # a config key, not an arg
