"""The device calculators (GPUDeviceResource, RDMADeviceResource) in koord-manager's node-resource
controller on the embedded cluster: Device objects into node capacity / allocatable and GPU labels (the
controller's label path), the ``EnableSyncGPUSharedResource`` gate reaching the calculator, colocation off
leaving the devices, a Device event re-calculating its node, ``--noderesource-plugins``."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.featuregates import gates_for
from koord_framework.manager.component import ManagerComponent
from koord_framework.testing import make_node

gpudevice = pytest.importorskip("koord_plugin_gpudeviceresource")
rdmadevice = pytest.importorskip("koord_plugin_rdmadeviceresource")

NOW = 1_700_000_000.0
NS = "koordinator-system"
GPU = "koordinator.sh/gpu"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_SHARED = "koordinator.sh/gpu.shared"
RDMA = "koordinator.sh/rdma"
MODEL = "node.koordinator.sh/gpu-model"
DRIVER = "node.koordinator.sh/gpu-driver-version"


def config_map(colocation: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": NS},
        "data": {"colocation-config": json.dumps({"enable": colocation})},
    }


def device(driver: str = "535", *, gpus: int = 2, rdma: int = 1) -> dict[str, Any]:
    devices = [
        {
            "uuid": f"GPU-{i}",
            "minor": i,
            "type": "gpu",
            "health": True,
            "resources": {GPU_CORE: "100", GPU_MEMORY: "16Gi", "koordinator.sh/gpu-memory-ratio": "100"},
        }
        for i in range(gpus)
    ]
    devices += [{"uuid": f"mlx-{i}", "minor": i, "type": "rdma", "health": True} for i in range(rdma)]
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {
            "name": "n1",
            "labels": {"node.koordinator.sh/gpu-vendor": "nvidia", MODEL: "A100", DRIVER: driver},
        },
        "spec": {"devices": devices},
    }


@pytest.fixture
def cluster() -> MemoryCluster:
    c = MemoryCluster(VirtualClock(NOW), seed=0)
    c.create(make_node("n1", cpu="32", memory="128Gi"))
    c.create(config_map(True))
    c.create(device())
    return c


def manager(cluster: MemoryCluster, gates: str = "") -> ManagerComponent:
    plugins = [gpudevice.GPUDeviceResource(), rdmadevice.RDMADeviceResource()]
    return ManagerComponent(
        cluster,
        CollectorRegistry(),
        config_namespace=NS,
        plugins=plugins,
        gates=gates_for("manager").parse(gates),
    )


def sync(cluster: MemoryCluster, gates: str = "") -> dict[str, Any]:
    m = manager(cluster, gates)
    try:
        m.sync_once()
    finally:
        m.close()
    return cluster.get("Node", "n1")


def test_device_resources_and_labels_reach_the_node(cluster: MemoryCluster) -> None:
    node = sync(cluster)
    for section in ("capacity", "allocatable"):
        res = node["status"][section]
        assert res[GPU] == "200" and res[GPU_CORE] == "200"
        assert res[GPU_MEMORY] == "32Gi"  # the Device's BinarySI family, as Go serialises the sum
        assert res[RDMA] == "100"
        assert GPU_SHARED not in res  # the gate is off by default
    labels = node["metadata"]["labels"]
    assert (labels[MODEL], labels[DRIVER], labels["node.koordinator.sh/gpu-vendor"]) == (
        "A100",
        "535",
        "nvidia",
    )


def test_the_gate_adds_gpu_shared(cluster: MemoryCluster) -> None:
    node = sync(cluster, "EnableSyncGPUSharedResource=true")
    assert node["status"]["allocatable"][GPU_SHARED] == "200"


def test_a_driver_upgrade_patches_only_the_label(cluster: MemoryCluster) -> None:
    sync(cluster)
    status_before = cluster.get("Node", "n1")["status"]
    cluster.update({**cluster.get("Device", "n1"), "metadata": device("550")["metadata"]})
    node = sync(cluster)
    assert node["metadata"]["labels"][DRIVER] == "550"
    assert node["status"]["allocatable"] == status_before["allocatable"]


def test_losing_the_device_removes_the_resources_but_not_the_labels(cluster: MemoryCluster) -> None:
    sync(cluster)
    cluster.delete("Device", "n1")
    node = sync(cluster)
    for name in (GPU, GPU_CORE, GPU_MEMORY, RDMA):
        assert name not in node["status"]["allocatable"] and name not in node["status"]["capacity"]
    assert node["metadata"]["labels"][MODEL] == "A100"  # Koordinator never removes them


def test_colocation_off_leaves_the_devices(cluster: MemoryCluster) -> None:
    sync(cluster)
    cm = cluster.get("ConfigMap", "slo-controller-config", NS)
    cluster.update({**cm, "data": config_map(False)["data"]})
    cluster.delete("Device", "n1")  # not even read: the controller calculates nothing with colocation off
    node = sync(cluster)
    assert node["status"]["allocatable"][GPU] == "200" and node["status"]["allocatable"][RDMA] == "100"


def test_a_device_event_recalculates_its_node(cluster: MemoryCluster) -> None:
    """The running manager watches Devices: one more healthy RDMA NIC shows up on the node."""
    m = manager(cluster)
    stop = threading.Event()
    runner = threading.Thread(target=m.run, args=(stop,), daemon=True)
    runner.start()
    try:
        deadline = threading.Event()
        for _ in range(200):
            if (cluster.get("Node", "n1")["status"]["allocatable"]).get(RDMA) == "100":
                break
            deadline.wait(0.05)
        current = cluster.get("Device", "n1")
        cluster.update({**current, "spec": device(rdma=3)["spec"]})
        for _ in range(200):
            if cluster.get("Node", "n1")["status"]["allocatable"].get(RDMA) == "300":
                break
            deadline.wait(0.05)
        assert cluster.get("Node", "n1")["status"]["allocatable"][RDMA] == "300"
    finally:
        stop.set()
        runner.join(timeout=10)
        m.close()


def test_noderesource_plugins_selects_them() -> None:
    from koord_framework.cli.manager import load_plugins

    names = [p.name for p in load_plugins("*")]
    assert names.index("GPUDeviceResource") < names.index("RDMADeviceResource")  # Koordinator's order
    assert "GPUDeviceResource" not in [p.name for p in load_plugins("*,-GPUDeviceResource")]
    assert [p.name for p in load_plugins("RDMADeviceResource")] == ["RDMADeviceResource"]


def go_device(gpu_memory: list[str], *, rdma: int = 0) -> dict[str, Any]:
    """``testDeviceNVIDIA`` of Koordinator's ``TestPluginCalculate``, its quantities as Go serialises them
    (``NewQuantity(8000, DecimalSI)`` is ``8k``)."""
    d = device(gpus=len(gpu_memory), rdma=rdma)
    d["metadata"]["labels"][DRIVER] = "480"
    for entry, memory in zip(d["spec"]["devices"], gpu_memory, strict=False):
        entry["resources"][GPU_MEMORY] = memory
    return d


def test_the_node_status_is_what_go_writes(cluster: MemoryCluster) -> None:
    """Koordinator's ``TestPluginPrepare`` (nvidia: update resources) expects ``gpu-memory``
    ``NewQuantity(18000, DecimalSI)`` in the node status, from ``TestPluginCalculate``'s
    ``NewScaledQuantity(18, 3)``: JSON ``"18k"``, not a byte count."""
    cluster.update({**cluster.get("Device", "n1"), "spec": go_device(["8k", "10k"])["spec"]})
    node = sync(cluster, "EnableSyncGPUSharedResource=true")
    want = {
        "cpu": "32",
        "memory": "128Gi",
        GPU: "200",
        GPU_CORE: "200",
        GPU_MEMORY: "18k",
        "koordinator.sh/gpu-memory-ratio": "200",
        GPU_SHARED: "200",
    }
    for section in ("capacity", "allocatable"):
        got = {k: v for k, v in node["status"][section].items() if k in want}
        assert got == want


@pytest.mark.parametrize(
    ("memory", "want"),
    [
        (["16Gi", "16Gi"], "32Gi"),  # BinarySI stays BinarySI
        (["16384Mi", "16Gi"], "32Gi"),  # canonical, not the first text
        (["8Gi", "1000"], "8589935592"),  # BinarySI, not a whole number of Ki: plain digits
        (["1000", "8Gi"], "8589935592"),  # DecimalSI first: the family of the first addend
        (["8000", "10000"], "18k"),
        (["0", "1Gi"], "1Gi"),  # a zero total takes the addend's family (Go's Add)
    ],
)
def test_gpu_memory_keeps_go_quantity_spelling(cluster: MemoryCluster, memory: list[str], want: str) -> None:
    cluster.update({**cluster.get("Device", "n1"), "spec": go_device(memory)["spec"]})
    node = sync(cluster)
    assert node["status"]["capacity"][GPU_MEMORY] == node["status"]["allocatable"][GPU_MEMORY] == want


def test_counts_are_decimal_si_as_go_writes_them(cluster: MemoryCluster) -> None:
    """``NewQuantity(n*100, DecimalSI)``: ten RDMA NICs or ten GPUs' ``gpu.shared`` are ``1k``."""
    cluster.update({**cluster.get("Device", "n1"), "spec": device(gpus=10, rdma=10)["spec"]})
    node = sync(cluster, "EnableSyncGPUSharedResource=true")
    res = node["status"]["allocatable"]
    assert (res[RDMA], res[GPU_SHARED], res[GPU], res[GPU_MEMORY]) == ("1k", "1k", "1k", "160Gi")
