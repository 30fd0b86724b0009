"""The shipped example through the simulator with ``--explain``: devices chosen and per-node reasons."""

from __future__ import annotations

import json
from pathlib import Path

from koord_plugin_deviceshare import DeviceShare

from koord_framework.registry import PluginRegistry
from koord_framework.scheduler.simulate import simulate
from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOW = 1_704_067_200.0


def test_example_packs_the_shared_gpu_and_explains_the_misfit() -> None:
    registry = PluginRegistry.from_classes(
        "koord.scheduler.plugins", [DeviceShare, HarnessQueueSort, HarnessBinder]
    )
    result, _ = simulate(
        [EXAMPLES / "cluster.yaml"], EXAMPLES / "profile.yaml", now=NOW, explain=True, registry=registry
    )
    pods = {p.pod: p for p in result.pods}
    quarter, train, slice48 = (
        pods["default/infer-quarter"],
        pods["default/train-2gpu"],
        pods["default/slice-48g"],
    )
    # MostAllocated packs the quarter GPU next to the running half on gpu-a's GPU 1.
    assert quarter.node == "gpu-a"
    got = json.loads(quarter.annotations["scheduling.koordinator.sh/device-allocated"])
    assert [(a["minor"], a["id"], a["resources"]["koordinator.sh/gpu-memory"]) for a in got["gpu"]] == [
        (1, "GPU-gpu-a-01", "10Gi")
    ]
    assert train.node == "gpu-b"
    assert train.filter == {
        "gpu-a": {
            "plugin": "DeviceShare",
            "reason": "Insufficient GPU Devices, gpu 1: gpu-core 25 free < 100",
        }
    }
    assert slice48.node is None
    assert slice48.filter is not None
    assert slice48.filter["gpu-a"]["reason"] == (
        "Insufficient GPU Devices, gpu 0: gpu-memory 40Gi free < 48Gi; gpu 1: gpu-core 25 free < 50"
    )
