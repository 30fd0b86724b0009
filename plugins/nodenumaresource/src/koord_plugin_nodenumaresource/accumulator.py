"""The CPU accumulator: which logical CPUs a pod gets (Koordinator's ``cpu_accumulator.go``).

This is the plugin's allocator API, usable on its own:

    cpus = take_cpus(topology, max_ref_count=1, available=free, allocated={}, needed=4,
                     bind_policy="FullPCPUs", exclusive_policy="None", numa_strategy="MostAllocated")

``available`` is the set of CPUs the pod may use (all CPUs minus those referenced ``max_ref_count`` times and
minus reserved ones); ``allocated`` maps CPUs already given to pods to their ``Allocated`` record (reference
count and the exclusive policy of the pod that holds them). The answer is a sorted list, or
``CPUAllocationError`` with Koordinator's message.

The order in which candidates are tried is the whole point of the algorithm and follows upstream exactly:

* ``FullPCPUs`` (or one thread per core): whole free cores only, first from a single NUMA node, then from a
  single socket, then whole sockets (largest first) topped up core by core from the smallest remaining ones.
* ``SpreadByPCPUs``: one CPU per core first, from a single NUMA node, then a single socket.
* Either way the fallback takes CPUs one by one from every free core, closest to what was already taken.

NUMA nodes and sockets are visited by the NUMA allocate strategy: ``MostAllocated`` packs (fewest free CPUs
first), ``LeastAllocated`` spreads (most free first); ties by id. Exclusive policies keep pods apart:
``PCPULevel`` avoids cores, ``NUMANodeLevel`` NUMA nodes that already hold a CPU of a pod with that policy
(first try only; the second try ignores exclusivity rather than fail).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from koord_plugin_nodenumaresource.topology import CPUInfo, CPUTopology

__all__ = [
    "ERR_FAILED_TO_ALLOCATE",
    "ERR_NOT_ENOUGH_CPUS",
    "Allocated",
    "CPUAllocationError",
    "spread_cpus",
    "take_cpus",
    "take_preferred_cpus",
]

ERR_NOT_ENOUGH_CPUS: Final = "not enough cpus available to satisfy request"
ERR_FAILED_TO_ALLOCATE: Final = "failed to allocate cpus"

FULL_PCPUS: Final = "FullPCPUs"
PCPU_LEVEL: Final = "PCPULevel"
NUMA_NODE_LEVEL: Final = "NUMANodeLevel"
MOST_ALLOCATED: Final = "MostAllocated"


class CPUAllocationError(Exception):
    """The CPUs asked for cannot be taken; the message is Koordinator's."""


@dataclass(frozen=True, slots=True)
class Allocated:
    """A CPU held by pods: how many hold it and the exclusive policy of the last one recorded."""

    ref_count: int = 1
    exclusive_policy: str = ""


def take_preferred_cpus(
    topology: CPUTopology,
    max_ref_count: int,
    available: Iterable[int],
    preferred: Iterable[int],
    allocated: Mapping[int, Allocated],
    needed: int,
    bind_policy: str,
    exclusive_policy: str,
    numa_strategy: str,
) -> list[int]:
    """Take from ``available ∩ preferred`` first (as many as it holds, at most ``needed``), then the rest
    from the other available CPUs (``takePreferredCPUs``; reservations hand their CPUs back this way)."""
    avail = set(available)
    pref = avail.intersection(preferred)
    result: set[int] = set()
    if pref:
        got = take_cpus(
            topology,
            max_ref_count,
            pref,
            allocated,
            min(needed, len(pref)),
            bind_policy,
            exclusive_policy,
            numa_strategy,
        )
        result.update(got)
        needed -= len(got)
        avail -= pref
    if needed > 0:
        result.update(
            take_cpus(
                topology,
                max_ref_count,
                avail,
                allocated,
                needed,
                bind_policy,
                exclusive_policy,
                numa_strategy,
            )
        )
    return sorted(result)


