"""Koordinator's cases for GPUDeviceResource (``gpudeviceresource/plugin_test.go`` and
``device_event_handler_test.go`` at a7a1b76b): NeedSync, NeedSyncMeta, Prepare, Calculate, the Device
events."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from koord_plugin_gpudeviceresource import GPUDeviceResource
from koord_plugin_gpudeviceresource.plugin import (
    NEED_SYNC_FOR_GPU_MODEL_MSG_FMT,
    NEED_SYNC_FOR_RESOURCE_DIFF_MSG,
    PLUGIN_NAME,
    RESET_RESOURCES_MSG,
    RESOURCE_NAMES,
    UPDATE_LABELS_MSG,
    UPDATE_RESOURCES_MSG,
)

from koord_framework.featuregates import gates_for
from koord_framework.manager.noderesource import ColocationStrategy, ResourceItem, ResourceMetrics

GPU = "koordinator.sh/gpu"
GPU_SHARED = "koordinator.sh/gpu.shared"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
NPU_CORE = "huawei.com/npu-core"
NPU_CPU = "huawei.com/npu-cpu"
NPU_DVPP = "huawei.com/npu-dvpp"
VENDOR = "node.koordinator.sh/gpu-vendor"
MODEL = "node.koordinator.sh/gpu-model"
DRIVER = "node.koordinator.sh/gpu-driver-version"

STRATEGY = ColocationStrategy.from_mapping(
    {
        "enable": True,
        "cpuReclaimThresholdPercent": 65,
        "memoryReclaimThresholdPercent": 65,
        "degradeTimeMinutes": 15,
        "updateTimeThresholdSeconds": 300,
        "resourceDiffThreshold": 0.1,
    }
)
METRICS = ResourceMetrics(None, 0.0)


class Context:
    """The manager's context over a dict of Devices, with the manager's gates."""

    def __init__(self, devices: Mapping[str, dict[str, Any]] | None = None, **gates: bool) -> None:
        self.devices = dict(devices or {})
        self.gates = gates_for("manager").parse(",".join(f"{k}={str(v).lower()}" for k, v in gates.items()))

    def get(self, kind: str, name: str, namespace: str = "") -> Mapping[str, Any] | None:
        assert kind == "Device"
        return self.devices.get(name)

    def slo_config(self, key: str) -> Mapping[str, Any]:
        return {}

    def feature_enabled(self, name: str) -> bool:
        return self.gates.enabled(name)


def plugin(devices: Mapping[str, dict[str, Any]] | None = None, *, shared: bool = False) -> GPUDeviceResource:
    p = GPUDeviceResource()
    p.bind(Context(devices, EnableSyncGPUSharedResource=shared))
    return p


BASE = {"cpu": "100", "memory": "400Gi"}


def node(labels: Mapping[str, str] | None = None, gpu: Mapping[str, str] | None = None) -> dict[str, Any]:
    status = {**BASE, **(gpu or {})}
    return {
        "metadata": {"name": "test-node", "labels": {"test-label": "test-value", **(labels or {})}},
        "status": {"allocatable": dict(status), "capacity": dict(status)},
    }


NVIDIA_LABELS = {VENDOR: "nvidia", MODEL: "A100", DRIVER: "480"}
GPU_200 = {GPU: "200", GPU_CORE: "200", GPU_MEMORY: "18000", GPU_MEMORY_RATIO: "200"}
WITHOUT = node()
WITH = node(NVIDIA_LABELS, GPU_200)
DRIVER_UPDATE = node({**NVIDIA_LABELS, DRIVER: "486"}, GPU_200)
RESOURCE_UPDATE = node(NVIDIA_LABELS, {**GPU_200, GPU: "160", GPU_CORE: "160"})


def gpu(uuid: str, minor: int, resources: Mapping[str, int], *, health: bool = True) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "minor": minor,
        "health": health,
        "type": "gpu",
        "resources": {k: str(v) for k, v in resources.items()},
    }


def device(labels: Mapping[str, str] | None, devices: list[dict[str, Any]]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "test-node"}
    if labels is not None:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": meta,
        "spec": {"devices": devices},
    }


NVIDIA_GPUS = [
    gpu("1", 0, {GPU_CORE: 100, GPU_MEMORY: 8000, GPU_MEMORY_RATIO: 100}),
    gpu("2", 1, {GPU_CORE: 100, GPU_MEMORY: 10000, GPU_MEMORY_RATIO: 100}),
]
HUAWEI_NPUS = [
    gpu("1", 0, {NPU_CORE: 20, NPU_CPU: 20, NPU_DVPP: 100, GPU_MEMORY: 8000, GPU_MEMORY_RATIO: 100}),
    gpu("2", 1, {NPU_CORE: 20, NPU_CPU: 20, NPU_DVPP: 100, GPU_MEMORY: 10000, GPU_MEMORY_RATIO: 100}),
]


def test_need_sync() -> None:
    p = plugin()
    assert p.need_sync(STRATEGY, WITHOUT, WITHOUT) == (False, "")
    assert p.need_sync(STRATEGY, WITH, WITH) == (False, "")
    assert p.need_sync(STRATEGY, WITH, DRIVER_UPDATE) == (False, "")  # labels are not resources
    assert p.need_sync(STRATEGY, WITHOUT, WITH) == (True, NEED_SYNC_FOR_RESOURCE_DIFF_MSG)
    assert p.need_sync(STRATEGY, WITH, RESOURCE_UPDATE) == (True, NEED_SYNC_FOR_RESOURCE_DIFF_MSG)
    assert p.need_sync(STRATEGY, WITH, WITHOUT) == (True, NEED_SYNC_FOR_RESOURCE_DIFF_MSG)


def test_need_sync_meta() -> None:
    p = plugin()
    assert p.need_sync_meta(STRATEGY, WITHOUT, WITHOUT) == (False, "")
    assert p.need_sync_meta(STRATEGY, WITH, WITH) == (False, "")
    assert p.need_sync_meta(STRATEGY, WITH, RESOURCE_UPDATE) == (False, "")  # resources are not labels
    assert p.need_sync_meta(STRATEGY, WITHOUT, WITH) == (True, NEED_SYNC_FOR_GPU_MODEL_MSG_FMT.format(VENDOR))
    assert p.need_sync_meta(STRATEGY, WITH, DRIVER_UPDATE) == (
        True,
        NEED_SYNC_FOR_GPU_MODEL_MSG_FMT.format(DRIVER),
    )
    assert p.need_sync_meta(STRATEGY, WITH, WITHOUT) == (True, NEED_SYNC_FOR_GPU_MODEL_MSG_FMT.format(VENDOR))


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        ({}, {"test-label": "test-value"}),  # nothing to prepare
        (
            {**NVIDIA_LABELS, "other.io/ignored": "x"},
            {"test-label": "test-value", **NVIDIA_LABELS},
        ),
        (
            {VENDOR: "huawei", MODEL: "Ascend-910"},
            {"test-label": "test-value", VENDOR: "huawei", MODEL: "Ascend-910"},
        ),
    ],
    ids=["nothing to prepare", "nvidia labels", "huawei labels"],
)
def test_prepare_labels(labels: dict[str, str], want: dict[str, str]) -> None:
    n = copy.deepcopy(WITHOUT)
    plugin().prepare_labels(STRATEGY, n, labels)
    assert n["metadata"]["labels"] == want


def test_prepare_labels_never_removes_a_label() -> None:
    """Koordinator's "TBD: shall we reset labels": a label the items lack stays on the node."""
    n = copy.deepcopy(WITH)
    plugin().prepare_labels(STRATEGY, n, {MODEL: "H100"})
    assert n["metadata"]["labels"] == {"test-label": "test-value", **NVIDIA_LABELS, MODEL: "H100"}


