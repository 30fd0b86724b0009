"""The device rule of ``/validate-pod``: Koordinator's ``TestDeviceResourceValidatingPod`` cases and the kit's
conformance."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_deviceshare.webhook import DeviceResourceValidation

from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    GroupVersionKind,
    GroupVersionResource,
)
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.testing.conformance import AdmissionHandlerConformance

GPU, SHARED, CORE = "koordinator.sh/gpu", "koordinator.sh/gpu.shared", "koordinator.sh/gpu-core"
MEMORY, RATIO, NPU = "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio", "huawei.com/npu-core"
PATH = "pod.spec.containers[*].resources.requests"


def _answer(requests: dict[str, Any], gate: bool = True, op: str = "CREATE") -> dict[str, Any]:
    handler = DeviceResourceValidation()
    handler.bind(_NoObjects(), gates_for("manager").parse(f"ValidatePodDeviceResource={str(gate).lower()}"))
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "test-container-a",
                    "resources": {"limits": dict(requests), "requests": dict(requests)},
                }
            ]
        },
    }
    request = AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "Pod"),
        resource=GroupVersionResource("", "v1", "pods"),
        operation=op,  # type: ignore[arg-type]
        namespace="default",
        object=pod if op != "DELETE" else None,
        old_object=pod if op != "CREATE" else None,
    )
    return Dispatcher.admit([handler], request)


class _NoObjects:
    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return []


@pytest.mark.parametrize(
    ("case", "requests", "gate", "reason"),
    [
        ("gpu resource is percentage", {GPU: "200"}, True, ""),
        ("gpu resource is not percentage", {GPU: "70"}, True, ""),
        (
            "gpu memory and memoryRatio at same time",
            {SHARED: "1", MEMORY: "1Gi", RATIO: "50", CORE: "50"},
            True,
            f"{PATH}: Forbidden: declare GPU memory and GPU memory ratio at same time",
        ),
        (
            "none of gpu memory and memoryRatio",
            {SHARED: "2"},
            True,
            f"{PATH}: Forbidden: GPU memory and GPU memory ratio all is zero",
        ),
        ("none of gpu memory and memoryRatio, gate off", {SHARED: "2"}, False, ""),
        (
            "gpuCore not a multiple of shared",
            {SHARED: "2", RATIO: "100", CORE: "101"},
            True,
            f'{PATH}: Invalid value: "101": the requested gpuCore must multiple of shared',
        ),
        (
            "gpuMemoryRatio not a multiple of shared",
            {SHARED: "2", RATIO: "101", CORE: "100"},
            True,
            f'{PATH}: Invalid value: "101": the requested gpuMemoryRatio must multiple of shared',
        ),
        ("shared huawei npu", {NPU: "8", SHARED: "1"}, True, ""),
        (
            "gpu and gpu share together",
            {GPU: "100", SHARED: "1"},
            True,
            f"{PATH}: Forbidden: Forbidden declare GPU and GPU share at same time",
        ),
        (
            "gpu above 100 not a multiple of 100",
            {GPU: "150"},
            True,
            f'{PATH}: Invalid value: "150": the requested GPU must be percentage of 100',
        ),
        (
            "zero shared",
            {SHARED: "0", RATIO: "50"},
            True,
            f'{PATH}: Invalid value: "0": the requested GPU must be greater than zero',
        ),
    ],
)
def test_device_resource_validating_pod(case: str, requests: dict[str, Any], gate: bool, reason: str) -> None:
    response = _answer(requests, gate)
    assert response["allowed"] is (not reason), (case, response)
    if reason:
        assert response["status"]["code"] == 400 and response["status"]["message"] == reason


def test_several_errors_are_aggregated() -> None:
    response = _answer({SHARED: "2", MEMORY: "1Gi", RATIO: "3", CORE: "3"})
    assert response["status"]["message"] == (
        f"[{PATH}: Forbidden: declare GPU memory and GPU memory ratio at same time, "
        f'{PATH}: Invalid value: "3": the requested gpuCore must multiple of shared, '
        f'{PATH}: Invalid value: "3": the requested gpuMemoryRatio must multiple of shared]'
    )


def test_an_unreadable_quantity_is_a_bad_request_naming_the_field() -> None:
    response = _answer({GPU: "lots"})
    assert response["status"]["code"] == 400
    assert "spec.containers[0].resources.requests[koordinator.sh/gpu]" in response["status"]["message"]


def test_deletions_are_not_validated() -> None:
    assert _answer({SHARED: "2"}, op="DELETE")["allowed"] is True


class TestDeviceResourceValidationConformance(AdmissionHandlerConformance):
    plugin_class = DeviceResourceValidation
