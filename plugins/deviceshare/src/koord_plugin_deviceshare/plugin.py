"""``DeviceShare``: GPUs (whole or shared), RDMA NICs (with VFs) and FPGAs (Koordinator ``deviceshare``).

PreFilter reads the pod's device request and hints (``state.prepare_pod``); Filter runs the allocator on the
node without a scorer (any fit passes); Score rates the node (LeastAllocated/MostAllocated, summed over device
types, then normalised); Reserve allocates for real with the scorer and records it in the node's cache;
Unreserve gives it back; PreBind fills device ids from the Device object and writes
``scheduling.koordinator.sh/device-allocated``. AddPod/RemovePod let preemption what-ifs count a victim's
devices as free.

The node caches are fed by the shared informer: ``Device`` objects set totals and topology; pods with a
``device-allocated`` annotation on a node set usage. Pods this scheduler reserved are counted once (by
namespace/name) whether their annotation has arrived yet or not.

Koordinator's framework extensions:
* Reservations (``reservation.py``): a Reservation's reserve pod holds its devices under its own key (from
  Reserve, then from the Reservation's ``device-allocated``, written by ``pre_bind_reservation``). Per cycle,
  ``restore_reservation`` works out what matched reservations hold; an owner pod allocates inside its
  nominated reservation first (Restricted: only there), and reserved devices are never free for others.
* NUMA: as a ``NUMATopologyHintProvider`` the plugin gives the topology manager hints per device type and
  allocates under the merged hint (``_numa_nodes``: the hint's NUMA nodes for this node).
Both make a verdict specific to the cycle: ``_memoisable`` answers False for such pods, so that the
per-shape memo and the GPU columns are bypassed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.events import BAD_ANNOTATIONS
from koord_framework.explain.hooks import ExplainSection, NodeExplainer
from koord_framework.plugin import PluginArgs
from koord_framework.scheduler.constant_arrays import all_pass
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import (
    ANNOTATION_RESERVATION_AFFINITY,
    LABEL_RESERVATION_IGNORED,
    MAX_RESERVATION_SCORE,
    ReservationFilterPlugin,
    ReservationInfo,
    ReservationPreAllocationRestorePlugin,
    ReservationPreBindPlugin,
    ReservationRestorePlugin,
    ReservationScorePlugin,
    is_pre_allocation_required,
    is_pre_allocation_reserve_pod,
    is_reserve_pod,
    nominated_pre_allocation,
    nominated_reservation,
)
from koord_framework.scheduler.interface import (
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeScore,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    SchedulerPlugin,
    ScoreExtensions,
    ScorePlugin,
    VectorFilter,
    VectorFilterStatuses,
    VectorNormalize,
    VectorScore,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import MAX_NODE_SCORE, Code, Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_framework.scheduler.topologymanager import (
    AFFINITY_STATE_KEY,
    AffinityStore,
    NUMATopologyHint,
    NUMATopologyHintProvider,
    ProviderHints,
    bits,
    iterate_bit_masks,
)
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import (
    AllocationError,
    DeviceAllocations,
    decode_allocations,
    encode_allocations,
)
from koord_plugin_deviceshare.allocator import (
    ERR_INSUFFICIENT_GPU_DEVICES,
    AutopilotAllocator,
    quick_fit,
    quick_status,
)
from koord_plugin_deviceshare.args import DeviceShareArgs
from koord_plugin_deviceshare.columns import GPU_COLUMNS, GPUColumns
from koord_plugin_deviceshare.device import DeviceError, ParsedDevice, parse_device
from koord_plugin_deviceshare.memo import RowMemo
from koord_plugin_deviceshare.nodedevice import (
    DeviceResources,
    NodeDevice,
    append_allocated,
    subtract_allocated,
)
from koord_plugin_deviceshare.requests import format_value
from koord_plugin_deviceshare.reservation import (
    RESTORE_STATE_KEY,
    NodeRestoreState,
    RestoreStates,
    ReusableAlloc,
    includes_devices,
    merge_pre_allocatable,
    required_device_resources,
    restore_node,
    restore_pre_allocation,
    restore_states_of,
)
from koord_plugin_deviceshare.scoring import DeviceScorer
from koord_plugin_deviceshare.state import PodDeviceError, PodDeviceState, prepare_pod

__all__ = ["NAME", "DeviceShare"]

NAME: Final = "DeviceShare"
STATE_KEY: Final = NAME
_TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
_MAX_DETAIL_DEVICES: Final = 4
_MAX_STATUSES: Final = 200_000
_MAX_SHAPES: Final = 1024
ERR_INSUFFICIENT_NUMA_SCOPED_DEVICES: Final = "Insufficient NUMA Scoped Devices"
DEFAULT_NUMA_SCORE: Final = 500
"""Above any CPU hint's score (0..100): the device's NUMA preference takes precedence, as upstream."""
_DEVICE_NAMES: Final = frozenset(name for names in n.DEVICE_RESOURCE_NAMES.values() for name in names)
_SHAPE_ANNOTATIONS: Final = (
    n.ANNOTATION_DEVICE_ALLOCATE_HINT,
    n.ANNOTATION_DEVICE_JOINT_ALLOCATE,
    n.ANNOTATION_GPU_PARTITION_SPEC,
)
log = logging.getLogger(__name__)


def _pod_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def _device_view(obj: Mapping[str, Any]) -> tuple[object, ...]:
    """What the pod handler's outcome depends on: key, node, phase and the ``device-allocated`` value."""
    meta = obj.get("metadata") or {}
    return (
        meta.get("namespace"),
        meta.get("name"),
        (obj.get("spec") or {}).get("nodeName"),
        (obj.get("status") or {}).get("phase"),
        (meta.get("annotations") or {}).get(n.ANNOTATION_DEVICE_ALLOCATED),
    )


