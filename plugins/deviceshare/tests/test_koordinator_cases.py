"""Koordinator unit-test cases the vectors lack, re-stated against this allocator.

Sources (a7a1b76b): ``allocator_gpu_test.go`` (TestAllocateByPartition, TestAllocateByTopology),
``device_allocator_test.go`` (TestAutopilotAllocator), ``devicehandler_default_test.go``. The two Device
fixtures are the ones those tests use (``data/h800-device.json``: 8 GPUs, one PCIe switch each, 8 NICs with
fakeS/fakeG/fakeC VF groups; ``data/fake-device.json``: 8 GPUs two per switch, 4 NICs with 30 VFs each).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import DeviceAllocation, VFAllocation
from koord_plugin_deviceshare.allocator import AutopilotAllocator, desired_requests_and_count
from koord_plugin_deviceshare.device import parse_device
from koord_plugin_deviceshare.nodedevice import NodeDevice
from koord_plugin_deviceshare.state import DeviceHint, prepare_pod

from koord_framework.api.selectors import parse_label_selector
from koord_framework.scheduler.status import Code

DATA = Path(__file__).parent / "data"
H800 = json.loads((DATA / "h800-device.json").read_text())
FAKE = json.loads((DATA / "fake-device.json").read_text())
GPU_FULL = {n.GPU_CORE: 100, n.GPU_MEMORY_RATIO: 100}


def node_device(
    device: dict[str, Any], assigned: dict[str, list[DeviceAllocation]] | None = None
) -> NodeDevice:
    nd = NodeDevice()
    nd.set_device(parse_device(device))
    if assigned:
        nd.update_used(assigned, "default/assigned-pod", add=True)
    return nd


def pod_annotations(
    vf_type: str = "fakeG",
    joint: bool = True,
    same_pcie: bool = False,
    gpu_scope: str = "",
    rdma_exclusive: str = "",
    rdma_strategy: str = "",
) -> dict[str, str]:
    rdma: dict[str, Any] = {"selector": {"matchLabels": {"type": "fakeW"}}}
    if vf_type:
        rdma["vfSelector"] = {
            "matchExpressions": [{"key": "type", "operator": "In", "values": ["general", vf_type]}]
        }
    if rdma_exclusive:
        rdma["exclusivePolicy"] = rdma_exclusive
    if rdma_strategy:
        rdma["allocateStrategy"] = rdma_strategy
    hints: dict[str, Any] = {"rdma": rdma}
    if gpu_scope:
        hints["gpu"] = {"requiredTopologyScope": gpu_scope}
    out = {n.ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps(hints)}
    if joint:
        spec: dict[str, Any] = {"deviceTypes": ["gpu", "rdma"]}
        if same_pcie:
            spec["requiredScope"] = "SamePCIe"
        out[n.ANNOTATION_DEVICE_JOINT_ALLOCATE] = json.dumps(spec)
    return out


def allocate(
    nd: NodeDevice, gpus: int, annotations: dict[str, str], labels: dict[str, str] | None = None
) -> tuple[dict[str, list[tuple[int, tuple[str, ...]]]] | None, Code]:
    requests = {n.RDMA_RESOURCE: 1}
    if gpus:
        requests[n.NVIDIA_GPU] = gpus
    state = prepare_pod(requests, annotations)
    result, status = AutopilotAllocator(state, nd, labels or {}).allocate()
    if result is None:
        return None, status.code
    return {
        t: sorted((a.minor, tuple(vf.bus_id for vf in a.vfs)) for a in allocs) for t, allocs in result.items()
    }, status.code


HONOR_H800 = {n.LABEL_GPU_MODEL: "H800", n.LABEL_GPU_PARTITION_POLICY: "Honor"}


def rdma_vf(minor: int, bus: str, vf_minor: int) -> DeviceAllocation:
    return DeviceAllocation(minor, {n.RDMA_RESOURCE: 1}, vfs=(VFAllocation(bus, vf_minor),))


# --- TestAllocateByPartition -----------------------------------------------------------------------
def test_partition_three_gpus_is_not_a_partition_size() -> None:
    got, code = allocate(node_device(H800), 3, pod_annotations(), HONOR_H800)
    assert got is None and code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_partition_two_gpus_with_assigned_devices() -> None:
    assigned = {
        "gpu": [DeviceAllocation(2, dict(GPU_FULL)), DeviceAllocation(3, dict(GPU_FULL))],
        "rdma": [rdma_vf(1, "0000:09:00.3", 1), rdma_vf(2, "0000:7f:00.3", 1)],
    }
    got, _ = allocate(node_device(H800, assigned), 2, pod_annotations(), HONOR_H800)
    assert got == {
        "gpu": [(0, ()), (1, ())],
        "rdma": [(1, ("0000:09:00.4",)), (2, ("0000:7f:00.4",))],
    }


def test_partition_one_gpu_bin_packs_next_to_the_used_one() -> None:
    assigned = {"gpu": [DeviceAllocation(4, dict(GPU_FULL))], "rdma": [rdma_vf(5, "0001:08:00.3", 1)]}
    got, _ = allocate(node_device(H800, assigned), 1, pod_annotations(), HONOR_H800)
    assert got == {"gpu": [(5, ())], "rdma": [(6, ("0001:7e:00.3",))]}


# --- TestAllocateByTopology ------------------------------------------------------------------------
def test_topology_required_pcie_with_pcie_exclusive_nics() -> None:
    assigned = {"gpu": [DeviceAllocation(5, dict(GPU_FULL))], "rdma": [rdma_vf(3, "0000:51:00.2", 0)]}
    annotations = pod_annotations(same_pcie=True, gpu_scope="PCIe", rdma_exclusive="PCIeLevel")
    got, _ = allocate(node_device(FAKE, assigned), 2, annotations)
    assert got == {"gpu": [(6, ()), (7, ())], "rdma": [(4, ("0000:b9:00.2",))]}


def test_topology_required_numa_node_insufficient() -> None:
    assigned = {
        "gpu": [DeviceAllocation(5, dict(GPU_FULL)), DeviceAllocation(0, dict(GPU_FULL))],
        "rdma": [rdma_vf(3, "0000:51:00.2", 0)],
    }
    annotations = pod_annotations(same_pcie=True, gpu_scope="NUMANode", rdma_exclusive="PCIeLevel")
    got, code = allocate(node_device(FAKE, assigned), 4, annotations)
    assert got is None and code is Code.UNSCHEDULABLE


# --- TestAutopilotAllocator ------------------------------------------------------------------------
def test_three_gpus_and_two_vfs() -> None:
    got, _ = allocate(node_device(FAKE), 3, pod_annotations())
    assert got == {
        "gpu": [(0, ()), (1, ()), (2, ())],
        "rdma": [(1, ("0000:1f:00.2",)), (2, ("0000:90:00.2",))],
    }


def test_three_gpus_with_assigned_devices() -> None:
    assigned = {"gpu": [DeviceAllocation(0, dict(GPU_FULL))], "rdma": [rdma_vf(1, "0000:1f:00.2", 0)]}
    got, _ = allocate(node_device(FAKE, assigned), 3, pod_annotations())
    assert got == {
        "gpu": [(1, ()), (2, ()), (3, ())],
        "rdma": [(1, ("0000:1f:00.3",)), (2, ("0000:90:00.2",))],
    }


def test_two_gpus_with_assigned_devices() -> None:
    assigned = {"gpu": [DeviceAllocation(0, dict(GPU_FULL))], "rdma": [rdma_vf(1, "0000:1f:00.2", 0)]}
    got, _ = allocate(node_device(FAKE, assigned), 2, pod_annotations())
    assert got == {"gpu": [(2, ()), (3, ())], "rdma": [(2, ("0000:90:00.2",))]}


def test_host_network_applies_for_all_nics() -> None:
    device = json.loads(json.dumps(FAKE))
    for d in device["spec"]["devices"]:
        d.pop("vfGroups", None)
    annotations = pod_annotations(vf_type="", joint=True, same_pcie=True, rdma_strategy="ApplyForAll")
    got, _ = allocate(node_device(device), 4, annotations)
    assert got == {
        "gpu": [(0, ()), (1, ()), (2, ()), (3, ())],
        "rdma": [(1, ()), (2, ()), (3, ()), (4, ())],
    }


def test_vf_selector_without_vfs_on_the_node() -> None:
    device = json.loads(json.dumps(FAKE))
    for d in device["spec"]["devices"]:
        d.pop("vfGroups", None)
    got, code = allocate(node_device(device), 1, pod_annotations())
    assert got is None and code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_secondary_device_well_planned_skips_nics_outside_reserve() -> None:
    device = json.loads(json.dumps(FAKE))
    device["metadata"]["labels"] = {n.LABEL_SECONDARY_DEVICE_WELL_PLANNED: "true"}
    nd = node_device(device)
    state = prepare_pod({n.RDMA_RESOURCE: 1, n.NVIDIA_GPU: 8}, pod_annotations())
    result, _ = AutopilotAllocator(state, nd, {}).allocate()
    assert result is not None and set(result) == {"gpu"}
    state = prepare_pod({n.RDMA_RESOURCE: 1, n.NVIDIA_GPU: 8}, pod_annotations())
    result, _ = AutopilotAllocator(state, nd, {}, reserve_phase=True).allocate()
    assert result is not None and len(result["rdma"]) == 4


# --- devicehandler_default_test.go -----------------------------------------------------------------
def _hint(selector: dict[str, Any] | None, strategy: str, exclusive: str = "") -> DeviceHint:
    return DeviceHint(
        selector=parse_label_selector(selector) if selector is not None else None,
        allocate_strategy=strategy,
        exclusive_policy=exclusive,
    )


H800_RDMA_LABELLED = json.loads(json.dumps(H800))
for _i, _d in enumerate(d for d in H800_RDMA_LABELLED["spec"]["devices"] if d["type"] == "rdma"):
    # As in the Go test: four fakeW NICs, one fakeS, the rest unlabelled.
    _d["labels"] = {"type": "fakeW"} if _i < 4 else ({"type": "fakeS"} if _i == 4 else {})


@pytest.mark.parametrize(
    ("request_value", "hint", "want", "count", "ok"),
    [
        (100, None, 100, 1, True),
        (1, _hint({"matchLabels": {"type": "fakeW"}}, "ApplyForAll"), 1, 4, True),
        (1, _hint({"matchLabels": {"type": "fakeS"}}, "ApplyForAll"), 1, 1, True),
        (1, _hint({"matchExpressions": [{"key": "type", "operator": "Exists"}]}, "ApplyForAll"), 1, 5, True),
        (
            1,
            _hint({"matchExpressions": [{"key": "nope", "operator": "Exists"}]}, "ApplyForAll"),
            None,
            0,
            False,
        ),
        (4, _hint(None, "RequestsAsCount"), 1, 4, True),
        (4, _hint(None, "RequestsAsCount", "DeviceLevel"), 100, 4, True),
    ],
)
def test_default_handler(
    request_value: int, hint: DeviceHint | None, want: int | None, count: int, ok: bool
) -> None:
    nd = node_device(H800_RDMA_LABELLED)
    per, got_count, status = desired_requests_and_count(
        "rdma", {n.RDMA_RESOURCE: request_value}, nd, hint, None
    )
    assert status.is_success == ok
    assert got_count == count
    assert (per or {}).get(n.RDMA_RESOURCE) == want
