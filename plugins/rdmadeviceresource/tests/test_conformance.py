"""RDMADeviceResource against the node-resource calculator contracts (the framework's conformance kit)."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_rdmadeviceresource import RDMADeviceResource

from koord_framework.testing.conformance import NodeResourcePluginConformance


class TestRDMADeviceResourceConformance(NodeResourcePluginConformance):
    plugin_class = RDMADeviceResource
    valid_args: ClassVar[list[dict[str, Any]]] = [{}]
    invalid_args: ClassVar[list[dict[str, Any]]] = [{"rdmaPerDevice": True}]  # fixed at 100, not an arg

    def test_reset_removes_every_owned_resource(self) -> None:
        """Overridden on purpose: Koordinator's ``Reset`` of the device calculators returns no item, so
        turning colocation off never takes a node's RDMA devices away (a missing Device does, in
        ``calculate``)."""
        assert self._plugin().reset({"metadata": {"name": "n"}}, "why") == []
