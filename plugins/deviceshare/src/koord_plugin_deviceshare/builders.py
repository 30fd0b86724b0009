"""Manifests of GPU nodes and their Device objects, for tests, examples and the benchmark.

``make_device`` lays GPUs out the way common 8-GPU servers are built: two GPUs per PCIe switch, half the
switches per NUMA node (socket), and one RDMA NIC on each of the first ``rdma`` switches, each with ``vfs``
virtual functions. ``gpu_node_allocatable`` is what Koordinator's node-resource controller publishes for
such a node, so NodeResourcesFit admits device pods there.
"""

from __future__ import annotations

import json
import random
from typing import Any

from koord_plugin_deviceshare import names as n

__all__ = ["device_pod", "gpu_node_allocatable", "make_device", "random_device_pod"]

GiB = 1 << 30


def make_device(
    node: str,
    gpus: int = 8,
    rdma: int = 2,
    *,
    memory: int = 80 * GiB,
    numa_nodes: int = 2,
    vfs: int = 4,
    unhealthy: tuple[int, ...] = (),
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Device manifest for ``node`` with ``gpus`` GPUs and ``rdma`` RDMA NICs."""
    switches = max(1, (gpus + 1) // 2)
    per_numa = max(1, switches // max(1, numa_nodes))

    def topology(switch: int, bus: str) -> dict[str, Any]:
        numa = min(switch // per_numa, numa_nodes - 1)
        return {
            "socketID": numa,
            "nodeID": numa,
            "pcieID": f"pci0000:{0x10 * (switch + 1):02x}",
            "busID": bus,
        }

    devices: list[dict[str, Any]] = []
    for minor in range(gpus):
        bus = f"0000:{0x18 + 0x10 * (minor // 2):02x}:{minor % 2:02x}.0"
        devices.append(
            {
                "type": n.GPU,
                "id": f"GPU-{node}-{minor:02d}",
                "minor": minor,
                "health": minor not in unhealthy,
                "resources": {
                    n.GPU_CORE: "100",
                    n.GPU_MEMORY: str(memory),
                    n.GPU_MEMORY_RATIO: "100",
                },
                "topology": topology(minor // 2, bus),
            }
        )
    for i in range(rdma):
        switch = i * max(1, switches // max(1, rdma))
        bus = f"0000:{0x1F + 0x10 * switch:02x}:00.0"
        functions = [
            {"minor": v, "busID": f"0000:{0x1F + 0x10 * switch:02x}:{(v + 2) // 8:02x}.{(v + 2) % 8}"}
            for v in range(vfs)
        ]
        entry: dict[str, Any] = {
            "type": n.RDMA,
            "id": bus,
            "minor": i,
            "health": True,
            "resources": {n.RDMA_RESOURCE: "100"},
            "topology": topology(switch, bus),
        }
        if functions:
            entry["vfGroups"] = [{"labels": {"type": "general"}, "vfs": functions}]
        devices.append(entry)
    meta: dict[str, Any] = {"name": node}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": meta,
        "spec": {"devices": devices},
    }


def gpu_node_allocatable(gpus: int = 8, rdma: int = 2, memory: int = 80 * GiB) -> dict[str, str]:
    """Node allocatable of the device resources of ``make_device(gpus, rdma, memory)``."""
    return {
        n.NVIDIA_GPU: str(gpus),
        n.KOORD_GPU: str(100 * gpus),
        n.GPU_CORE: str(100 * gpus),
        n.GPU_MEMORY_RATIO: str(100 * gpus),
        n.GPU_MEMORY: str(memory * gpus),
        n.RDMA_RESOURCE: str(100 * rdma),
    }


def random_device_pod(rng: random.Random, i: int) -> dict[str, Any]:
    """A pending pod ``p<i>`` of a random device kind (whole, shared, multi-shared, RDMA, joint, scoped,
    or CPU only)."""
    kind = rng.choice(["whole", "shared", "shared-mem", "multi-shared", "rdma", "joint", "scoped", "cpu"])
    annotations: dict[str, str] = {}
    requests: dict[str, str] = {"cpu": "1"}
    if kind == "whole":
        requests[n.NVIDIA_GPU] = str(rng.randint(1, 8))
    elif kind == "shared":
        share = rng.choice([25, 30, 50, 75])
        requests |= {n.GPU_CORE: str(share), n.GPU_MEMORY_RATIO: str(share)}
    elif kind == "shared-mem":
        requests |= {n.GPU_CORE: str(rng.choice([10, 20, 40])), n.GPU_MEMORY: f"{rng.choice([4, 8, 16])}Gi"}
    elif kind == "multi-shared":
        requests |= {n.GPU_SHARED: "2", n.GPU_CORE: "100", n.GPU_MEMORY_RATIO: "100"}
    elif kind == "rdma":
        requests[n.RDMA_RESOURCE] = "1"
        annotations[n.ANNOTATION_DEVICE_ALLOCATE_HINT] = json.dumps({"rdma": {"vfSelector": {}}})
    elif kind == "joint":
        requests |= {n.NVIDIA_GPU: str(rng.choice([1, 2, 4])), n.RDMA_RESOURCE: "1"}
        annotations[n.ANNOTATION_DEVICE_ALLOCATE_HINT] = json.dumps({"rdma": {"vfSelector": {}}})
        annotations[n.ANNOTATION_DEVICE_JOINT_ALLOCATE] = json.dumps(
            {"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}
        )
    elif kind == "scoped":
        requests[n.NVIDIA_GPU] = str(rng.choice([2, 3, 4]))
        scope = rng.choice(["PCIe", "NUMANode"])
        annotations[n.ANNOTATION_DEVICE_ALLOCATE_HINT] = json.dumps({"gpu": {"requiredTopologyScope": scope}})
    return device_pod(f"p{i}", requests, annotations)


def device_pod(
    name: str, requests: dict[str, str], annotations: dict[str, str] | None = None, namespace: str = "default"
) -> dict[str, Any]:
    """A pending pod with one container asking ``requests``."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "resources": {"requests": dict(requests)}}]},
        "status": {"phase": "Pending"},
    }
