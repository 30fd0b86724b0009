"""DeviceShare end to end: ``koord device-daemon`` writes a node's Device object and GPU labels into a real
API server from a fake host, then a ``koord scheduler`` process with DeviceShare binds GPU pods and writes
``device-allocated`` onto them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.devices import pcie_switch_2gpu_2nic

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def scheduler_config(tmp_path: Path, lease: str) -> Path:
    source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
    config = yaml.safe_load(source["data"]["koord-scheduler-config"])
    config["leaderElection"]["resourceName"] = lease
    path = tmp_path / f"{lease}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_device_daemon_then_deviceshare_scheduling(
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    koord_crds: list[str],
    tmp_path: Path,
    kube_apiserver: Any,
    e2e_harness: Any,
) -> None:
    node = f"{namespace}-gpu"
    allocatable = {
        "nvidia.com/gpu": "2",
        "koordinator.sh/gpu-core": "200",
        "koordinator.sh/gpu-memory-ratio": "200",
        "koordinator.sh/rdma": "200",
    }
    kube.create(make_node(node, cpu="8", memory="32Gi", allocatable=allocatable))
    pcie_switch_2gpu_2nic().materialize(tmp_path / "host")
    # No NVML here: the daemon reads the GPUs from sysfs PCI.
    daemon = subprocess.run(
        [
            sys.executable,
            "-m",
            "koord_framework.cli.main",
            "device-daemon",
            f"--node-name={node}",
            f"--kubeconfig={kube_apiserver.kubeconfig}",
            f"--host-root={tmp_path / 'host'}",
            "--oneshot",
            "--no-timestamp",
            "--no-nvml",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert daemon.returncode == 0, daemon.stderr
    assert json.loads(daemon.stdout)["action"] == "create"
    device = kube.get("Device", node)
    assert [(d["type"], d["minor"]) for d in device["spec"]["devices"]] == [
        ("gpu", 0),
        ("gpu", 1),
        ("rdma", 0),
        ("rdma", 1),
    ]
    assert device["metadata"]["ownerReferences"][0]["name"] == node
    assert kube.get("Node", node)["metadata"]["labels"]["node.koordinator.sh/gpu-vendor"] == "nvidia"

    port = e2e_harness.free_port()
    log = tmp_path / "scheduler.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "koord_framework.cli.serve",
                "scheduler",
                f"--config={scheduler_config(tmp_path, f'ds-{namespace}')}",
                f"--kubeconfig={kube_apiserver.kubeconfig}",
                f"--address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        for name, requests in (
            ("whole", {"nvidia.com/gpu": "1"}),
            ("half", {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}),
        ):
            kube.create(
                make_pod(
                    name,
                    namespace,
                    cpu="100m",
                    requests=requests,
                    limits=requests,  # extended resources need limits = requests
                    scheduler_name="koord-scheduler",
                )
            )

        def annotated() -> bool:
            pods, _ = kube.list("Pod", namespace)
            # PreBind writes the annotation, then Bind sets the node: wait for both.
            return len(pods) == 2 and all(
                ALLOCATED in (p["metadata"].get("annotations") or {}) and p["spec"].get("nodeName")
                for p in pods
            )

        wait_for(annotated, 60, "both pods bound with device-allocated")
        pods = {p["metadata"]["name"]: p for p in kube.list("Pod", namespace)[0]}
        whole = json.loads(pods["whole"]["metadata"]["annotations"][ALLOCATED])["gpu"]
        half = json.loads(pods["half"]["metadata"]["annotations"][ALLOCATED])["gpu"]
        assert pods["whole"]["spec"]["nodeName"] == pods["half"]["spec"]["nodeName"] == node
        assert len(whole) == 1 and whole[0]["resources"]["koordinator.sh/gpu-core"] == "100"
        assert half[0]["resources"]["koordinator.sh/gpu-core"] == "50"
        assert whole[0]["minor"] != half[0]["minor"], "a whole GPU is never shared"
        assert {whole[0]["id"], half[0]["id"]} <= {"0000:3c:00.0", "0000:3d:00.0"}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