def _reserve_pod_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a Reservation the pod handler reads, shaped as its reserve pod (name = uid)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
    active = (
        status.get("phase") == "Available"
        and bool(status.get("nodeName"))
        and not meta.get("deletionTimestamp")
    )
    return {
        "metadata": {
            "namespace": template.get("namespace") or "default",
            "name": meta.get("uid") or "",
            "annotations": meta.get("annotations") or {},
        },
        "spec": {"nodeName": status.get("nodeName") if active else ""},
        "status": {"phase": "Running" if active else "Succeeded"},
    }


def _gpu_minors(result: DeviceAllocations | None) -> tuple[int, ...]:
    """``hashAllocateResult``: the GPUs of an allocation, to compare two of them."""
    return tuple(a.minor for a in (result or {}).get(n.GPU, []))


def _reservation_required(pod: PodInfo) -> bool:
    """``isReservationRequired``: the pod must get its devices from a reservation (required reservation
    affinity), or a reserve pod from the pods it takes over (``pre-allocation-required``)."""
    return bool(pod.annotations.get(ANNOTATION_RESERVATION_AFFINITY)) or is_pre_allocation_required(pod)


def _short(name: str) -> str:
    return name.split("/", 1)[-1]


class DeviceShare(
    SchedulerPlugin[DeviceShareArgs],
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    VectorFilter,
    VectorFilterStatuses,
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    ScoreExtensions,
    VectorNormalize,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
    ReservationRestorePlugin,
    ReservationPreAllocationRestorePlugin,
    ReservationFilterPlugin,
    ReservationPreBindPlugin,
    ReservationScorePlugin,
    NUMATopologyHintProvider,
    NodeExplainer,
):
    """Koordinator's DeviceShare: GPU/RDMA/FPGA allocation with sharing, VFs, joint allocation, partitions."""

    name: ClassVar[str] = NAME
    Args: ClassVar[type[PluginArgs]] = DeviceShareArgs

    def __init__(self, args: DeviceShareArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        parsed = self.args
        self.ds_args: DeviceShareArgs = parsed
        strategy = parsed.scoring_strategy
        self.scorer = DeviceScorer(strategy.type, {r.name: r.weight for r in strategy.resources})
        self.template_matched_resources = tuple(parsed.gpu_shared_resource_templates_config.matched_resources)
        self.unsupported_models: dict[str, set[str]] = {}
        for m in parsed.gpu_share_unsupported_models:
            self.unsupported_models.setdefault(m.vendor, set()).add(m.model)
        self._lock = threading.RLock()
        self.nodes: dict[str, NodeDevice] = {}
        self.devices: dict[str, ParsedDevice] = {}
        self.device_errors: dict[str, str] = {}
        """node -> why its Device object was refused (a Filter reason for device pods)."""
        self._pod_allocations: dict[str, tuple[str, DeviceAllocations, str]] = {}
        """pod key -> (node, allocations, annotation) the informer last saw, so updates and deletes undo
        exactly that, and an update that changes neither node nor annotation is recognised at once."""
        self._written: dict[str, DeviceAllocations] = {}
        """``device-allocated`` values this scheduler wrote in PreBind -> the allocations they encode, so the
        informer's echo of our own write is not decoded again (bounded: see ``_remember_written``)."""
        self._memo = RowMemo()
        self._uuids: dict[str, tuple[ParsedDevice, dict[tuple[str, int], str]]] = {}
        """node -> (its parsed Device, (type, minor) -> uuid): PreBind's ids, indexed once per Device."""
        self._columns = GPUColumns(tuple(self.scorer.weights))
        self._node_gen: dict[str, int] = {}
        self._gen_counter = 0
        self._prepared: dict[tuple[object, ...], PodDeviceState | PodDeviceError] = {}
        self._statuses: dict[tuple[object, ...], dict[str, tuple[int, Status]]] = {}
        """pod shape -> node -> (node generation, Filter status): reasons of unschedulable pods of one
        shape are worked out once per node change, not once per pod (the shape hashed once per pod)."""
        self._status_count = 0
        self._interned: dict[tuple[Code, tuple[str, ...]], Status] = {}
        """One Status object per distinct rejection (code, reasons) among the memoised ones."""
        handle.informer.add_handler("Device", self._on_device, self._on_device_update, self._on_device_delete)
        handle.informer.add_handler("Pod", self._on_pod, self._on_pod_update, self._on_pod_delete)
        # Node labels (GPU model, partition policy, isolation provider) enter Filter and Score.
        handle.informer.add_handler("Node", self._on_node, self._on_node_update, self._on_node)
        handle.informer.add_handler(
            "Reservation", self._on_reservation, self._on_reservation_update, self._on_reservation_delete
        )

    # --- cluster events -------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("Device", "Add"),
            ClusterEvent("Device", "Update"),
            ClusterEvent("Device", "Delete"),
        ]

    def _bump(self, name: str) -> None:
        """``name`` changed: its memoised Filter/Score verdicts are stale (call with the lock held)."""
        self._memo.bump(self.handle.table, name)
        self._columns.dirty.add(name)
        self._gen_counter += 1
        self._node_gen[name] = self._gen_counter

    def _exact_row(self, name: str, nd: NodeDevice | None) -> bool:
        """Nodes the GPU columns cannot judge: a refused Device object, or GPU partitions honored."""
        if name in self.device_errors or (nd is not None and nd.honor_gpu_partition):
            return True
        ni = self.handle.node_info(name)
        return (
            ni is not None
            and ni.node.labels.get(n.LABEL_GPU_PARTITION_POLICY) == n.GPU_PARTITION_POLICY_HONOR
        )

    def _plain_gpu(self, state: CycleState, s: PodDeviceState, pod: PodInfo) -> bool:
        """A pod the GPU columns judge: only GPUs, by core/ratio/memory, no hints, joint or partition spec,
        no preemption what-if, no node-label check (isolation provider, share-unsupported models)."""
        gpu = s.gpu_requirements
        if gpu is None or set(s.pod_requests) != {n.GPU} or s.hints or s.joint_allocate is not None:
            return False
        if gpu.honor_gpu_partition or not set(gpu.requests_per_gpu) <= set(GPU_COLUMNS):
            return False
        if gpu.gpu_shared and (self.unsupported_models or pod.labels.get(n.LABEL_GPU_ISOLATION_PROVIDER)):
            return False
        return self._memoisable(state, s)

    def _on_node(self, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self._bump(str((obj.get("metadata") or {}).get("name") or ""))

    def _on_node_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self._on_node(obj)

    def explain_node(self, node_name: str) -> ExplainSection:
        """``koord explain node``: free devices (minors, gpu-core/memory, VFs) and who holds them."""
        from koord_plugin_deviceshare.explain import explain_node

        return explain_node(self, node_name)

    def _node_device(self, name: str) -> NodeDevice:
        nd = self.nodes.get(name)
        if nd is None:
            nd = self.nodes[name] = NodeDevice()
        return nd

    def _on_device(self, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        try:
            parsed = parse_device(obj)
        except DeviceError as err:
            log.warning("DeviceShare: ignoring %s", err)
            with self._lock:
                self.device_errors[name] = str(err)
                self.devices.pop(name, None)
                if name in self.nodes:
                    self.nodes[name].invalidate()
                self._bump(name)
            return
        with self._lock:
            self.device_errors.pop(name, None)
            self.devices[name] = parsed
            self._node_device(name).set_device(parsed)
            self._bump(name)

    def _on_device_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self._on_device(obj)

    def _on_device_delete(self, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        with self._lock:
            self.devices.pop(name, None)
            self._uuids.pop(name, None)
            self.device_errors.pop(name, None)
            if name in self.nodes:
                self.nodes[name].invalidate()
            self._bump(name)

    def _on_pod(self, obj: Mapping[str, Any]) -> None:
        key = _pod_key(obj)
        spec = obj.get("spec") or {}
        node = str(spec.get("nodeName") or "")
        phase = str((obj.get("status") or {}).get("phase") or "")
        raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(n.ANNOTATION_DEVICE_ALLOCATED)
        live = bool(node and raw and phase not in _TERMINAL_PHASES)
        if live:
            with self._lock:
                seen = self._pod_allocations.get(key)
                # Most pod updates (status, the bind after our own annotation patch) change neither the node
                # nor the annotation: nothing to undo and redo, and no node made stale for the caches.
                if seen is not None and seen[0] == node and seen[2] == raw:
                    return
                allocations = self._written.pop(str(raw), None)
            if allocations is None:
                try:
                    allocations = decode_allocations(str(raw), f"pod {key}: {n.ANNOTATION_DEVICE_ALLOCATED}")
                except AllocationError as err:
                    # Every update of the pod reads it again: said once per pod and value.
                    uid = str((obj.get("metadata") or {}).get("uid") or key)
                    BAD_ANNOTATIONS.once(uid, n.ANNOTATION_DEVICE_ALLOCATED, str(raw), f"DeviceShare: {err}")
                    return  # keep what we had, as Koordinator does with an unreadable annotation
        else:
            allocations = {}
        with self._lock:
            previous = self._pod_allocations.pop(key, None)
            if previous is not None and self._node_device(previous[0]).update_used(
                previous[1], key, add=False
            ):
                self._bump(previous[0])
            if allocations:
                # Already counted when this scheduler reserved it: then nothing changes here.
                if self._node_device(node).update_used(allocations, key, add=True):
                    self._bump(node)
                self._pod_allocations[key] = (node, allocations, str(raw))

    def _on_pod_update(self, old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        # ``_on_pod`` reads only the key, node, phase and annotation: an update changing none of them
        # (status, conditions, other annotations -- most pod events) leaves what ``old`` left.
        if _device_view(old) == _device_view(obj):
            return
        self._on_pod(obj)

    def _on_reservation(self, obj: Mapping[str, Any]) -> None:
        """An active (Available, placed) Reservation holds its ``device-allocated`` devices under its reserve
        pod's key; any other state (or deletion) frees them, as upstream's reservation-to-pod handler."""
        self._on_pod(_reserve_pod_view(obj))

    def _on_reservation_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self._on_reservation(obj)

    def _on_reservation_delete(self, obj: Mapping[str, Any]) -> None:
        self._on_pod_delete(_reserve_pod_view(obj))

    def _on_pod_delete(self, obj: Mapping[str, Any]) -> None:
        key = _pod_key(obj)
        with self._lock:
            previous = self._pod_allocations.pop(key, None)
            if previous is not None and self._node_device(previous[0]).update_used(
                previous[1], key, add=False
            ):
                self._bump(previous[0])

    # --- NUMA affinity and reservations ------------------------------------------------------------------
    def _numa_nodes(self, state: CycleState, node_name: str) -> frozenset[int] | None:
        """The NUMA nodes of the topology manager's merged hint for this node (None: no constraint)."""
        hint = AffinityStore.of(state).get(node_name)
        if hint is None or hint.affinity is None:
            return None
        return frozenset(bits(hint.affinity))

    def _basic_preemptible(
        self, s: PodDeviceState, restore: NodeRestoreState, node_name: str
    ) -> dict[str, DeviceResources]:
        """Owner usage inside unmatched reservations (counted twice otherwise) plus preemption victims."""
        return append_allocated(None, restore.unmatched_used, s.preemptible.get(node_name))

    def _allocate_from_reusable(
        self,
        allocator: AutopilotAllocator,
        pod: PodInfo,
        restore: NodeRestoreState,
        allocs: Sequence[ReusableAlloc],
        basic: Mapping[str, DeviceResources],
        required_from_reservation: bool,
    ) -> tuple[DeviceAllocations | None, Status]:
        """``tryAllocateFromReusable``: allocate inside one of ``allocs``; (None, Success) when none can and
        the pod may fall back to the node."""
        if not allocs:
            return None, Status.success()
        if pod.labels.get(LABEL_RESERVATION_IGNORED) == "true":
            return self._allocate_ignoring_reservations(allocator, restore, basic)
        base = append_allocated(None, basic, restore.matched_allocated)
        # A pre-allocating reserve pod allocates from candidate pods (the cycle state says so, not the pod).
        pre_allocation = restore.pre_allocation is not None
        reasons: list[str] = []
        for alloc in allocs:
            preemptible = append_allocated(None, base, alloc.remained)
            preferred = {t: set(res) for t, res in alloc.allocatable.items()}
            # Default is implemented as Aligned upstream: the reservation's devices and the node's free ones.
            restricted = alloc.reservation.allocate_policy == "Restricted"
            # A pre-allocating reservation may hold more than the candidate's devices.
            required = required_device_resources(alloc) if restricted and not pre_allocation else None
            result, status = allocator.allocate(
                required=required, preemptible=preemptible, preferred=preferred
            )
            # ... but it takes over every device of the candidate.
            taken_over = not (restricted and pre_allocation) or includes_devices(
                result or {}, alloc.allocatable
            )
            if status.is_success and not taken_over:
                reasons.append(ERR_INSUFFICIENT_GPU_DEVICES)
                continue
            if status.is_success:
                return result, status
            reasons += status.reasons
        if required_from_reservation:
            return None, Status.unschedulable(*(f"Reservation(s) {r}" for r in reasons))
        return None, Status.success()

    @staticmethod
    def _allocate_ignoring_reservations(
        allocator: AutopilotAllocator, restore: NodeRestoreState, basic: Mapping[str, DeviceResources]
    ) -> tuple[DeviceAllocations | None, Status]:
        """``tryAllocateIgnoreReservation``: what matched reservations hold but their owners do not use is
        free for a reservation-ignored pod."""
        preemptible = append_allocated(
            None, *(a.remained for a in restore.matched), basic, restore.matched_allocated
        )
        return allocator.allocate(preemptible=preemptible)

    def _allocate_with_nominated(
        self,
        state: CycleState,
        allocator: AutopilotAllocator,
        pod: PodInfo,
        node_name: str,
        restore: NodeRestoreState,
        basic: Mapping[str, DeviceResources],
    ) -> tuple[DeviceAllocations | None, Status]:
        """``allocateWithNominated``: in Reserve, an owner pod allocates inside its nominated reservation, a
        pre-allocating reserve pod inside the pods nominated for it (with ``enableMultiple`` all of them
        together, where Koordinator takes the first)."""
        if is_reserve_pod(pod):
            if not is_pre_allocation_reserve_pod(pod) or restore.pre_allocation is None:
                return None, Status.success()
            taken = nominated_pre_allocation(state, node_name)
            found = [a for a in (restore.find_pre_allocatable(p.uid) for p in taken) if a is not None]
            if not found:
                return None, Status.success()
            return self._allocate_from_reusable(
                allocator, pod, restore, [merge_pre_allocatable(found)], basic, False
            )
        if pod.labels.get(LABEL_RESERVATION_IGNORED) == "true":
            return self._allocate_ignoring_reservations(allocator, restore, basic)
        nominated = nominated_reservation(state, node_name)
        alloc = restore.find(nominated.uid) if nominated is not None else None
        if alloc is None:
            return None, Status.success()
        return self._allocate_from_reusable(allocator, pod, restore, [alloc], basic, False)

    # --- NUMA hint provider ----------------------------------------------------------------------------
    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[ProviderHints | None, Status]:
        """``GetPodTopologyHints``: per requested device type, the NUMA node sets the pod's devices fit in;
        the narrowest are preferred and the set holding the same GPUs as an unconstrained allocation scores
        ``DEFAULT_NUMA_SCORE``."""
        s = self._state(state)
        if s is None or s.skip:
            return None, Status.success()
        with self._lock:
            nd = self.nodes.get(node.name)
            if nd is None:
                return None, Status.success()
            return self._topology_hints(state, s, nd, pod, node)

    def _topology_hints(
        self, state: CycleState, s: PodDeviceState, nd: NodeDevice, pod: PodInfo, node: NodeInfo
    ) -> tuple[ProviderHints | None, Status]:
        restore = restore_states_of(state).of(node.name)
        basic = self._basic_preemptible(s, restore, node.name)
        required = _reservation_required(pod)
        numa_of: dict[str, list[int]] = {
            device_type: [
                i.topology.node_id for i in infos if i.topology is not None and i.topology.node_id >= 0
            ]
            for device_type, infos in nd.device_infos.items()
        }
        numa_nodes = sorted({node_id for ids in numa_of.values() for node_id in ids})
        min_size: dict[str, int] | None = None
        unsatisfied = Status.success()
        best: tuple[int, ...] | None = None
        feasible: list[tuple[int, tuple[int, ...]]] = []
        for mask in iterate_bit_masks(numa_nodes):
            in_mask = frozenset(bits(mask))
            allocator = AutopilotAllocator(s, nd, node.node.labels, numa_nodes=in_mask)
            status = allocator.prepare()
            result: DeviceAllocations | None = None
            if status.is_success:
                for device_type, wanted in allocator.desired_counts.items():
                    if (
                        device_type in numa_of
                        and sum(1 for i in numa_of[device_type] if i in in_mask) < wanted
                    ):
                        status = Status.unresolvable(ERR_INSUFFICIENT_NUMA_SCOPED_DEVICES)
                        break
            if status.is_success:
                if min_size is None:
                    min_size = dict.fromkeys(allocator.requests_per_instance, len(numa_nodes))
                result, status = self._allocate_from_reusable(
                    allocator, pod, restore, restore.matched, basic, required
                )
                if status.is_success and not result:
                    preemptible = append_allocated(None, basic, restore.fallback_allocatable)
                    result, status = allocator.allocate(preemptible=preemptible)
            if len(in_mask) == len(numa_nodes):
                unsatisfied = status
                best = _gpu_minors(result)
            if not status.is_success or not result:
                continue
            assert min_size is not None
            for name, size in min_size.items():
                min_size[name] = min(size, len(in_mask))
            feasible.append((mask, _gpu_minors(result)))
        hints: dict[str, list[NUMATopologyHint]] = {}
        for name, size in (min_size or {}).items():
            hints[name] = [
                NUMATopologyHint(
                    mask, preferred=len(bits(mask)) == size, score=DEFAULT_NUMA_SCORE if gpus == best else 0
                )
                for mask, gpus in feasible
            ]
            if not hints[name]:
                return None, unsatisfied
        if not unsatisfied.is_success:
            return None, unsatisfied
        return hints, Status.success()

    def allocate(self, state: CycleState, affinity: NUMATopologyHint, pod: PodInfo, node: NodeInfo) -> Status:
        """``Allocate``: a trial allocation under the merged hint (the manager's admission check)."""
        s = self._state(state)
        if s is None or s.skip:
            return Status.success()
        numa = frozenset(bits(affinity.affinity)) if affinity.affinity is not None else None
        with self._lock:
            nd = self.nodes.get(node.name)
            if nd is None:
                return Status.success()
            restore = restore_states_of(state).of(node.name)
            basic = self._basic_preemptible(s, restore, node.name)
            allocator = AutopilotAllocator(s, nd, node.node.labels, numa_nodes=numa)
            required = _reservation_required(pod)
            result, status = self._allocate_from_reusable(
                allocator, pod, restore, restore.matched, basic, required
            )
            if not status.is_success or result:
                return status
            _, status = allocator.allocate(preemptible=append_allocated(basic, restore.fallback_allocatable))
            return status

    # --- reservation hooks ---------------------------------------------------------------------------------
    def pre_restore_reservation(self, state: CycleState, pod: PodInfo) -> Status:
        state.write(RESTORE_STATE_KEY, RestoreStates(skip=not any(k in _DEVICE_NAMES for k in pod.requests)))
        return Status.success()

    def restore_reservation(
        self,
        state: CycleState,
        pod: PodInfo,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node: NodeInfo,
    ) -> Status:
        states = restore_states_of(state)
        if states.skip:
            return Status.success()
        with self._lock:
            nd = self.nodes.get(node.name)
            if nd is None:
                return Status.success()
            states.nodes[node.name] = restore_node(nd, matched, unmatched)
        state.write(RESTORE_STATE_KEY, states)
        return Status.success()

    def pre_restore_reservation_pre_allocation(
        self, state: CycleState, reservation: ReservationInfo
    ) -> Status:
        """``PreRestoreReservationPreAllocation``: nothing to restore unless the reservation asks for
        devices (its allocatable is the template's requests while it is Pending)."""
        skip = not any(k in _DEVICE_NAMES for k in reservation.allocatable)
        state.write(RESTORE_STATE_KEY, RestoreStates(skip=skip))
        return Status.success()

    def restore_reservation_pre_allocation(
        self,
        state: CycleState,
        reservation: ReservationInfo,
        pre_allocatable: Sequence[PodInfo],
        node: NodeInfo,
    ) -> Status:
        """``RestoreReservationPreAllocation``: each candidate pod's devices, reusable by the reserve pod."""
        states = restore_states_of(state)
        if states.skip or not pre_allocatable:
            return Status.success()
        with self._lock:
            nd = self.nodes.get(node.name)
            if nd is None:
                return Status.success()
            states.nodes[node.name] = restore_pre_allocation(
                nd, states.of(node.name), reservation, pre_allocatable
            )
        state.write(RESTORE_STATE_KEY, states)
        return Status.success()

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node: NodeInfo
    ) -> Status:
        return Status.success()  # as upstream: the devices are checked at nomination

    def filter_nominate_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> Status:
        """``FilterNominateReservation``: the pod's devices must fit inside this reservation."""
        s = self._state(state)
        if s is None or s.skip:
            return Status.success()
        ni = self.handle.node_info(node_name)
        if ni is None:
            return Status.as_error(f"getting node {node_name!r} from Snapshot: not found")
        restore = restore_states_of(state).of(node_name)
        # Nominating a candidate pod of a pre-allocating reservation: can the reserve pod take its devices?
        if restore.pre_allocation is not None:
            alloc = restore.find_pre_allocatable(pod.uid)
        else:
            alloc = restore.find(reservation.uid)
        with self._lock:
            nd = self.nodes.get(node_name)
            if nd is None or alloc is None:
                return Status.success()
            allocator = AutopilotAllocator(
                s, nd, ni.node.labels, numa_nodes=self._numa_nodes(state, node_name)
            )
            basic = self._basic_preemptible(s, restore, node_name)
            _, status = self._allocate_from_reusable(allocator, pod, restore, [alloc], basic, True)
            return status

    def pre_bind_reservation(
        self, state: CycleState, reservation: Mapping[str, Any], node_name: str
    ) -> Status:
        """``PreBindReservation``: the reserve pod's devices as ``device-allocated`` on the Reservation."""
        return self.pre_bind_object(state, node_name)

    # --- PreFilter ------------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        shape = (
            tuple(sorted((k, v) for k, v in pod.requests.items() if k in _DEVICE_NAMES)),
            tuple(pod.annotations.get(a) for a in _SHAPE_ANNOTATIONS),
            pod.labels.get(n.LABEL_GPU_ISOLATION_PROVIDER, ""),
        )
        # Pods of one shape read the same: parse once, hand each cycle a fresh state.
        proto = self._prepared.get(shape)
        if proto is None:
            try:
                proto = prepare_pod(pod.requests, pod.annotations, self.template_matched_resources)
                proto.shape = shape
            except PodDeviceError as err:
                proto = err
            if len(self._prepared) >= _MAX_SHAPES:
                self._prepared.clear()
            self._prepared[shape] = proto
        if isinstance(proto, PodDeviceError):
            reasons = (proto.reason, f"pod {pod.key}: {proto.detail}") if proto.detail else (proto.reason,)
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)
        s = proto.fresh()
        state.write(STATE_KEY, s)
        if s.skip:
            return None, Status.skip()
        return None, Status.success()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def _state(self, state: CycleState) -> PodDeviceState | None:
        s = state.get(STATE_KEY)
        return s if isinstance(s, PodDeviceState) else None

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        s = self._state(state)
        if s is None or s.skip:
            return Status.success()
        with self._lock:
            nd = self.nodes.get(node.name)
            held = nd.get_used(to_add.key) if nd is not None else {}
            if held:
                s.preemptible[node.name] = subtract_allocated(s.preemptible.setdefault(node.name, {}), held)
        return Status.success()

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        s = self._state(state)
        if s is None or s.skip:
            return Status.success()
        with self._lock:
            nd = self.nodes.get(node.name)
            held = nd.get_used(to_remove.key) if nd is not None else {}
            if held:
                s.preemptible[node.name] = append_allocated(s.preemptible.get(node.name), held)
        return Status.success()

    # --- Filter ---------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = self._state(state)
        if s is None or s.skip:
            return Status.success()
        if not self._memoisable(state, s):
            return self._filter(state, s, pod, node)
        with self._lock:
            by_node = self._statuses_of(s.shape)
            gen = self._node_gen.get(node.name, 0)
            cached = by_node.get(node.name)
            if cached is not None and cached[0] == gen:
                return cached[1]
            status = self._filter(state, s, pod, node)
            if not status.is_success and status.error is None:
                # Nodes rejected for the same reasons share one Status: the framework indexes a failed pod's
                # rejections (and counts its "0/N nodes" message) per distinct object.
                status = self._interned.setdefault((status.code, status.reasons), status)
            by_node[node.name] = (gen, status)
            self._status_count += 1
            return status

    def _statuses_of(self, shape: tuple[object, ...]) -> dict[str, tuple[int, Status]]:
        """The memoised Filter statuses of one shape (all forgotten past ``_MAX_STATUSES`` entries)."""
        if self._status_count > _MAX_STATUSES:
            self._statuses.clear()
            self._interned.clear()
            self._status_count = 0
        by_node = self._statuses.get(shape)
        if by_node is None:
            by_node = self._statuses[shape] = {}
        return by_node

    def _filter(self, state: CycleState, s: PodDeviceState, pod: PodInfo, node: NodeInfo) -> Status:
        labels = node.node.labels
        gpu = s.gpu_requirements
        if gpu is not None and gpu.gpu_shared:
            provider = pod.labels.get(n.LABEL_GPU_ISOLATION_PROVIDER, "")
            if provider and provider != labels.get(n.LABEL_GPU_ISOLATION_PROVIDER, ""):
                return Status.as_error("GPUIsolationProviderHAMICore not found on the node")
            vendor, model = labels.get(n.LABEL_GPU_VENDOR, ""), labels.get(n.LABEL_GPU_MODEL, "")
            if model in self.unsupported_models.get(vendor, ()):
                return Status.unresolvable(f'model "{model}" of vendor "{vendor}" does not support GPU Share')
        with self._lock:
            error = self.device_errors.get(node.name)
            if error is not None:
                return Status.unresolvable(f"node(s) invalid Device object: {error}")
            nd = self.nodes.get(node.name)
            if nd is None:
                return Status.success()  # as Koordinator: nodes without a Device are left to NodeResourcesFit
            numa_nodes = self._numa_nodes(state, node.name)
            restore = restore_states_of(state).of(node.name)
            preemptible = self._basic_preemptible(s, restore, node.name)
            status: Status | None = None
            if numa_nodes is None and not preemptible and not restore.matched:
                status = quick_status(s, nd, labels)
                if status is None and quick_fit(s, nd, labels):
                    status = Status.success()
            if status is None:
                allocator = AutopilotAllocator(s, nd, labels, numa_nodes=numa_nodes)
                required = _reservation_required(pod)
                result, status = self._allocate_from_reusable(
                    allocator, pod, restore, restore.matched, preemptible, required
                )
                if status.is_success and not result:
                    # Upstream's fallback returns every matched reservation's devices to the node.
                    preemptible = append_allocated(preemptible, restore.fallback_allocatable)
                    _, status = allocator.allocate(preemptible=preemptible)
            if status.is_success:
                return status
            if status.code is Code.UNSCHEDULABLE:
                detail = self._shortage(s, nd)
                if detail:
                    return Status(status.code, (*status.reasons, detail))
            return status

    def _memoisable(self, state: CycleState, s: PodDeviceState) -> bool:
        """Verdicts depend on the node and the pod's shape only -- unless a preemption what-if returned
        devices, reservations were restored for the pod, or a NUMA hint narrows the devices: those make the
        verdict specific to the cycle."""
        if s.preemptible:
            return False
        # Read the cycle's entries without the accessors' throw-away defaults: this runs several times per
        # pod on the hot path.
        restored = state.get(RESTORE_STATE_KEY)
        if isinstance(restored, RestoreStates) and restored.nodes:
            return False
        hints = state.get(AFFINITY_STATE_KEY)
        return not (isinstance(hints, AffinityStore) and len(hints))

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        s = self._state(state)
        if s is None or s.skip:
            return all_pass(int(rows.size))

        def one(row: int) -> int:
            ni = self.handle.node_info(table.names[row])
            return 1 if ni is None or self.filter(state, pod, ni).is_success else 0

        with self._lock:
            if not self._memoisable(state, s):
                return np.fromiter((one(r) for r in rows.tolist()), dtype=np.bool_, count=int(rows.size))
            if self._plain_gpu(state, s, pod):
                assert s.gpu_requirements is not None
                self._columns.flush(table, self.nodes.get, self._exact_row)
                req = s.gpu_requirements
                verdict = self._columns.fits_of(rows, req.requests_per_gpu, req.number_of_gpus)
                exact = self._columns.exact[rows]
                if exact.any():
                    verdict[exact] = self._memo.values(table, rows[exact], ("Filter", *s.shape), one) != 0
                return verdict
            return self._memo.values(table, rows, ("Filter", *s.shape), one).astype(np.bool_)

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> Sequence[Status]:
        """What ``filter`` says for each of ``rows`` (memoised per shape and node, so a pod that fits
        nowhere costs a lookup per node, not an allocation)."""
        s = self._state(state)
        names = table.names
        out: list[Status] = []
        if s is None or s.skip or not self._memoisable(state, s):
            for row in rows.tolist():
                ni = self.handle.node_info(names[row])
                out.append(Status.success() if ni is None else self.filter(state, pod, ni))
            return out
        with self._lock:
            known = self._statuses_of(s.shape).get
        gen = self._node_gen.get
        for name in [names[row] for row in rows.tolist()]:
            cached = known(name)
            if cached is not None and cached[0] == gen(name, 0):
                out.append(cached[1])
                continue
            ni = self.handle.node_info(name)
            out.append(Status.success() if ni is None else self.filter(state, pod, ni))
        return out

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        s = self._state(state)
        if s is None or s.skip:
            return np.zeros(int(rows.size), dtype=np.int64)

        def one(row: int) -> int:
            ni = self.handle.node_info(table.names[row])
            return 0 if ni is None else self.score(state, pod, ni)[0]

        with self._lock:
            if not self._memoisable(state, s):
                return np.fromiter((one(r) for r in rows.tolist()), dtype=np.int64, count=int(rows.size))
            if self._plain_gpu(state, s, pod):
                assert s.gpu_requirements is not None
                self._columns.flush(table, self.nodes.get, self._exact_row)
                scores = self._columns.scores_of(rows, s.gpu_requirements.requests_per_gpu, self.scorer)
                exact = self._columns.exact[rows]
                if exact.any():
                    scores[exact] = self._memo.values(table, rows[exact], ("Score", *s.shape), one)
                return scores
            return self._memo.values(table, rows, ("Score", *s.shape), one)

    def _shortage(self, s: PodDeviceState, nd: NodeDevice) -> str:
        """Which devices lack what, for explanations: ``gpu 3: gpu-memory-ratio 20 free < 50``."""
        parts: list[str] = []
        for device_type, request in s.pod_requests.items():
            per = (
                s.gpu_requirements.requests_per_gpu
                if device_type == n.GPU and s.gpu_requirements
                else request
            )
            for minor, free in sorted(nd.free.get(device_type, {}).items()):
                for name, want in per.items():
                    if free.get(name, 0) < want:
                        have = format_value(name, free.get(name, 0))
                        parts.append(
                            f"{device_type} {minor}: {_short(name)} {have} free < {format_value(name, want)}"
                        )
                        break
                if len(parts) >= _MAX_DETAIL_DEVICES:
                    break
        return "; ".join(parts)

    # --- Score ----------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        s = self._state(state)
        return Status.skip() if s is None or s.skip else Status.success()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        s = self._state(state)
        if s is None or s.skip:
            return 0, Status.success()
        with self._lock:
            nd = self.nodes.get(node.name)
            if nd is None:
                return 0, Status.success()
            allocator = AutopilotAllocator(
                s, nd, node.node.labels, scorer=self.scorer, numa_nodes=self._numa_nodes(state, node.name)
            )
            restore = restore_states_of(state).of(node.name)
            basic = self._basic_preemptible(s, restore, node.name)
            nominated = nominated_reservation(state, node.name)
            if nominated is not None:
                score, status = self._score_with_reservation(allocator, pod, restore, basic, nominated)
                if status.is_success:
                    return score, status
            return allocator.score(preemptible=append_allocated(basic, restore.fallback_allocatable))

    @staticmethod
    def _score_with_reservation(
        allocator: AutopilotAllocator,
        pod: PodInfo,
        restore: NodeRestoreState,
        basic: Mapping[str, DeviceResources],
        reservation: ReservationInfo,
    ) -> tuple[int, Status]:
        """``scoreWithNominatedReservation``: the node's score as the pod sees it inside the reservation (0
        when the reservation holds no device or the pod is a reserve pod)."""
        alloc = restore.find(reservation.uid)
        if alloc is None or is_reserve_pod(pod):
            return 0, Status.success()
        required = (
            required_device_resources(alloc) if alloc.reservation.allocate_policy == "Restricted" else None
        )
        preemptible = append_allocated(None, basic, restore.matched_allocated, alloc.remained)
        return allocator.score(required, preemptible)

    # --- ReservationScorePlugin ----------------------------------------------------------------------------
    def score_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> tuple[int, Status]:
        """``ScoreReservation``: the device score of the node inside this reservation (raw: summed over device
        types, so it may exceed 100; ``normalize_reservation_score`` scales it)."""
        s = self._state(state)
        if s is None or s.skip:
            return 0, Status.success()
        ni = self.handle.node_info(node_name)
        if ni is None:
            return 0, Status.as_error(f"getting node {node_name!r} from Snapshot: not found")
        with self._lock:
            nd = self.nodes.get(node_name)
            if nd is None:
                return 0, Status.success()
            allocator = AutopilotAllocator(
                s, nd, ni.node.labels, scorer=self.scorer, numa_nodes=self._numa_nodes(state, node_name)
            )
            restore = restore_states_of(state).of(node_name)
            basic = self._basic_preemptible(s, restore, node_name)
            return self._score_with_reservation(allocator, pod, restore, basic, reservation)

    def normalize_reservation_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> Status:
        """``DefaultReservationNormalizeScore(100, reverse=false)``: the best reservation gets 100."""
        top = max(scores, default=0)
        if top > 0:
            scores[:] = [MAX_RESERVATION_SCORE * v // top for v in scores]
        return Status.success()

    def score_extensions(self) -> ScoreExtensions | None:
        return self

    def normalize_all(
        self, state: CycleState, pod: PodInfo, rows: Int64Array, scores: Int64Array
    ) -> Int64Array:
        """``normalize_score`` over an array (DefaultNormalizeScore(100, reverse=false))."""
        top = int(scores.max()) if np.count_nonzero(scores) else 0
        if top <= 0:
            return scores
        out: Int64Array = scores * MAX_NODE_SCORE // top
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        highest = max((ns.score for ns in scores), default=0)
        if highest == 0:
            return Status.success()
        for ns in scores:
            ns.score = MAX_NODE_SCORE * ns.score // highest
        return Status.success()

    # --- Reserve / Unreserve --------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s = self._state(state)
        if s is None or s.skip:
            return Status.success()
        with self._lock:
            nd = self.nodes.get(node_name)
            if nd is None:
                return Status.success()
            if s.allocation_result is None:
                ni = self.handle.node_info(node_name)
                labels = ni.node.labels if ni is not None else {}
                allocator = AutopilotAllocator(
                    s,
                    nd,
                    labels,
                    scorer=self.scorer,
                    numa_nodes=self._numa_nodes(state, node_name),
                    reserve_phase=True,
                )
                restore = restore_states_of(state).of(node_name)
                basic = self._basic_preemptible(s, restore, node_name)
                try:
                    result, status = self._allocate_with_nominated(
                        state, allocator, pod, node_name, restore, basic
                    )
                    if status.is_success and not result:
                        preemptible = append_allocated(basic, restore.fallback_allocatable)
                        result, status = allocator.allocate(preemptible=preemptible)
                except ValueError as err:
                    return Status.as_error(f"fillGPUTotalMem failed: {err}, node: {node_name}")
                # Upstream drops the per-node restore data here: O(nodes), useless to the binding cycle.
                state.write(RESTORE_STATE_KEY, RestoreStates())
                if not status.is_success:
                    return status
                s.allocation_result = result
            if s.allocation_result:
                nd.update_used(s.allocation_result, pod.key, add=True)
                self._bump(node_name)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s = self._state(state)
        if s is None or s.skip or s.allocation_result is None:
            return
        with self._lock:
            nd = self.nodes.get(node_name)
            if nd is not None:
                nd.update_used(s.allocation_result, pod.key, add=False)
                self._bump(node_name)
            s.allocation_result = None

    # --- PreBind --------------------------------------------------------------------------------------
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self.pre_bind_object(state, node_name)

    def pre_bind_object(self, state: CycleState, node_name: str) -> Status:
        """``preBindObject``: ``device-allocated`` into the batched patch (the pod's, or for a reserve pod the
        Reservation's)."""
        s = self._state(state)
        if s is None or s.skip or not s.allocation_result:
            return Status.success()
        status = self._fill_ids(s.allocation_result, node_name)
        if not status.is_success:
            return status
        raw = encode_allocations(s.allocation_result)
        state.pod_mutation.annotations[n.ANNOTATION_DEVICE_ALLOCATED] = raw
        self._remember_written(raw, s.allocation_result)
        return Status.success()

    _WRITTEN_LIMIT = 4096
    """Writes whose echo never came (a failed bind, a deleted pod) are forgotten oldest first past this."""

    def _remember_written(self, raw: str, allocations: DeviceAllocations) -> None:
        with self._lock:
            self._written[raw] = allocations
            while len(self._written) > self._WRITTEN_LIMIT:
                del self._written[next(iter(self._written))]

    def _fill_ids(self, allocations: DeviceAllocations, node_name: str) -> Status:
        with self._lock:
            device = self.devices.get(node_name)
        if device is None:
            return Status.as_error(f'devices.scheduling.koordinator.sh "{node_name}" not found')
        cached = self._uuids.get(node_name)
        if cached is None or cached[0] is not device:
            cached = self._uuids[node_name] = (device, {(d.type, d.minor): d.uuid for d in device.devices})
        by_key = cached[1]
        for device_type, allocs in allocations.items():
            for a in allocs:
                a.id = by_key.get((device_type, a.minor), a.id)
        return Status.success()

    # --- introspection ----------------------------------------------------------------------------------
    def node_summary(self, node_name: str) -> dict[str, dict[str, dict[str, int]]] | None:
        """Free device resources of a node (``type -> minor -> resources``), or None without a Device."""
        with self._lock:
            nd = self.nodes.get(node_name)
            return nd.summary() if nd is not None else None