def take_cpus(
    topology: CPUTopology,
    max_ref_count: int,
    available: Iterable[int],
    allocated: Mapping[int, Allocated],
    needed: int,
    bind_policy: str,
    exclusive_policy: str,
    numa_strategy: str,
) -> list[int]:
    """``needed`` CPUs out of ``available`` by Koordinator's ``takeCPUs``; sorted ascending."""
    acc = _Accumulator(topology, max_ref_count, available, allocated, needed, exclusive_policy, numa_strategy)
    if acc.satisfied():
        return []
    if acc.failed():
        raise CPUAllocationError(ERR_NOT_ENOUGH_CPUS)
    per_core = topology.cpus_per_core
    full_pcpus = bind_policy == FULL_PCPUS
    if full_pcpus or per_core == 1:
        if acc.needed <= topology.cpus_per_node:
            for filter_exclusive in acc.passes():
                for cpus in acc.free_cores_in_node(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(cpus[: acc.needed])
                        return acc.result_sorted()
        if acc.needed <= topology.cpus_per_socket:
            for cpus in acc.free_cores_in_socket():
                if len(cpus) >= acc.needed:
                    acc.take(cpus[: acc.needed])
                    return acc.result_sorted()
        # Too many for one socket, or every node/socket is partly used: whole sockets first (most free
        # cores first, no longer by the NUMA strategy), then cores from the smallest leftovers.
        by_size = sorted(acc.free_cores_in_socket(), key=len, reverse=True)
        leftovers: list[list[int]] = []
        for cpus in by_size:
            if not acc.needs(len(cpus)):
                leftovers.append(cpus)
                continue
            acc.take(cpus)
            if acc.satisfied():
                return acc.result_sorted()
        if acc.needs(per_core):
            for cpus in sorted(leftovers, key=len):
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i : i + per_core])
                    if acc.satisfied():
                        return acc.result_sorted()
                    if not acc.needs(per_core):
                        break
    if not full_pcpus:
        if acc.needed <= topology.cpus_per_node:
            for filter_exclusive in (True, False):  # the first pass also keeps one CPU per core
                for cpus in acc.free_cpus_in_node(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(spread_cpus(topology, cpus)[: acc.needed])
                        return acc.result_sorted()
        if acc.needed <= topology.cpus_per_socket:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_socket(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(spread_cpus(topology, cpus)[: acc.needed])
                        return acc.result_sorted()
    for filter_exclusive in acc.passes():
        for cpu in spread_cpus(topology, acc.free_cpus(filter_exclusive)):
            if acc.needs(1):
                acc.take([cpu])
            if acc.satisfied():
                return acc.result_sorted()
    raise CPUAllocationError(ERR_FAILED_TO_ALLOCATE)


def spread_cpus(topology: CPUTopology, cpus: list[int]) -> list[int]:
    """Round-robin over cores: one CPU of each core per pass, in list order (``[0..7]`` with two threads
    per core gives ``[0, 2, 4, 6, 1, 3, 5, 7]``)."""
    if len(cpus) <= topology.cpus_per_core:
        return cpus
    details = topology.details
    out: list[int] = []
    pending = cpus
    while pending:
        seen: set[int] = set()
        later: list[int] = []
        for cpu in pending:
            core = details[cpu].core
            if core in seen:
                later.append(cpu)
                continue
            seen.add(core)
            out.append(cpu)
        pending = later
    return out


def _strategy_key(value: int, most_allocated: bool) -> int:
    """Sort key of a free count: ascending for MostAllocated (pack), descending otherwise (spread)."""
    return value if most_allocated else -value


class _Accumulator:
    __slots__ = (
        "exclusive_cores",
        "exclusive_nodes",
        "exclusive_policy",
        "free",
        "max_ref_count",
        "most_allocated",
        "needed",
        "result",
        "topology",
    )

    def __init__(
        self,
        topology: CPUTopology,
        max_ref_count: int,
        available: Iterable[int],
        allocated: Mapping[int, Allocated],
        needed: int,
        exclusive_policy: str,
        numa_strategy: str,
    ) -> None:
        self.topology = topology
        self.max_ref_count = max_ref_count
        details = topology.details
        self.exclusive_cores: set[int] = set()
        self.exclusive_nodes: set[int] = set()
        for cpu, held in allocated.items():
            info = details.get(cpu)
            if info is None:
                continue
            if held.exclusive_policy == PCPU_LEVEL:
                self.exclusive_cores.add(info.core)
            elif held.exclusive_policy == NUMA_NODE_LEVEL:
                self.exclusive_nodes.add(info.node)
        # Free CPUs with their reference counts (only counted when CPUs may be shared).
        self.free: dict[int, int] = {}
        for cpu in available:
            if cpu in details:
                held_by = allocated.get(cpu) if max_ref_count > 1 else None
                self.free[cpu] = held_by.ref_count if held_by is not None else 0
        self.exclusive_policy = exclusive_policy
        self.most_allocated = numa_strategy == MOST_ALLOCATED
        self.needed = needed
        self.result: set[int] = set()

    # --- state ---------------------------------------------------------------------------------------
    def take(self, cpus: Iterable[int]) -> None:
        details = self.topology.details
        for cpu in cpus:
            self.result.add(cpu)
            self.free.pop(cpu, None)
            self.needed -= 1
            if self.exclusive_policy == PCPU_LEVEL:
                self.exclusive_cores.add(details[cpu].core)
            elif self.exclusive_policy == NUMA_NODE_LEVEL:
                self.exclusive_nodes.add(details[cpu].node)

    def passes(self) -> tuple[bool, ...]:
        """Filtering exclusivity first, then not. Where filtering only drops exclusive cores or NUMA nodes
        (whole free cores, the fallback), both passes see the same candidates without an exclusive
        policy, so one is enough (same result as upstream, half the work)."""
        if self.exclusive_policy in (PCPU_LEVEL, NUMA_NODE_LEVEL):
            return (True, False)
        return (False,)

    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.free)

    def result_sorted(self) -> list[int]:
        return sorted(self.result)

    def _pcpu_exclusive(self, info: CPUInfo) -> bool:
        return self.exclusive_policy == PCPU_LEVEL and info.core in self.exclusive_cores

    def _numa_exclusive(self, info: CPUInfo) -> bool:
        return self.exclusive_policy == NUMA_NODE_LEVEL and info.node in self.exclusive_nodes

    # --- helpers ---------------------------------------------------------------------------------------
    def _core_ref_count(self, core_cpus: Iterable[int]) -> int:
        free = self.free
        return sum(free.get(cpu, 0) for cpu in core_cpus)

    def _sort_cores(self, cores: list[int], cpus_in_cores: Mapping[int, list[int]]) -> None:
        """Cores with the most free CPUs first, then (shared CPUs) the least referenced, then by id."""
        if self.max_ref_count > 1:
            cores.sort(key=lambda c: (-len(cpus_in_cores[c]), self._core_ref_count(cpus_in_cores[c]), c))
        else:
            cores.sort(key=lambda c: (-len(cpus_in_cores[c]), c))

    def _by_ref_count(self, cpus: list[int]) -> list[int]:
        free = self.free
        return sorted(cpus, key=lambda c: (free.get(c, 0), c))

    def _one_per_core(self, cpus: list[int]) -> list[int]:
        details = self.topology.details
        seen: set[int] = set()
        out: list[int] = []
        for cpu in cpus:
            core = details[cpu].core
            if core not in seen:
                seen.add(core)
                out.append(cpu)
        return out

    def _whole_free_cores(self) -> tuple[dict[int, list[int]], dict[int, int]]:
        """The common case of ``_full_cores`` + ``_grouped_cores`` (no shared CPUs, no NUMA exclusivity):
        walk each NUMA node's cores in id order from the topology instead of regrouping free CPUs."""
        free = self.free
        width = self.topology.cpus_per_core
        _, _, socket_of = self.topology.ids()
        socket_free: dict[int, int] = {}
        for cpu in free:
            socket = socket_of[cpu]
            socket_free[socket] = socket_free.get(socket, 0) + 1
        keys = free.keys()
        groups: dict[int, list[int]] = {}
        for node, cores in self.topology.cores_by_node().items():
            listed: list[int] = []
            for members, cpus in cores:
                if len(cpus) == width:
                    if keys >= members:
                        listed.extend(cpus)
                else:  # an uneven core (CPUs offline): whole means as many free CPUs as a core has
                    here = [c for c in cpus if c in free]
                    if len(here) == width:
                        listed.extend(here)
            if listed:
                groups[node] = listed
        return groups, socket_free

    def _full_cores(self, filter_numa_exclusive: bool) -> tuple[dict[int, list[int]], dict[int, int]]:
        """Free CPUs per core (only cores with every thread free) and free CPUs per socket (all)."""
        core_of, node_of, socket_of = self.topology.ids()
        per_core = self.topology.cpus_per_core
        skip = (
            self.exclusive_nodes
            if filter_numa_exclusive and self.exclusive_policy == NUMA_NODE_LEVEL
            else None
        )
        cpus_in_cores: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        for cpu in self.free:
            if skip and node_of[cpu] in skip:
                continue
            core = core_of[cpu]
            listed = cpus_in_cores.get(core)
            if listed is None:
                cpus_in_cores[core] = [cpu]
            else:
                listed.append(cpu)
            socket = socket_of[cpu]
            socket_free[socket] = socket_free.get(socket, 0) + 1
        full = {core: cpus for core, cpus in cpus_in_cores.items() if len(cpus) == per_core}
        return full, socket_free

    def _grouped_cores(
        self, full: Mapping[int, list[int]], group_of: Mapping[int, int]
    ) -> dict[int, list[int]]:
        """Each group's (NUMA node or socket) CPUs, core by core in core order."""
        cores_in_group: dict[int, list[int]] = {}
        for core, cpus in full.items():
            cores_in_group.setdefault(group_of[cpus[0]], []).append(core)
        out: dict[int, list[int]] = {}
        shared = self.max_ref_count > 1
        for group, cores in cores_in_group.items():
            if shared:
                self._sort_cores(cores, full)
            else:
                cores.sort()  # every core here is whole, so sortCores reduces to the core id
            listed: list[int] = []
            for core in cores:
                cpus = full[core]
                cpus.sort()
                listed.extend(cpus)
            out[group] = listed
        return out

    # --- candidate lists ---------------------------------------------------------------------------------
    def free_cores_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        """CPUs of fully free cores per NUMA node, nodes in strategy order (``freeCoresInNode``)."""
        _, node_of, socket_of = self.topology.ids()
        filtering = filter_exclusive and self.exclusive_policy == NUMA_NODE_LEVEL and self.exclusive_nodes
        if self.max_ref_count > 1 or filtering:
            full, socket_free = self._full_cores(filter_exclusive)
            groups = self._grouped_cores(full, node_of)
        else:
            groups, socket_free = self._whole_free_cores()
        most = self.most_allocated

        def key(node: int) -> tuple[int, int, int]:
            socket = socket_of[groups[node][0]]
            return (_strategy_key(len(groups[node]), most), _strategy_key(socket_free[socket], most), node)

        return [groups[node] for node in sorted(groups, key=key)]

    def free_cores_in_socket(self) -> list[list[int]]:
        """CPUs of fully free cores per socket, sockets in strategy order (``freeCoresInSocket``)."""
        _, _, socket_of = self.topology.ids()
        full, _ = self._full_cores(False)
        groups = self._grouped_cores(full, socket_of)
        most = self.most_allocated
        return [groups[s] for s in sorted(groups, key=lambda s: (_strategy_key(len(groups[s]), most), s))]

    def free_cpus_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        """Free CPUs per NUMA node (one per core when filtering exclusivity), nodes in strategy order."""
        details = self.topology.details
        cpus_in_nodes: dict[int, list[int]] = {}
        node_free: dict[int, int] = {}
        socket_free: dict[int, int] = {}
        socket_of_node: dict[int, int] = {}
        for cpu in self.free:
            info = details[cpu]
            if filter_exclusive and (self._pcpu_exclusive(info) or self._numa_exclusive(info)):
                continue
            cpus_in_nodes.setdefault(info.node, []).append(cpu)
            node_free[info.node] = node_free.get(info.node, 0) + 1
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
            socket_of_node[info.node] = info.socket
        for node, cpus in cpus_in_nodes.items():
            cpus.sort()
            listed = self._by_ref_count(cpus) if self.max_ref_count > 1 else cpus
            cpus_in_nodes[node] = self._one_per_core(listed) if filter_exclusive else listed
        most = self.most_allocated

        def key(node: int) -> tuple[int, int, int]:
            return (
                _strategy_key(node_free[node], most),
                _strategy_key(socket_free[socket_of_node[node]], most),
                node,
            )

        return [cpus_in_nodes[node] for node in sorted(cpus_in_nodes, key=key)]

    def free_cpus_in_socket(self, filter_exclusive: bool) -> list[list[int]]:
        """Free CPUs per socket (one per core when filtering PCPU exclusivity), sockets in strategy order."""
        details = self.topology.details
        cpus_in_sockets: dict[int, list[int]] = {}
        for cpu in self.free:
            info = details[cpu]
            if filter_exclusive and self._pcpu_exclusive(info):
                continue
            cpus_in_sockets.setdefault(info.socket, []).append(cpu)
        for socket, cpus in cpus_in_sockets.items():
            cpus.sort()
            listed = self._by_ref_count(cpus) if self.max_ref_count > 1 else cpus
            cpus_in_sockets[socket] = self._one_per_core(listed) if filter_exclusive else listed
        most = self.most_allocated
        return [
            cpus_in_sockets[s]
            for s in sorted(cpus_in_sockets, key=lambda s: (_strategy_key(len(cpus_in_sockets[s]), most), s))
        ]

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        """Every free CPU, core by core, cores ordered as ``freeCPUs``: sockets already used by the result
        first, then by socket, node and core free counts, socket id, [reference count], core id."""
        topology = self.topology
        details = topology.details
        cpus_in_cores: dict[int, list[int]] = {}
        core_info: dict[int, CPUInfo] = {}
        node_free: dict[int, int] = {}
        socket_free: dict[int, int] = {}
        for cpu in self.free:
            info = details[cpu]
            if filter_exclusive and (self._pcpu_exclusive(info) or self._numa_exclusive(info)):
                continue
            cpus_in_cores.setdefault(info.core, []).append(cpu)
            core_info[info.core] = info
            node_free[info.node] = node_free.get(info.node, 0) + 1
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        colocated = {s: len(topology.cpus_in_socket(s) & self.result) for s in socket_free}
        most = self.most_allocated
        shared = self.max_ref_count > 1

        def key(core: int) -> tuple[int, ...]:
            info = core_info[core]
            return (
                -colocated[info.socket],
                _strategy_key(socket_free[info.socket], most),
                _strategy_key(node_free[info.node], most),
                len(cpus_in_cores[core]),
                info.socket,
                self._core_ref_count(cpus_in_cores[core]) if shared else 0,
                core,
            )

        out: list[int] = []
        for core in sorted(cpus_in_cores, key=key):
            cpus = sorted(cpus_in_cores[core])
            out.extend(self._by_ref_count(cpus) if shared else cpus)
        return out
