"""Allocation on one node: NUMA resources by hint, then the cpuset (Koordinator's ``resourceManager``).

``allocate`` is used for real (Reserve) and for trials (Filter with a required bind policy, Score, NUMA
hints); it never changes the node's state, ``update``/``release`` do. ``topology_hints`` is the NUMA hint
provider half: every subset of NUMA nodes the pod could be allocated on, scored.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from koord_framework.api.resources import add, subtract_non_negative
from koord_framework.scheduler.status import Status
from koord_framework.scheduler.topologymanager import NUMATopologyHint, bits, iterate_bit_masks
from koord_plugin_nodenumaresource.accumulator import (
    ERR_NOT_ENOUGH_CPUS,
    Allocated,
    CPUAllocationError,
    take_preferred_cpus,
)
from koord_plugin_nodenumaresource.node_allocation import NodeAllocation, PodAllocation
from koord_plugin_nodenumaresource.preemption import PreemptibleNodeState
from koord_plugin_nodenumaresource.scoring import ResourceScorer
from koord_plugin_nodenumaresource.topology import CPUTopology
from koord_plugin_nodenumaresource.topology_options import TopologyOptions, TopologyOptionsManager

__all__ = [
    "ERR_INSUFFICIENT_NUMA_RESOURCES",
    "ERR_INVALID_CPU_TOPOLOGY",
    "InvalidTopologyError",
    "ResourceManager",
    "ResourceOptions",
    "filter_cpus_by_required_policy",
]

ERR_INVALID_CPU_TOPOLOGY: Final = "node(s) invalid CPU Topology"
ERR_INSUFFICIENT_NUMA_RESOURCES: Final = "insufficient resources on NUMA Node"
FULL_PCPUS: Final = "FullPCPUs"
SPREAD_BY_PCPUS: Final = "SpreadByPCPUs"


class InvalidTopologyError(Exception):
    pass


@dataclass(slots=True)
class ResourceOptions:
    """Everything one allocation attempt needs (``ResourceOptions``)."""

    topology_options: TopologyOptions
    requests: dict[str, int]
    """Requests with cpu amplified when the pod binds CPUs on a node with a cpu ratio above 1."""
    original_requests: Mapping[str, int]
    num_cpus_needed: int = 0
    request_cpu_bind: bool = False
    required_cpu_bind_policy: bool = False
    cpu_bind_policy: str = ""
    cpu_exclusive_policy: str = ""
    numa_allocate_strategy: str = "LeastAllocated"
    ratios: Mapping[str, float] = field(default_factory=dict)
    numa_node_resources: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    """The topology's NUMA zones, amplified by ``ratios``."""
    hint: NUMATopologyHint | None = None
    preferred_cpus: frozenset[int] = frozenset()
    preemptible_cpus: frozenset[int] = frozenset()
    reusable_resources: dict[int, dict[str, int]] = field(default_factory=dict)
    required_resources: dict[int, dict[str, int]] | None = None
    numa_scorer: ResourceScorer | None = None
    node_preemption: PreemptibleNodeState | None = None
    """What a preemption what-if frees on this node (None outside preemption)."""

    def amplified_options(self) -> TopologyOptions:
        return replace(self.topology_options, numa_node_resources=self.numa_node_resources)


def filter_cpus_by_required_policy(policy: str, available: Iterable[int], topology: CPUTopology) -> set[int]:
    """``filterCPUsByRequiredCPUBindPolicy``: FullPCPUs keeps whole free cores; SpreadByPCPUs keeps the
    lowest free CPU of each core; other policies keep everything."""
    avail = set(available)
    if policy not in (FULL_PCPUS, SPREAD_BY_PCPUS):
        return avail
    details = topology.details
    per_core: dict[int, list[int]] = {}
    for cpu in avail:
        info = details.get(cpu)
        if info is not None:
            per_core.setdefault(info.core, []).append(cpu)
    out: set[int] = set()
    if policy == FULL_PCPUS:
        width = topology.cpus_per_core
        for cpus in per_core.values():
            if len(cpus) == width:
                out.update(cpus)
    else:
        for cpus in per_core.values():
            out.add(min(cpus))
    return out


