"""The Device reader and the calculator skeleton, apart from any device type's plugin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest
from koord_lib_deviceresource import (
    DeviceError,
    DeviceResourceCalculator,
    add_quantity,
    healthy_devices,
    sum_resources,
)

from koord_framework.api.quantity import BINARY_SI, DECIMAL_SI, Quantity
from koord_framework.manager.colocation import ColocationStrategy
from koord_framework.manager.noderesource import ResourceItem, ResourceMetrics
from koord_framework.plugin import NoArgs


def device(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Device", "metadata": {"name": "n1"}, "spec": {"devices": list(entries)}}


def fpga(uuid: str, health: bool | None = True, **resources: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"uuid": uuid, "type": "fpga", "resources": resources}
    if health is not None:
        entry["health"] = health
    return entry


@pytest.mark.parametrize(
    ("a", "b", "want", "fmt"),
    [
        ("8Gi", "8Gi", "16Gi", BINARY_SI),
        ("8000", "10000", "18k", DECIMAL_SI),
        ("8Gi", "1000", "8589935592", BINARY_SI),
        ("1000", "8Gi", "8589935592", DECIMAL_SI),
        ("0", "1Gi", "1Gi", BINARY_SI),
        ("1Gi", "0", "1Gi", BINARY_SI),
    ],
)
def test_add_keeps_go_format(a: str, b: str, want: str, fmt: str) -> None:
    got = add_quantity(Quantity(a), Quantity(b))
    assert (str(got), got.format) == (want, fmt)


def test_healthy_devices_of_one_type() -> None:
    d = device(fpga("a"), fpga("b", False), fpga("c", None), {"uuid": "g", "type": "gpu", "health": True})
    assert [e["uuid"] for e in healthy_devices(d, "fpga")] == ["a"]  # missing health: Go's false
    assert [e["uuid"] for e in healthy_devices(d, "gpu")] == ["g"]
    assert healthy_devices({"metadata": {"name": "n1"}}, "fpga") == []


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("x", r"spec is not an object"),
        ({"devices": {}}, r"spec\.devices is not a list"),
        ({"devices": ["x"]}, r"spec\.devices\[0\] is not an object"),
        ({"devices": [{"type": "fpga", "health": "yes"}]}, r"spec\.devices\[0\]\.health is not a boolean"),
    ],
)
def test_a_malformed_device_names_object_and_field(spec: Any, field: str) -> None:
    with pytest.raises(DeviceError, match=rf"Device 'n1': {field}"):
        healthy_devices({"metadata": {"name": "n1"}, "spec": spec}, "fpga")


def test_sum_resources() -> None:
    d = device(fpga("a", mem="4Gi", lanes="8"), fpga("b", mem="4Gi", lanes="8"))
    totals = sum_resources(d, healthy_devices(d, "fpga"))
    assert {k: str(v) for k, v in totals.items()} == {"mem": "8Gi", "lanes": "16"}
    bad = device(fpga("a", mem="lots"))
    with pytest.raises(DeviceError, match=r"Device 'n1': spec\.devices\[uuid='a'\]\.resources\['mem'\]"):
        sum_resources(bad, healthy_devices(bad, "fpga"))


class Context:
    def __init__(self, devices: Mapping[str, dict[str, Any]]) -> None:
        self.devices = devices

    def get(self, kind: str, name: str, namespace: str = "") -> Mapping[str, Any] | None:
        assert kind == "Device"
        return self.devices.get(name)

    def slo_config(self, key: str) -> Mapping[str, Any]:
        return {}

    def feature_enabled(self, name: str) -> bool:
        return False


class FPGAResource(DeviceResourceCalculator[NoArgs]):
    name: ClassVar[str] = "FPGAResource"
    args_model: ClassVar[type[NoArgs]] = NoArgs
    resource_names: ClassVar[Sequence[str]] = ("example.com/fpga-mem",)
    device_type: ClassVar[str] = "fpga"
    reset_message: ClassVar[str] = "reset fpga"

    def device_items(
        self, device: Mapping[str, Any], found: Sequence[Mapping[str, Any]]
    ) -> list[ResourceItem]:
        return [ResourceItem.of("example.com/fpga-mem", sum_resources(device, found)["mem"], "fpga")]


NODE = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}
STRATEGY = ColocationStrategy.from_mapping({"enable": True})
METRICS = ResourceMetrics(None, 0.0)
RESET = [ResourceItem("example.com/fpga-mem", reset=True, message="reset fpga")]


def calc(devices: Mapping[str, dict[str, Any]]) -> FPGAResource:
    p = FPGAResource()
    p.bind(Context(devices))
    return p


def test_calculator_skeleton() -> None:
    items = calc({"n1": device(fpga("a", mem="2Gi"), fpga("b", mem="2Gi"))}).calculate(
        STRATEGY, NODE, [], METRICS
    )
    assert items == [ResourceItem("example.com/fpga-mem", 4 * 1024**3, message="fpga")]
    assert items[0].text() == "4Gi"
    assert calc({}).calculate(STRATEGY, NODE, [], METRICS) == RESET  # no Device
    assert calc({"n1": device(fpga("a", False, mem="2Gi"))}).calculate(STRATEGY, NODE, [], METRICS) == RESET
    assert calc({}).reset(NODE, "colocation off") == []  # devices are the node's whatever the strategy
    with pytest.raises(ValueError, match="missing essential arguments"):
        calc({}).calculate(STRATEGY, {"metadata": {"name": "n1"}, "status": {}}, [], METRICS)
    with pytest.raises(RuntimeError, match="FPGAResource used before bind"):
        FPGAResource().calculate(STRATEGY, NODE, [], METRICS)


def test_device_events() -> None:
    p = calc({})
    d = device(fpga("a", mem="1Gi"))
    assert p.wants_event("Device", None, d) and p.wants_event("Device", d, None)
    assert not p.wants_event("Device", d, {**d, "metadata": {"name": "n1", "labels": {"x": "y"}}})
    assert p.wants_event("Device", d, device(fpga("a", False, mem="1Gi")))
    assert not p.wants_event("Node", None, d)


def test_an_item_spelling_must_match_its_value() -> None:
    with pytest.raises(ValueError, match="spelling 1Ki is not quantity 1000"):
        ResourceItem("x", quantity=1000, spelling=Quantity("1Ki"))
