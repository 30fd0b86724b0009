"""The per-cycle state of NodeNUMAResource and the reservation seam.

``PreFilterState`` is what PreFilter works out once per pod (Koordinator's ``preFilterState``).
``NodeRestoreState`` is what Koordinator's reservation hooks (``RestoreReservation``) leave per node: CPUs
and NUMA resources that matched reservations give back to the pod. Until the framework runs those hooks it
is filled by ``NodeNUMAResource.restore_reservation`` for the nodes where the pod matches reservations (or
other reservations have owners); elsewhere it is empty and Reserve allocates from the node alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import add, subtract_non_negative
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import ReservationInfo
from koord_plugin_nodenumaresource.node_allocation import PodAllocation
from koord_plugin_nodenumaresource.preemption import PreemptibleNodeState

__all__ = [
    "RESTORE_STATE_KEY",
    "STATE_KEY",
    "NodeRestoreState",
    "PreFilterState",
    "ReusableAlloc",
    "merge_by_numa",
    "merge_pre_allocatable",
    "restore_state_of",
    "set_restore_state",
]

STATE_KEY: Final = "NodeNUMAResource"
RESTORE_STATE_KEY: Final = "NodeNUMAResource/reservation-restore"


@dataclass(slots=True)
class PreFilterState:
    skip: bool = False
    request_cpu_bind: bool = False
    requests: Mapping[str, int] = field(default_factory=dict)
    required_cpu_bind_policy: str = ""
    preferred_cpu_bind_policy: str = ""
    preferred_cpu_exclusive_policy: str = ""
    pod_numa_topology_policy: str = ""
    pod_numa_exclusive: str = ""
    num_cpus_needed: int = 0
    allocation: PodAllocation | None = None
    """Set by Reserve (and by Filter for a designated allocation); PreBind writes it out."""
    allocated_node: str = ""
    has_reservation_affinity: bool = False
    """The pod must consume a reservation (required reservation affinity): no fallback to the node."""
    reservation_ignored: bool = False
    """The pod has the ``reservation-ignored`` label: reserved-but-unused CPUs are usable too."""
    pre_allocation_required: bool = False
    """A reserve pod labelled ``pre-allocation-required``: it must take over a pod's CPUs, no fallback."""
    preemptible: dict[str, PreemptibleNodeState] = field(default_factory=dict)
    """Node name -> what the preemption what-if's removed pods give back there (AddPod / RemovePod)."""

    def clone(self) -> PreFilterState:
        # Each what-if works on its own clone of the cycle state: the per-node accumulators are copied.
        return replace(self, preemptible={n: ns.clone() for n, ns in self.preemptible.items()})


ResourcesByNUMA = Mapping[int, Mapping[str, int]]


def merge_by_numa(*parts: ResourcesByNUMA | None) -> dict[int, dict[str, int]]:
    """``appendAllocated``: the per-NUMA-node sum of ``parts``."""
    out: dict[int, dict[str, int]] = {}
    for part in parts:
        for numa, res in (part or {}).items():
            out[numa] = dict(add(out.get(numa, {}), res))
    return out


@dataclass(frozen=True, slots=True)
class ReusableAlloc:
    """What one reservation (or one pod a pre-allocating reservation may take over) holds on a node in this
    plugin's terms (Koordinator's ``reusableAlloc``)."""

    reservation: ReservationInfo
    """The matched reservation, or the pre-allocating one for a candidate pod."""
    pre_allocatable: PodInfo | None = None
    """The candidate pod whose CPUs / NUMA resources these are (pre-allocation only)."""
    allocatable_cpus: frozenset[int] = frozenset()
    """The reservation's whole reserved cpuset."""
    allocated_cpus: frozenset[int] = frozenset()
    """As upstream: the reserved cpuset again (owners' CPUs inside it are a subset)."""
    remained_cpus: frozenset[int] = frozenset()
    """Reserved CPUs no owner pod has taken yet."""
    allocatable: ResourcesByNUMA | None = None
    allocated: ResourcesByNUMA | None = None
    remained: ResourcesByNUMA | None = None


