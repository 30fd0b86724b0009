"""``koord device-daemon`` on the testing kit's fake machines: the Device object checked field by field."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cli.devicedaemon import parse_duration
from koord_framework.cli.devicedaemon import run as run_cli
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.devices import DeviceDaemon, discover
from koord_framework.devices.discovery import gpu_model_label
from koord_framework.testing import make_node
from koord_framework.testing.devices import (
    H100_MEMORY,
    FakeNVML,
    h100_nvlink_8x,
    no_devices,
    pcie_switch_2gpu_2nic,
    unhealthy_gpu_machine,
)

T0 = 1_704_067_200.0


def healthy() -> list[dict[str, str]]:
    return [{"type": "Healthy", "status": "True", "reason": "DeviceHealthy", "message": ""}]


def test_h100_8x_field_by_field(tmp_path: Path) -> None:
    machine = h100_nvlink_8x()
    found = discover(machine.materialize(tmp_path), FakeNVML(machine))
    assert found.errors == [] and found.nvml == "ok"
    assert found.labels == {
        "node.koordinator.sh/gpu-vendor": "nvidia",
        "node.koordinator.sh/gpu-model": "H100-80GB-HBM3",
        "node.koordinator.sh/gpu-driver-version": "550.54.15",
    }
    gpus = [d for d in found.devices if d["type"] == "gpu"]
    roots = ["17", "3a", "5d", "80", "97", "ba", "d7", "e9"]
    assert len(gpus) == 8
    for minor, (gpu, root) in enumerate(zip(gpus, roots)):
        bus = f"0000:{int(root, 16) + 1:02x}:00.0"
        assert gpu == {
            "type": "gpu",
            "id": f"GPU-h100-0000-0000-0000-00000000000{minor}",
            "minor": minor,
            "health": True,
            "resources": {
                "koordinator.sh/gpu-core": "100",
                "koordinator.sh/gpu-memory": str(H100_MEMORY),
                "koordinator.sh/gpu-memory-ratio": "100",
            },
            "topology": {"socketID": -1, "nodeID": minor // 4, "pcieID": f"pci0000:{root}", "busID": bus},
            "conditions": healthy(),
        }
    nics = [d for d in found.devices if d["type"] == "rdma"]
    assert nics == [
        {
            "type": "rdma",
            "id": "0000:1f:00.0",
            "minor": 0,
            "health": True,
            "resources": {"koordinator.sh/rdma": "100"},
            "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:17", "busID": "0000:1f:00.0"},
            "vfGroups": [
                {"vfs": [{"minor": -1, "busID": "0000:1f:00.2"}, {"minor": -1, "busID": "0000:1f:00.3"}]}
            ],
        },
        {
            "type": "rdma",
            "id": "0000:9f:00.0",
            "minor": 1,
            "health": True,
            "resources": {"koordinator.sh/rdma": "100"},
            "topology": {"socketID": -1, "nodeID": 1, "pcieID": "pci0000:97", "busID": "0000:9f:00.0"},
            "vfGroups": [
                {"vfs": [{"minor": -1, "busID": "0000:9f:00.2"}, {"minor": -1, "busID": "0000:9f:00.3"}]}
            ],
        },
    ]


def test_two_gpus_and_two_nics_under_one_pcie_switch(tmp_path: Path) -> None:
    machine = pcie_switch_2gpu_2nic()
    found = discover(machine.materialize(tmp_path), FakeNVML(machine))
    assert found.labels["node.koordinator.sh/gpu-model"] == "A100-SXM4-40GB"
    assert [(d["type"], d["minor"], d["id"]) for d in found.devices] == [
        ("gpu", 0, "GPU-a100-a"),
        ("gpu", 1, "GPU-a100-b"),
        ("rdma", 0, "0000:3e:00.0"),
        ("rdma", 1, "0000:3f:00.0"),
    ]
    # Behind the switch every device reports the root complex as its PCIe id, as koordlet does.
    assert {d["topology"]["pcieID"] for d in found.devices} == {"pci0000:3a"}
    assert [d["topology"]["busID"] for d in found.devices] == [
        "0000:3c:00.0",
        "0000:3d:00.0",
        "0000:3e:00.0",
        "0000:3f:00.0",
    ]
    assert found.devices[0]["resources"]["koordinator.sh/gpu-memory"] == "42949672960"
    assert [vf["busID"] for vf in found.devices[2]["vfGroups"][0]["vfs"]] == [
        "0000:3e:00.2",
        "0000:3e:00.3",
        "0000:3e:00.4",
        "0000:3e:00.5",
    ]


def test_unhealthy_gpu_and_down_nic(tmp_path: Path) -> None:
    machine, broken = unhealthy_gpu_machine()
    found = discover(machine.materialize(tmp_path), FakeNVML(machine, broken=broken))
    gpus = {d["minor"]: d for d in found.devices if d["type"] == "gpu"}
    assert sorted(gpus) == [0, 1, 2, 3]
    bad = gpus[2]
    assert bad["health"] is False and bad["id"] == "0000:1a:00.0"
    assert bad["conditions"] == [
        {
            "type": "Healthy",
            "status": "False",
            "reason": "NVMLError",
            "message": "nvmlDeviceGetHandleByPciBusId: Unknown Error",
        }
    ]
    assert "koordinator.sh/gpu-memory" not in bad["resources"]
    assert all(gpus[m]["health"] for m in (0, 1, 3))
    assert found.labels["node.koordinator.sh/gpu-model"] == "Tesla-T4"
    nic = next(d for d in found.devices if d["type"] == "rdma")
    assert nic["health"] is False
    assert nic["conditions"][0]["reason"] == "PortNotActive"
    assert found.errors == ["gpu 0000:1a:00.0: nvmlDeviceGetHandleByPciBusId: Unknown Error"]


def test_machine_without_devices(tmp_path: Path) -> None:
    machine = no_devices()
    found = discover(machine.materialize(tmp_path), FakeNVML(machine))
    assert found.devices == [] and found.labels == {} and found.errors == []


def test_without_nvml_gpus_come_from_sysfs(tmp_path: Path) -> None:
    machine = pcie_switch_2gpu_2nic()
    found = discover(machine.materialize(tmp_path), FakeNVML(machine, available=False))
    assert found.nvml == "unavailable"
    gpus = [d for d in found.devices if d["type"] == "gpu"]
    assert [(g["minor"], g["id"]) for g in gpus] == [(0, "0000:3c:00.0"), (1, "0000:3d:00.0")]
    assert gpus[0]["resources"] == {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    assert found.labels == {"node.koordinator.sh/gpu-vendor": "nvidia"}


def test_nvml_failing_mid_scan_marks_the_rest_unhealthy(tmp_path: Path) -> None:
    machine = h100_nvlink_8x()
    nvml = FakeNVML(machine, fail_after=3)
    found = discover(machine.materialize(tmp_path), nvml)
    gpus = [d for d in found.devices if d["type"] == "gpu"]
    assert [g["health"] for g in gpus] == [True] * 3 + [False] * 5
    assert sorted(g["minor"] for g in gpus) == list(range(8))
    assert found.nvml == "failed"
    assert any("GPU is lost" in e for e in found.errors)
    assert nvml.closed == nvml.opened == 1  # NVML is shut down even after the failure


def test_daemon_writes_device_and_node_labels_then_updates_only_on_change(tmp_path: Path) -> None:
    machine, broken = unhealthy_gpu_machine()
    host = machine.materialize(tmp_path)
    clock = VirtualClock(T0)
    cluster = MemoryCluster(clock)
    cluster.create(make_node("gpu-0"))
    nvml = FakeNVML(machine, broken=broken)
    daemon = DeviceDaemon("gpu-0", cluster, host, nvml, cluster.clock.now)
    first = daemon.sync()
    assert first.action == "create"
    device = cluster.get("Device", "gpu-0")
    assert device["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert device["metadata"]["labels"]["node.koordinator.sh/gpu-model"] == "Tesla-T4"
    node_labels = cluster.get("Node", "gpu-0")["metadata"]["labels"]
    assert node_labels["node.koordinator.sh/gpu-vendor"] == "nvidia"
    assert node_labels["node.koordinator.sh/gpu-driver-version"] == "550.54.15"
    stamp = device["spec"]["devices"][0]["conditions"][0]["lastTransitionTime"]
    clock.advance(60)
    assert daemon.sync().action == "unchanged"
    nvml.broken = frozenset()  # the GPU recovered
    clock.advance(60)
    assert daemon.sync().action == "update"
    devices = cluster.get("Device", "gpu-0")["spec"]["devices"]
    assert all(d["health"] for d in devices if d["type"] == "gpu")
    # Unchanged conditions keep their transition time; the recovered GPU's moved on.
    assert devices[0]["conditions"][0]["lastTransitionTime"] == stamp
    assert devices[2]["conditions"][0]["lastTransitionTime"] != stamp


def test_daemon_keeps_running_through_failures(tmp_path: Path) -> None:
    machine = h100_nvlink_8x()
    host = machine.materialize(tmp_path)
    cluster = MemoryCluster(VirtualClock(T0))
    nvml = FakeNVML(machine, fail_after=0)
    daemon = DeviceDaemon("gpu-0", cluster, host, nvml, cluster.clock.now)
    stop = threading.Event()
    results: list[Any] = []

    def on_result(result: Any) -> None:
        results.append(result)
        if len(results) == 1:
            nvml.fail_after = None  # the driver comes back
        if len(results) == 3:
            stop.set()

    daemon.run(stop, 0.001, on_result)
    assert len(results) == 3
    assert not any(d["health"] for d in results[0].device["spec"]["devices"] if d["type"] == "gpu")
    assert all(d["health"] for d in results[1].device["spec"]["devices"])
    assert [r.action for r in results] == ["create", "update", "unchanged"]


def test_cli_oneshot_writes_the_output_file(tmp_path: Path) -> None:
    machine = pcie_switch_2gpu_2nic()
    machine.materialize(tmp_path / "host")
    out = tmp_path / "device.json"
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(json.dumps(make_node("gpu-0")))
    from koord_framework.cli.main import build_parser

    args = build_parser().parse_args(
        [
            "device-daemon",
            "--node-name",
            "gpu-0",
            "--cluster",
            str(cluster_file),
            "--host-root",
            str(tmp_path / "host"),
            "--oneshot",
            "--no-timestamp",
            "--output-file",
            str(out),
        ]
    )
    assert run_cli(args, nvml=FakeNVML(machine)) == 0
    data = json.loads(out.read_text())
    assert "timestamp" not in data
    assert data["action"] == "create"
    assert [d["id"] for d in data["device"]["spec"]["devices"]] == [
        "GPU-a100-a",
        "GPU-a100-b",
        "0000:3e:00.0",
        "0000:3f:00.0",
    ]


def test_cli_bad_input(tmp_path: Path) -> None:
    from koord_framework.cli.main import build_parser

    args = build_parser().parse_args(["device-daemon", "--host-root", str(tmp_path), "--oneshot"])
    assert run_cli(args) == 2
    args = build_parser().parse_args(
        ["device-daemon", "--node-name", "n", "--host-root", str(tmp_path), "--sleep-interval", "0s"]
    )
    assert run_cli(args) == 2


@pytest.mark.parametrize(
    ("text", "seconds"), [("60s", 60.0), ("5m", 300.0), ("1h", 3600.0), ("500ms", 0.5), ("2", 2.0)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_gpu_model_label() -> None:
    assert gpu_model_label("NVIDIA A100-SXM4-80GB") == "A100-SXM4-80GB"
    assert gpu_model_label("Tesla T4") == "Tesla-T4"
