"""What is already given out on one node: pinned CPUs with reference counts, and resources per NUMA node
(Koordinator's ``NodeAllocation``).

Pods enter from their ``resource-status`` annotation (bound pods, via the informer) or from this scheduler's
Reserve; they leave on delete, on termination, or on Unreserve. Adding a pod that is already there changes
nothing, and removing one that is not there is a no-op, so a pod is never counted twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from koord_framework.api.resources import add, subtract_non_negative
from koord_framework.scheduler.topologymanager import NUMANodeStatus
from koord_plugin_nodenumaresource.accumulator import Allocated
from koord_plugin_nodenumaresource.annotations import amplify
from koord_plugin_nodenumaresource.topology import CPUTopology
from koord_plugin_nodenumaresource.topology_options import TopologyOptions

__all__ = ["NodeAllocation", "PodAllocation"]

ResourcesByNUMA = dict[int, dict[str, int]]


@dataclass(frozen=True, slots=True)
class PodAllocation:
    """One pod's cpuset and per-NUMA-node resources."""

    uid: str
    namespace: str = ""
    name: str = ""
    cpuset: frozenset[int] = frozenset()
    exclusive_policy: str = ""
    numa_node_resources: tuple[tuple[int, Mapping[str, int]], ...] = ()

    @property
    def numa_nodes(self) -> list[int]:
        return [node for node, _ in self.numa_node_resources]


@dataclass(slots=True)
class NodeAllocation:
    name: str
    pods: dict[str, PodAllocation] = field(default_factory=dict)
    cpus: dict[int, Allocated] = field(default_factory=dict)
    """Pinned CPUs: reference count and the exclusive policy of the pod that pinned them last."""
    resources: ResourcesByNUMA = field(default_factory=dict)

    def add(self, alloc: PodAllocation) -> None:
        if alloc.uid in self.pods:
            return
        self.pods[alloc.uid] = alloc
        for cpu in alloc.cpuset:
            held = self.cpus.get(cpu)
            self.cpus[cpu] = Allocated((held.ref_count if held else 0) + 1, alloc.exclusive_policy)
        for node, res in alloc.numa_node_resources:
            self.resources[node] = add(self.resources.get(node, {}), res)

    def update(self, alloc: PodAllocation) -> None:
        self.release(alloc.uid)
        self.add(alloc)

    def release(self, uid: str) -> PodAllocation | None:
        alloc = self.pods.pop(uid, None)
        if alloc is None:
            return None
        for cpu in alloc.cpuset:
            held = self.cpus.get(cpu)
            if held is None:
                continue
            if held.ref_count <= 1:
                del self.cpus[cpu]
            else:
                self.cpus[cpu] = Allocated(held.ref_count - 1, held.exclusive_policy)
        for node, res in alloc.numa_node_resources:
            if node in self.resources:
                self.resources[node] = subtract_non_negative(self.resources[node], res)
        return alloc

    def numa_node_statuses(self, topology: CPUTopology, count: int) -> list[str]:
        """``GetAllNUMANodeStatus``: per NUMA node 0..count-1, idle / single / shared. Only cpusets count,
        as upstream (a pod with NUMA resources but no cpuset marks nothing)."""
        single: set[int] = set()
        shared: set[int] = set()
        details = topology.details
        for alloc in self.pods.values():
            used = {details[c].node for c in alloc.cpuset if c in details}
            if len(used) > 1:
                shared |= used
            elif used:
                single |= used
        out: list[str] = []
        for node in range(count):
            if node in shared:
                out.append(NUMANodeStatus.SHARED)
            elif node in single:
                out.append(NUMANodeStatus.SINGLE)
            else:
                out.append(NUMANodeStatus.IDLE)
        return out

    def available_cpus(
        self,
        topology: CPUTopology,
        max_ref_count: int,
        reserved: Iterable[int],
        returned: Sequence[Iterable[int]] = (),
    ) -> tuple[set[int], dict[int, Allocated]]:
        """``getAvailableCPUs``: CPUs with room for one more reference, minus reserved ones, after handing
        back one reference per CPU of each set in ``returned`` (reservations' and preemptible pods' CPUs);
        and the allocation details the accumulator needs."""
        held = dict(self.cpus)
        for cpus in returned:
            for cpu in cpus:
                h = held.get(cpu)
                if h is None:
                    continue
                if h.ref_count <= 1:
                    del held[cpu]
                else:
                    held[cpu] = Allocated(h.ref_count - 1, h.exclusive_policy)
        full = {cpu for cpu, h in held.items() if h.ref_count >= max_ref_count}
        available = set(topology.details)
        available -= full
        available.difference_update(reserved)
        return available, held

    def available_numa_resources(
        self, options: TopologyOptions, ratios: Mapping[str, float], reusable: Mapping[int, Mapping[str, int]]
    ) -> tuple[ResourcesByNUMA, ResourcesByNUMA]:
        """``getAvailableNUMANodeResources``: per NUMA node of ``options``, (available, allocated). With a
        cpu amplification ratio, pinned CPUs count amplified (a pinned CPU is worth r CPUs of the pool)."""
        available: ResourcesByNUMA = {}
        allocated: ResourcesByNUMA = {}
        ratio = ratios.get("cpu", 0.0)
        topology = options.cpu_topology
        for node, total in options.numa_node_resources:
            used = self.resources.get(node)
            if used is not None:
                if ratio > 1 and topology is not None:
                    in_node = topology.cpus_in_numa_node(node)
                    pinned = 1000 * sum(1 for c in self.cpus if c in in_node)
                    used = dict(used)
                    used["cpu"] = used.get("cpu", 0) - pinned + amplify(pinned, ratio)
                used = subtract_non_negative(used, reusable.get(node, {}))
                allocated[node] = used
                available[node] = subtract_non_negative(total, used)
            else:
                available[node] = subtract_non_negative(total, {})
        return available, allocated
