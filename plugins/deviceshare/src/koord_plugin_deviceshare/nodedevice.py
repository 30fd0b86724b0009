"""One node's devices: totals from its Device object, what pods use, what is free, which VFs are taken.

``NodeDevice`` is Koordinator's ``nodeDevice``: ``total[type][minor]`` (empty for an unhealthy device),
``used`` summed from the ``device-allocated`` annotations of the pods on the node (and this scheduler's
reservations), ``free = total - used`` clamped at zero, and ``allocate_set`` remembering what each pod
holds so an allocation is never added or removed twice. ``filter`` builds the restricted view one
allocation attempt works on (hint selectors, NUMA nodes, preemptible and designated resources, PCIe
exclusivity).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from koord_framework.api.resources import is_zero, subtract_non_negative
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import DeviceAllocation
from koord_plugin_deviceshare.device import DeviceInfo, GPUPartition, ParsedDevice, hash_minors
from koord_plugin_deviceshare.scoring import sum_resources

__all__ = [
    "HOPPER_PARTITIONS",
    "DeviceResources",
    "GPUTopologyScope",
    "NodeDevice",
    "PartitionIndexer",
    "add_resources",
    "append_allocated",
    "build_gpu_topology_scope",
    "copy_resources",
    "designated_partition_indexer",
    "min_resources",
    "partition_indexer",
    "subtract_allocated",
]

DeviceResources = dict[int, dict[str, int]]
"""minor -> resource list."""
PartitionIndexer = dict[int, list[tuple[int, list[GPUPartition]]]]
"""number of GPUs -> [(allocationScore, partitions)] in ascending allocationScore."""


def add_resources(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def min_resources(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Per name in ``a``: the smaller of the two (Koordinator's ``util.MinResourceList``)."""
    return {k: min(v, b.get(k, 0)) if k in b else v for k, v in a.items()}


def copy_resources(d: DeviceResources) -> DeviceResources:
    return {minor: dict(res) for minor, res in d.items()}


def append_allocated(
    base: dict[str, DeviceResources] | None, *others: Mapping[str, DeviceResources] | None
) -> dict[str, DeviceResources]:
    """``base`` plus every other per-type map, minor by minor (Koordinator's ``appendAllocated``)."""
    out = base if base is not None else {}
    for other in others:
        for device_type, resources in (other or {}).items():
            current = out.get(device_type)
            if current is None:
                out[device_type] = copy_resources(resources)
                continue
            for minor, res in resources.items():
                current[minor] = add_resources(current.get(minor, {}), res)
    return out


def subtract_allocated(
    base: dict[str, DeviceResources], other: Mapping[str, DeviceResources]
) -> dict[str, DeviceResources]:
    """``base`` minus ``other`` (may go negative, as in preemption's AddPod bookkeeping)."""
    for device_type, resources in other.items():
        current = base.setdefault(device_type, {})
        for minor, res in resources.items():
            left = dict(current.get(minor, {}))
            for k, v in res.items():
                left[k] = left.get(k, 0) - v
            if is_zero(left):
                current.pop(minor, None)
            else:
                current[minor] = left
        if not current:
            del base[device_type]
    return base


@dataclass(slots=True)
class GPUTopologyScope:
    """Node → NUMA node → PCIe switch tree of a node's GPUs (Koordinator's ``GPUTopologyScope``)."""

    scope_name: str
    scope_level: int
    minors_resources: DeviceResources
    minors: list[int]
    minors_hash: int
    child_scopes: list[GPUTopologyScope] = field(default_factory=list)
    pcie_id: str = ""
    numa_node_id: int = 0


def _scope(name: str, resources: DeviceResources, pcie_id: str = "", numa: int = 0) -> GPUTopologyScope:
    minors = sorted(resources)
    return GPUTopologyScope(
        name, n.TOPOLOGY_SCOPE_LEVEL[name], resources, minors, hash_minors(minors), [], pcie_id, numa
    )


def build_gpu_topology_scope(infos: list[DeviceInfo], totals: DeviceResources) -> GPUTopologyScope | None:
    """The GPU scope tree, or None when any GPU lacks a topology (the topology path is then skipped)."""
    if not infos:
        return None
    numa: dict[int, DeviceResources] = {}
    pcie: dict[int, dict[str, DeviceResources]] = {}
    for info in infos:
        if info.topology is None:
            return None
        res = totals.get(info.minor, {})
        numa.setdefault(info.topology.node_id, {})[info.minor] = res
        pcie.setdefault(info.topology.node_id, {}).setdefault(info.topology.pcie_id, {})[info.minor] = res
    root = _scope(n.SCOPE_NODE, totals)
    for numa_id in sorted(numa):
        numa_scope = _scope(n.SCOPE_NUMA_NODE, numa[numa_id], numa=numa_id)
        for pcie_id in sorted(pcie[numa_id]):
            numa_scope.child_scopes.append(_scope(n.SCOPE_PCIE, pcie[numa_id][pcie_id], pcie_id=pcie_id))
        root.child_scopes.append(numa_scope)
    return root