def _satisfies_required_policy(policy: str, cpus: frozenset[int], topology: CPUTopology) -> bool:
    cores = topology.cores_of(cpus)
    if policy == FULL_PCPUS:
        return len(cores) * topology.cpus_per_core == len(cpus)
    if policy == SPREAD_BY_PCPUS:
        return len(cores) == len(cpus)
    return True


def _split(name: str, quantity: int, count: int, options: ResourceOptions) -> int:
    """``splitQuantity``: this NUMA node's share of what is left (cpu in milli, whole CPUs when binding)."""
    if name != "cpu":
        return quantity // count
    if not options.request_cpu_bind:
        return quantity // count
    cpus = -(-quantity // 1000)  # Quantity.Value() rounds up
    topology = options.topology_options.cpu_topology
    if options.required_cpu_bind_policy and options.cpu_bind_policy == FULL_PCPUS and topology is not None:
        per_core = topology.cpus_per_core
        return (cpus // per_core) // count * per_core * 1000
    return cpus // count * 1000


def _sorted_by_position_quirk(
    nodes: list[int], available: Mapping[int, Mapping[str, int]], name: str
) -> list[int]:
    """Upstream sorts the hint's NUMA nodes with a comparator that reads ``available[i]`` for *positions*
    i, j of the slice being sorted (not the node ids there). Go's sort.Slice runs insertion sort on so few
    elements; replaying it with the same comparator gives the same order."""
    out = list(nodes)

    def value(pos: int) -> int:
        return available.get(pos, {}).get(name, 0)

    for i in range(1, len(out)):
        j = i
        while j > 0 and value(j) < value(j - 1):
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return out


def distribute_evenly(
    requests: Mapping[str, int], available: Mapping[int, Mapping[str, int]], options: ResourceOptions
) -> tuple[list[tuple[int, dict[str, int]]], list[str]]:
    """``tryBestToDistributeEvenly``: split each request over the hint's NUMA nodes."""
    names: set[str] = set()
    for res in available.values():
        names.update(res)
    assert options.hint is not None and options.hint.affinity is not None
    nodes = bits(options.hint.affinity)
    per_node: dict[int, dict[str, int]] = {}
    left = dict(requests)
    for name, quantity in requests.items():
        order = _sorted_by_position_quirk(nodes, available, name) if name in names else []
        for i, node in enumerate(order):
            share = _split(name, quantity, len(nodes) - i, options)
            got = min(available.get(node, {}).get(name, 0), share)
            if got != 0:
                per_node.setdefault(node, {})[name] = got
                quantity -= got
        left[name] = quantity
    reasons = sorted(f"Insufficient NUMA {name}" for name, q in left.items() if name in names and q != 0)
    return sorted(per_node.items()), reasons


class ResourceManager:
    """Node allocations of the whole cluster, with the default NUMA allocate strategy."""

    def __init__(self, topologies: TopologyOptionsManager) -> None:
        self.topologies = topologies
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeAllocation] = {}

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def node_allocation(self, node: str) -> NodeAllocation:
        found = self._nodes.get(node)
        if found is None:
            with self._lock:
                found = self._nodes.setdefault(node, NodeAllocation(node))
        return found

    def update(self, node: str, alloc: PodAllocation) -> None:
        with self._lock:
            self.node_allocation(node).update(alloc)

    def release(self, node: str, uid: str) -> PodAllocation | None:
        with self._lock:
            found = self._nodes.get(node)
            return found.release(uid) if found is not None else None

    def delete_node(self, node: str) -> None:
        with self._lock:
            self._nodes.pop(node, None)

    def pod_allocation(self, node: str, uid: str) -> PodAllocation | None:
        """What ``uid`` (a pod, or a reservation's reserve pod) holds on ``node``."""
        found = self._nodes.get(node)
        return found.pods.get(uid) if found is not None else None

    def allocated_cpuset(self, node: str, uid: str) -> frozenset[int] | None:
        found = self._nodes.get(node)
        alloc = found.pods.get(uid) if found is not None else None
        return alloc.cpuset if alloc is not None else None

    def available_cpus(self, node: str, *returned: Iterable[int]) -> tuple[set[int], dict[int, Allocated]]:
        """``GetAvailableCPUs``: (free CPUs, allocation details); nothing on a node without an NRT;
        ``InvalidTopologyError`` on a node whose NRT has no usable CPU topology."""
        options = self.topologies.get(node)
        topology = options.cpu_topology
        if topology is None:
            return set(), {}
        if not topology.is_valid:
            raise InvalidTopologyError(ERR_INVALID_CPU_TOPOLOGY)
        with self._lock:
            return self.node_allocation(node).available_cpus(
                topology, options.max_ref_count, options.reserved_cpus, list(returned)
            )

    # --- NUMA availability ------------------------------------------------------------------------------
    def _available_numa(self, node: str, options: ResourceOptions) -> dict[int, dict[str, int]]:
        with self._lock:
            available, _ = self.node_allocation(node).available_numa_resources(
                options.amplified_options(), options.ratios, options.reusable_resources
            )
        return available

    def allocated_numa(self, node: str, options: ResourceOptions) -> dict[int, dict[str, int]]:
        with self._lock:
            _, allocated = self.node_allocation(node).available_numa_resources(
                options.amplified_options(), options.ratios, options.reusable_resources
            )
        return allocated

    def _trim(self, node: str, available: dict[int, dict[str, int]], options: ResourceOptions) -> None:
        """``trimNUMANodeResources``: under a required bind policy, a NUMA node offers only the CPUs the
        policy can use (whole free cores, or one CPU per core)."""
        if not options.required_cpu_bind_policy:
            return
        topology = options.topology_options.cpu_topology
        assert topology is not None
        free, _ = self.available_cpus(node, options.preferred_cpus, options.preemptible_cpus)
        for numa, res in available.items():
            cpu = res.get("cpu", 0)
            if cpu == 0:
                continue
            usable = filter_cpus_by_required_policy(
                options.cpu_bind_policy, free & topology.cpus_in_numa_node(numa), topology
            )
            if len(usable) * 1000 < cpu:
                res["cpu"] = len(usable) * 1000

    # --- allocation -------------------------------------------------------------------------------------
    def allocate(self, node: str, uid: str, options: ResourceOptions) -> tuple[PodAllocation | None, Status]:
        """``Allocate``: NUMA resources under the hint (if any), then the cpuset (if the pod binds)."""
        numa: list[tuple[int, dict[str, int]]] = []
        if options.hint is not None and options.hint.affinity is not None:
            if not options.numa_node_resources:
                return None, Status.unresolvable(ERR_INSUFFICIENT_NUMA_RESOURCES)
            available = (
                {k: dict(v) for k, v in options.required_resources.items()}
                if options.required_resources
                else self._available_numa(node, options)
            )
            try:
                self._trim(node, available, options)
            except InvalidTopologyError as err:
                return None, Status.unresolvable(str(err))
            requests = options.original_requests if options.request_cpu_bind else options.requests
            numa, reasons = distribute_evenly(requests, available, options)
            if reasons:
                return None, Status.unschedulable(*reasons)
        cpus: frozenset[int] = frozenset()
        if options.request_cpu_bind:
            try:
                cpus = self._allocate_cpuset(node, numa, options)
            except (CPUAllocationError, InvalidTopologyError) as err:
                return None, Status.unschedulable(str(err))
        return (
            PodAllocation(
                uid,
                cpuset=cpus,
                exclusive_policy=options.cpu_exclusive_policy,
                numa_node_resources=tuple(numa),
            ),
            Status.success(),
        )

    def _allocate_cpuset(
        self, node: str, numa: list[tuple[int, dict[str, int]]], options: ResourceOptions
    ) -> frozenset[int]:
        topology = options.topology_options.cpu_topology
        assert topology is not None
        free, held = self.available_cpus(node, options.preferred_cpus, options.preemptible_cpus)
        if options.required_cpu_bind_policy:
            free = filter_cpus_by_required_policy(options.cpu_bind_policy, free, topology)
        if len(free) < options.num_cpus_needed:
            raise CPUAllocationError(ERR_NOT_ENOUGH_CPUS)
        max_ref = options.topology_options.max_ref_count
        result: set[int] = set()
        needed = options.num_cpus_needed
        take = {
            "bind_policy": options.cpu_bind_policy,
            "exclusive_policy": options.cpu_exclusive_policy,
            "numa_strategy": options.numa_allocate_strategy,
        }
        if numa:
            for numa_node, res in numa:
                in_node = free & topology.cpus_in_numa_node(numa_node)
                count = min(len(in_node), res.get("cpu", 0) // 1000)
                result.update(
                    take_preferred_cpus(
                        topology, max_ref, in_node, options.preferred_cpus, held, count, **take
                    )
                )
            needed -= len(result)
            if needed != 0:
                raise CPUAllocationError(ERR_NOT_ENOUGH_CPUS)
        if needed > 0:
            result.update(
                take_preferred_cpus(
                    topology, max_ref, free - result, options.preferred_cpus, held, needed, **take
                )
            )
        cpus = frozenset(result)
        if options.required_cpu_bind_policy and not _satisfies_required_policy(
            options.cpu_bind_policy, cpus, topology
        ):
            raise CPUAllocationError(
                f"insufficient CPUs to satisfy required cpu bind policy {options.cpu_bind_policy}"
            )
        return cpus

    # --- NUMA hints -------------------------------------------------------------------------------------
    def topology_hints(
        self, node: str, uid: str, options: ResourceOptions, policy: str
    ) -> dict[str, list[NUMATopologyHint]]:
        """``GetTopologyHints``: for every non-empty subset of NUMA nodes where a trial allocation
        succeeds, a hint per requested resource the subset has, scored by the NUMA scorer. Preferred: the
        narrowest feasible subsets (every feasible one under Restricted)."""
        zones = options.numa_node_resources
        if not zones:
            raise ValueError(ERR_INSUFFICIENT_NUMA_RESOURCES)
        available = self._available_numa(node, options)
        self._trim(node, available, options)
        names_in_zones: set[str] = set()
        for _, res in zones:
            names_in_zones.update(res)
        lacking: dict[str, set[int]] = {}
        for name in names_in_zones:
            for numa_node, res in available.items():
                if res.get(name, 0) == 0:
                    lacking.setdefault(name, set()).add(numa_node)
        min_size = dict.fromkeys(options.requests, len(zones))
        hints: dict[str, list[NUMATopologyHint]] = {}
        totals = dict(zones)
        seen_names: list[str] = []
        for mask in iterate_bit_masks([n for n, _ in zones]):
            nodes = bits(mask)
            avail: dict[str, int] = {}
            total: dict[str, int] = {}
            for n in nodes:
                avail = add(avail, available.get(n, {}))
                total = add(total, totals.get(n, {}))
            for name in options.requests:
                if name in total and name not in seen_names:
                    seen_names.append(name)
            score = 0
            if options.numa_scorer is not None:
                used = subtract_non_negative(total, avail)
                score = options.numa_scorer.score(used, total, options.requests)
            trial = replace(options, hint=NUMATopologyHint(mask), required_resources=None)
            _, status = self.allocate(node, uid, trial)
            if not status.is_success:
                continue
            for name in seen_names:
                if any(n in lacking.get(name, ()) for n in nodes):
                    continue
                size = len(nodes)
                if size < min_size.get(name, size + 1):
                    min_size[name] = size
                hints.setdefault(name, []).append(NUMATopologyHint(mask, False, False, score))
        restricted = policy == "Restricted"
        out: dict[str, list[NUMATopologyHint]] = {}
        for name in options.requests:
            listed = hints.get(name)
            if listed is not None:
                out[name] = [
                    replace(h, preferred=restricted or len(bits(h.affinity or 0)) == min_size[name])
                    for h in listed
                ]
            elif name in seen_names:
                out[name] = []
        for name, listed in hints.items():
            out.setdefault(name, listed)
        return out