def items(pairs: list[tuple[str, int]]) -> list[ResourceItem]:
    return [ResourceItem(n, quantity=q, message=UPDATE_RESOURCES_MSG) for n, q in pairs]


NVIDIA_ITEMS = [(GPU, 200), (GPU_CORE, 200), (GPU_MEMORY, 18000), (GPU_MEMORY_RATIO, 200)]
RESETS = [ResourceItem(n, reset=True, message=RESET_RESOURCES_MSG) for n in RESOURCE_NAMES]


@pytest.mark.parametrize(
    ("dev", "shared", "want"),
    [
        (
            device(NVIDIA_LABELS, NVIDIA_GPUS),
            True,
            [
                *items([*NVIDIA_ITEMS, (GPU_SHARED, 200)]),
                ResourceItem(PLUGIN_NAME, labels=NVIDIA_LABELS, message=UPDATE_LABELS_MSG),
            ],
        ),
        (
            device({VENDOR: "huawei", MODEL: "Ascend-910"}, HUAWEI_NPUS),
            True,
            [
                *items(
                    [
                        (NPU_CORE, 40),
                        (NPU_CPU, 40),
                        (NPU_DVPP, 200),
                        (GPU_MEMORY, 18000),
                        (GPU_MEMORY_RATIO, 200),
                        (GPU_SHARED, 200),
                    ]
                ),
                ResourceItem(
                    PLUGIN_NAME, labels={VENDOR: "huawei", MODEL: "Ascend-910"}, message=UPDATE_LABELS_MSG
                ),
            ],
        ),
        (device(None, NVIDIA_GPUS), True, items([*NVIDIA_ITEMS, (GPU_SHARED, 200)])),
        (device({"anything": "anything"}, NVIDIA_GPUS), True, items([*NVIDIA_ITEMS, (GPU_SHARED, 200)])),
        (
            device(NVIDIA_LABELS, NVIDIA_GPUS),
            False,
            [
                *items(NVIDIA_ITEMS),
                ResourceItem(PLUGIN_NAME, labels=NVIDIA_LABELS, message=UPDATE_LABELS_MSG),
            ],
        ),
        (device(None, NVIDIA_GPUS), False, items(NVIDIA_ITEMS)),
        (device({"anything": "anything"}, NVIDIA_GPUS), False, items(NVIDIA_ITEMS)),
        (None, False, RESETS),  # no Device: reset
        (device(None, []), False, RESETS),  # no GPU on the Device: reset
    ],
    ids=[
        "nvidia with gpu.shared",
        "huawei with gpu.shared",
        "no labels with gpu.shared",
        "no gpu labels with gpu.shared",
        "nvidia",
        "no labels",
        "no gpu labels",
        "no device",
        "no gpu",
    ],
)
def test_calculate(dev: dict[str, Any] | None, shared: bool, want: list[ResourceItem]) -> None:
    p = plugin({"test-node": dev} if dev is not None else {}, shared=shared)
    assert p.calculate(STRATEGY, WITHOUT, [], METRICS) == want


