"""Koordinator's cases for RDMADeviceResource (``rdmadevicereource/plugin_test.go`` and
``device_event_handler_test.go`` at a7a1b76b): NeedSync, Calculate, the Device events."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from koord_plugin_rdmadeviceresource import RDMADeviceResource
from koord_plugin_rdmadeviceresource.plugin import (
    NEED_SYNC_FOR_RESOURCE_DIFF_MSG,
    RESET_RESOURCES_MSG,
    UPDATE_RESOURCES_MSG,
)

from koord_framework.manager.noderesource import ColocationStrategy, ResourceItem, ResourceMetrics

RDMA = "koordinator.sh/rdma"
STRATEGY = ColocationStrategy.from_mapping(
    {
        "enable": True,
        "degradeTimeMinutes": 15,
        "updateTimeThresholdSeconds": 300,
        "resourceDiffThreshold": 0.1,
    }
)
METRICS = ResourceMetrics(None, 0.0)


class Context:
    def __init__(self, devices: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.devices = dict(devices or {})

    def get(self, kind: str, name: str, namespace: str = "") -> Mapping[str, Any] | None:
        assert kind == "Device"
        return self.devices.get(name)

    def slo_config(self, key: str) -> Mapping[str, Any]:
        return {}

    def feature_enabled(self, name: str) -> bool:
        raise AssertionError("RDMADeviceResource reads no gate")


def plugin(devices: Mapping[str, dict[str, Any]] | None = None) -> RDMADeviceResource:
    p = RDMADeviceResource()
    p.bind(Context(devices))
    return p


def node(rdma: str | None = None) -> dict[str, Any]:
    status = {"cpu": "100", "memory": "400Gi", **({RDMA: rdma} if rdma is not None else {})}
    return {
        "metadata": {"name": "test-node"},
        "status": {"allocatable": dict(status), "capacity": dict(status)},
    }


def rdma(uuid: str, minor: int, *, health: bool = True) -> dict[str, Any]:
    return {"uuid": uuid, "minor": minor, "health": health, "type": "rdma", "resources": {RDMA: "200"}}


def device(devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "test-node", "labels": {"node.koordinator.sh/gpu-model": "A100"}},
        "spec": {"devices": devices},
    }


def test_need_sync() -> None:
    p = plugin()
    assert p.need_sync(STRATEGY, node(), node()) == (False, "")
    assert p.need_sync(STRATEGY, node("200"), node("200")) == (False, "")
    assert p.need_sync(STRATEGY, node(), node("200")) == (True, NEED_SYNC_FOR_RESOURCE_DIFF_MSG)
    assert p.need_sync(STRATEGY, node("200"), node("100")) == (True, NEED_SYNC_FOR_RESOURCE_DIFF_MSG)
    assert p.need_sync(STRATEGY, node("200"), node()) == (True, NEED_SYNC_FOR_RESOURCE_DIFF_MSG)
    assert p.need_sync(STRATEGY, node("1000"), node("1090")) == (False, "")  # within the 10 % threshold


RESET = [ResourceItem(RDMA, reset=True, message=RESET_RESOURCES_MSG)]


@pytest.mark.parametrize(
    ("dev", "want"),
    [
        # 100 per healthy PF, whatever the Device says each is worth
        (
            device([rdma("1", 0), rdma("2", 1)]),
            [ResourceItem(RDMA, quantity=200, message=UPDATE_RESOURCES_MSG)],
        ),
        (
            device([rdma("1", 0), rdma("2", 1, health=False)]),
            [ResourceItem(RDMA, 100, message=UPDATE_RESOURCES_MSG)],
        ),
        (None, RESET),
        (device([]), RESET),
        (device([rdma("1", 0, health=False)]), RESET),
    ],
    ids=["two healthy", "one healthy", "no device", "no rdma", "none healthy"],
)
def test_calculate(dev: dict[str, Any] | None, want: list[ResourceItem]) -> None:
    p = plugin({"test-node": dev} if dev is not None else {})
    assert p.calculate(STRATEGY, node(), [], METRICS) == want


def test_calculate_missing_essential_fields() -> None:
    with pytest.raises(ValueError, match="missing essential arguments"):
        plugin().calculate(STRATEGY, {"metadata": {}}, [], METRICS)


def test_a_malformed_device_names_the_object_and_field() -> None:
    bad = device([rdma("1", 0)])
    bad["spec"]["devices"][0]["health"] = "yes"
    with pytest.raises(ValueError, match=r"Device 'test-node': spec\.devices\[0\]\.health"):
        plugin({"test-node": bad}).calculate(STRATEGY, node(), [], METRICS)


def test_colocation_off_leaves_the_rdma() -> None:
    assert plugin().reset(node("200"), "node colocation is not enabled") == []


def test_device_events() -> None:
    p = plugin()
    d = device([rdma("1", 0)])
    assert p.wants_event("Device", None, d) and p.wants_event("Device", d, None)
    assert not p.wants_event("Device", d, {**d, "metadata": {"name": "test-node"}})
    changed = copy.deepcopy(d)
    changed["spec"]["devices"].append(rdma("2", 1))
    assert p.wants_event("Device", d, changed)