def partition_indexer(table: Mapping[int, list[GPUPartition]] | None) -> PartitionIndexer | None:
    """Group a partition table by GPU count, then by allocationScore ascending."""
    if table is None:
        return None
    out: PartitionIndexer = {}
    for count, partitions in table.items():
        by_score: dict[int, list[GPUPartition]] = {}
        for p in partitions:
            by_score.setdefault(p.allocation_score, []).append(p)
        out[count] = sorted(by_score.items())
    return out


def _nvlink(*groups: tuple[int, ...]) -> list[GPUPartition]:
    return [GPUPartition(g, hash_minors(g), 1, "NVLink") for g in groups]


HOPPER_PARTITIONS: PartitionIndexer = {
    1: [(1, _nvlink(*[(i,) for i in range(8)]))],
    2: [(1, _nvlink((0, 1), (2, 3), (4, 5), (6, 7)))],
    4: [(1, _nvlink((0, 1, 2, 3), (4, 5, 6, 7)))],
    8: [(1, _nvlink((0, 1, 2, 3, 4, 5, 6, 7)))],
}
"""Koordinator's built-in partition table for NVIDIA Hopper 8-GPU boards (H100, H800, H20)."""
HOPPER_MODELS = frozenset({"H100", "H800", "H20"})


def designated_partition_indexer(node_labels: Mapping[str, str]) -> tuple[PartitionIndexer | None, bool]:
    """(built-in table for the node's GPU model, node honors partitions?) from node labels."""
    vendor = node_labels.get(n.LABEL_GPU_VENDOR, "")
    indexer = None
    if vendor in ("", n.GPU_VENDOR_NVIDIA) and node_labels.get(n.LABEL_GPU_MODEL, "") in HOPPER_MODELS:
        indexer = HOPPER_PARTITIONS
    return indexer, node_labels.get(n.LABEL_GPU_PARTITION_POLICY) == n.GPU_PARTITION_POLICY_HONOR


