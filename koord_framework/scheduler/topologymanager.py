"""The NUMA topology manager: align the NUMA nodes every resource of a pod comes from (Koordinator's
``frameworkext/topologymanager``, itself kubelet's topology manager moved into the scheduler).

Several plugins own NUMA-local resources (``NodeNUMAResource``: cpu, memory and cpusets; ``DeviceShare``:
GPUs and RDMA devices). Each implements ``NUMATopologyHintProvider`` and never imports the others: the
manager asks every provider of the profile for its *hints* (which sets of NUMA nodes could satisfy each
resource, which of them are preferred, and a score), merges them, and hands the best merged hint back to
every provider's ``allocate``. The hint chosen for a node is kept in the cycle state (``AffinityStore``), so
Filter, Score and Reserve of all providers agree on it.

Admission by policy (the node's ``node.koordinator.sh/numa-topology-policy`` label, the NRT's kubelet
policy, or the pod's ``numa-topology-spec``):

* ``BestEffort``: always admits; if no merged hint satisfies every resource, the pod gets all NUMA nodes.
* ``Restricted``: admits only a preferred merged hint.
* ``SingleNUMANode``: only single-NUMA-node preferred hints count; admits only a preferred one.

A rejection reads ``Unaligned NUMA Hint cause <summary>`` (or ``Unsatisfied NUMA <resource>`` when a provider
has no feasible NUMA set at all for a resource).

``singleNUMANodeExclusive: Required`` keeps pods that use one NUMA node and pods that span several apart: a
multi-node hint touching a NUMA node that only single-node pods use, or a single-node hint on a NUMA node a
spanning pod uses, is not preferred.

Bit masks are plain ``int``s (bit *i* = NUMA node *i*); ``None`` means "no preference" (Go's nil mask).
"""

from __future__ import annotations

import abc
import enum
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Status

__all__ = [
    "AFFINITY_STATE_KEY",
    "ERR_NUMA_HINT_CANNOT_ALIGN",
    "ERR_UNSATISFIED_NUMA_RESOURCE",
    "AffinityStore",
    "NUMANodeStatus",
    "NUMATopologyExclusive",
    "NUMATopologyHint",
    "NUMATopologyHintProvider",
    "NUMATopologyPolicy",
    "TopologyManager",
    "bits",
    "iterate_bit_masks",
    "mask_of",
    "mask_string",
    "merge_hints",
]

ERR_UNSATISFIED_NUMA_RESOURCE: Final = "Unsatisfied NUMA {}"
ERR_NUMA_HINT_CANNOT_ALIGN: Final = "Unaligned NUMA Hint cause {}"
AFFINITY_STATE_KEY: Final = "koordinator.sh/topology-affinity-store"


class NUMATopologyPolicy(enum.StrEnum):
    """How strictly a pod's resources must be NUMA-aligned (``extension.NUMATopologyPolicy``)."""

    NONE = ""
    BEST_EFFORT = "BestEffort"
    RESTRICTED = "Restricted"
    SINGLE_NUMA_NODE = "SingleNUMANode"


class NUMATopologyExclusive(enum.StrEnum):
    """The pod's ``singleNUMANodeExclusive``."""

    NONE = ""
    PREFERRED = "Preferred"
    REQUIRED = "Required"


class NUMANodeStatus(enum.StrEnum):
    """Who uses a NUMA node: nobody, only pods confined to it, or some pod spanning several nodes."""

    IDLE = "idle"
    SHARED = "shared"
    SINGLE = "single"


# --- bit masks ------------------------------------------------------------------------------------------
def mask_of(nodes: Sequence[int]) -> int:
    mask = 0
    for n in nodes:
        mask |= 1 << n
    return mask


def bits(mask: int) -> list[int]:
    """The set bits, ascending."""
    out: list[int] = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def mask_string(mask: int) -> str:
    """A mask as Koordinator prints it in messages: binary, zero-padded to an even width (``01``, ``10``)."""
    for shift in range(62, 0, -2):
        if mask > (1 << shift):
            return format(mask, f"0{shift + 2}b")
    return format(mask, "02b")


