"""``NodeNUMAResource``: CPU pinning and NUMA-aware placement (Koordinator's ``nodenumaresource``).

An LSE/LSR prod pod gets an exclusive cpuset (``scheduling.koordinator.sh/resource-status``), chosen by the
CPU accumulator under the pod's bind policy (FullPCPUs: whole physical cores; SpreadByPCPUs: one thread per
core first) or the node's (``node.koordinator.sh/cpu-bind-policy``, kubelet's ``full-pcpus-only``). On nodes
with a NUMA topology policy (node label, the NRT's kubelet policy, or the pod's ``numa-topology-spec``) the
pod's cpu, memory and any other resource the NRT lists per NUMA node are aligned through the framework's
NUMA topology manager, to which this plugin is a hint provider. CPU amplification ratios are honoured: a
pinned CPU costs the whole amplified amount of the node's pool.

Inputs come from the shared informer: NodeResourceTopology objects (``TopologyOptions`` per node) and bound
pods' ``resource-status`` (what is already taken). Reserve records this scheduler's decision at once, so the
next pod sees it; Unreserve gives it back; PreBind writes the annotations through the batched pod patch.

Reservations (Koordinator's reservation hooks, ``reservation.py`` upstream): a Reservation's reserve pod gets
its cpuset like any pod, and it is recorded under the reservation's uid (from Reserve, then from the
Reservation's ``resource-status`` annotation). ``restore_reservation`` works out per node what matched
reservations still hold; Reserve allocates an owner pod inside its nominated reservation first, so reserved
CPUs go to owners only; ``pre_bind_reservation`` writes the reserve pod's cpuset on the Reservation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

import numpy as np

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.qos import PriorityClass, QoSClass, qos_class_raw
from koord_framework.api.resources import add, is_zero
from koord_framework.cluster.events import BAD_ANNOTATIONS
from koord_framework.explain.hooks import ExplainSection, NodeExplainer
from koord_framework.koordlet.cpuset import format_cpuset
from koord_framework.plugin import PluginArgs
from koord_framework.scheduler.constant_arrays import all_pass
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import (
    ANNOTATION_RESERVATION_AFFINITY,
    LABEL_RESERVATION_IGNORED,
    ReservationFilterPlugin,
    ReservationInfo,
    ReservationPreAllocationRestorePlugin,
    ReservationPreBindPlugin,
    ReservationRestorePlugin,
    allocated_reservation_of,
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
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    SchedulerPlugin,
    ScorePlugin,
    VectorFilter,
    VectorScore,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import MAX_NODE_SCORE, Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_framework.scheduler.topologymanager import (
    AffinityStore,
    NUMATopologyExclusive,
    NUMATopologyHint,
    NUMATopologyHintProvider,
    NUMATopologyPolicy,
    ProviderHints,
    TopologyManager,
)
from koord_plugin_nodenumaresource.accumulator import ERR_NOT_ENOUGH_CPUS
from koord_plugin_nodenumaresource.annotations import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    LABEL_NUMA_ALLOCATE_STRATEGY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    NODE_BIND_NONE,
    NODE_FULL_PCPUS_ONLY,
    NODE_SPREAD_BY_PCPUS,
    AnnotationError,
    ResourceSpec,
    ResourceStatus,
    amplification_ratios,
    amplify,
    amplify_resources,
    node_cpu_bind_policy,
    numa_topology_spec,
    resource_spec,
    resource_status,
)
from koord_plugin_nodenumaresource.args import NodeNUMAResourceArgs
from koord_plugin_nodenumaresource.node_allocation import PodAllocation
from koord_plugin_nodenumaresource.preemption import PreemptibleNodeState
from koord_plugin_nodenumaresource.resource_manager import (
    ERR_INVALID_CPU_TOPOLOGY,
    InvalidTopologyError,
    ResourceManager,
    ResourceOptions,
)
from koord_plugin_nodenumaresource.rows import RowFacts
from koord_plugin_nodenumaresource.scoring import ResourceScorer, is_scalar_resource
from koord_plugin_nodenumaresource.state import (
    RESTORE_STATE_KEY,
    STATE_KEY,
    NodeRestoreState,
    PreFilterState,
    ReusableAlloc,
    merge_by_numa,
    merge_pre_allocatable,
    restore_state_of,
    set_restore_state,
)
from koord_plugin_nodenumaresource.topology import CPUTopology
from koord_plugin_nodenumaresource.topology_options import (
    TopologyOptions,
    TopologyOptionsManager,
    topology_options_from_nrt,
)

__all__ = [
    "ERR_CPU_BIND_POLICY_CONFLICT",
    "ERR_INSUFFICIENT_AMPLIFIED_CPU",
    "ERR_INVALID_CPU_AMPLIFICATION_RATIO",
    "ERR_INVALID_REQUESTED_CPUS",
    "ERR_NOT_MATCH_NUMA_TOPOLOGY",
    "ERR_SMT_ALIGNMENT",
    "NAME",
    "NodeNUMAResource",
    "append_resource_spec_if_missed",
]

log = logging.getLogger(__name__)

NAME: Final = "NodeNUMAResource"
ERR_NOT_MATCH_NUMA_TOPOLOGY: Final = "node(s) NUMA Topology policy not match"
ERR_INVALID_REQUESTED_CPUS: Final = "the requested CPUs must be integer"
ERR_SMT_ALIGNMENT: Final = "node(s) requested cpus not multiple cpus per core"
ERR_CPU_BIND_POLICY_CONFLICT: Final = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_INVALID_CPU_AMPLIFICATION_RATIO: Final = "node(s) invalid CPU amplification ratio"
ERR_INSUFFICIENT_AMPLIFIED_CPU: Final = "Insufficient amplified cpu"
ERR_MISSING_NUMA_RESOURCES: Final = "node(s) missing NUMA resources"
ERR_INSUFFICIENT_NUMA_NODE_RESOURCES: Final = "node(s) Insufficient NUMA Node resources"
FULL_PCPUS: Final = "FullPCPUs"
SPREAD_BY_PCPUS: Final = "SpreadByPCPUs"
DEFAULT: Final = "Default"
_TERMINAL: Final = ("Succeeded", "Failed")


def _same_allocation(old: Mapping[str, Any], annotations: Mapping[str, str]) -> bool:
    """The two pods' allocation annotations are the same text (nothing to re-read)."""
    before: Mapping[str, str] = (old.get("metadata") or {}).get("annotations") or {}
    return before.get(ANNOTATION_RESOURCE_STATUS) == annotations.get(
        ANNOTATION_RESOURCE_STATUS
    ) and before.get(ANNOTATION_RESOURCE_SPEC) == annotations.get(ANNOTATION_RESOURCE_SPEC)


def allow_use_cpuset(pod: PodInfo) -> bool:
    """``AllowUseCPUSet``: the raw QoS label is LSE or LSR and the pod is prod (with defaults)."""
    return (
        qos_class_raw(pod.labels) in (QoSClass.LSE, QoSClass.LSR) and pod.priority_class is PriorityClass.PROD
    )