@dataclass(frozen=True, slots=True)
class NodeRestoreState:
    """Reservation resources restored on one node (Koordinator's ``nodeReservationRestoreStateData``)."""

    matched: Mapping[str, ReusableAlloc] = field(default_factory=dict)
    """Reservations the pod may consume, by uid (only those holding CPUs or NUMA resources)."""
    unmatched: Mapping[str, ReusableAlloc] = field(default_factory=dict)
    matched_remain_cpus: frozenset[int] = frozenset()
    """CPUs of matched reservations not yet taken by their owners."""
    matched_allocated_cpus: frozenset[int] = frozenset()
    matched_allocatable: ResourcesByNUMA = field(default_factory=dict)
    """Per NUMA node, resources held by matched reservations."""
    matched_allocated: ResourcesByNUMA = field(default_factory=dict)
    """Per NUMA node, what owner pods already use of the matched reservations."""
    unmatched_used: ResourcesByNUMA = field(default_factory=dict)
    """Per NUMA node, what owner pods use of the other reservations (counted twice on the node otherwise)."""
    pre_allocation: ReservationInfo | None = None
    """Set for a pre-allocating reserve pod: ``matched`` then holds its candidate pods, by pod uid."""

    @classmethod
    def merged(
        cls,
        matched: Mapping[str, ReusableAlloc],
        unmatched: Mapping[str, ReusableAlloc],
        pre_allocation: ReservationInfo | None = None,
    ) -> NodeRestoreState:
        """``mergeReservationAllocations``."""
        used = merge_by_numa(
            *(
                {
                    n: subtract_non_negative(r, (a.remained or {}).get(n, {}))
                    for n, r in (a.allocatable or {}).items()
                }
                for a in unmatched.values()
            )
        )
        remain: set[int] = set()
        allocated: set[int] = set()
        for a in matched.values():
            remain |= a.remained_cpus
            allocated |= a.allocated_cpus
        return cls(
            matched=dict(matched),
            unmatched=dict(unmatched),
            matched_remain_cpus=frozenset(remain),
            matched_allocated_cpus=frozenset(allocated),
            matched_allocatable=merge_by_numa(*(a.allocatable for a in matched.values())),
            matched_allocated=merge_by_numa(*(a.allocated for a in matched.values())),
            unmatched_used=used,
            pre_allocation=pre_allocation,
        )

    @property
    def empty(self) -> bool:
        return not (self.matched or self.unmatched)


_NO_RESTORE = NodeRestoreState()


def restore_state_of(state: CycleState, node: str) -> NodeRestoreState:
    """The reservation restore state of ``node`` in this cycle (empty when no reservation hook ran)."""
    per_node = state.get(RESTORE_STATE_KEY)
    if isinstance(per_node, dict):
        found = per_node.get(node)
        if isinstance(found, NodeRestoreState):
            return found
    return _NO_RESTORE


def merge_pre_allocatable(allocs: Sequence[ReusableAlloc]) -> ReusableAlloc:
    """Several candidate pods taken over together (``enableMultiple``) as one: the union of their cpusets
    and the sum of their NUMA resources."""
    if len(allocs) == 1:
        return allocs[0]
    cpus: frozenset[int] = frozenset().union(*(a.remained_cpus for a in allocs))
    numa = merge_by_numa(*(a.remained for a in allocs)) or None
    return ReusableAlloc(
        reservation=allocs[0].reservation,
        pre_allocatable=allocs[0].pre_allocatable,
        allocatable_cpus=cpus,
        remained_cpus=cpus,
        allocatable=numa,
        remained=numa,
    )


def set_restore_state(state: CycleState, node: str, restore: NodeRestoreState) -> None:
    per_node = state.get(RESTORE_STATE_KEY)
    if not isinstance(per_node, dict):
        per_node = {}
        state.write(RESTORE_STATE_KEY, per_node)
    per_node[node] = restore