class NodeDevice:
    """Device totals, usage and VF allocations of one node."""

    __slots__ = (
        "_healthy",
        "_total_sums",
        "allocate_set",
        "device_infos",
        "free",
        "gpu_topology_scope",
        "honor_gpu_partition",
        "partition_indexer",
        "pcie_devices",
        "secondary_device_well_planned",
        "sums",
        "total",
        "used",
        "vf_allocations",
    )

    def __init__(self) -> None:
        self.total: dict[str, DeviceResources] = {}
        self.free: dict[str, DeviceResources] = {}
        self.used: dict[str, DeviceResources] = {}
        self.vf_allocations: dict[str, dict[int, set[str]]] = {}
        self.allocate_set: dict[str, dict[str, DeviceResources]] = {}
        """type -> pod key (namespace/name) -> what that pod holds."""
        self.device_infos: dict[str, list[DeviceInfo]] = {}
        self.pcie_devices: dict[tuple[int, int, str], dict[str, list[int]]] = {}
        """(socket, NUMA node, PCIe id) -> type -> minors (devices with a known NUMA node)."""
        self.secondary_device_well_planned = False
        self.honor_gpu_partition = False
        self.partition_indexer: PartitionIndexer | None = None
        self.gpu_topology_scope: GPUTopologyScope | None = None
        self.sums: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        self._total_sums: dict[str, dict[str, int]] = {}
        self._healthy: dict[str, DeviceResources] = {}
        """type -> the devices offering something (not unhealthy): per Device object, not per allocation."""
        """type -> (total, free) summed over its devices; dropped whenever free changes (Score reads it)."""

    def summed(self, device_type: str) -> tuple[dict[str, int], dict[str, int]]:
        cached = self.sums.get(device_type)
        if cached is None:
            total = self._total_sums.get(device_type)
            if total is None:
                total = self._total_sums[device_type] = sum_resources(
                    self.total.get(device_type, {}).values()
                )
            free = sum_resources(self.free.get(device_type, {}).values())
            cached = self.sums[device_type] = (total, free)
        return cached

    # --- the Device object ------------------------------------------------------------------------------
    def set_device(self, device: ParsedDevice) -> None:
        """Replace totals and topology from a (re)parsed Device object; usage is kept."""
        totals: dict[str, DeviceResources] = {}
        infos: dict[str, list[DeviceInfo]] = {}
        pcies: dict[tuple[int, int, str], dict[str, list[int]]] = {}
        for info in device.devices:
            # An unhealthy device keeps its minor (pods on it stay accounted) but offers nothing.
            totals.setdefault(info.type, {})[info.minor] = dict(info.resources) if info.health else {}
            infos.setdefault(info.type, []).append(info)
            topo = info.topology
            if topo is not None and topo.node_id != -1:
                key = (topo.socket_id, topo.node_id, topo.pcie_id)
                pcies.setdefault(key, {}).setdefault(info.type, []).append(info.minor)
        self.reset_total(totals)
        self.device_infos = infos
        self.pcie_devices = pcies
        self.partition_indexer = partition_indexer(device.partition_table)
        self.honor_gpu_partition = device.honor_gpu_partition
        self.secondary_device_well_planned = device.secondary_device_well_planned
        self.gpu_topology_scope = build_gpu_topology_scope(infos.get(n.GPU, []), totals.get(n.GPU, {}))

    def invalidate(self) -> None:
        """The Device object is gone: every device offers nothing, usage stays (pods still hold it)."""
        self.reset_total({t: {minor: {} for minor in res} for t, res in self.total.items()})
        self.gpu_topology_scope = None

    def healthy_total(self, device_type: str) -> DeviceResources:
        """``total`` of the devices offering any resource (read-only: shared by every allocation)."""
        cached = self._healthy.get(device_type)
        if cached is None:
            total = self.total.get(device_type, {})
            cached = self._healthy[device_type] = {m: r for m, r in total.items() if any(r.values())}
        return cached

    def reset_total(self, totals: dict[str, DeviceResources]) -> None:
        self._total_sums = {}
        self._healthy = {}
        for device_type in self.total:
            totals.setdefault(device_type, {})
        self.total = totals
        for device_type in totals:
            self.reset_free(device_type)

    def reset_free(self, device_type: str) -> None:
        self.sums.pop(device_type, None)
        total = self.total.setdefault(device_type, {})
        free = copy_resources(total)
        for minor, used in self.used.get(device_type, {}).items():
            free[minor] = subtract_non_negative(total.get(minor, {}), used)
        self.free[device_type] = free

    def _refresh_free(self, device_type: str, minors: Iterable[int]) -> None:
        """``reset_free`` for the devices whose usage changed (a pod's allocation touches one or a few of
        them): the same free map, and the free sum moved by the same difference, without rebuilding every
        device's entry on each Reserve and each informer update."""
        free = self.free.get(device_type)
        if free is None:
            self.reset_free(device_type)
            return
        total = self.total.setdefault(device_type, {})
        used = self.used.get(device_type, {})
        sums = self.sums.get(device_type)
        free_sum = dict(sums[1]) if sums is not None else None
        for minor in minors:
            before = free.get(minor)
            res = used.get(minor)
            if res is not None:
                after: dict[str, int] | None = subtract_non_negative(total.get(minor, {}), res)
            elif minor in total:
                after = dict(total[minor])
            else:
                after = None
            if after is None:
                free.pop(minor, None)
            else:
                free[minor] = after
            if free_sum is not None:
                for name, value in (before or {}).items():
                    free_sum[name] = free_sum.get(name, 0) - value
                for name, value in (after or {}).items():
                    free_sum[name] = free_sum.get(name, 0) + value
        if sums is not None and free_sum is not None:
            self.sums[device_type] = (sums[0], free_sum)

    # --- usage ------------------------------------------------------------------------------------------
    def update_used(self, allocations: Mapping[str, list[DeviceAllocation]], pod_key: str, add: bool) -> bool:
        """Add or remove one pod's allocations; a pod is counted at most once per device type. Returns
        whether anything changed."""
        changed = False
        for device_type, allocs in allocations.items():
            held = self.allocate_set.setdefault(device_type, {})
            if (pod_key in held) == add:
                continue  # already added / never added
            changed = True
            used = self.used.setdefault(device_type, {})
            for a in allocs:
                if add:
                    used[a.minor] = add_resources(used.get(a.minor, {}), a.resources)
                else:
                    left = subtract_non_negative(used.get(a.minor, {}), a.resources)
                    if is_zero(left):
                        used.pop(a.minor, None)
                    else:
                        used[a.minor] = left
            if not add and not used:
                self.used.pop(device_type, None)
            self._update_vfs(device_type, allocs, add)
            self._refresh_free(device_type, {a.minor for a in allocs})
            if add:
                held[pod_key] = {a.minor: dict(a.resources) for a in allocs}
            else:
                held.pop(pod_key, None)
        return changed

    def _update_vfs(self, device_type: str, allocs: Iterable[DeviceAllocation], add: bool) -> None:
        taken = self.vf_allocations.setdefault(device_type, {})
        for a in allocs:
            if not a.vfs:
                continue
            bus_ids = {vf.bus_id for vf in a.vfs}
            if add:
                taken.setdefault(a.minor, set()).update(bus_ids)
            else:
                left = taken.get(a.minor, set()) - bus_ids
                if left:
                    taken[a.minor] = left
                else:
                    taken.pop(a.minor, None)
        if not taken:
            self.vf_allocations.pop(device_type, None)

    def get_used(self, pod_key: str) -> dict[str, DeviceResources]:
        """What one pod holds on this node, per type (empty if nothing)."""
        out: dict[str, DeviceResources] = {}
        for device_type, held in self.allocate_set.items():
            res = held.get(pod_key)
            if res:
                out[device_type] = res
        return out

    # --- the view one allocation works on ---------------------------------------------------------------
    def calc_free_with_preemptible(
        self, device_type: str, preemptible: DeviceResources | None, required: DeviceResources | None
    ) -> DeviceResources:
        free = self.free.get(device_type, {})
        used = self.used.get(device_type, {})
        total = self.total.get(device_type, {})
        merged: DeviceResources = {}
        for minor, res in (preemptible or {}).items():
            still_used = subtract_non_negative(used.get(minor, {}), res)
            remaining = subtract_non_negative(total.get(minor, {}), still_used)
            if not is_zero(remaining):
                merged[minor] = remaining
        if merged:
            for minor, res in free.items():
                merged.setdefault(minor, dict(res))
            free = merged
        if required:
            return {
                minor: min_resources(res, required[minor]) for minor, res in free.items() if minor in required
            }
        return free

    def _fully_idle_pcie_minors(self, free: DeviceResources, device_type: str) -> set[int]:
        total = self.total.get(device_type, {})
        minors: set[int] = set()
        for devices in self.pcie_devices.values():
            group = devices.get(device_type, [])
            if all(total.get(m, {}) == free.get(m, {}) for m in group):
                minors.update(group)
        return minors

    def filter(
        self,
        devices: Mapping[str, Iterable[int]],
        pcie_exclusive: set[str],
        required: Mapping[str, DeviceResources] | None,
        preemptible: Mapping[str, DeviceResources] | None,
    ) -> NodeDevice:
        """A view restricted to ``devices`` (type -> allowed minors) with preemptible resources returned."""
        out = NodeDevice()
        total_view: dict[str, DeviceResources] = {}
        used_view: dict[str, DeviceResources] = {}
        for device_type, allowed in devices.items():
            free = self.calc_free_with_preemptible(
                device_type, (preemptible or {}).get(device_type), (required or {}).get(device_type)
            )
            if all(is_zero(r) for r in free.values()):
                continue
            minors = set(allowed)
            if device_type in pcie_exclusive:
                minors &= self._fully_idle_pcie_minors(free, device_type)
            original = self.total.get(device_type, {})
            t: DeviceResources = {}
            u: DeviceResources = {}
            for minor, res in free.items():
                if minor in minors:
                    t[minor] = dict(original.get(minor, {}))
                    left = subtract_non_negative(original.get(minor, {}), res)
                    if not is_zero(left):
                        u[minor] = left
            total_view[device_type] = t
            used_view[device_type] = u
        out.used = used_view
        out.reset_total(total_view)
        out.vf_allocations = self.vf_allocations
        out.device_infos = self.device_infos
        out.pcie_devices = self.pcie_devices
        out.partition_indexer = self.partition_indexer
        out.honor_gpu_partition = self.honor_gpu_partition
        out.secondary_device_well_planned = self.secondary_device_well_planned
        out.gpu_topology_scope = self.gpu_topology_scope
        return out

    def summary(self) -> dict[str, dict[str, dict[str, int]]]:
        """Free resources per device (``type/minor``) for explanations."""
        return {t: {str(m): dict(r) for m, r in sorted(res.items())} for t, res in sorted(self.free.items())}
