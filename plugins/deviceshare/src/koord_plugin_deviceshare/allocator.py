"""The allocator API: which devices (and VFs) of a node a pod gets (Koordinator's ``AutopilotAllocator``).

Use::

    allocator = AutopilotAllocator(state, node_device, node_labels, scorer=scorer, numa_nodes=None)
    allocations, status = allocator.allocate(preemptible=...)   # or allocator.score(...)

``state`` is the pod's ``PodDeviceState`` (``state.prepare_pod``); ``node_device`` the node's ``NodeDevice``.
``scorer=None`` is Filter's mode: devices are tried in minor order. With a scorer (Reserve, Score) devices are
ordered by score. ``numa_nodes`` restricts devices to NUMA nodes (the topology manager's hint: this is where
NUMA alignment plugs in). ``required`` caps what may be taken from each device (designated allocations,
reservations); ``preemptible`` returns resources of preemption victims / matched reservations.

Steps:
1. Per requested device type, the per-instance request and desired count (``desired_requests_and_count``).
2. A restricted view of the node (hint selectors, NUMA nodes, PCIe-level exclusivity, preemptible, required).
3. With more than one type and a ``device-joint-allocate`` annotation: the primary type first, then the
   secondary types preferring the primary's PCIe switches; ``SamePCIe`` scope demands equal PCIe sets.
4. GPUs: partition table path (whole GPUs; the Device's ``gpu-partitions`` table or the built-in
   Hopper table), then the topology path (deepest Node/NUMA/PCIe scope that fits, honoring
   ``requiredTopologyScope``), then the default path. RDMA/FPGA: the default path: free devices
   ordered by (preferred, score desc, minor),
   VFs allocated from groups matching the hint's ``vfSelector`` (smallest free bus id).
5. GPU allocations get the missing one of gpu-memory / gpu-memory-ratio from the device's memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from koord_framework.api.resources import is_zero, within
from koord_framework.scheduler.status import Code, Status
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import DeviceAllocation, DeviceAllocations, VFAllocation
from koord_plugin_deviceshare.device import DeviceInfo, GPUPartition, VirtualFunction, hash_minors
from koord_plugin_deviceshare.nodedevice import (
    DeviceResources,
    GPUTopologyScope,
    NodeDevice,
    PartitionIndexer,
    designated_partition_indexer,
)
from koord_plugin_deviceshare.requests import (
    GPURequirements,
    calc_desired_requests_and_count_for_gpu,
    memory_bytes_to_ratio,
    memory_ratio_to_bytes,
)
from koord_plugin_deviceshare.scoring import DeviceScorer
from koord_plugin_deviceshare.state import DeviceHint, JointAllocate, PodDeviceState

__all__ = [
    "ERR_INSUFFICIENT_GPU_DEVICES",
    "ERR_INSUFFICIENT_PARTITIONED_DEVICE",
    "ERR_INSUFFICIENT_TOPOLOGY_SCOPED_GPU_DEVICES",
    "ERR_JOINT_ALLOCATE_VIOLATION",
    "AutopilotAllocator",
    "desired_requests_and_count",
    "fill_gpu_total_memory",
    "quick_fit",
    "quick_status",
]

ERR_NO_GPU_REQUIREMENTS = "No GPU Requirements"
ERR_INSUFFICIENT_PARTITIONED_DEVICE = "Insufficient Partitioned GPU Devices"
ERR_INSUFFICIENT_TOPOLOGY_SCOPED_GPU_DEVICES = "Insufficient Topology Scoped GPU Devices"
ERR_INSUFFICIENT_GPU_DEVICES = "Insufficient GPU Devices"
ERR_NODE_MISSING_GPU_PARTITION_TABLE = "node(s) missing GPU Partition Table"
ERR_UNSUPPORTED_GPU_REQUESTS = "node(s) Unsupported number of GPU requests"
ERR_UNSUPPORTED_MULTI_SHARED_GPU = "node(s) Unsupported Multi-Shared GPU"
ERR_NODE_MISSING_GPU_DEVICE_TOPOLOGY_TREE = "node(s) missing GPU Device Topology Tree"
ERR_JOINT_ALLOCATE_VIOLATION = "node(s) Device Joint-Allocate rules violation"

Result = tuple[list[DeviceAllocation] | None, Status]


def insufficient(device_type: str, code: Code = Code.UNSCHEDULABLE) -> Status:
    return Status(code, (f"Insufficient {device_type} devices",))


def desired_requests_and_count(
    device_type: str,
    request: Mapping[str, int],
    node_device: NodeDevice,
    hint: DeviceHint | None,
    state: PodDeviceState | None,
) -> tuple[dict[str, int] | None, int, Status]:
    """(per-instance request, desired count) of one type on one node (the device handlers)."""
    total = node_device.total.get(device_type, {})
    if not total:
        return None, 0, insufficient(device_type, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    if device_type == n.GPU:
        if state is None or state.gpu_requirements is None:
            per_gpu, count, _ = calc_desired_requests_and_count_for_gpu(request)
            return per_gpu, count, Status.success()
        req = state.gpu_requirements
        return req.requests_per_gpu, req.number_of_gpus, Status.success()
    name = n.RDMA_RESOURCE if device_type == n.RDMA else n.FPGA_RESOURCE
    quantity = request.get(name, 0)
    per_instance: dict[str, int] = dict(request)
    count = 1
    if quantity > 100 and quantity % 100 == 0:
        count = quantity // 100
        per_instance = {name: quantity // count}
    elif hint is not None:
        if hint.allocate_strategy == n.APPLY_FOR_ALL:
            count = len(total)
            if hint.selector is not None:
                count = sum(
                    1
                    for d in node_device.device_infos.get(device_type, [])
                    if hint.selector.matches(d.labels)
                )
            if count == 0:
                return None, 0, insufficient(device_type, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        elif hint.allocate_strategy == n.REQUESTS_AS_COUNT:
            count = quantity
            per_instance = {name: 100 if hint.exclusive_policy == n.DEVICE_LEVEL_EXCLUSIVE else 1}
    return per_instance, count, Status.success()


@dataclass(slots=True)
class _RequestContext:
    state: PodDeviceState
    node_labels: Mapping[str, str]
    requests_per_instance: dict[str, dict[str, int]]
    desired_count: dict[str, int]
    scorer: DeviceScorer | None
    original: NodeDevice
    required: Mapping[str, set[int]] | None = None
    preferred: Mapping[str, set[int]] | None = None


class AutopilotAllocator:
    """Allocates one pod's devices on one node; see the module docstring."""

    __slots__ = (
        "_counts",
        "_requests",
        "node_device",
        "node_labels",
        "numa_nodes",
        "reserve_phase",
        "scorer",
        "state",
    )

    def __init__(
        self,
        state: PodDeviceState,
        node_device: NodeDevice,
        node_labels: Mapping[str, str],
        *,
        scorer: DeviceScorer | None = None,
        numa_nodes: frozenset[int] | None = None,
        reserve_phase: bool = False,
    ) -> None:
        self.state = state
        self.node_device = node_device
        self.node_labels = node_labels
        self.scorer = scorer
        self.numa_nodes = numa_nodes
        self.reserve_phase = reserve_phase
        self._requests: dict[str, dict[str, int]] | None = None
        self._counts: dict[str, int] = {}

    # --- step 1 -----------------------------------------------------------------------------------------
    def prepare(self) -> Status:
        if self._requests is not None:
            return Status.success()
        state = self.state
        requests: dict[str, dict[str, int]] = {}
        counts: dict[str, int] = {}
        for device_type, request in state.pod_requests.items():
            if is_zero(request) or device_type not in n.DEVICE_TYPES:
                continue
            if (
                state.primary_device_type
                and device_type != state.primary_device_type
                and state.pod_fits_secondary_device_well_planned
                and self.node_device.secondary_device_well_planned
                and not self.reserve_phase
            ):
                continue  # the secondary devices of a well-planned node fit whenever the primary ones do
            per, count, status = desired_requests_and_count(
                device_type, request, self.node_device, state.hints.get(device_type), state
            )
            if not status.is_success:
                return status
            assert per is not None
            requests[device_type] = per
            counts[device_type] = count
        for device_type in requests:
            hint = state.hints.get(device_type)
            if (
                hint is not None
                and hint.vf_selector is not None
                and not any(d.vf_groups for d in self.node_device.device_infos.get(device_type, []))
            ):
                return Status.unresolvable(f"Insufficient {device_type} VirtualFunctions")
        self._requests = requests
        self._counts = counts
        return Status.success()

    # --- step 2 -----------------------------------------------------------------------------------------
    def _view(
        self,
        required: Mapping[str, DeviceResources] | None,
        preemptible: Mapping[str, DeviceResources] | None,
    ) -> NodeDevice:
        assert self._requests is not None
        exclusive = {t for t, h in self.state.hints.items() if h.exclusive_policy == n.PCIE_LEVEL_EXCLUSIVE}
        if (
            not required
            and not preemptible
            and self.numa_nodes is None
            and not self.state.has_selectors
            and not exclusive
        ):
            return self.node_device
        devices: dict[str, list[int]] = {}
        for device_type in self._requests:
            hint = self.state.hints.get(device_type)
            selector = hint.selector if hint is not None else None
            minors = []
            for info in self.node_device.device_infos.get(device_type, []):
                if self.numa_nodes is not None:
                    topo = info.topology
                    if topo is None or (topo.node_id != -1 and topo.node_id not in self.numa_nodes):
                        continue
                if selector is None or selector.matches(info.labels):
                    minors.append(info.minor)
            if minors:
                devices[device_type] = minors
        return self.node_device.filter(devices, exclusive, required, preemptible)

    @property
    def desired_counts(self) -> Mapping[str, int]:
        """Device type -> desired count (after ``prepare``)."""
        return self._counts

    @property
    def requests_per_instance(self) -> Mapping[str, Mapping[str, int]]:
        """Device type -> request per device instance (after ``prepare``; empty before)."""
        return self._requests or {}

    # --- entry points -----------------------------------------------------------------------------------
    def allocate(
        self,
        required: Mapping[str, DeviceResources] | None = None,
        preemptible: Mapping[str, DeviceResources] | None = None,
        preferred: Mapping[str, set[int]] | None = None,
    ) -> tuple[DeviceAllocations | None, Status]:
        """The pod's allocations on this node (GPU memory filled in), or a status saying why not."""
        status = self.prepare()
        if not status.is_success:
            return None, status
        assert self._requests is not None
        view = self._view(required, preemptible)
        ctx = _RequestContext(
            self.state,
            self.node_labels,
            self._requests,
            self._counts,
            self.scorer,
            self.node_device,
            preferred=preferred,
        )
        result: DeviceAllocations = {}
        if len(self._requests) > 1:
            joint, status = self._try_joint_allocate(ctx, self.state.joint_allocate, view)
            if not status.is_success:
                return None, status
            result = joint or {}
        for device_type in self._requests:
            if device_type in result:
                continue
            allocs, status = _allocate_devices(ctx, view, device_type, self._counts[device_type], set())
            if not status.is_success:
                return None, status
            if allocs:
                result[device_type] = allocs
        if not result:
            return None, Status.unschedulable(*(f"Insufficient {t} devices" for t in self._requests))
        fill_gpu_total_memory(result, self.node_device)
        return result, Status.success()

    def score(
        self,
        required: Mapping[str, DeviceResources] | None = None,
        preemptible: Mapping[str, DeviceResources] | None = None,
    ) -> tuple[int, Status]:
        """Sum over requested types of the node score of the per-instance request (0 without a scorer)."""
        status = self.prepare()
        if not status.is_success:
            return 0, status
        assert self._requests is not None
        if self.scorer is None:
            return 0, Status.success()
        view = self._view(required, preemptible)
        total = 0
        for device_type, request in self._requests.items():
            if is_zero(request):
                continue
            if view.total.get(device_type):
                total += self.scorer.score_sums(request, *view.summed(device_type))
        return total, Status.success()

    # --- step 3 -----------------------------------------------------------------------------------------
    def _try_joint_allocate(
        self, ctx: _RequestContext, joint: JointAllocate | None, view: NodeDevice
    ) -> tuple[DeviceAllocations | None, Status]:
        if joint is None or not joint.device_types:
            return None, Status.success()
        primary = joint.device_types[0]
        primary_allocs, status = _allocate_devices(
            ctx, view, primary, ctx.desired_count.get(primary, 0), set()
        )
        if not status.is_success:
            return None, status
        if not primary_allocs:
            return None, Status.unschedulable("node(s) Insufficient primary device")
        result: DeviceAllocations = {primary: primary_allocs}
        pcies = _pcie_ids(view, primary, primary_allocs)
        for device_type in joint.device_types[1:]:
            desired = ctx.desired_count.get(device_type, 0)
            if joint.required_scope == n.SAME_PCIE_SCOPE and desired < len(pcies):
                desired = len(pcies)
            allocs, status = _allocate_devices(ctx, view, device_type, desired, pcies)
            if not status.is_success:
                return None, status
            if allocs:
                result[device_type] = allocs
        if joint.required_scope == n.SAME_PCIE_SCOPE and len(joint.device_types) > 1:
            for device_type in joint.device_types[1:]:
                if _pcie_ids(view, device_type, result.get(device_type, [])) != pcies:
                    return None, Status.unschedulable(ERR_JOINT_ALLOCATE_VIOLATION)
        return result, Status.success()


