"""``/mutate-pod``'s device step (``DeviceResourceSpec``): Koordinator's ``TestDeviceResourceSpecMutatingPod``
and ``..._Disabled`` (pkg/webhook/pod/mutating/device_resource_spec_test.go at a7a1b76b), and bad input."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from koord_plugin_deviceshare.webhook_spec import DeviceResourceSpec

from koord_framework.api.quantity import Quantity
from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook.admission import AdmissionRequest, GroupVersionResource
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.testing.conformance import AdmissionHandlerConformance

CORE, MEM, RATIO, SHARED, GPU = (
    "koordinator.sh/gpu-core",
    "koordinator.sh/gpu-memory",
    "koordinator.sh/gpu-memory-ratio",
    "koordinator.sh/gpu.shared",
    "koordinator.sh/gpu",
)


class TestDeviceResourceSpecConformance(AdmissionHandlerConformance):
    plugin_class = DeviceResourceSpec


def pod(resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "test-pod-1", "namespace": "default"},
        "spec": {"containers": [{"name": "test-container-a", "resources": copy.deepcopy(resources)}]},
    }


def both(values: dict[str, str]) -> dict[str, Any]:
    return {"requests": dict(values), "limits": dict(values)}


CASES = [
    (
        "mutating gpu share when gpuMemoryRatio small than 100",
        both({CORE: "100", MEM: "4000", RATIO: "50"}),
        both({CORE: "100", MEM: "4000", RATIO: "50", SHARED: "1"}),
    ),
    (
        "mutating gpu share when gpuMemoryRatio is multiple of 100",
        both({CORE: "100", MEM: "8000", RATIO: "200"}),
        both({CORE: "100", MEM: "8000", RATIO: "200", SHARED: "2"}),
    ),
    ("mutating gpu", both({GPU: "200"}), both({CORE: "200", RATIO: "200", SHARED: "2"})),
    ("core only, multiple of 100", both({CORE: "300"}), both({CORE: "300", SHARED: "3"})),
    ("shared already asked", both({SHARED: "2", CORE: "100"}), both({SHARED: "2", CORE: "100"})),
    ("no gpu", both({"cpu": "1"}), both({"cpu": "1"})),
]


def _quantities(resources: dict[str, Any]) -> dict[str, dict[str, Quantity]]:
    return {k: {n: Quantity.parse(v) for n, v in r.items()} for k, r in resources.items()}


def admit(obj: dict[str, Any], gates: str = "", op: str = "CREATE") -> dict[str, Any]:
    handler = DeviceResourceSpec()
    handler.bind(None, gates_for("manager").parse(gates))  # type: ignore[arg-type]
    request = AdmissionRequest(
        uid="u",
        kind=None,  # type: ignore[arg-type]
        resource=GroupVersionResource("", "v1", "pods"),
        operation=op,  # type: ignore[arg-type]
        object=obj,
    )
    handler.admit(request, obj)
    return obj


@pytest.mark.parametrize(("given", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_device_resource_spec_mutating_pod(given: dict[str, Any], want: dict[str, Any]) -> None:
    out = admit(pod(given))
    assert _quantities(out["spec"]["containers"][0]["resources"]) == _quantities(want)


def test_disabled_by_its_gate() -> None:
    out = admit(pod(both({GPU: "100"})), "DisableDeviceResourceSpec=true")
    assert out["spec"]["containers"][0]["resources"] == both({GPU: "100"})


def test_only_on_create() -> None:
    out = admit(pod(both({GPU: "100"})), op="UPDATE")
    assert out["spec"]["containers"][0]["resources"] == both({GPU: "100"})


def test_an_unreadable_quantity_is_a_400_naming_the_field() -> None:
    handler = DeviceResourceSpec()
    handler.bind(None, gates_for("manager").parse(""))  # type: ignore[arg-type]
    request = AdmissionRequest(
        uid="u",
        kind=None,  # type: ignore[arg-type]
        resource=GroupVersionResource("", "v1", "pods"),
        operation="CREATE",
        object=pod(both({GPU: "two"})),
    )
    response = Dispatcher.admit([handler], request)
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "spec.containers[0].resources.requests[koordinator.sh/gpu]" in response["status"]["message"]