def narrower(a: int, b: int) -> bool:
    """kubelet's ``IsNarrowerThan``: fewer NUMA nodes, or as many and a lower mask value."""
    ca, cb = a.bit_count(), b.bit_count()
    return a < b if ca == cb else ca < cb


def iterate_bit_masks(nodes: Sequence[int]) -> Iterator[int]:
    """Every non-empty subset of ``nodes`` as a mask: all of size 1, then size 2, ... (``IterateBitMasks``
    order, which decides ties between equally good hints)."""

    def combos(start: int, size: int, acc: int) -> Iterator[int]:
        if size == 0:
            yield acc
            return
        for i in range(start, len(nodes)):
            yield from combos(i + 1, size - 1, acc | (1 << nodes[i]))

    for size in range(1, len(nodes) + 1):
        yield from combos(0, size, 0)


# --- hints ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NUMATopologyHint:
    """One way to place a resource: on the NUMA nodes of ``affinity`` (``None``: anywhere)."""

    affinity: int | None = None
    preferred: bool = False
    unsatisfied: bool = False
    """The merged affinity cannot hold every resource of the permutation it came from."""
    score: int = 0
    """Among equally narrow preferred hints, the higher score wins."""

    @property
    def nodes(self) -> list[int]:
        return bits(self.affinity) if self.affinity is not None else []

    def __str__(self) -> str:
        mask = "nil" if self.affinity is None else mask_string(self.affinity)
        return f"{{{mask} preferred={self.preferred} score={self.score}}}"


ProviderHints = Mapping[str, Sequence[NUMATopologyHint] | None]
"""resource name -> feasible hints (``None``: no preference; empty: no feasible NUMA set)."""


class NUMATopologyHintProvider(abc.ABC):
    """A plugin that owns NUMA-local resources. The manager calls it for each node it admits the pod to."""

    @abc.abstractmethod
    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[ProviderHints | None, Status]:
        """The pod's hints per resource on ``node``; ``None`` or ``{}`` means no NUMA preference. A
        non-success status rejects the node with its message."""

    @abc.abstractmethod
    def allocate(self, state: CycleState, affinity: NUMATopologyHint, pod: PodInfo, node: NodeInfo) -> Status:
        """Trial-allocate (and remember in ``state``) under the merged ``affinity``."""


# --- the per-cycle store --------------------------------------------------------------------------------
class AffinityStore:
    """The hint chosen for each node in this scheduling cycle. Shared, not copied, by ``CycleState.clone``
    (as upstream: a preemption what-if sees the hints of the real cycle)."""

    __slots__ = ("_by_node", "_lock")

    def __init__(self) -> None:
        self._by_node: dict[str, NUMATopologyHint] = {}
        self._lock = threading.Lock()

    def clone(self) -> AffinityStore:
        return self

    def set(self, node: str, hint: NUMATopologyHint) -> None:
        with self._lock:
            self._by_node[node] = hint

    def get(self, node: str) -> NUMATopologyHint | None:
        return self._by_node.get(node)

    def __len__(self) -> int:
        """How many nodes have a hint so far (0: nothing in this cycle depends on NUMA alignment yet), so
        that plugins caching verdicts across cycles can tell when they must not."""
        return len(self._by_node)

    @staticmethod
    def init(state: CycleState) -> AffinityStore:
        store = AffinityStore()
        state.write(AFFINITY_STATE_KEY, store)
        return store

    @staticmethod
    def of(state: CycleState) -> AffinityStore:
        """The cycle's store; an empty throw-away one if PreFilter did not create it."""
        found = state.get(AFFINITY_STATE_KEY)
        return found if isinstance(found, AffinityStore) else AffinityStore()


