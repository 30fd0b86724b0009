"""How much memory to release and whom to evict first, exactly as Koordinator's ``memoryevict`` decides.

* ``BEMemoryEvict`` -- node memory usage above ``memoryEvictThresholdPercent``: evict BE pods (by label)
  until usage is back at ``memoryEvictLowerPercent`` (default threshold - 2).
* ``MemoryEvict`` -- the same trigger, but any pod up to ``evictEnabledPriorityThreshold`` that opted in
  with ``koordinator.sh/eviction-enabled``; upstream multiplies the pods' used bytes by 1000 here, and so
  does this port (the per-pod release is counted 1000-fold, so usually one pod is evicted per round).
* ``MemoryAllocatableEvict`` -- pods up to ``allocatableEvictPriorityThreshold`` requested more than
  ``memoryAllocatableEvictThresholdPercent`` of the node's (batch/mid) memory allocatable.

The release and candidate rules shared with CPU eviction live in ``koord_lib_evictpolicy.evict_policy``;
this module keeps what is memory's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord_lib_evictpolicy.evict_policy import (
    ConfigInvalid,
    lower_percent_or_default,
    release_by_used_percent,
)
from koord_lib_evictpolicy.evict_policy import release_by_allocatable as _release_by_allocatable

from koord_framework.api.qos import QoSClass
from koord_framework.api.resources import MEMORY
from koord_framework.koordlet.eviction import PodEvictInfo, eviction_policy_allowed, sort_by_less
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.states import PodMeta

__all__ = [
    "ConfigInvalid",
    "be_pod_evict_infos",
    "check_used_threshold_config",
    "release_by_allocatable",
    "release_by_used_threshold",
]


def check_used_threshold_config(t: ResourceThresholdStrategy | None, *, needs_priority: bool) -> None:
    """``generateConfigCheck``: threshold >= 0 and lower below it; ``MemoryEvict`` also needs
    ``evictEnabledPriorityThreshold``. The threshold - 2 default of the lower percent belongs to these usage
    triggers only: the allocatable trigger's lower percent has no default (``check_allocatable_config``)."""
    if t is None:
        raise ConfigInvalid("resourceThresholdStrategy not config")
    thr = t.memory_evict_threshold_percent
    if thr is None:
        raise ConfigInvalid("threshold percent is nil")
    if thr < 0:
        raise ConfigInvalid(f"threshold percent({thr}) should equal or greater than 0")
    lower = lower_percent_or_default(t.memory_evict_lower_percent, thr)
    if lower >= thr:
        raise ConfigInvalid(f"lower percent({lower}) should less than threshold percent({thr})")
    if needs_priority and t.evict_enabled_priority_threshold is None:
        raise ConfigInvalid("EvictEnabledPriorityThreshold not config")


def release_by_used_threshold(
    t: ResourceThresholdStrategy, capacity_bytes: int, node_used_bytes: float
) -> int:
    """Bytes to release (``calculateReleaseByUsedThresholdPercent``)::

    usage% = int(used) x 100 // capacity; release = capacity x (usage% - lower) // 100
    """
    return release_by_used_percent(
        capacity_bytes, int(node_used_bytes), t.memory_evict_threshold_percent, t.memory_evict_lower_percent
    )


def release_by_allocatable(
    t: ResourceThresholdStrategy, node: Mapping[str, Any] | None, pods: Sequence[PodMeta]
) -> dict[str, int]:
    """Per class resource (memory, batch-memory, mid-memory) of pods up to the priority threshold:
    ``int((requested/allocatable - lower%) x allocatable)`` once above ``threshold%``; everything when the
    node has none (``calculateReleaseByAllocatableThresholdPercent``)."""
    return _release_by_allocatable(t, node, pods, MEMORY)


def be_pod_evict_infos(
    pods: Sequence[PodMeta], pod_memory_used: Mapping[str, float], feature: str
) -> list[PodEvictInfo]:
    """BE pods (by label) the feature may evict, ordered (``getSortedBEPodInfos``): lower priority first when
    both have different ones; then more memory first; pods without usage last, by name descending.

    No phase filter, opt-in or ``eviction-priority`` here, as upstream. Pods equal under this order keep
    their input order (the node state's namespace/name order): upstream's come from a Go map and an unstable
    sort, so any order of them is upstream's."""
    infos = [
        PodEvictInfo(pod=meta, memory_used=int(pod_memory_used.get(meta.uid, 0.0)))
        for meta in pods
        if meta.raw_qos is QoSClass.BE and eviction_policy_allowed(feature, meta.pod)
    ]

    def less(a: PodEvictInfo, b: PodEvictInfo) -> bool:
        pa, pb = a.pod.pod.priority, b.pod.pod.priority
        if pa is not None and pb is not None and pa != pb:
            return pa < pb
        if a.memory_used != 0 and b.memory_used != 0:
            return a.memory_used > b.memory_used
        if a.memory_used == 0 and b.memory_used == 0:
            return a.pod.pod.name > b.pod.pod.name
        return b.memory_used == 0

    return sort_by_less(infos, less)