def quick_fit(state: PodDeviceState, node_device: NodeDevice, node_labels: Mapping[str, str]) -> bool | None:
    """Whether ``allocate`` (without scorer, NUMA hints, preemptible or required resources) would succeed,
    answered without allocating, for the common pod: no device hints, no joint allocation, no GPU partition
    constraint. None when the pod or node is not that simple (run the allocator).

    Why it agrees with ``allocate`` for such a pod: types are then allocated independently; for GPUs the
    partition path is optional (not honored) and can only succeed when enough unused GPUs exist, the
    topology path without a required scope succeeds iff the node scope holds ``count`` GPUs whose free
    covers the per-GPU request (else it fails, or is skipped and the default path asks the same), and the
    default path takes devices whose free covers the per-instance request.
    """
    if state.hints or state.joint_allocate is not None:
        return None
    gpu = state.gpu_requirements
    if gpu is not None and (
        gpu.honor_gpu_partition
        or node_device.honor_gpu_partition
        or node_labels.get(n.LABEL_GPU_PARTITION_POLICY) == n.GPU_PARTITION_POLICY_HONOR
    ):
        return None
    for device_type, request in state.pod_requests.items():
        if device_type not in n.DEVICE_TYPES or is_zero(request):
            continue
        per, count, status = desired_requests_and_count(device_type, request, node_device, None, state)
        if not status.is_success or per is None:
            return False
        total = node_device.total.get(device_type, {})
        fits = 0
        for minor, free in node_device.free.get(device_type, {}).items():
            # ``within`` first: on a full node it rejects most devices, and costs less than ``is_zero``.
            if total.get(minor) and within(per, free) and not is_zero(free):
                fits += 1
                if fits >= count:
                    break
        if fits < max(count, 1):
            return False
    return True


