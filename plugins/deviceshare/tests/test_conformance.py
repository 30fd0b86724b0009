"""Platform conformance, on random clusters that have GPU nodes with Device objects and device pods."""

from __future__ import annotations

import random
from typing import Any, ClassVar

from koord_plugin_deviceshare import DeviceShare
from koord_plugin_deviceshare.builders import GiB, gpu_node_allocatable, make_device, random_device_pod

from koord_framework.testing import make_node
from koord_framework.testing.conformance import SchedulerPluginConformance


class TestConformance(SchedulerPluginConformance):
    plugin_class = DeviceShare
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {},
        {"scoringStrategy": {"type": "MostAllocated"}},
        {
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "koordinator.sh/gpu-core", "weight": 2}],
            },
            "disableDeviceNUMATopologyAlignment": True,
            "gpuShareUnsupportedModels": [{"vendor": "nvidia", "model": "H20"}],
            "gpuSharedResourceTemplatesConfig": {
                "configMapNamespace": "x",
                "configMapName": "y",
                "matchedResources": [],
            },
        },
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        {"scoringStrategy": {"resources": [{"name": "koordinator.sh/gpu-core", "weight": 0}]}},
        {"gpuShareUnsupportedModels": [{"vendor": "nvidia"}]},
    ]

    def make_objects(self, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        objects: list[dict[str, Any]] = []
        for i in range(rng.randint(2, 6)):
            gpus, rdma = rng.randint(1, 8), rng.randint(0, 3)
            name = f"gpu-{i}"
            objects.append(
                make_node(name, cpu="64", memory="256Gi", allocatable=gpu_node_allocatable(gpus, rdma))
            )
            if rng.random() < 0.85:  # some GPU nodes have no Device object yet
                objects.append(make_device(name, gpus, rdma, memory=40 * GiB, vfs=2))
        objects.append(make_node("cpu-only", cpu="16", memory="64Gi"))
        return objects, [random_device_pod(rng, i) for i in range(12)]
