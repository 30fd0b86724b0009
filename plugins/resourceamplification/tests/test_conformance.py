"""ResourceAmplification against the node-resource calculator contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_resourceamplification import ResourceAmplification

from koord_framework.testing.conformance import NodeResourcePluginConformance


class TestResourceAmplificationConformance(NodeResourcePluginConformance):
    plugin_class = ResourceAmplification
    valid_args: ClassVar[list[dict[str, Any]]] = [{}]
    invalid_args: ClassVar[list[dict[str, Any]]] = [{"enable": True}]  # a config key, not an arg
