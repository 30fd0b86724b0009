"""The CPU topology of a node: which socket, NUMA node and physical core every logical CPU belongs to.

Koordinator's ``CPUTopology`` (``cpu_topology.go``). koordlet reports it in the NodeResourceTopology's
``node.koordinator.sh/cpu-topology`` annotation; the scheduler builds it with ``CPUTopologyBuilder``, which
makes core ids unique across sockets (``socket << 16 | core``) because the kernel numbers cores per socket.

The derived counts (``cpus_per_core`` and friends) are integer divisions, as upstream: a machine with some
CPUs offline keeps working, and the accumulator simply sees fewer free CPUs in some cores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["CPUInfo", "CPUTopology", "CPUTopologyBuilder", "build_cpu_topology_for_test"]


@dataclass(frozen=True, slots=True)
class CPUInfo:
    """Where one logical CPU sits."""

    cpu: int
    core: int
    """Physical core id, unique on the node."""
    node: int
    """NUMA node id."""
    socket: int


@dataclass(slots=True)
class CPUTopology:
    """Every logical CPU of a node, with the counts the accumulator divides by."""

    num_cpus: int = 0
    num_cores: int = 0
    num_nodes: int = 0
    num_sockets: int = 0
    details: dict[int, CPUInfo] = field(default_factory=dict)
    _cpus_in_node: dict[int, frozenset[int]] | None = field(default=None, repr=False)
    _cpus_in_socket: dict[int, frozenset[int]] | None = field(default=None, repr=False)
    _ids: tuple[dict[int, int], dict[int, int], dict[int, int]] | None = field(default=None, repr=False)
    _cores: dict[int, list[tuple[frozenset[int], tuple[int, ...]]]] | None = field(default=None, repr=False)

    def cores_by_node(self) -> dict[int, list[tuple[frozenset[int], tuple[int, ...]]]]:
        """NUMA node -> its cores in id order, each as (its CPUs as a set, its CPUs in id order); built
        once."""
        if self._cores is None:
            cpus_of: dict[int, list[int]] = {}
            node_of: dict[int, int] = {}
            for info in self.details.values():
                cpus_of.setdefault(info.core, []).append(info.cpu)
                node_of[info.core] = info.node
            grouped: dict[int, list[tuple[frozenset[int], tuple[int, ...]]]] = {}
            for core in sorted(cpus_of):
                cpus = tuple(sorted(cpus_of[core]))
                grouped.setdefault(node_of[core], []).append((frozenset(cpus), cpus))
            self._cores = grouped
        return self._cores

    def ids(self) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        """(cpu -> core, cpu -> NUMA node, cpu -> socket), built once: the accumulator's hot loops read
        these instead of ``details[cpu].core`` and friends."""
        if self._ids is None:
            details = self.details.values()
            self._ids = (
                {i.cpu: i.core for i in details},
                {i.cpu: i.node for i in details},
                {i.cpu: i.socket for i in details},
            )
        return self._ids

    @property
    def is_valid(self) -> bool:
        """Koordinator's ``IsValid``: sockets, nodes, cores and CPUs all non-zero."""
        return bool(self.num_sockets and self.num_nodes and self.num_cores and self.num_cpus)

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_node(self) -> int:
        return self.num_cpus // self.num_nodes if self.num_nodes else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def cpus(self) -> frozenset[int]:
        return frozenset(self.details)

    def cpus_in_numa_node(self, node: int) -> frozenset[int]:
        if self._cpus_in_node is None:
            grouped: dict[int, set[int]] = {}
            for info in self.details.values():
                grouped.setdefault(info.node, set()).add(info.cpu)
            self._cpus_in_node = {k: frozenset(v) for k, v in grouped.items()}
        return self._cpus_in_node.get(node, frozenset())

    def cpus_in_socket(self, socket: int) -> frozenset[int]:
        if self._cpus_in_socket is None:
            grouped: dict[int, set[int]] = {}
            for info in self.details.values():
                grouped.setdefault(info.socket, set()).add(info.cpu)
            self._cpus_in_socket = {k: frozenset(v) for k, v in grouped.items()}
        return self._cpus_in_socket.get(socket, frozenset())

    def numa_nodes(self) -> list[int]:
        return sorted({info.node for info in self.details.values()})

    def cores_of(self, cpus: Iterable[int]) -> set[int]:
        details = self.details
        return {details[c].core for c in cpus if c in details}

    def to_json(self) -> dict[str, object]:
        return {
            "numCPUs": self.num_cpus,
            "numCores": self.num_cores,
            "numNodes": self.num_nodes,
            "numSockets": self.num_sockets,
        }


class CPUTopologyBuilder:
    """Adds CPUs one by one and counts sockets, NUMA nodes and cores as it goes (``CPUTopologyBuilder``)."""

    def __init__(self) -> None:
        self._seen: dict[int, dict[int, set[int]]] = {}
        self._topology = CPUTopology()

    def add(self, socket: int, node: int, core: int, cpu: int) -> CPUTopologyBuilder:
        core = socket << 16 | core
        topo = self._topology
        topo.details[cpu] = CPUInfo(cpu, core, node, socket)
        nodes = self._seen.get(socket)
        if nodes is None:
            topo.num_sockets += 1
            nodes = self._seen[socket] = {}
        cores = nodes.get(node)
        if cores is None:
            topo.num_nodes += 1
            cores = nodes[node] = set()
        if core not in cores:
            topo.num_cores += 1
            cores.add(core)
        topo.num_cpus = len(topo.details)
        return self

    def result(self) -> CPUTopology:
        return self._topology


def build_cpu_topology_for_test(
    sockets: int, nodes_per_socket: int, cores_per_node: int, cpus_per_core: int
) -> CPUTopology:
    """Koordinator's test builder: CPU ids run over threads, then cores, then NUMA nodes, then sockets;
    core and node ids are global counters (no ``socket << 16``)."""
    topo = CPUTopology(
        num_sockets=sockets,
        num_nodes=nodes_per_socket * sockets,
        num_cores=cores_per_node * nodes_per_socket * sockets,
        num_cpus=cpus_per_core * cores_per_node * nodes_per_socket * sockets,
    )
    cpu = core = node = 0
    for socket in range(sockets):
        for _ in range(nodes_per_socket):
            for _ in range(cores_per_node):
                for _ in range(cpus_per_core):
                    topo.details[cpu] = CPUInfo(cpu, core, node, socket)
                    cpu += 1
                core += 1
            node += 1
    return topo


def topology_from_details(details: Mapping[int, CPUInfo]) -> CPUTopology:
    """A topology whose counts are worked out from ``details`` (core ids taken as given)."""
    topo = CPUTopology(details=dict(details))
    topo.num_cpus = len(details)
    topo.num_cores = len({i.core for i in details.values()})
    topo.num_nodes = len({(i.socket, i.node) for i in details.values()})
    topo.num_sockets = len({i.socket for i in details.values()})
    return topo
