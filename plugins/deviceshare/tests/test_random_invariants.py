"""Random GPU clusters and pod mixes: replaying ``device-allocated`` afterwards finds no broken invariant.

Each seed builds nodes with 1-8 GPUs (some unhealthy), 0-4 RDMA NICs with VFs, pre-bound pods already holding
devices, and pending pods mixing whole GPUs (1-8), shared GPUs (gpu-core + ratio, gpu-memory bytes, gpu.shared
across two GPUs), RDMA with VFs, joint GPU+RDMA with ``SamePCIe`` and GPUs with ``requiredTopologyScope``.
Every pod is scheduled (some fail); then ``checker.check_allocations`` replays the cluster's annotations: no
device beyond 100 % / its memory, no whole GPU shared, no VF twice, required scopes kept. The plugin's own
cache must also agree with the replay.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from koord_plugin_deviceshare import DeviceShare
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import DeviceAllocation
from koord_plugin_deviceshare.allocator import AutopilotAllocator, quick_fit, quick_status
from koord_plugin_deviceshare.builders import GiB, gpu_node_allocatable, make_device, random_device_pod
from koord_plugin_deviceshare.checker import check_allocations
from koord_plugin_deviceshare.device import parse_device
from koord_plugin_deviceshare.nodedevice import NodeDevice
from koord_plugin_deviceshare.state import prepare_pod

from koord_framework.api.objects import PodInfo
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

SEEDS = range(8)


def random_cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    objects: list[dict[str, Any]] = []
    for i in range(rng.randint(2, 5)):
        gpus, rdma = rng.randint(1, 8), rng.randint(0, 4)
        memory = rng.choice([16, 40, 80]) * GiB
        unhealthy = tuple(m for m in range(gpus) if rng.random() < 0.1)
        name = f"n{i}"
        objects.append(
            make_node(name, cpu="128", memory="1Ti", allocatable=gpu_node_allocatable(gpus, rdma, memory))
        )
        objects.append(
            make_device(name, gpus, rdma, memory=memory, vfs=rng.randint(1, 3), unhealthy=unhealthy)
        )
    pending = [random_device_pod(rng, i) for i in range(rng.randint(15, 40))]
    return objects, pending


@pytest.mark.parametrize("seed", SEEDS)
def test_no_invariant_breaks_on_random_clusters(seed: int) -> None:
    rng = random.Random(seed)
    objects, pending = random_cluster(rng)
    h = SchedulerHarness([DeviceShare])
    h.add(*objects)
    scheduled = 0
    for pod in pending:
        scheduled += h.schedule_one(pod).scheduled
    assert scheduled > 0
    pods, _ = h.cluster.list("Pod")
    devices, _ = h.cluster.list("Device")
    assert check_allocations(devices, pods) == []
    # The plugin's cache counts exactly what the annotations say.
    plugin = h.plugin("DeviceShare")
    assert isinstance(plugin, DeviceShare)
    replay: dict[tuple[str, str, int], dict[str, int]] = {}
    for pod in pods:
        raw = (pod["metadata"].get("annotations") or {}).get(n.ANNOTATION_DEVICE_ALLOCATED)
        if raw:
            for t, allocs in json.loads(raw).items():
                for a in allocs:
                    key = (pod["spec"]["nodeName"], t, a["minor"])
                    replay[key] = replay.get(key, 0) + int(a["resources"].get(n.GPU_CORE, 0))
    for (node, t, minor), core in replay.items():
        if t == "gpu":
            assert plugin.nodes[node].used[t][minor].get(n.GPU_CORE, 0) == core


def test_checker_catches_oversubscription() -> None:
    device = make_device("n1", gpus=1, rdma=0)
    alloc = {"gpu": [{"minor": 0, "resources": {n.GPU_CORE: "60", n.GPU_MEMORY_RATIO: "60"}}]}
    pods = [
        make_pod(f"p{i}", node="n1", annotations={n.ANNOTATION_DEVICE_ALLOCATED: json.dumps(alloc)})
        for i in range(2)
    ]
    problems = check_allocations([device], pods)
    assert any("gpu-core 120 allocated > 100" in p for p in problems)


@pytest.mark.parametrize("seed", SEEDS)
def test_quick_fit_agrees_with_the_allocator(seed: int) -> None:
    """The Filter shortcut for plain pods gives the allocator's verdict, on random partly used nodes."""
    rng = random.Random(1000 + seed)
    checked = 0
    for _ in range(80):
        gpus, rdma = rng.randint(1, 8), rng.randint(0, 3)
        device = make_device(
            "n", gpus, rdma, memory=40 * GiB, unhealthy=tuple(m for m in range(gpus) if rng.random() < 0.1)
        )
        nd = NodeDevice()
        nd.set_device(parse_device(device))
        for m in range(gpus):
            if rng.random() < 0.5:
                share = rng.choice([10, 25, 50, 100])
                nd.update_used(
                    {"gpu": [DeviceAllocation(m, {n.GPU_CORE: share, n.GPU_MEMORY_RATIO: share})]},
                    f"x/{m}",
                    True,
                )
        labels = {n.LABEL_GPU_MODEL: rng.choice(["H100", "A100"])}
        pod = random_device_pod(rng, 0)
        requests = PodInfo.from_manifest(pod).requests
        state = prepare_pod(requests, pod["metadata"].get("annotations") or {})
        if state.skip:
            continue
        quick = quick_fit(state, nd, labels)
        if quick is None:
            continue
        _, status = AutopilotAllocator(state, nd, labels).allocate()
        assert quick == status.is_success, (requests, status)
        exact = quick_status(state, nd, labels)
        if exact is not None:  # the reason too, for GPU-only pods
            assert (exact.code, exact.reasons) == (status.code, status.reasons), requests
        checked += 1
    assert checked > 5


@pytest.mark.parametrize("seed", range(4))
def test_vector_forms_agree_while_the_cluster_fills(seed: int) -> None:
    """filter_all/score_all (GPU columns, memo) equal filter/score after every placement, on nodes with
    and without Device objects, a refused Device and a partition-honoring node."""
    rng = random.Random(500 + seed)
    objects, pending = random_cluster(rng)
    objects.append(make_node("bare", cpu="64", memory="256Gi", allocatable=gpu_node_allocatable(8, 0)))
    honor = make_device("honor", 8, 0, memory=80 * GiB)
    objects.append(
        make_node(
            "honor",
            cpu="64",
            memory="256Gi",
            allocatable=gpu_node_allocatable(8, 0),
            labels={n.LABEL_GPU_MODEL: "H100", n.LABEL_GPU_PARTITION_POLICY: "Honor"},
        )
    )
    objects.append(honor)
    broken = make_device("broken", 2, 0)
    broken["spec"]["devices"][1]["minor"] = 0
    objects += [make_node("broken", cpu="64", memory="256Gi", allocatable=gpu_node_allocatable(2, 0)), broken]
    h = SchedulerHarness([DeviceShare])
    h.add(*objects)
    probes = [
        make_pod("probe-1", requests={n.NVIDIA_GPU: "1"}),
        make_pod("probe-4", requests={n.NVIDIA_GPU: "4"}),
        make_pod("probe-s", requests={n.GPU_CORE: "50", n.GPU_MEMORY_RATIO: "50"}),
        make_pod("probe-m", requests={n.GPU_CORE: "20", n.GPU_MEMORY: "16Gi"}),
    ]
    for pod in pending:
        h.schedule_one(pod)
        for probe in probes:
            h.check_vector_forms(probe, "DeviceShare")