def test_calculate_missing_essential_fields() -> None:
    with pytest.raises(ValueError, match="missing essential arguments"):
        plugin().calculate(STRATEGY, {"metadata": {}}, [], METRICS)


def test_unhealthy_gpus_do_not_count_and_none_healthy_resets() -> None:
    devs = [NVIDIA_GPUS[0], {**NVIDIA_GPUS[1], "health": False}]
    got = plugin({"test-node": device(None, devs)}).calculate(STRATEGY, WITHOUT, [], METRICS)
    assert got == items([(GPU, 100), (GPU_CORE, 100), (GPU_MEMORY, 8000), (GPU_MEMORY_RATIO, 100)])
    unhealthy = [{**g, "health": False} for g in NVIDIA_GPUS]
    assert plugin({"test-node": device(None, unhealthy)}).calculate(STRATEGY, WITHOUT, [], METRICS) == RESETS


def test_other_device_types_are_not_gpus() -> None:
    rdma = {
        "uuid": "r",
        "minor": 0,
        "health": True,
        "type": "rdma",
        "resources": {"koordinator.sh/rdma": "100"},
    }
    p = plugin({"test-node": device(None, [rdma])})
    assert p.calculate(STRATEGY, WITHOUT, [], METRICS) == RESETS


def test_a_malformed_device_names_the_object_and_field() -> None:
    bad = device(None, [gpu("1", 0, {GPU_CORE: 100})])
    bad["spec"]["devices"][0]["resources"][GPU_CORE] = "lots"
    with pytest.raises(ValueError, match=r"Device 'test-node'.*uuid='1'.*gpu-core"):
        plugin({"test-node": bad}).calculate(STRATEGY, WITHOUT, [], METRICS)
    with pytest.raises(ValueError, match=r"spec\.devices is not a list"):
        plugin({"test-node": {"metadata": {"name": "test-node"}, "spec": {"devices": "x"}}}).calculate(
            STRATEGY, WITHOUT, [], METRICS
        )


def test_colocation_off_leaves_the_gpus() -> None:
    assert plugin().reset(WITH, "node colocation is not enabled") == []


# device_event_handler_test.go: create and delete always, update only when the spec changed.
def test_device_events() -> None:
    p = plugin()
    d = device(NVIDIA_LABELS, NVIDIA_GPUS)
    assert p.wants_event("Device", None, d)
    assert p.wants_event("Device", d, None)
    relabelled = {**d, "metadata": {**d["metadata"], "labels": {VENDOR: "nvidia"}}}
    assert not p.wants_event("Device", d, relabelled)
    changed = copy.deepcopy(d)
    changed["spec"]["devices"][0]["health"] = False
    assert p.wants_event("Device", d, changed)
