"""DeviceShare in a scheduler: Filter/Score/Reserve/Unreserve/PreBind, caches, preemption, bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_deviceshare import DeviceShare
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import decode_allocations
from koord_plugin_deviceshare.builders import GiB, gpu_node_allocatable, make_device

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.status import Code
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness


def gpu_node(name: str, gpus: int = 8, rdma: int = 2, **labels: str) -> dict[str, Any]:
    return make_node(
        name, cpu="64", memory="512Gi", allocatable=gpu_node_allocatable(gpus, rdma), labels=labels
    )


def harness(*objects: dict[str, Any], args: dict[str, Any] | None = None) -> SchedulerHarness:
    h = SchedulerHarness([(DeviceShare, args)] if args else [DeviceShare])
    h.add(*objects)
    return h


def plugin_of(h: SchedulerHarness) -> DeviceShare:
    p = h.plugin("DeviceShare")
    assert isinstance(p, DeviceShare)
    return p


def allocated(h: SchedulerHarness, name: str) -> dict[str, Any]:
    res = h.result(make_pod(name))
    raw = res.annotations.get(n.ANNOTATION_DEVICE_ALLOCATED)
    assert raw is not None, res
    return dict(json.loads(raw))


def test_whole_gpus_are_allocated_and_annotated_with_ids() -> None:
    h = harness(gpu_node("n1"), make_device("n1"))
    res = h.schedule_one(make_pod("p", requests={n.NVIDIA_GPU: "2"}))
    assert res.scheduled, res
    got = allocated(h, "p")
    assert [a["minor"] for a in got["gpu"]] == [0, 1]
    assert [a["id"] for a in got["gpu"]] == ["GPU-n1-00", "GPU-n1-01"]
    assert got["gpu"][0]["resources"] == {n.GPU_CORE: "100", n.GPU_MEMORY: "80Gi", n.GPU_MEMORY_RATIO: "100"}
    # The bound pod's annotation is what the cache counts: the next pod gets the next pair.
    h.schedule_one(make_pod("q", requests={n.NVIDIA_GPU: "2"}))
    assert [a["minor"] for a in allocated(h, "q")["gpu"]] == [2, 3]


def test_shared_gpu_fills_memory_and_never_oversubscribes() -> None:
    h = harness(gpu_node("n1", gpus=1, rdma=0), make_device("n1", gpus=1, rdma=0, memory=16 * GiB))
    for i in range(4):
        res = h.schedule_one(make_pod(f"p{i}", requests={n.GPU_CORE: "25", n.GPU_MEMORY_RATIO: "25"}))
        assert res.scheduled
        a = allocated(h, f"p{i}")["gpu"][0]
        assert a["resources"][n.GPU_MEMORY] == "4Gi"
    res = h.schedule_one(make_pod("p4", requests={n.GPU_CORE: "25", n.GPU_MEMORY_RATIO: "25"}))
    assert not res.scheduled
    assert "Insufficient GPU Devices" in res.message  # the topology path's reason, as Koordinator
    assert plugin_of(h).node_summary("n1") == {
        "gpu": {"0": {n.GPU_CORE: 0, n.GPU_MEMORY: 0, n.GPU_MEMORY_RATIO: 0}}
    }


def test_filter_reason_names_the_short_device() -> None:
    h = harness(gpu_node("n1", gpus=1, rdma=0), make_device("n1", gpus=1, rdma=0))
    h.add(
        make_pod(
            "big",
            node="n1",
            annotations={
                n.ANNOTATION_DEVICE_ALLOCATED: json.dumps(
                    {"gpu": [{"minor": 0, "resources": {n.GPU_CORE: "80", n.GPU_MEMORY_RATIO: "80"}}]}
                )
            },
        )
    )
    s = h.filter(make_pod("p", requests={n.GPU_CORE: "50", n.GPU_MEMORY_RATIO: "50"}), "n1")
    assert s.code is Code.UNSCHEDULABLE
    assert s.reasons[0] == "Insufficient GPU Devices"
    assert "gpu 0: gpu-core 20 free < 50" in s.reasons[1]


def test_unreserve_returns_devices_and_reserve_is_counted_once() -> None:
    h = harness(gpu_node("n1", gpus=2, rdma=0), make_device("n1", gpus=2, rdma=0))
    p = plugin_of(h)
    pod = make_pod("p", requests={n.NVIDIA_GPU: "1"})
    assert h.reserve(pod, "n1").is_success
    assert p.nodes["n1"].free["gpu"][0][n.GPU_CORE] == 0
    h.unreserve(pod, "n1")
    assert p.nodes["n1"].free["gpu"][0][n.GPU_CORE] == 100
    h.unreserve(pod, "n1")  # idempotent
    assert p.nodes["n1"].free["gpu"][0][n.GPU_CORE] == 100


def test_deleted_pod_frees_its_devices() -> None:
    h = harness(gpu_node("n1", gpus=1, rdma=0), make_device("n1", gpus=1, rdma=0))
    h.schedule_one(make_pod("p", requests={n.NVIDIA_GPU: "1"}))
    assert plugin_of(h).nodes["n1"].free["gpu"][0][n.GPU_CORE] == 0
    h.cluster.delete("Pod", "p", "default")
    assert plugin_of(h).nodes["n1"].free["gpu"][0][n.GPU_CORE] == 100


def test_least_allocated_spreads_and_most_allocated_packs() -> None:
    objects = [gpu_node("a", gpus=1, rdma=0), make_device("a", gpus=1, rdma=0)]
    objects += [gpu_node("b", gpus=1, rdma=0), make_device("b", gpus=1, rdma=0)]
    used = {
        n.ANNOTATION_DEVICE_ALLOCATED: json.dumps(
            {
                "gpu": [
                    {
                        "minor": 0,
                        "resources": {n.GPU_CORE: "50", n.GPU_MEMORY_RATIO: "50", n.GPU_MEMORY: "40Gi"},
                    }
                ]
            }
        )
    }
    objects.append(make_pod("old", node="a", annotations=used))
    pod = make_pod("p", requests={n.GPU_CORE: "25", n.GPU_MEMORY_RATIO: "25"})
    spread = harness(*objects).normalized_scores(pod)
    assert spread["b"] > spread["a"]
    packed = harness(*objects, args={"scoringStrategy": {"type": "MostAllocated"}}).normalized_scores(pod)
    assert packed["a"] > packed["b"]


def test_preemption_what_if_counts_victim_devices_as_free() -> None:
    h = harness(gpu_node("n1", gpus=1, rdma=0), make_device("n1", gpus=1, rdma=0))
    h.add(
        make_pod(
            "victim",
            node="n1",
            annotations={
                n.ANNOTATION_DEVICE_ALLOCATED: json.dumps(
                    {"gpu": [{"minor": 0, "resources": {n.GPU_CORE: "100", n.GPU_MEMORY_RATIO: "100"}}]}
                )
            },
        )
    )
    p = plugin_of(h)
    pod = PodInfo.from_manifest(make_pod("p", requests={n.NVIDIA_GPU: "1"}))
    victim = PodInfo.from_manifest(make_pod("victim", node="n1"))
    node = h.node_info("n1")
    state = CycleState()
    p.pre_filter(state, pod, [node])
    assert p.filter(state, pod, node).code is Code.UNSCHEDULABLE
    assert p.remove_pod(state, pod, victim, node).is_success
    assert p.filter(state, pod, node).is_success
    clone = state.clone()
    assert p.add_pod(state, pod, victim, node).is_success
    assert p.filter(state, pod, node).code is Code.UNSCHEDULABLE
    assert p.filter(clone, pod, node).is_success  # the clone kept its own what-if


def test_rdma_with_vfs_and_joint_allocation_same_pcie() -> None:
    h = harness(gpu_node("n1"), make_device("n1", gpus=8, rdma=4, vfs=2))
    annotations = {
        n.ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps({"rdma": {"vfSelector": {}}}),
        n.ANNOTATION_DEVICE_JOINT_ALLOCATE: json.dumps(
            {"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}
        ),
    }
    h.schedule_one(make_pod("p", requests={n.NVIDIA_GPU: "4", n.RDMA_RESOURCE: "1"}, annotations=annotations))
    got = allocated(h, "p")
    assert [a["minor"] for a in got["gpu"]] == [0, 1, 2, 3]
    # Four GPUs on two PCIe switches: one NIC (with a VF) per switch.
    assert [a["minor"] for a in got["rdma"]] == [0, 1]
    assert all(len(a["extension"]["vfs"]) == 1 for a in got["rdma"])
    h.schedule_one(make_pod("q", requests={n.RDMA_RESOURCE: "1"}, annotations=annotations))
    vfs = {v["busID"] for a in allocated(h, "q")["rdma"] for v in a["extension"]["vfs"]}
    first = {v["busID"] for a in got["rdma"] for v in a["extension"]["vfs"]}
    assert not vfs & first  # a VF is never handed out twice


# --- bad input -------------------------------------------------------------------------------------
def test_gpu_core_150_is_refused_naming_the_pod_and_field() -> None:
    h = harness(gpu_node("n1"), make_device("n1"))
    res = h.schedule_one(make_pod("p", requests={n.GPU_CORE: "150", n.GPU_MEMORY_RATIO: "150"}))
    assert not res.scheduled
    assert (
        res.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        or "invalid resource device requests" in res.message
    )
    assert "invalid resource device requests" in res.message
    state = CycleState()
    _, s = plugin_of(h).pre_filter(
        state,
        PodInfo.from_manifest(make_pod("p", requests={n.GPU_CORE: "150", n.GPU_MEMORY_RATIO: "150"})),
        [],
    )
    assert s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.reasons[0] == f"invalid resource device requests: [{n.GPU_CORE} {n.GPU_MEMORY_RATIO}]"
    assert "pod default/p" in s.reasons[1] and f"{n.GPU_CORE} 150" in s.reasons[1]


def test_gpu_core_without_memory_is_refused() -> None:
    h = harness(gpu_node("n1"), make_device("n1"))
    _, s = plugin_of(h).pre_filter(
        CycleState(), PodInfo.from_manifest(make_pod("p", requests={n.GPU_CORE: "50"})), []
    )
    assert s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.reasons[0] == f"invalid resource device requests: [{n.GPU_CORE}]"
    assert "needs" in s.reasons[1] and n.GPU_MEMORY in s.reasons[1]


def test_gpu_memory_ratio_alone_is_accepted_as_koordinator_does() -> None:
    # Koordinator's ValidDeviceResourceCombinations lists GPUMemoryRatio on its own (vector DeviceShare-226).
    h = harness(gpu_node("n1", gpus=1, rdma=0), make_device("n1", gpus=1, rdma=0, memory=16 * GiB))
    res = h.schedule_one(make_pod("p", requests={n.GPU_MEMORY_RATIO: "50"}))
    assert res.scheduled
    assert allocated(h, "p")["gpu"][0]["resources"] == {n.GPU_MEMORY: "8Gi", n.GPU_MEMORY_RATIO: "50"}


def test_device_with_duplicate_minors_is_refused_naming_node_and_field() -> None:
    device = make_device("n1", gpus=2, rdma=0)
    device["spec"]["devices"][1]["minor"] = 0
    h = harness(gpu_node("n1", gpus=2, rdma=0), device)
    s = h.filter(make_pod("p", requests={n.NVIDIA_GPU: "1"}), "n1")
    assert s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "Device n1: spec.devices[1].minor: duplicate minor 0 of type gpu" in s.reasons[0]
    # Fixing the object makes the node usable again.
    h.cluster.update(make_device("n1", gpus=2, rdma=0))
    assert h.filter(make_pod("p", requests={n.NVIDIA_GPU: "1"}), "n1").is_success


def test_malformed_hint_and_allocated_annotations() -> None:
    h = harness(gpu_node("n1"), make_device("n1"))
    pod = make_pod(
        "p", requests={n.RDMA_RESOURCE: "1"}, annotations={n.ANNOTATION_DEVICE_ALLOCATE_HINT: "{nope"}
    )
    _, s = plugin_of(h).pre_filter(CycleState(), PodInfo.from_manifest(pod), [])
    assert s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.reasons[0] == "invalid DeviceAllocateHint annotation"
    # A bound pod with an unreadable device-allocated annotation is ignored, not half-counted.
    h.add(make_pod("bad", node="n1", annotations={n.ANNOTATION_DEVICE_ALLOCATED: '{"gpu":[{"minor":"x"}]}'}))
    assert plugin_of(h).nodes["n1"].free["gpu"][0][n.GPU_CORE] == 100


def test_unhealthy_gpu_is_never_allocated() -> None:
    h = harness(gpu_node("n1", gpus=2, rdma=0), make_device("n1", gpus=2, rdma=0, unhealthy=(0,)))
    h.schedule_one(make_pod("p", requests={n.NVIDIA_GPU: "1"}))
    assert [a["minor"] for a in allocated(h, "p")["gpu"]] == [1]
    assert not h.schedule_one(make_pod("q", requests={n.NVIDIA_GPU: "1"})).scheduled


def test_node_without_device_object_is_left_to_node_resources_fit() -> None:
    h = harness(gpu_node("n1"))
    assert h.filter(make_pod("p", requests={n.NVIDIA_GPU: "1"}), "n1").is_success


def test_cpu_only_pod_skips_the_plugin() -> None:
    h = harness(gpu_node("n1"), make_device("n1"))
    _, s = plugin_of(h).pre_filter(CycleState(), PodInfo.from_manifest(make_pod("p", cpu="1")), [])
    assert s.code is Code.SKIP


@pytest.mark.parametrize(
    ("labels", "code"),
    [({"koordinator.sh/gpu-isolation-provider": "HAMi-core"}, Code.ERROR), ({}, Code.SUCCESS)],
)
def test_gpu_isolation_provider_must_match(labels: dict[str, str], code: Code) -> None:
    h = harness(gpu_node("n1"), make_device("n1"))
    pod = make_pod("p", requests={n.GPU_CORE: "50", n.GPU_MEMORY_RATIO: "50"}, labels=labels)
    assert h.filter(pod, "n1").code is code


def test_share_unsupported_model_is_refused() -> None:
    h = harness(
        gpu_node("n1", **{n.LABEL_GPU_VENDOR: "nvidia", n.LABEL_GPU_MODEL: "H20"}),
        make_device("n1"),
        args={"gpuShareUnsupportedModels": [{"vendor": "nvidia", "model": "H20"}]},
    )
    s = h.filter(make_pod("p", requests={n.GPU_CORE: "50", n.GPU_MEMORY_RATIO: "50"}), "n1")
    assert s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.reasons == ('model "H20" of vendor "nvidia" does not support GPU Share',)
    assert h.filter(make_pod("q", requests={n.NVIDIA_GPU: "1"}), "n1").is_success


def test_annotation_round_trip() -> None:
    h = harness(gpu_node("n1"), make_device("n1", vfs=2))
    hint = {n.ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps({"rdma": {"vfSelector": {}}})}
    h.schedule_one(make_pod("p", requests={n.NVIDIA_GPU: "1", n.RDMA_RESOURCE: "1"}, annotations=hint))
    raw = h.result(make_pod("p")).annotations[n.ANNOTATION_DEVICE_ALLOCATED]
    decoded = decode_allocations(raw)
    assert decoded["gpu"][0].id == "GPU-n1-00"
    assert decoded["rdma"][0].vfs and decoded["rdma"][0].id


def test_echo_of_own_write_is_counted_as_the_annotation_says() -> None:
    """The informer's echo of a PreBind write reuses the allocations instead of decoding them again; what
    the plugin then holds for each pod must equal what decoding the annotation gives (whole, shared, VF)."""
    h = harness(gpu_node("n1"), make_device("n1", vfs=2), gpu_node("n2"), make_device("n2", vfs=2))
    hint = {n.ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps({"rdma": {"vfSelector": {}}})}
    pods = [
        make_pod("whole", requests={n.NVIDIA_GPU: "2"}),
        make_pod("shared", requests={n.GPU_CORE: "30", n.GPU_MEMORY_RATIO: "30"}),
        make_pod("joint", requests={n.NVIDIA_GPU: "1", n.RDMA_RESOURCE: "1"}, annotations=hint),
    ]
    for pod in pods:
        assert h.schedule_one(pod).scheduled
    plugin = plugin_of(h)
    for pod in pods:
        res = h.result(make_pod(pod["metadata"]["name"]))
        raw = res.annotations[n.ANNOTATION_DEVICE_ALLOCATED]
        node, held, seen_raw = plugin._pod_allocations[f"default/{pod['metadata']['name']}"]
        assert (node, held, seen_raw) == (res.node, decode_allocations(raw), raw)


def test_pod_update_that_changes_no_allocation_leaves_the_node_fresh() -> None:
    h = harness(gpu_node("n1"), make_device("n1"))
    assert h.schedule_one(make_pod("p", requests={n.NVIDIA_GPU: "1"})).scheduled
    plugin = plugin_of(h)
    generation = plugin._node_gen.get("n1")
    bound = h.cluster.get("Pod", "p", "default")
    bound["status"] = {"phase": "Running"}
    h.cluster.update(bound)
    assert plugin._node_gen.get("n1") == generation
    # A changed annotation still counts: the held allocation follows it.
    again = h.cluster.get("Pod", "p", "default")
    whole = {n.GPU_CORE: "100", n.GPU_MEMORY: "80Gi", n.GPU_MEMORY_RATIO: "100"}
    again["metadata"]["annotations"][n.ANNOTATION_DEVICE_ALLOCATED] = json.dumps(
        {"gpu": [{"minor": 5, "resources": whole}]}
    )
    h.cluster.update(again)
    assert [a.minor for a in plugin._pod_allocations["default/p"][1]["gpu"]] == [5]


def test_pod_update_the_handler_does_not_read_is_skipped_and_a_terminal_phase_frees() -> None:
    h = harness(gpu_node("n1"), make_device("n1"))
    assert h.schedule_one(make_pod("p", requests={n.NVIDIA_GPU: "1"})).scheduled
    plugin = plugin_of(h)
    seen: list[str] = []
    handle = plugin._on_pod

    def counting(obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["name"])
        handle(obj)

    plugin._on_pod = counting  # type: ignore[method-assign]
    pod = h.cluster.get("Pod", "p", "default")
    pod["metadata"].setdefault("labels", {})["touched"] = "yes"
    h.cluster.update(pod)
    assert seen == []  # a label: nothing the device bookkeeping reads
    assert "default/p" in plugin._pod_allocations
    h.cluster.patch("Pod", "p", "default", {"status": {"phase": "Succeeded"}}, status=True)
    assert seen == ["p"]
    assert "default/p" not in plugin._pod_allocations