# --- merging ----------------------------------------------------------------------------------------------
def _exclusive_ok(hint: NUMATopologyHint, exclusive: str, statuses: Sequence[str]) -> bool:
    """``checkExclusivePolicy``: does the hint respect ``singleNUMANodeExclusive: Required``?"""
    if hint.affinity is None:
        return False
    if exclusive != NUMATopologyExclusive.REQUIRED:
        return True

    def status(node: int) -> str:
        return statuses[node] if node < len(statuses) else NUMANodeStatus.IDLE

    nodes = bits(hint.affinity)
    if len(nodes) > 1:
        return all(status(n) != NUMANodeStatus.SINGLE for n in nodes)
    return status(nodes[0]) != NUMANodeStatus.SHARED


def _merge_permutation(default: int, permutation: Sequence[NUMATopologyHint]) -> NUMATopologyHint:
    preferred = True
    satisfied = True
    merged = default
    first: int | None = None
    widest = 0
    any_affinity = False
    for hint in permutation:
        if hint.affinity is not None:
            if not any_affinity:
                first, any_affinity = hint.affinity, True
            elif hint.affinity != first:
                preferred = False
            widest = max(widest, hint.affinity.bit_count())
            merged &= hint.affinity
        if not hint.preferred:
            preferred = False
        if hint.unsatisfied:
            satisfied = False
    satisfied = (not any_affinity or widest == merged.bit_count()) and satisfied
    return NUMATopologyHint(merged, preferred, not satisfied)


def _filter_provider_hints(
    providers_hints: Sequence[ProviderHints | None],
) -> tuple[list[list[NUMATopologyHint]], list[str], list[str]]:
    """Per provider and resource, the list of alternatives, plus rejection reasons and a summary."""
    out: list[list[NUMATopologyHint]] = []
    reasons: list[str] = []
    summary: list[str] = []
    for hints in providers_hints:
        if not hints:
            out.append([NUMATopologyHint(None, preferred=True)])
            continue
        for resource in sorted(hints):
            listed = hints[resource]
            if listed is None:
                out.append([NUMATopologyHint(None, preferred=True)])
                continue
            if len(listed) == 0:
                out.append([NUMATopologyHint(None, preferred=False, unsatisfied=True)])
                reasons.append(ERR_UNSATISFIED_NUMA_RESOURCE.format(resource))
                continue
            summary.append(_summary(resource, listed))
            out.append(list(listed))
    summary.sort()
    return out, reasons, summary


def _summary(resource: str, hints: Sequence[NUMATopologyHint]) -> str:
    preferred = [mask_string(h.affinity or 0) for h in hints if not h.unsatisfied and h.preferred]
    possible = [mask_string(h.affinity or 0) for h in hints if not h.unsatisfied]
    return f"{resource} prefer [{' '.join(preferred)}] among [{' '.join(possible)}]"


def _permutations(lists: Sequence[Sequence[NUMATopologyHint]]) -> Iterator[list[NUMATopologyHint]]:
    if not lists:
        yield []
        return
    head, rest = lists[0], lists[1:]
    for hint in head:
        for tail in _permutations(rest):
            yield [hint, *tail]


def _best_of(
    numa_nodes: Sequence[int],
    filtered: Sequence[Sequence[NUMATopologyHint]],
    exclusive: str,
    statuses: Sequence[str],
) -> NUMATopologyHint:
    """``mergeFilteredHints``: the best merged hint over every permutation of the alternatives."""
    default = mask_of(numa_nodes)
    best = NUMATopologyHint(default)
    for permutation in _permutations(filtered):
        merged = _merge_permutation(default, permutation)
        mask = merged.affinity
        assert mask is not None
        if mask == 0:
            continue
        if not _exclusive_ok(merged, exclusive, statuses):
            merged = replace(merged, preferred=False)
        score = sum(h.score for h in permutation if h.affinity is not None and h.affinity == mask)
        merged = replace(merged, score=merged.score + score)
        if merged.preferred and not best.preferred:
            best = merged
            continue
        if not merged.preferred and best.preferred:
            continue
        assert best.affinity is not None
        if not narrower(mask, best.affinity):
            if mask.bit_count() == best.affinity.bit_count() and merged.score > best.score:
                best = merged
            continue
        best = merged
    return best


