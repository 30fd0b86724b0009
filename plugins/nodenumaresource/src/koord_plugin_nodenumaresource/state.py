"""The per-cycle state of NodeNUMAResource and the reservation seam.

``PreFilterState`` is what PreFilter works out once per pod (Koordinator's ``preFilterState``).
``NodeRestoreState`` is what Koordinator's reservation hooks (``RestoreReservation``) leave per node: CPUs
and NUMA resources that matched reservations give back to the pod. Until the framework runs those hooks it
is always empty, and the plugin's ``_allocate_from_reservations`` then answers "nothing reserved here",
exactly as upstream's ``tryAllocateFromReusable`` does for a node without matched reservations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from koord_framework.scheduler.cycle_state import CycleState
from koord_plugin_nodenumaresource.node_allocation import PodAllocation

__all__ = ["RESTORE_STATE_KEY", "STATE_KEY", "NodeRestoreState", "PreFilterState", "restore_state_of"]

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

    def clone(self) -> PreFilterState:
        return replace(self)


@dataclass(frozen=True, slots=True)
class NodeRestoreState:
    """Reservation resources restored on one node (Koordinator's ``nodeReservationRestoreStateData``)."""

    matched_remain_cpus: frozenset[int] = frozenset()
    """CPUs of matched reservations the pod may take (preferred CPUs)."""
    matched_allocatable: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    """Per NUMA node, resources held by matched reservations that the pod may reuse."""
    unmatched_used: Mapping[int, Mapping[str, int]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.matched_remain_cpus or self.matched_allocatable or self.unmatched_used)


_NO_RESTORE = NodeRestoreState()


def restore_state_of(state: CycleState, node: str) -> NodeRestoreState:
    """The reservation restore state of ``node`` in this cycle (empty when no reservation hook ran)."""
    per_node = state.get(RESTORE_STATE_KEY)
    if isinstance(per_node, dict):
        found = per_node.get(node)
        if isinstance(found, NodeRestoreState):
            return found
    return _NO_RESTORE