def merge_topology_policy(node_policy: str, pod_policy: str) -> str | None:
    """The effective NUMA policy; None when pod and node both set one and they differ."""
    if node_policy and pod_policy and node_policy != pod_policy:
        return None
    return pod_policy or node_policy


def request_cpu_bind(st: PreFilterState, node_bind_policy: str) -> tuple[bool, Status]:
    """``requestCPUBind``: the pod asked for a cpuset, or the node's bind policy imposes one."""
    if st.request_cpu_bind:
        return True, Status.success()
    cpu = st.requests.get("cpu", 0)
    if cpu == 0:
        return False, Status.success()
    if node_bind_policy and node_bind_policy != NODE_BIND_NONE:
        if cpu % 1000 != 0:
            return False, Status.unresolvable(ERR_INVALID_REQUESTED_CPUS)
        return True, Status.success()
    return False, Status.success()


def cpu_bind_policy(
    options: TopologyOptions, labels: Mapping[str, str], required: str, preferred: str
) -> tuple[str, bool]:
    """``getCPUBindPolicy``: (policy, required) after the node's own bind policy."""
    if required:
        return required, True
    node_policy = node_cpu_bind_policy(labels, options.policy)
    if node_policy == NODE_SPREAD_BY_PCPUS:
        return SPREAD_BY_PCPUS, True
    if node_policy == NODE_FULL_PCPUS_ONLY:
        return FULL_PCPUS, True
    return preferred, False


def append_resource_spec_if_missed(
    annotations: Mapping[str, str], st: PreFilterState, labels: Mapping[str, str], options: TopologyOptions
) -> ResourceSpec | None:
    """``appendResourceSpecIfMissed``: the ``resource-spec`` to write back when the pod did not state the
    policy it was bound with; None when nothing needs writing."""
    policy, required = cpu_bind_policy(
        options, labels, st.required_cpu_bind_policy, st.preferred_cpu_bind_policy
    )
    try:
        spec = resource_spec(annotations, "pod")
    except AnnotationError:
        spec = ResourceSpec()
    changed = False
    req, pref, excl = (
        spec.required_cpu_bind_policy,
        spec.preferred_cpu_bind_policy,
        spec.preferred_cpu_exclusive_policy,
    )
    if required and req in ("", DEFAULT):
        req, changed = policy, True
    if pref == DEFAULT:
        pref, changed = policy, True
    if req == "" and pref == "" and policy != "":
        pref, changed = policy, True
    return ResourceSpec(req, pref, excl) if changed else None


