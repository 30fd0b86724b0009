"""What a preemption what-if frees on a node (Koordinator's ``preemptibleAlloc`` / ``preemptibleNodeState``).

Preemption asks every PreFilter plugin to take victims off a node (``RemovePod``) and to put pods back
(``AddPod``) in a cloned cycle state, then runs Filter on that node. The resource manager still holds the
victims' cpusets and NUMA resources: they are only released when the victims are really deleted. So the
what-if keeps, per node, what removed pods would give back, and the allocation paths add it to what they
consider free: the CPUs to the preemptible set (``available_cpus`` gives one reference back per CPU), the
NUMA resources to the reusable ones.

A victim allocated inside a NUMA-aware reservation gives its resources back to that reservation, not to
the node, so they are kept per reservation uid and only pods that may use that reservation see them.

Two sets, not one, for the CPUs: a pod removed and then added back must cancel out exactly, whichever came
first, and one set cannot say "remove this CPU from what the caller passes in".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from koord_framework.api.resources import add, subtract

__all__ = ["PreemptibleAlloc", "PreemptibleNodeState"]

ResourcesByNUMA = Mapping[int, Mapping[str, int]]


@dataclass(slots=True)
class PreemptibleAlloc:
    cpus_to_add: frozenset[int] = frozenset()
    cpus_to_remove: frozenset[int] = frozenset()
    numa_resources: dict[int, dict[str, int]] = field(default_factory=dict)
    """Per NUMA node, what removed pods give back (negative after a pod was added back without removal)."""

    def clone(self) -> PreemptibleAlloc:
        return PreemptibleAlloc(
            self.cpus_to_add, self.cpus_to_remove, {n: dict(r) for n, r in self.numa_resources.items()}
        )

    def append_cpus(self, cpus: Iterable[int] = ()) -> frozenset[int]:
        """``AppendCPUSet``: ``cpus`` plus what was given back, less what was taken again."""
        return (frozenset(cpus) | self.cpus_to_add) - self.cpus_to_remove

    def append_numa(self, resources: ResourcesByNUMA | None) -> dict[int, dict[str, int]]:
        """``AppendNUMAResources``: the per-NUMA-node sum of what was given back and ``resources``."""
        out = {n: dict(r) for n, r in self.numa_resources.items()}
        for numa, res in (resources or {}).items():
            out[numa] = add(out.get(numa, {}), res)
        return out

    def accumulate(self, cpus: frozenset[int], numa: ResourcesByNUMA) -> None:
        """A pod's resources given back (``RemovePod``)."""
        for node, res in numa.items():
            self.numa_resources[node] = add(self.numa_resources.get(node, {}), res)
        if cpus:
            taken_back = self.cpus_to_remove & cpus
            self.cpus_to_remove -= taken_back
            self.cpus_to_add |= cpus - taken_back

    def subtract(self, cpus: frozenset[int], numa: ResourcesByNUMA) -> None:
        """A pod's resources taken again (``AddPod``): may go below zero, as upstream's ``Subtract``."""
        for node, res in numa.items():
            self.numa_resources[node] = subtract(self.numa_resources.get(node, {}), res)
        if cpus:
            given_back = self.cpus_to_add & cpus
            self.cpus_to_add -= given_back
            self.cpus_to_remove |= cpus - given_back


@dataclass(slots=True)
class PreemptibleNodeState:
    node_alloc: PreemptibleAlloc | None = None
    """What removed pods give back to the node's free resources."""
    reservations_alloc: dict[str, PreemptibleAlloc] = field(default_factory=dict)
    """Reservation uid -> what removed owner pods give back to that reservation."""

    def clone(self) -> PreemptibleNodeState:
        return PreemptibleNodeState(
            self.node_alloc.clone() if self.node_alloc is not None else None,
            {uid: a.clone() for uid, a in self.reservations_alloc.items()},
        )

    def alloc_for(self, reservation_uid: str | None) -> PreemptibleAlloc:
        """The accumulator a pod's resources go to: its reservation's, or the node's."""
        if reservation_uid is None:
            if self.node_alloc is None:
                self.node_alloc = PreemptibleAlloc()
            return self.node_alloc
        return self.reservations_alloc.setdefault(reservation_uid, PreemptibleAlloc())
