"""Replay ``device-allocated`` annotations against Device objects and report every broken invariant.

Used by the randomized tests and the benchmark: it trusts nothing from the scheduler's caches, only the
objects a cluster holds after scheduling. Checked per node and device:

* no device's summed ``gpu-core`` / ``gpu-memory-ratio`` exceeds its total (100) and no ``gpu-memory`` its
  total bytes; no RDMA/FPGA beyond its total; nothing allocated on an unknown or unhealthy device;
* a pod that took a whole GPU (ratio 100 per GPU) shares it with no other pod;
* no VF is handed out twice;
* a pod asking ``requiredTopologyScope`` got GPUs within one such scope, and a ``SamePCIe`` joint allocation
  got the same PCIe switches for every joint type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import AllocationError, decode_allocations
from koord_plugin_deviceshare.device import DeviceError, DeviceInfo, parse_device

__all__ = ["check_allocations"]

_CAPPED = (n.GPU_CORE, n.GPU_MEMORY_RATIO, n.GPU_MEMORY, n.RDMA_RESOURCE, n.FPGA_RESOURCE)


def _scope_key(info: DeviceInfo, scope: str) -> Any:
    topo = info.topology
    if topo is None:
        return None
    if scope == n.SCOPE_PCIE:
        return (topo.node_id, topo.pcie_id)
    if scope == n.SCOPE_NUMA_NODE:
        return topo.node_id
    return "node"


def check_allocations(devices: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """Problems found (empty when every invariant holds)."""
    problems: list[str] = []
    infos: dict[str, dict[tuple[str, int], DeviceInfo]] = {}
    for obj in devices:
        try:
            parsed = parse_device(obj)
        except DeviceError as err:
            problems.append(str(err))
            continue
        infos[parsed.name] = {(d.type, d.minor): d for d in parsed.devices}
    used: dict[tuple[str, str, int], dict[str, int]] = {}
    holders: dict[tuple[str, str, int], list[tuple[str, bool]]] = {}
    vfs: dict[tuple[str, str], str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName") or ""
        annotations = meta.get("annotations") or {}
        raw = annotations.get(n.ANNOTATION_DEVICE_ALLOCATED)
        if not node or not raw:
            continue
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        try:
            allocations = decode_allocations(raw, f"pod {key}")
        except AllocationError as err:
            problems.append(str(err))
            continue
        node_infos = infos.get(node, {})
        for device_type, allocs in allocations.items():
            for a in allocs:
                dk = (node, device_type, a.minor)
                info = node_infos.get((device_type, a.minor))
                if info is None or not info.health:
                    problems.append(f"pod {key}: {device_type} {a.minor} on {node} is unknown or unhealthy")
                    continue
                total = used.setdefault(dk, {})
                for name, value in a.resources.items():
                    total[name] = total.get(name, 0) + value
                whole = device_type == n.GPU and a.resources.get(n.GPU_MEMORY_RATIO, 0) >= 100
                holders.setdefault(dk, []).append((key, whole))
                for vf in a.vfs:
                    other = vfs.setdefault((node, vf.bus_id), key)
                    if other != key:
                        problems.append(f"VF {vf.bus_id} on {node} given to {other} and {key}")
        problems += _check_topology(key, node_infos, allocations, annotations)
    for (node, device_type, minor), total in sorted(used.items()):
        info = infos[node][(device_type, minor)]
        for name in _CAPPED:
            cap = info.resources.get(name)
            if cap is not None and total.get(name, 0) > cap:
                problems.append(f"{node} {device_type} {minor}: {name} {total[name]} allocated > {cap}")
        held = holders[(node, device_type, minor)]
        if len(held) > 1 and any(whole for _, whole in held):
            problems.append(f"{node} {device_type} {minor}: whole GPU shared by {[k for k, _ in held]}")
    return problems


def _check_topology(
    key: str,
    node_infos: Mapping[tuple[str, int], DeviceInfo],
    allocations: Mapping[str, Any],
    annotations: Mapping[str, str],
) -> list[str]:
    problems: list[str] = []
    try:
        hints = json.loads(annotations.get(n.ANNOTATION_DEVICE_ALLOCATE_HINT) or "{}") or {}
        joint = json.loads(annotations.get(n.ANNOTATION_DEVICE_JOINT_ALLOCATE) or "null")
    except json.JSONDecodeError:
        return problems
    scope = ((hints.get(n.GPU) or {}).get("requiredTopologyScope")) or ""
    gpus = [node_infos.get((n.GPU, a.minor)) for a in allocations.get(n.GPU, [])]
    if scope in (n.SCOPE_PCIE, n.SCOPE_NUMA_NODE) and gpus:
        keys = {_scope_key(i, scope) for i in gpus if i is not None}
        if len(keys) > 1:
            problems.append(f"pod {key}: GPUs span {len(keys)} {scope} scopes")
    if joint and joint.get("requiredScope") == n.SAME_PCIE_SCOPE:
        types = [t for t in joint.get("deviceTypes") or [] if allocations.get(t)]
        sets = []
        for t in types:
            pcies = set()
            for a in allocations[t]:
                info = node_infos.get((t, a.minor))
                if info is not None and info.topology is not None:
                    pcies.add(info.topology.pcie_id)
            sets.append(pcies)
        if any(s != sets[0] for s in sets[1:]):
            problems.append(f"pod {key}: SamePCIe joint allocation on different PCIe switches {sets}")
    return problems