def merge_hints(
    policy: str,
    numa_nodes: Sequence[int],
    providers_hints: Sequence[ProviderHints | None],
    exclusive: str = "",
    statuses: Sequence[str] = (),
) -> tuple[NUMATopologyHint, bool, list[str]]:
    """Merge the providers' hints under ``policy``: ``(best hint, admitted, reasons)``."""
    filtered, reasons, summary = _filter_provider_hints(providers_hints)
    everything = mask_of(numa_nodes)
    if policy == NUMATopologyPolicy.BEST_EFFORT:
        best = _best_of(numa_nodes, filtered, exclusive, statuses)
        if best.unsatisfied:
            best = NUMATopologyHint(everything)
        return best, True, []
    if policy == NUMATopologyPolicy.RESTRICTED:
        if reasons:
            return NUMATopologyHint(everything), False, reasons
        best = _best_of(numa_nodes, filtered, exclusive, statuses)
        if not best.preferred:
            return best, False, [ERR_NUMA_HINT_CANNOT_ALIGN.format(" & ".join(summary))]
        return best, True, []
    if policy == NUMATopologyPolicy.SINGLE_NUMA_NODE:
        if reasons:
            return NUMATopologyHint(), False, reasons
        single = [
            [h for h in alternatives if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]
            for alternatives in filtered
        ]
        best = _best_of(numa_nodes, single, exclusive, statuses)
        if best.affinity == everything:
            best = NUMATopologyHint(None, preferred=best.preferred)
        if not best.preferred:
            return best, False, [ERR_NUMA_HINT_CANNOT_ALIGN.format(",".join(summary))]
        return best, True, []
    return NUMATopologyHint(), True, []


# --- the manager ------------------------------------------------------------------------------------------
class TopologyManager:
    """Runs admission for one profile. ``providers`` returns the profile's hint providers in profile order
    (``Handle.numa_topology_hint_providers``)."""

    def __init__(self, providers: Callable[[], Sequence[NUMATopologyHintProvider]]) -> None:
        self._providers = providers

    def admit(
        self,
        state: CycleState,
        pod: PodInfo,
        node: NodeInfo,
        numa_nodes: Sequence[int],
        policy: str,
        exclusive: str = "",
        statuses: Sequence[str] = (),
        *,
        recompute: bool = False,
    ) -> Status:
        """Admit ``pod`` to ``node`` under ``policy``: the first call for a node in a cycle (or any call
        with ``recompute``, as in PostFilter) computes and stores the best hint; later calls reuse it.
        Either way every provider allocates under the hint."""
        store = AffinityStore.of(state)
        best = store.get(node.name)
        if best is None or recompute:
            providers_hints: list[ProviderHints | None] = []
            reasons: list[str] = []
            for provider in self._providers():
                hints, status = provider.get_pod_topology_hints(state, pod, node)
                if not status.is_success:
                    reasons.append(status.message)
                    continue
                providers_hints.append(hints)
            if reasons:
                return Status.unschedulable(*reasons)
            best, admitted, reasons = merge_hints(policy, numa_nodes, providers_hints, exclusive, statuses)
            if not admitted and reasons:
                return Status.unschedulable(*reasons)
            status = self._allocate(state, best, pod, node)
            if not status.is_success:
                return status
            store.set(node.name, best)
            return Status.success()
        return self._allocate(state, best, pod, node)

    def _allocate(self, state: CycleState, hint: NUMATopologyHint, pod: PodInfo, node: NodeInfo) -> Status:
        for provider in self._providers():
            status = provider.allocate(state, hint, pod, node)
            if not status.is_success:
                return status
        return Status.success()