class NodeNUMAResource(
    SchedulerPlugin[NodeNUMAResourceArgs],
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    VectorFilter,
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
    NUMATopologyHintProvider,
    ReservationRestorePlugin,
    ReservationPreAllocationRestorePlugin,
    ReservationFilterPlugin,
    ReservationPreBindPlugin,
    NodeExplainer,
):
    """Koordinator's NodeNUMAResource."""

    name: ClassVar[str] = NAME
    Args: ClassVar[type[PluginArgs]] = NodeNUMAResourceArgs

    def __init__(self, args: NodeNUMAResourceArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        parsed = self.args
        self.numa_args: NodeNUMAResourceArgs = parsed
        weights = parsed.scoring_strategy.weights()
        self.scorer = ResourceScorer(parsed.scoring_strategy.type, weights)
        # Upstream builds the NUMA scorer with the NUMA strategy's type but the node strategy's weights.
        self.numa_scorer = ResourceScorer(parsed.numa_scoring_strategy.type, weights)
        self.topologies = TopologyOptionsManager()
        self.resources = ResourceManager(self.topologies)
        self.topology_manager = TopologyManager(handle.numa_topology_hint_providers)
        self.rows = RowFacts(self.topologies, handle.node_info)
        informer = handle.informer
        informer.add_handler("NodeResourceTopology", self._on_nrt, self._on_nrt_update, self._on_nrt_delete)
        informer.add_handler("Pod", self._on_pod, self._on_pod_update, self._on_pod_delete)
        informer.add_handler("Node", self._on_node, self._on_node_update, self._on_node_delete)
        informer.add_handler(
            "Reservation", self._on_reservation, self._on_reservation_update, self._on_reservation_delete
        )

    # --- informer events ------------------------------------------------------------------------------
    def _on_nrt(self, obj: Mapping[str, Any]) -> None:
        options = topology_options_from_nrt(obj, self.topologies.shared_topologies)
        if options.error:
            log.warning("NodeNUMAResource: %s", options.error)
        name = str((obj.get("metadata") or {}).get("name") or "")
        options.max_ref_count = self.topologies.get(name).max_ref_count
        self.topologies.set(name, options)

    def _on_nrt_update(self, _old: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> None:
        self._on_nrt(obj)

    def _on_nrt_delete(self, obj: Mapping[str, Any]) -> None:
        self.topologies.delete(str((obj.get("metadata") or {}).get("name") or ""))

    def _on_node(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        self.rows.touch(str(meta.get("name") or ""), str(meta.get("resourceVersion") or ""))

    def _on_node_update(self, _old: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> None:
        self._on_node(obj)

    def _on_node_delete(self, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        self.resources.delete_node(name)
        self.rows.touch(name, None)

    def _on_pod(self, obj: Mapping[str, Any]) -> None:
        self._on_pod_update(None, obj)

    def _on_pod_update(self, old: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        old_node = str(((old or {}).get("spec") or {}).get("nodeName") or "")
        if not node:
            if old_node:
                self.resources.release(old_node, uid)
            return
        if (obj.get("status") or {}).get("phase") in _TERMINAL:
            self.resources.release(node, uid)
            return
        annotations: Mapping[str, str] = meta.get("annotations") or {}
        if ANNOTATION_RESOURCE_STATUS not in annotations:
            return
        if old is not None and old_node == node and _same_allocation(old, annotations):
            return  # status-only churn (or this scheduler's own bind): the recorded allocation stands
        self._record_allocation(obj, node, "pod")

    def _record_allocation(self, obj: Mapping[str, Any], node: str, kind: str) -> None:
        """Record the ``resource-status`` of a bound pod or an active reservation on ``node``."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        annotations: Mapping[str, str] = meta.get("annotations") or {}
        if ANNOTATION_RESOURCE_STATUS not in annotations:
            return
        owner = f"{kind} {meta.get('namespace') or ''}/{meta.get('name') or ''}".replace(" /", " ")
        try:
            status = resource_status(annotations, owner)
            spec = resource_spec(annotations, owner)
        except AnnotationError as err:
            # Upstream skips such a pod too; say so (once per pod and value: every update reads it
            # again), since its CPUs are then not counted as taken.
            value = "\x00".join(
                (
                    annotations.get(ANNOTATION_RESOURCE_STATUS, ""),
                    annotations.get(ANNOTATION_RESOURCE_SPEC, ""),
                )
            )
            BAD_ANNOTATIONS.once(
                uid or owner,
                ANNOTATION_RESOURCE_STATUS,
                value,
                f"NodeNUMAResource: ignoring the allocation of {err}",
            )
            return
        if not status.cpuset and not status.numa_node_resources:
            return
        self.resources.update(
            node,
            PodAllocation(
                uid,
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
                status.cpuset,
                spec.preferred_cpu_exclusive_policy,
                status.numa_node_resources,
            ),
        )

    def _on_pod_delete(self, obj: Mapping[str, Any]) -> None:
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        if node:
            self.resources.release(node, str((obj.get("metadata") or {}).get("uid") or ""))

    # A reservation's cpuset is held under its uid (the reserve pod's uid), as upstream's
    # ReservationToPodEventHandler does for active (Available, placed) reservations only.
    def _on_reservation(self, obj: Mapping[str, Any]) -> None:
        self._on_reservation_update(None, obj)

    def _on_reservation_update(self, old: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> None:
        status = obj.get("status") or {}
        node = str(status.get("nodeName") or "")
        old_node = str(((old or {}).get("status") or {}).get("nodeName") or "")
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if old_node and old_node != node:
            self.resources.release(old_node, uid)
        if not node:
            return
        if status.get("phase") != "Available":
            self.resources.release(node, uid)
            return
        self._record_allocation(obj, node, "reservation")

    def _on_reservation_delete(self, obj: Mapping[str, Any]) -> None:
        node = str((obj.get("status") or {}).get("nodeName") or "")
        if node:
            self.resources.release(node, str((obj.get("metadata") or {}).get("uid") or ""))

    def explain_node(self, node_name: str) -> ExplainSection:
        """``koord explain node``: free CPUs and NUMA resources per zone, the pods holding cpusets."""
        from koord_plugin_nodenumaresource.explain import explain_node

        return explain_node(self, node_name)

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("NodeResourceTopology", "Add"),
            ClusterEvent("NodeResourceTopology", "Update"),
            ClusterEvent("NodeResourceTopology", "Delete"),
        ]

    # --- PreFilter ----------------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        owner = f"pod {pod.key}"
        try:
            spec = resource_spec(pod.annotations, owner)
            numa = numa_topology_spec(pod.annotations, owner)
        except AnnotationError as err:
            return None, Status.unresolvable(str(err))
        requests = pod.requests
        if is_zero(requests):
            state.write(STATE_KEY, PreFilterState(skip=True))
            return None, Status.skip()
        cpu = requests.get("cpu", 0)
        st = PreFilterState(
            requests=requests,
            num_cpus_needed=cpu // 1000,
            pod_numa_topology_policy=numa.numa_topology_policy,
            pod_numa_exclusive=numa.single_numa_node_exclusive,
            has_reservation_affinity=bool(pod.annotations.get(ANNOTATION_RESERVATION_AFFINITY)),
            reservation_ignored=pod.labels.get(LABEL_RESERVATION_IGNORED) == "true",
            pre_allocation_required=is_pre_allocation_required(pod),
        )
        if allow_use_cpuset(pod):
            default = self.numa_args.default_cpu_bind_policy
            bind = spec.preferred_cpu_bind_policy
            if bind in ("", DEFAULT):
                bind = default
            required = spec.required_cpu_bind_policy
            if required == DEFAULT:
                required = default
            if required:
                bind = required
            if bind in (FULL_PCPUS, SPREAD_BY_PCPUS):
                if cpu % 1000 != 0:
                    return None, Status.unresolvable(ERR_INVALID_REQUESTED_CPUS)
                if cpu > 0:
                    st.request_cpu_bind = True
                    st.required_cpu_bind_policy = required
                    st.preferred_cpu_bind_policy = bind
                    st.preferred_cpu_exclusive_policy = spec.preferred_cpu_exclusive_policy
        state.write(STATE_KEY, st)
        AffinityStore.init(state)
        return None, Status.success()

    def _state(self, state: CycleState) -> PreFilterState | None:
        found = state.get(STATE_KEY)
        return found if isinstance(found, PreFilterState) else None

    # --- PreFilter extensions: preemption what-ifs (Koordinator's preempt.go) ------------------------------
    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        """A pod put back on ``node`` takes its CPUs and NUMA resources again."""
        return self._preempt(state, to_add, node.name, removed=False)

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        """A victim taken off ``node`` gives its CPUs and NUMA resources back, to its reservation when it
        was allocated in a NUMA-aware one, else to the node."""
        return self._preempt(state, to_remove, node.name, removed=True)

    def _preempt(self, state: CycleState, other: PodInfo, node: str, *, removed: bool) -> Status:
        st = self._state(state)
        if st is None:
            return Status.as_error(f"{NAME}: no PreFilter state")
        if st.skip:
            return Status.success()
        with self.resources.lock:
            held = self.resources.pod_allocation(node, other.uid)
            if held is None or (not held.cpuset and not held.numa_node_resources):
                return Status.success()  # a nominated pod, or one without cpuset and NUMA resources
            reservation = self._numa_aware_reservation_of(other, node)
        numa = merge_by_numa(dict(held.numa_node_resources))
        freed = st.preemptible.setdefault(node, PreemptibleNodeState()).alloc_for(reservation)
        if removed:
            freed.accumulate(held.cpuset, numa)
        else:
            freed.subtract(held.cpuset, numa)
        return Status.success()

    def _numa_aware_reservation_of(self, pod: PodInfo, node: str) -> str | None:
        """The uid of the reservation ``pod`` was allocated in, when that reservation itself holds a cpuset or
        NUMA resources here (``notNUMAAwareReservation``); None otherwise (its resources are the node's)."""
        try:
            allocated = allocated_reservation_of(pod)
        except ValueError:
            return None  # the reservation cache would not know it either: count it against the node
        if allocated is None:
            return None
        reserved = self.resources.pod_allocation(node, allocated[1])
        if reserved is None or (not reserved.cpuset and not reserved.numa_node_resources):
            return None
        return allocated[1]

    # --- per-node context -------------------------------------------------------------------------------
    def _numa_policy(self, st: PreFilterState, record: NodeRecord, options: TopologyOptions) -> str | None:
        node_policy = record.labels.get(LABEL_NUMA_TOPOLOGY_POLICY, "") or options.numa_topology_policy
        return merge_topology_policy(node_policy, st.pod_numa_topology_policy)

    def _resource_options(
        self,
        st: PreFilterState,
        record: NodeRecord,
        bind: bool,
        hint: NUMATopologyHint | None,
        options: TopologyOptions,
    ) -> ResourceOptions:
        """``getResourceOptions``; ``AnnotationError`` for a malformed amplification-ratio annotation."""
        ratios = options.amplification_ratios
        zones = options.numa_node_resources
        if ratios is None:
            ratios = amplification_ratios(record.annotations, f"node {record.name}")
            zones = [(node, amplify_resources(res, ratios)) for node, res in zones]
        requests = dict(st.requests)
        if bind and ratios.get("cpu", 0.0) > 1:
            requests = amplify_resources(requests, ratios, only="cpu")
        policy, required = cpu_bind_policy(
            options, record.labels, st.required_cpu_bind_policy, st.preferred_cpu_bind_policy
        )
        return ResourceOptions(
            topology_options=options,
            requests=requests,
            original_requests=st.requests,
            num_cpus_needed=st.num_cpus_needed,
            request_cpu_bind=bind,
            required_cpu_bind_policy=required,
            cpu_bind_policy=policy,
            cpu_exclusive_policy=st.preferred_cpu_exclusive_policy,
            numa_allocate_strategy=record.labels.get(LABEL_NUMA_ALLOCATE_STRATEGY, "")
            or self.numa_args.default_numa_allocate_strategy,
            ratios=ratios,
            numa_node_resources=zones,
            hint=hint,
            node_preemption=st.preemptible.get(record.name),
        )

    def _allocate_from_node(
        self, pod: PodInfo, node: str, options: ResourceOptions, restore: NodeRestoreState
    ) -> tuple[PodAllocation | None, Status]:
        """``tryAllocateFromNode``: what is free on the node. Owner pods' usage inside reservations is given
        back (the reserve pods already count it); what reservations still hold stays taken, so a pod going
        this way never gets reserved CPUs."""
        options.required_resources = None
        options.reusable_resources = merge_by_numa(restore.unmatched_used, restore.matched_allocated)
        options.preferred_cpus = frozenset()
        options.preemptible_cpus = frozenset()
        freed = options.node_preemption.node_alloc if options.node_preemption is not None else None
        if freed is not None:  # a preemption what-if: the victims' CPUs and NUMA resources count as free
            options.reusable_resources = freed.append_numa(options.reusable_resources)
            options.preemptible_cpus = freed.append_cpus()
        return self.resources.allocate(node, pod.uid, options)

    def _allocate_from_reservations(
        self,
        st: PreFilterState,
        pod: PodInfo,
        node: str,
        options: ResourceOptions,
        restore: NodeRestoreState,
        allocs: Mapping[str, ReusableAlloc],
    ) -> tuple[PodAllocation | None, Status]:
        """``tryAllocateFromReusable``: allocate inside one of ``allocs`` (matched reservations).

        (None, Success) when no reservation holds CPUs/NUMA resources here or none could satisfy the pod and
        the pod may fall back to the node; Unschedulable when it must consume a reservation."""
        if not allocs:
            return None, Status.success()
        if st.reservation_ignored:
            return self._allocate_ignoring_reservations(pod, node, options, restore, allocs)
        reusable = merge_by_numa(restore.unmatched_used, restore.matched_allocated)
        preemption = options.node_preemption
        node_freed = preemption.node_alloc if preemption is not None else None
        preemptible: frozenset[int] = frozenset()
        if node_freed is not None:
            reusable = node_freed.append_numa(reusable)
            preemptible = node_freed.append_cpus()
        # A pre-allocating reserve pod allocates from candidate pods (the cycle state says so, not the pod:
        # a normal pod consuming a placed pre-allocation reservation is not one).
        pre_allocation = restore.pre_allocation is not None
        reasons: list[str] = []
        for alloc in allocs.values():
            options.reusable_resources = merge_by_numa(reusable, alloc.remained)
            options.preferred_cpus = restore.matched_allocated_cpus | alloc.remained_cpus
            options.preemptible_cpus = preemptible
            options.required_resources = None
            freed = preemption.reservations_alloc.get(alloc.reservation.uid) if preemption else None
            if freed is not None:  # owner pods of this reservation removed by the what-if
                options.reusable_resources = freed.append_numa(options.reusable_resources)
                options.preemptible_cpus = freed.append_cpus(options.preemptible_cpus)
            if alloc.reservation.allocate_policy != "Restricted":
                # Upstream implements Default as Aligned: reserved CPUs first, then the node's.
                result, status = self.resources.allocate(node, pod.uid, options)
                if status.is_success:
                    return result, status
                reasons += status.reasons
                continue
            _, status = self.resources.allocate(node, pod.uid, options)
            if not status.is_success:
                reasons += status.reasons
                continue
            # Restricted: the pod's cpuset and NUMA resources come from the reservation only.
            reserved = alloc.remained_cpus
            options.required_resources = (
                {n: dict(r) for n, r in alloc.remained.items()} if alloc.remained else None
            )
            options.preferred_cpus = alloc.remained_cpus
            options.preemptible_cpus = frozenset()
            if node_freed is not None:
                # A reservation-ignored victim's CPUs inside the reservation are not in its allocated set.
                options.preemptible_cpus |= alloc.allocatable_cpus & node_freed.append_cpus()
            if freed is not None:
                options.required_resources = freed.append_numa(options.required_resources)
                # Given back twice: one reference held by the reservation, one by the removed owner.
                again = alloc.allocatable_cpus & freed.append_cpus()
                options.preemptible_cpus |= again
                options.preferred_cpus |= again
                reserved |= again
            if pre_allocation:
                # The reservation may hold more than the candidate's NUMA resources (more cpu, memory).
                options.required_resources = None
            if options.request_cpu_bind and options.num_cpus_needed > len(reserved):
                reasons.append(ERR_NOT_ENOUGH_CPUS)
                continue
            result, status = self.resources.allocate(node, pod.uid, options)
            if not status.is_success:
                reasons += status.reasons
                continue
            assert result is not None
            if not pre_allocation and len(result.cpuset) > len(reserved):
                reasons.append(ERR_NOT_ENOUGH_CPUS)  # a pod gets no more CPUs than the reservation has left
                continue
            if pre_allocation and not reserved <= result.cpuset:
                reasons.append(ERR_NOT_ENOUGH_CPUS)  # the reservation takes over every CPU of the pod
                continue
            return result, status
        if st.has_reservation_affinity or st.pre_allocation_required:
            return None, Status.unschedulable(*(f"Reservation(s) {r}" for r in reasons))
        return None, Status.success()

    def _allocate_ignoring_reservations(
        self,
        pod: PodInfo,
        node: str,
        options: ResourceOptions,
        restore: NodeRestoreState,
        allocs: Mapping[str, ReusableAlloc],
    ) -> tuple[PodAllocation | None, Status]:
        """``tryAllocateIgnoreReservation``: a reservation-ignored pod may use what the node has free and
        what the reservations hold but their owners have not taken."""
        reusable = merge_by_numa(restore.unmatched_used, restore.matched_allocated)
        cpus = set(restore.matched_allocated_cpus)
        preemption = options.node_preemption
        preemptible: frozenset[int] = frozenset()
        if preemption is not None and preemption.node_alloc is not None:
            reusable = preemption.node_alloc.append_numa(reusable)
            preemptible = preemption.node_alloc.append_cpus()
        for alloc in allocs.values():
            reusable = merge_by_numa(reusable, alloc.remained)
            cpus |= alloc.remained_cpus
            freed = preemption.reservations_alloc.get(alloc.reservation.uid) if preemption else None
            if freed is not None:
                reusable = freed.append_numa(reusable)
                preemptible |= freed.append_cpus()
        options.reusable_resources = reusable
        options.preferred_cpus = frozenset(cpus)
        options.preemptible_cpus = preemptible
        options.required_resources = None
        return self.resources.allocate(node, pod.uid, options)

    def _allocate_with_nominated(
        self,
        state: CycleState,
        st: PreFilterState,
        pod: PodInfo,
        node: str,
        options: ResourceOptions,
        restore: NodeRestoreState,
    ) -> tuple[PodAllocation | None, Status]:
        """``allocateWithNominated``: an owner pod allocates inside the reservation it was nominated to
        (Reserve), a pre-allocating reserve pod inside the pods it takes over; neither falls back to the node
        when what it was nominated to holds CPUs but cannot serve it."""
        if is_reserve_pod(pod):
            if not is_pre_allocation_reserve_pod(pod):
                return None, Status.success()
            return self._allocate_pre_allocation(state, st, pod, node, options, restore)
        if st.reservation_ignored:
            return self._allocate_ignoring_reservations(pod, node, options, restore, restore.matched)
        if not restore.matched:
            return None, Status.success()
        nominated = nominated_reservation(state, node)
        if nominated is None:
            if st.has_reservation_affinity:
                return None, Status.unschedulable("no nominated reservation")
            return None, Status.success()
        alloc = restore.matched.get(nominated.uid)
        if alloc is None:
            return None, Status.success()  # the nominated reservation holds no CPUs/NUMA resources
        result, status = self._allocate_from_reservations(
            st, pod, node, options, restore, {nominated.uid: alloc}
        )
        if not status.is_success:
            return None, status
        if result is None:
            return None, Status.unschedulable(
                "pod has a nominated reservation but cannot be allocated within its NUMA scope"
            )
        return result, status

    def _allocate_pre_allocation(
        self,
        state: CycleState,
        st: PreFilterState,
        pod: PodInfo,
        node: str,
        options: ResourceOptions,
        restore: NodeRestoreState,
    ) -> tuple[PodAllocation | None, Status]:
        """``getNominatedReusableAlloc`` for a reserve pod: the CPUs of the pods nominated for it on ``node``
        (with ``enableMultiple`` all of them together, where Koordinator takes the first)."""
        nominated = nominated_pre_allocation(state, node) if restore.pre_allocation is not None else ()
        if not nominated:
            if st.pre_allocation_required:
                return None, Status.unschedulable("no nominated pre-allocatable pod")
            return None, Status.success()
        found = [restore.matched[p.uid] for p in nominated if p.uid in restore.matched]
        if not found:
            return None, Status.success()  # the nominated pods hold no cpuset or NUMA resources
        alloc = merge_pre_allocatable(found)
        key = nominated[0].uid
        result, status = self._allocate_from_reservations(st, pod, node, options, restore, {key: alloc})
        if not status.is_success:
            return None, status
        if result is None:
            return None, Status.unschedulable(
                "pod has a nominated reservation but cannot be allocated within its NUMA scope"
            )
        return result, status

    # --- reservation hooks --------------------------------------------------------------------------------
    def pre_restore_reservation(self, state: CycleState, pod: PodInfo) -> Status:
        state.write(RESTORE_STATE_KEY, {})
        return Status.success()

    def restore_reservation(
        self,
        state: CycleState,
        pod: PodInfo,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node: NodeInfo,
    ) -> Status:
        """``RestoreReservation``: per reservation on the node, its reserved cpuset / NUMA resources and what
        its owner pods took of them."""
        name = node.name
        found_matched = self._reusable_allocs(name, matched)
        found_unmatched = self._reusable_allocs(name, unmatched)
        if found_matched or found_unmatched:
            set_restore_state(state, name, NodeRestoreState.merged(found_matched, found_unmatched))
        return Status.success()

    def _reusable_allocs(
        self, node: str, reservations: Sequence[ReservationInfo]
    ) -> dict[str, ReusableAlloc]:
        out: dict[str, ReusableAlloc] = {}
        with self.resources.lock:
            for r in reservations:
                held = self.resources.pod_allocation(node, r.uid)
                if held is None:
                    continue
                owners = [self.resources.pod_allocation(node, uid) for uid in r.allocated_pods]
                allocatable = merge_by_numa(dict(held.numa_node_resources)) or None
                allocated: dict[int, dict[str, int]] | None = None
                remained: dict[int, dict[str, int]] | None = None
                if allocatable:
                    allocated = merge_by_numa(*(dict(o.numa_node_resources) for o in owners if o)) or None
                    remained = {
                        n: {k: v - (allocated or {}).get(n, {}).get(k, 0) for k, v in res.items()}
                        for n, res in allocatable.items()
                    }
                reserved = held.cpuset
                remain = set(reserved)
                for o in owners:
                    if o is not None:
                        remain -= o.cpuset
                if allocatable is None and not reserved:
                    continue
                out[r.uid] = ReusableAlloc(
                    reservation=r,
                    allocatable_cpus=reserved,
                    allocated_cpus=reserved,
                    remained_cpus=frozenset(remain),
                    allocatable=allocatable,
                    allocated=allocated,
                    remained=remained,
                )
        return out

    def pre_restore_reservation_pre_allocation(
        self, state: CycleState, reservation: ReservationInfo
    ) -> Status:
        if not isinstance(state.get(RESTORE_STATE_KEY), dict):
            state.write(RESTORE_STATE_KEY, {})
        return Status.success()

    def restore_reservation_pre_allocation(
        self,
        state: CycleState,
        reservation: ReservationInfo,
        pre_allocatable: Sequence[PodInfo],
        node: NodeInfo,
    ) -> Status:
        """``RestoreReservationPreAllocation``: each candidate pod's cpuset and NUMA resources, all of them
        reusable by the pre-allocating reserve pod (kept by pod uid)."""
        name = node.name
        found: dict[str, ReusableAlloc] = {}
        with self.resources.lock:
            for p in pre_allocatable:
                held = self.resources.pod_allocation(name, p.uid)
                if held is None:
                    continue
                numa = merge_by_numa(dict(held.numa_node_resources)) or None
                if numa is None and not held.cpuset:
                    continue
                found[p.uid] = ReusableAlloc(
                    reservation=reservation,
                    pre_allocatable=p,
                    allocatable_cpus=held.cpuset,
                    remained_cpus=held.cpuset,
                    allocatable=numa,
                    remained=numa,
                )
        if not found:
            return Status.success()
        current = restore_state_of(state, name)
        set_restore_state(
            state, name, NodeRestoreState.merged({**current.matched, **found}, current.unmatched, reservation)
        )
        return Status.success()

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node: NodeInfo
    ) -> Status:
        return Status.success()  # upstream checks nothing here; nomination is where the cpuset must fit

    def filter_nominate_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> Status:
        """``FilterNominateReservation``: the pod must fit inside the reservation's held CPUs/NUMA resources
        (under the node's merged NUMA hint) for the reservation to be nominated."""
        st = self._state(state)
        if st is None:
            return Status.as_error(f"{NAME}: no PreFilter state for pod {pod.key}")
        if st.skip:
            return Status.success()
        node = self.handle.node_info(node_name)
        if node is None:
            return Status.as_error(f"getting node {node_name!r} from Snapshot: not found")
        record = node.node
        options = self.topologies.get(node_name)
        policy = self._numa_policy(st, record, options) or ""
        bind, status = request_cpu_bind(st, node_cpu_bind_policy(record.labels, options.policy))
        if not status.is_success:
            return status
        if not bind and policy == NUMATopologyPolicy.NONE:
            return Status.success()
        if bind and (options.cpu_topology is None or not options.cpu_topology.is_valid):
            return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY)
        restore = restore_state_of(state, node_name)
        # Nominating a candidate pod for a pre-allocating reservation: ``pod`` is the candidate, the
        # allocation is the reserve pod's inside that candidate's CPUs.
        key = pod.uid if restore.pre_allocation is not None else reservation.uid
        alloc = restore.matched.get(key)
        if alloc is None:
            return Status.success()
        hint = AffinityStore.of(state).get(node_name)
        try:
            res_options = self._resource_options(st, record, bind, hint, options)
        except AnnotationError as err:
            return Status.unresolvable(str(err))
        result, status = self._allocate_from_reservations(
            st, pod, node_name, res_options, restore, {key: alloc}
        )
        if not status.is_success:
            return status
        if result is None:
            # Also for a pre-allocation candidate (Koordinator passes it unless pre-allocation is required):
            # Reserve could not serve the reservation from it, so another candidate should be nominated.
            return Status.unschedulable("reservation NUMA scope is incompatible with the best topology hint")
        return Status.success()

    def pre_bind_reservation(
        self, state: CycleState, reservation: Mapping[str, Any], node_name: str
    ) -> Status:
        """``PreBindReservation``: the reserve pod's cpuset (``resource-status``, and ``resource-spec`` when
        missing) written on the Reservation."""
        annotations = ((reservation.get("metadata") or {}).get("annotations")) or {}
        return self._pre_bind_object(state, annotations, node_name)

    # --- Filter -------------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        st = self._state(state)
        if st is None:
            return Status.as_error(f"{NAME}: no PreFilter state for pod {pod.key}")
        if st.skip:
            return Status.success()
        record = node.node
        options = self.topologies.get(record.name)
        policy = self._numa_policy(st, record, options)
        if policy is None:
            return Status.unresolvable(ERR_NOT_MATCH_NUMA_TOPOLOGY)
        node_bind = node_cpu_bind_policy(record.labels, options.policy)
        bind, status = request_cpu_bind(st, node_bind)
        if not status.is_success:
            return status
        status = self._filter_amplified_cpus(st.requests.get("cpu", 0), node, bind)
        if not status.is_success:
            return status
        if bind:
            invalid = self._invalid_topology(record, options)
            if invalid is not None:
                return invalid
            topology = options.cpu_topology
            assert topology is not None
            required = st.required_cpu_bind_policy
            if node_bind == NODE_FULL_PCPUS_ONLY:
                required = FULL_PCPUS
            elif node_bind == NODE_SPREAD_BY_PCPUS:
                required = SPREAD_BY_PCPUS
            if st.required_cpu_bind_policy and st.required_cpu_bind_policy != required:
                return Status.unresolvable(ERR_CPU_BIND_POLICY_CONFLICT)
            if required == FULL_PCPUS and st.num_cpus_needed % topology.cpus_per_core != 0:
                return Status.unresolvable(ERR_SMT_ALIGNMENT)
            if required and policy == NUMATopologyPolicy.NONE:
                try:
                    res_options = self._resource_options(st, record, bind, None, options)
                except AnnotationError as err:
                    return Status.unresolvable(str(err))
                restore = restore_state_of(state, record.name)
                alloc, status = self._allocate_from_reservations(
                    st, pod, record.name, res_options, restore, restore.matched
                )
                if not status.is_success or alloc is not None:
                    return status
                _, status = self._allocate_from_node(pod, record.name, res_options, restore)
                return status
        if policy in (NUMATopologyPolicy.RESTRICTED, NUMATopologyPolicy.SINGLE_NUMA_NODE):
            return self._filter_by_numa_node(state, pod, node, policy, self._exclusive(st), options)
        return Status.success()

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        """Filter over many rows: the easy rows (see ``rows.RowFacts``) at once, the others one by one."""
        st = self._state(state)
        n = rows.size
        if st is None or st.skip or n == 0:
            return all_pass(n) if st is not None else self._filter_rows(state, pod, table, rows)
        if st.pod_numa_topology_policy or (st.request_cpu_bind and st.required_cpu_bind_policy):
            return self._filter_rows(state, pod, table, rows)
        self.rows.refresh(table)
        easy = (self.rows.pinnable if st.request_cpu_bind else self.rows.plain).take(rows)
        if easy.all():
            return easy
        out = easy.copy()
        hard = np.flatnonzero(~easy)
        out[hard] = self._filter_rows(state, pod, table, rows[hard])
        return out

    def _filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        out = np.zeros(rows.size, dtype=np.bool_)
        for i, row in enumerate(rows.tolist()):
            info = self.handle.node_info(table.names[row])
            out[i] = info is not None and self.filter(state, pod, info).is_success
        return out

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        """Score over many rows: on easy rows (no NUMA policy, no ratio, no node bind policy) the scorer over
        the table's requested/allocatable columns; elsewhere ``score`` row by row."""
        st = self._state(state)
        n = rows.size
        if st is None or st.skip or n == 0:
            return np.zeros(n, dtype=np.int64)
        if st.pod_numa_topology_policy:
            return self._score_rows(state, pod, table, rows)
        self.rows.refresh(table)
        easy = (self.rows.pinnable if st.request_cpu_bind else self.rows.plain).take(rows)
        out = np.zeros(n, dtype=np.int64)
        if easy.any():
            out[easy] = self._vector_scores(st, table, rows[easy])
        if not easy.all():
            hard = np.flatnonzero(~easy)
            out[hard] = self._score_rows(state, pod, table, rows[hard])
        return out

    def _vector_scores(self, st: PreFilterState, table: NodeTable, rows: Int64Array) -> Int64Array:
        """``ResourceScorer.score(node requested, node allocatable, pod requests)`` over columns."""
        total = np.zeros(rows.size, dtype=np.int64)
        weights = np.zeros(rows.size, dtype=np.int64)
        most = self.scorer.most
        for name, weight in self.scorer.weights.items():
            pod = st.requests.get(name, 0)
            scalar = is_scalar_resource(name)
            if (pod == 0 and scalar) or (name not in ("cpu", "memory", "ephemeral-storage") and not scalar):
                continue
            if scalar and name not in table.resources:
                continue
            cap = table.allocatable_of(name).take(rows)
            req = table.requested_of(name).take(rows) + pod
            valid = cap != 0
            safe = np.where(valid, cap, 1)
            if most:
                part = np.minimum(req, cap) * MAX_NODE_SCORE // safe
            else:
                part = np.where(req > cap, 0, (cap - req) * MAX_NODE_SCORE // safe)
            total += np.where(valid, part * weight, 0)
            weights += np.where(valid, weight, 0)
        scores: Int64Array = np.where(weights > 0, total // np.where(weights > 0, weights, 1), 0)
        return scores

    def _score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        out = np.zeros(rows.size, dtype=np.int64)
        for i, row in enumerate(rows.tolist()):
            info = self.handle.node_info(table.names[row])
            if info is not None:
                out[i] = self.score(state, pod, info)[0]
        return out

    @staticmethod
    def _exclusive(st: PreFilterState) -> str:
        """The pod's singleNUMANodeExclusive; Required by default when the pod itself asks for a policy."""
        if not st.pod_numa_exclusive and st.pod_numa_topology_policy:
            return NUMATopologyExclusive.REQUIRED
        return st.pod_numa_exclusive

    @staticmethod
    def _invalid_topology(record: NodeRecord, options: TopologyOptions) -> Status | None:
        """Why the node cannot pin CPUs (no/invalid topology, or an NRT naming CPUs the node lacks)."""
        topology = options.cpu_topology
        if topology is None or not topology.is_valid:
            return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY, *([options.error] if options.error else []))
        capacity = record.capacity.get("cpu", 0)
        if capacity and topology.num_cpus * 1000 > capacity:
            return Status.unresolvable(
                ERR_INVALID_CPU_TOPOLOGY,
                f"NodeResourceTopology {record.name} lists {topology.num_cpus} CPUs but node {record.name} "
                f"has status.capacity.cpu {capacity // 1000}",
            )
        return None

    def _filter_amplified_cpus(self, pod_cpu: int, node: NodeInfo, bind: bool) -> Status:
        """``filterAmplifiedCPUs``: on a node with a cpu ratio r > 1, pinned CPUs cost r each."""
        if pod_cpu == 0:
            return Status.success()
        record = node.node
        try:
            ratio = amplification_ratios(record.annotations, f"node {record.name}").get("cpu", -1.0)
        except AnnotationError as err:
            return Status.unresolvable(ERR_INVALID_CPU_AMPLIFICATION_RATIO, str(err))
        if ratio <= 1:
            return Status.success()
        if bind:
            pod_cpu = amplify(pod_cpu, ratio)
        try:
            _, held = self.resources.available_cpus(record.name)
        except InvalidTopologyError as err:
            return Status.unresolvable(str(err))
        pinned = len(held) * 1000
        requested = node.requested.get("cpu", 0)
        if requested >= pinned > 0:
            requested = requested - pinned + amplify(pinned, ratio)
        if pod_cpu > node.allocatable.get("cpu", 0) - requested:
            return Status.unschedulable(ERR_INSUFFICIENT_AMPLIFIED_CPU)
        return Status.success()

    def _filter_by_numa_node(
        self,
        state: CycleState,
        pod: PodInfo,
        node: NodeInfo,
        policy: str,
        exclusive: str,
        options: TopologyOptions,
        *,
        recompute: bool = False,
    ) -> Status:
        """``FilterByNUMANode``: admission by the framework's topology manager."""
        if policy == NUMATopologyPolicy.NONE:
            return Status.success()
        numa_nodes = options.numa_nodes()
        if not numa_nodes:
            return Status.unresolvable(ERR_MISSING_NUMA_RESOURCES)
        with self.resources.lock:
            statuses = self.resources.node_allocation(node.name).numa_node_statuses(
                options.cpu_topology or CPUTopology(), len(numa_nodes)
            )
        return self.topology_manager.admit(
            state, pod, node, numa_nodes, policy, exclusive, statuses, recompute=recompute
        )

    # --- NUMA hint provider -----------------------------------------------------------------------------
    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[ProviderHints | None, Status]:
        st = self._state(state)
        if st is None:
            return None, Status.as_error(f"{NAME}: no PreFilter state for pod {pod.key}")
        if st.skip:
            return None, Status.success()
        record = node.node
        options = self.topologies.get(record.name)
        policy = self._numa_policy(st, record, options) or ""
        bind, status = request_cpu_bind(st, node_cpu_bind_policy(record.labels, options.policy))
        if not status.is_success:
            return None, status
        try:
            res_options = self._resource_options(st, record, bind, None, options)
        except AnnotationError as err:
            return None, Status.as_error(str(err))
        restore = restore_state_of(state, record.name)
        res_options.numa_scorer = self.numa_scorer
        res_options.reusable_resources = {
            n: dict(add(restore.unmatched_used.get(n, {}), restore.matched_allocatable.get(n, {})))
            for n in {*restore.unmatched_used, *restore.matched_allocatable}
        }
        res_options.preferred_cpus = restore.matched_remain_cpus
        preemption = res_options.node_preemption
        if preemption is not None:  # every victim's resources, the node's and the reservations' alike
            freed_all = [preemption.node_alloc] if preemption.node_alloc is not None else []
            freed_all += preemption.reservations_alloc.values()
            for freed in freed_all:
                res_options.reusable_resources = freed.append_numa(res_options.reusable_resources)
                res_options.preemptible_cpus = freed.append_cpus(res_options.preemptible_cpus)
        try:
            hints = self.resources.topology_hints(record.name, pod.uid, res_options, policy)
        except (ValueError, InvalidTopologyError):
            return None, Status.unschedulable(ERR_INSUFFICIENT_NUMA_NODE_RESOURCES)
        return hints, Status.success()

    def allocate(self, state: CycleState, affinity: NUMATopologyHint, pod: PodInfo, node: NodeInfo) -> Status:
        st = self._state(state)
        if st is None:
            return Status.as_error(f"{NAME}: no PreFilter state for pod {pod.key}")
        if st.skip:
            return Status.success()
        record = node.node
        options = self.topologies.get(record.name)
        bind, status = request_cpu_bind(st, node_cpu_bind_policy(record.labels, options.policy))
        if not status.is_success:
            return status
        try:
            res_options = self._resource_options(st, record, bind, affinity, options)
        except AnnotationError as err:
            return Status.unresolvable(str(err))
        restore = restore_state_of(state, record.name)
        alloc, status = self._allocate_from_reservations(
            st, pod, record.name, res_options, restore, restore.matched
        )
        if not status.is_success or alloc is not None:
            return status
        _, status = self._allocate_from_node(pod, record.name, res_options, restore)
        return status

    # --- Score --------------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        st = self._state(state)
        if st is None:
            return Status.as_error(f"{NAME}: no PreFilter state for pod {pod.key}")
        return Status.skip() if st.skip else Status.success()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        st = self._state(state)
        if st is None:
            return 0, Status.as_error(f"{NAME}: no PreFilter state for pod {pod.key}")
        if st.skip:
            return 0, Status.success()
        record = node.node
        options = self.topologies.get(record.name)
        policy = self._numa_policy(st, record, options) or ""
        bind, status = request_cpu_bind(st, node_cpu_bind_policy(record.labels, options.policy))
        if not status.is_success:
            return 0, status
        if bind and not options.valid:
            return 0, Status.success()
        hint = AffinityStore.of(state).get(record.name)
        try:
            res_options = self._resource_options(st, record, bind, hint, options)
        except AnnotationError:
            return 0, Status.success()
        if policy == NUMATopologyPolicy.NONE:
            return self._score_with_amplified_cpus(st, node, res_options), Status.success()
        restore = restore_state_of(state, record.name)
        alloc, status = self._allocate_from_reservations(
            st, pod, record.name, res_options, restore, restore.matched
        )
        if status.is_success and alloc is None:
            alloc, status = self._allocate_from_node(pod, record.name, res_options, restore)
        if not status.is_success or alloc is None:
            # Filter passed; a failed trial here only means this node is not preferred (as upstream).
            return 0, Status.success()
        allocatable, requested = self._allocatable_and_requested(node, alloc, res_options)
        return self.scorer.score(requested, allocatable, res_options.requests), Status.success()

    def _score_with_amplified_cpus(self, st: PreFilterState, node: NodeInfo, options: ResourceOptions) -> int:
        ratio = options.ratios.get("cpu", 0.0)
        if st.requests.get("cpu", 0) == 0 or ratio <= 1:
            return self.scorer.score(node.requested, node.allocatable, options.requests)
        try:
            _, held = self.resources.available_cpus(node.name, options.preferred_cpus)
        except InvalidTopologyError:
            return 0
        pinned = len(held) * 1000
        requested = dict(node.requested)
        requested["cpu"] = requested.get("cpu", 0) - pinned + amplify(pinned, ratio)
        return self.scorer.score(requested, node.allocatable, options.requests)

    def _allocatable_and_requested(
        self, node: NodeInfo, alloc: PodAllocation, options: ResourceOptions
    ) -> tuple[Mapping[str, int], dict[str, int]]:
        """``calculateAllocatableAndRequested``: over the NUMA nodes the pod got (if any), with pinned CPUs
        counted amplified."""
        if alloc.numa_node_resources:
            allocated = self.resources.allocated_numa(node.name, options)
            zones = dict(options.numa_node_resources)
            allocatable: Mapping[str, int] = {}
            requested: dict[str, int] = {}
            for numa_node in alloc.numa_nodes:
                if allocated.get(numa_node):
                    requested = add(requested, allocated[numa_node])
                allocatable = add(allocatable, zones.get(numa_node, {}))
        else:
            allocatable = node.allocatable
            requested = dict(node.requested)
        if alloc.cpuset:
            returned = options.preferred_cpus - alloc.cpuset
            try:
                _, held = self.resources.available_cpus(node.name, returned)
            except InvalidTopologyError:
                held = {}
            requested["cpu"] = amplify(len(held) * 1000, options.ratios.get("cpu", 0.0))
        return allocatable, requested

    # --- Reserve ------------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        st = self._state(state)
        if st is None:
            return Status.as_error(f"{NAME}: no PreFilter state for pod {pod.key}")
        if st.skip:
            return Status.success()
        if st.allocation is None:
            node = self.handle.node_info(node_name)
            if node is None:
                return Status.as_error(f"getting node {node_name!r} from Snapshot: not found")
            record = node.node
            options = self.topologies.get(node_name)
            policy = self._numa_policy(st, record, options) or ""
            if policy == NUMATopologyPolicy.BEST_EFFORT:
                status = self._filter_by_numa_node(state, pod, node, policy, self._exclusive(st), options)
                if not status.is_success:
                    return status
            status = self._allocate(state, st, pod, node, policy)
            if not status.is_success:
                return status
        if st.allocation is not None:
            st.allocated_node = node_name
            self.resources.update(node_name, st.allocation)
        # Upstream clears the per-node restore data here: it is O(nodes) and the binding cycle needs none.
        state.write(RESTORE_STATE_KEY, {})
        return Status.success()

    def _allocate(
        self, state: CycleState, st: PreFilterState, pod: PodInfo, node: NodeInfo, policy: str
    ) -> Status:
        record = node.node
        options = self.topologies.get(record.name)
        bind, status = request_cpu_bind(st, node_cpu_bind_policy(record.labels, options.policy))
        if not status.is_success:
            return status
        if not bind and policy == NUMATopologyPolicy.NONE:
            return Status.success()
        if bind:
            invalid = self._invalid_topology(record, options)
            if invalid is not None:
                return Status.as_error(invalid.message)
        hint = AffinityStore.of(state).get(record.name)
        try:
            res_options = self._resource_options(st, record, bind, hint, options)
        except AnnotationError as err:
            return Status.as_error(str(err))
        restore = restore_state_of(state, record.name)
        alloc, status = self._allocate_with_nominated(state, st, pod, record.name, res_options, restore)
        if not status.is_success:
            return status
        if alloc is None:
            alloc, status = self._allocate_from_node(pod, record.name, res_options, restore)
            if not status.is_success:
                return status
        assert alloc is not None
        st.allocation = PodAllocation(
            pod.uid, pod.namespace, pod.name, alloc.cpuset, alloc.exclusive_policy, alloc.numa_node_resources
        )
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        st = self._state(state)
        if st is None or st.allocation is None:
            return
        self.resources.release(node_name, pod.uid)
        st.allocation = None
        st.allocated_node = ""

    # --- PreBind ------------------------------------------------------------------------------------------
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self._pre_bind_object(state, pod.annotations, node_name)

    def _pre_bind_object(self, state: CycleState, current: Mapping[str, str], node_name: str) -> Status:
        """``preBindObject``: the allocation into the batched patch of the pod (or of the Reservation, for a
        reserve pod); ``current`` are the object's annotations."""
        st = self._state(state)
        if st is None:
            return Status.as_error(f"{NAME}: no PreFilter state")
        if st.skip or st.allocation is None:
            return Status.success()
        node = self.handle.node_info(node_name)
        if node is None:
            return Status.as_error(f"getting node {node_name!r} from Snapshot: not found")
        record = node.node
        options = self.topologies.get(node_name)
        bind, status = request_cpu_bind(st, node_cpu_bind_policy(record.labels, options.policy))
        if not status.is_success:
            return status
        annotations = state.pod_mutation.annotations
        if bind:
            spec = append_resource_spec_if_missed(current, st, record.labels, options)
            if spec is not None:
                annotations[ANNOTATION_RESOURCE_SPEC] = spec.to_json()
        alloc = st.allocation
        annotations[ANNOTATION_RESOURCE_STATUS] = ResourceStatus(
            alloc.cpuset, alloc.numa_node_resources
        ).to_json()
        return Status.success()

    # --- explanations -------------------------------------------------------------------------------------
    def explain(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> dict[str, Any]:
        """The bind and NUMA policies on ``node`` and the cpuset / NUMA nodes a trial allocation gives."""
        st = self._state(state)
        if st is None or st.skip:
            return {"skipped": True}
        record = node.node
        options = self.topologies.get(record.name)
        status = self.filter(state, pod, node)
        out: dict[str, Any] = {
            "filter": {"status": status.code.label, "reasons": list(status.reasons)},
            "numaTopologyPolicy": self._numa_policy(st, record, options),
            "nodeCPUBindPolicy": node_cpu_bind_policy(record.labels, options.policy),
        }
        bind, _ = request_cpu_bind(st, node_cpu_bind_policy(record.labels, options.policy))
        if status.is_success and bind and options.valid:
            hint = AffinityStore.of(state).get(record.name)
            try:
                res_options = self._resource_options(st, record, bind, hint, options)
            except AnnotationError:
                return out
            alloc, _ = self._allocate_from_node(
                pod, record.name, res_options, restore_state_of(state, record.name)
            )
            if alloc is not None:
                out["cpuset"] = format_cpuset(alloc.cpuset)
                out["numaNodes"] = alloc.numa_nodes
        return out