def quick_status(
    state: PodDeviceState, node_device: NodeDevice, node_labels: Mapping[str, str]
) -> Status | None:
    """``allocate``'s status for a GPU-only pod ``quick_fit`` decides, without allocating; None when the
    pod is not that simple.

    Such a pod fails on a node in one of three ways: no GPU at all (the handler's UnschedulableAndUnresolvable
    "Insufficient gpu devices"); the node-scope search of the topology path finds fewer than ``count``
    GPUs with enough free ("Insufficient GPU Devices"); or, without a topology tree or for a pod sharing
    several GPUs (both skip that path), the default path does ("Insufficient gpu devices").
    """
    if set(state.pod_requests) != {n.GPU} or state.gpu_requirements is None:
        return None
    fits = quick_fit(state, node_device, node_labels)
    if fits is None:
        return None
    if fits:
        return Status.success()
    if not node_device.total.get(n.GPU):
        return insufficient(n.GPU, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    gpu = state.gpu_requirements
    if node_device.gpu_topology_scope is None or (gpu.gpu_shared and gpu.number_of_gpus > 1):
        return insufficient(n.GPU)
    return Status.unschedulable(ERR_INSUFFICIENT_GPU_DEVICES)


def _pcie_ids(view: NodeDevice, device_type: str, allocs: list[DeviceAllocation]) -> set[str]:
    by_minor = {d.minor: d for d in view.device_infos.get(device_type, [])}
    out = set()
    for a in allocs:
        info = by_minor.get(a.minor)
        if info is not None and info.topology is not None:
            out.add(info.topology.pcie_id)
    return out


def _allocate_devices(
    ctx: _RequestContext, view: NodeDevice, device_type: str, desired: int, preferred_pcies: set[str]
) -> Result:
    max_desired = max(desired, len(preferred_pcies))
    desired = max(desired, 1)
    max_desired = max(max_desired, desired)
    if device_type == n.GPU:
        # Koordinator's GPU allocator ignores preferred PCIe switches (it only has the primary role here).
        return _allocate_gpu(ctx, view, desired, max_desired)
    return _default_allocate(
        view, ctx, ctx.requests_per_instance[device_type], desired, max_desired, device_type, preferred_pcies
    )


# --- the default path (RDMA, FPGA, and GPUs when no other path applies) ----------------------------------
def _ordered_minors(
    request: Mapping[str, int],
    total: DeviceResources,
    free: DeviceResources,
    scorer: DeviceScorer | None,
    preferred: set[int] | None,
    preferred_pcies: set[str],
    infos: Mapping[int, DeviceInfo],
) -> list[int]:
    def score(minor: int) -> int:
        return scorer.score_device(request, total.get(minor, {}), free[minor]) if scorer is not None else 0

    scored = [(minor, score(minor)) for minor in free]
    if preferred:
        scored.sort(key=lambda p: (p[0] not in preferred, -p[1], p[0]))
        return [m for m, _ in scored]
    scored.sort(key=lambda p: (-p[1], p[0]))
    if not preferred_pcies:
        return [m for m, _ in scored]
    # Round-robin over the preferred PCIe switches so secondaries spread over every primary switch.
    groups: dict[str, list[tuple[int, int]]] = {}
    rest: list[int] = []
    for minor, s in scored:
        info = infos.get(minor)
        if info is not None and info.topology is not None and info.topology.pcie_id in preferred_pcies:
            groups.setdefault(info.topology.pcie_id, []).append((minor, s))
        else:
            rest.append(minor)
    out: list[int] = []
    depth = max((len(g) for g in groups.values()), default=0)
    for i in range(depth):
        layer = [g[i] for g in groups.values() if i < len(g)]
        layer.sort(key=lambda p: (-p[1], p[0]))
        out.extend(m for m, _ in layer)
    return out + rest


def _allocate_vf(info: DeviceInfo | None, taken: set[str], hint: DeviceHint) -> VirtualFunction | None:
    if info is None:
        return None
    remaining = [
        vf
        for group in info.vf_groups
        if hint.vf_selector is None or hint.vf_selector.matches(group.labels)
        for vf in group.vfs
        if vf.bus_id not in taken
    ]
    return min(remaining, key=lambda vf: vf.bus_id) if remaining else None


def _default_allocate(
    view: NodeDevice,
    ctx: _RequestContext,
    request: Mapping[str, int],
    desired: int,
    max_desired: int,
    device_type: str,
    preferred_pcies: set[str],
) -> Result:
    free = view.free.get(device_type, {})
    total = view.total.get(device_type, {})
    taken_vfs = view.vf_allocations.get(device_type, {})
    required = (ctx.required or {}).get(device_type)
    hint = ctx.state.hints.get(device_type)
    must_vf = hint is not None and hint.vf_selector is not None
    infos = {d.minor: d for d in view.device_infos.get(device_type, [])}
    preferred = (ctx.preferred or {}).get(device_type)
    allocations: list[DeviceAllocation] = []
    for minor in _ordered_minors(request, total, free, ctx.scorer, preferred, preferred_pcies, infos):
        if required and minor not in required:
            continue
        res = free[minor]
        if is_zero(res) or not within(request, res):
            continue
        vfs: tuple[VFAllocation, ...] = ()
        if must_vf:
            assert hint is not None
            vf = _allocate_vf(infos.get(minor), taken_vfs.get(minor, set()), hint)
            if vf is None:
                continue
            vfs = (VFAllocation(vf.bus_id, vf.minor),)
        allocations.append(DeviceAllocation(minor, dict(request), vfs=vfs))
        if len(allocations) == max_desired:
            break
    if len(allocations) < desired:
        return None, insufficient(device_type)
    return allocations, Status.success()


# --- GPUs -------------------------------------------------------------------------------------------------
def _allocate_gpu(ctx: _RequestContext, view: NodeDevice, desired: int, max_desired: int) -> Result:
    req = ctx.state.gpu_requirements
    if req is None:
        return None, Status.unschedulable(ERR_NO_GPU_REQUIREMENTS)
    indexer = view.partition_indexer
    node_honor = view.honor_gpu_partition
    if indexer is None:
        indexer, node_honor = designated_partition_indexer(ctx.node_labels)
    honor = req.honor_gpu_partition or node_honor
    total_view = view.healthy_total(n.GPU)
    # "Used" for partitions and scopes: anything in use, and anything the view left out (nothing, when the
    # view is the node itself).
    used_hash = hash_minors(view.used.get(n.GPU, {}))
    if view is not ctx.original:
        in_view = view.total.get(n.GPU, {})
        used_hash |= hash_minors([m for m in ctx.original.used.get(n.GPU, {}) if m not in in_view])
    free = view.free.get(n.GPU, {})

    if honor or (indexer is not None and not req.gpu_shared):
        # Otherwise the partition path can only answer "try the other paths" (shared GPUs take no
        # partition; without a table and without Honor the trouble is ignored).
        allocs, status = _allocate_by_partition(honor, req, indexer, used_hash, total_view)
        if not status.is_success:
            return None, status
        if allocs:
            return allocs, Status.success()
    allocs, status = _allocate_by_topology(
        req, view.gpu_topology_scope, used_hash, free, total_view, ctx.scorer
    )
    if not status.is_success:
        return None, status
    if allocs:
        return allocs, Status.success()
    return _default_allocate(view, ctx, req.requests_per_gpu, desired, max_desired, n.GPU, set())


def _allocate_by_partition(
    honor: bool,
    req: GPURequirements,
    indexer: PartitionIndexer | None,
    used_hash: int,
    total: DeviceResources,
) -> Result:
    allocs, status = _partition(req, indexer, used_hash, total)
    # Without Honor, partition trouble only means "try the other paths".
    return allocs, (status if honor else Status.success())


def _partition(
    req: GPURequirements, indexer: PartitionIndexer | None, used_hash: int, total: DeviceResources
) -> Result:
    if req.gpu_shared:
        return None, Status.success()
    if indexer is None:
        return None, Status.unresolvable(ERR_NODE_MISSING_GPU_PARTITION_TABLE)
    by_score = indexer.get(req.number_of_gpus)
    if not by_score:
        return None, Status.unresolvable(ERR_UNSUPPORTED_GPU_REQUESTS)
    total_hash = hash_minors(sorted(total))
    feasible: list[GPUPartition] = []
    for _, partitions in by_score:
        for p in partitions:
            if p.minors_hash & used_hash or total_hash & p.minors_hash != p.minors_hash:
                continue
            if req.ring_bus_bandwidth is not None and (
                p.ring_bus_bandwidth is None or req.ring_bus_bandwidth > p.ring_bus_bandwidth
            ):
                continue
            feasible.append(p)
        if feasible or req.restricted_gpu_partition:
            break
    if not feasible:
        return None, Status.unschedulable(ERR_INSUFFICIENT_PARTITIONED_DEVICE)
    chosen = _select_partition_by_bin_pack(used_hash, feasible, indexer, req.number_of_gpus)
    return [DeviceAllocation(m, dict(req.requests_per_gpu)) for m in chosen.minors], Status.success()


_BIN_PACK_WEIGHT = {8: 10000, 4: 100, 2: 1}


def _select_partition_by_bin_pack(
    used_hash: int, feasible: list[GPUPartition], indexer: PartitionIndexer, desired: int
) -> GPUPartition:
    """The partition that leaves the most (and largest) partitions whole after taking it."""
    if len(feasible) == 1:
        return feasible[0]
    best: GPUPartition = feasible[0]
    best_score = -1
    for p in feasible:
        after = used_hash | p.minors_hash
        score = 0
        for size in (8, 4, 2):
            if size < desired or not indexer.get(size):
                continue
            for other in indexer[size][0][1]:
                if not other.minors_hash & after:
                    score += _BIN_PACK_WEIGHT[size] * other.allocation_score
        if score > best_score:  # first best wins ties, as Go's sort of this short list does in practice
            best, best_score = p, score
    return best


_ScopeResult = tuple[list[int], int, int, int]
"""(GPUs chosen in the scope, cumulative not-empty scopes, depth, score): allocations are built once, for
the winning scope only."""


def _allocate_by_topology(
    req: GPURequirements,
    root: GPUTopologyScope | None,
    used_hash: int,
    free: DeviceResources,
    total: DeviceResources,
    scorer: DeviceScorer | None,
) -> Result:

    def relax(status: Status) -> Status:
        # Structural trouble (no tree, multi-shared) only blocks a pod that *requires* a scope.
        if not req.required_topology_scope and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return Status.success()
        return status

    if root is None:
        return None, relax(Status.unresolvable(ERR_NODE_MISSING_GPU_DEVICE_TOPOLOGY_TREE))
    if req.gpu_shared and req.number_of_gpus > 1:
        return None, relax(Status.unresolvable(ERR_UNSUPPORTED_MULTI_SHARED_GPU))
    result = _allocate_from_scope(req, root, used_hash, free, total, scorer)
    if result is None:
        if req.required_topology_scope:
            return None, Status.unschedulable(ERR_INSUFFICIENT_TOPOLOGY_SCOPED_GPU_DEVICES)
        return None, Status.unschedulable(ERR_INSUFFICIENT_GPU_DEVICES)
    return [DeviceAllocation(m, dict(req.requests_per_gpu)) for m in result[0]], Status.success()


def _allocate_from_scope(
    req: GPURequirements,
    root: GPUTopologyScope,
    used_hash: int,
    free: DeviceResources,
    total: DeviceResources,
    scorer: DeviceScorer | None,
) -> _ScopeResult | None:
    """Koordinator's ``allocateByTopology`` search: the deepest scope that fits (ties: the one whose path
    crosses more scopes already in use, then for a shared GPU the better device score). Every device is
    judged once (``judged``) however many scopes hold it. Reserve runs this for every device pod: the
    request's fields are bound once and the recursion is a closure."""
    count = req.number_of_gpus
    shared = req.gpu_shared
    per_gpu = req.requests_per_gpu
    required_level = req.required_topology_scope_level
    judged: dict[int, tuple[bool, int]] = {}

    def judge(minor: int, scope: GPUTopologyScope) -> tuple[bool, int]:
        device_free = free.get(minor, {})
        ok = within(per_gpu, device_free) and minor in total
        s = 0
        if ok and shared and scorer is not None:
            # Koordinator passes (free, total) in this order here, swapped against scoreDevice's
            # signature; kept so shared-GPU placement matches it.
            s = scorer.score_device(per_gpu, device_free, scope.minors_resources.get(minor, {}))
        verdict = judged[minor] = (ok, s)
        return verdict

    def visit(scope: GPUTopologyScope, not_empties: int, depth: int) -> _ScopeResult | None:
        depth += 1
        if scope.minors_hash & used_hash:
            not_empties += 1
        best: _ScopeResult | None = None
        for child in scope.child_scopes:
            if len(child.minors) < count:
                continue
            r = visit(child, not_empties, depth)
            if r is None or not r[0]:
                continue
            if best is None:
                best = r
                continue
            if best[2] < r[2] or (best[2] == r[2] and best[1] < r[1]):
                best = r
            if shared and best[2] == r[2] and best[1] == r[1] and best[3] < r[3]:
                best = r
        if best is not None:
            return best
        if required_level > scope.scope_level:
            return None
        candidates: list[int] = []
        best_minor, best_score = -1, -1
        satisfied = False
        for minor in scope.minors:
            verdict = judged.get(minor)
            if verdict is None:
                verdict = judge(minor, scope)
            ok, s = verdict
            if not ok:
                continue
            if not shared:
                candidates.append(minor)
                if len(candidates) == count:
                    satisfied = True
                    break
                continue
            satisfied = True
            if s > best_score:
                best_minor, best_score = minor, s
        if not satisfied:
            return None
        if shared:
            candidates.append(best_minor)
        return candidates, not_empties, depth, best_score

    if len(root.minors) < count:
        return None
    return visit(root, 0, 0)


def fill_gpu_total_memory(allocations: DeviceAllocations, node_device: NodeDevice) -> None:
    """Give every GPU allocation both gpu-memory and gpu-memory-ratio, from the device's total memory."""
    gpus = allocations.get(n.GPU)
    totals = node_device.total.get(n.GPU)
    if not gpus or totals is None:
        return
    for a in gpus:
        device = totals.get(a.minor)
        if not device:
            raise ValueError(f"no healthy gpu device with minor {a.minor} of allocation")
        has_mem, has_ratio = n.GPU_MEMORY in a.resources, n.GPU_MEMORY_RATIO in a.resources
        if has_mem and has_ratio:
            continue
        device_memory = device.get(n.GPU_MEMORY, 0)
        resources = dict(a.resources)
        if has_mem:
            resources[n.GPU_MEMORY_RATIO] = (
                memory_bytes_to_ratio(resources[n.GPU_MEMORY], device_memory) if device_memory else 0
            )
        else:
            resources[n.GPU_MEMORY] = memory_ratio_to_bytes(
                resources.get(n.GPU_MEMORY_RATIO, 0), device_memory
            )
        a.resources = resources
