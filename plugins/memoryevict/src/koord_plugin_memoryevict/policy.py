"""How much memory to release and whom to evict first, exactly as Koordinator's ``memoryevict`` decides.

* ``BEMemoryEvict`` -- node memory usage above ``memoryEvictThresholdPercent``: evict BE pods (by label)
  until usage is back at ``memoryEvictLowerPercent`` (default threshold - 2).
* ``MemoryEvict`` -- the same trigger, but any pod up to ``evictEnabledPriorityThreshold`` that opted in
  with ``koordinator.sh/eviction-enabled``; upstream multiplies the pods' used bytes by 1000 here, and so
  does this port (the per-pod release is counted 1000-fold, so usually one pod is evicted per round).
* ``MemoryAllocatableEvict`` -- pods up to ``allocatableEvictPriorityThreshold`` requested more than
  ``memoryAllocatableEvictThresholdPercent`` of the node's (batch/mid) memory allocatable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from koord_framework.api.qos import PriorityClass, QoSClass, priority_value_with_default
from koord_framework.api.resources import (
    BATCH_CPU,
    BATCH_MEMORY,
    MEMORY,
    MID_CPU,
    MID_MEMORY,
    parse_resource_list,
)
from koord_framework.koordlet.eviction import (
    PodEvictInfo,
    eviction_policy_allowed,
    pod_evict_enabled,
    pod_eviction_priority,
    pod_priority_label,
    request_from_pod,
    request_type_and_value,
    sort_by_eviction_order,
    sort_by_less,
)
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.states import PodMeta

MEMORY_RELEASE_BUFFER_PERCENT: Final = 2
PRIORITY_MID_VALUE_MAX: Final = 7999
RESOURCE_CLASS: Final = {
    BATCH_CPU: PriorityClass.BATCH,
    BATCH_MEMORY: PriorityClass.BATCH,
    MID_CPU: PriorityClass.MID,
    MID_MEMORY: PriorityClass.MID,
}


class ConfigInvalid(ValueError):
    """The NodeSLO thresholds do not allow this trigger (the message is Koordinator's)."""


def _lower(t: ResourceThresholdStrategy, threshold: int) -> int:
    if t.memory_evict_lower_percent is not None:
        return t.memory_evict_lower_percent
    return threshold - MEMORY_RELEASE_BUFFER_PERCENT


def check_used_threshold_config(t: ResourceThresholdStrategy | None, *, needs_priority: bool) -> None:
    """``generateConfigCheck``: threshold >= 0 and lower below it; ``MemoryEvict`` also needs
    ``evictEnabledPriorityThreshold``."""
    if t is None:
        raise ConfigInvalid("resourceThresholdStrategy not config")
    thr = t.memory_evict_threshold_percent
    if thr is None:
        raise ConfigInvalid("threshold percent is nil")
    if thr < 0:
        raise ConfigInvalid(f"threshold percent({thr}) should equal or greater than 0")
    lower = _lower(t, thr)
    if lower >= thr:
        raise ConfigInvalid(f"lower percent({lower}) should less than threshold percent({thr})")
    if needs_priority and t.evict_enabled_priority_threshold is None:
        raise ConfigInvalid("EvictEnabledPriorityThreshold not config")


def check_allocatable_config(t: ResourceThresholdStrategy | None) -> None:
    if t is None:
        raise ConfigInvalid("ResourceThresholdStrategy not config")
    thr = t.memory_allocatable_evict_threshold_percent
    if thr is None:
        raise ConfigInvalid("MemoryAllocatableEvictThresholdPercent not config")
    if thr < 0:
        raise ConfigInvalid(f"threshold percent({thr}) should greater than 0")
    lower = t.memory_allocatable_evict_lower_percent
    if lower is None:
        raise ConfigInvalid("MemoryAllocatableEvictLowerPercent not config")
    if lower >= thr:
        raise ConfigInvalid(f"lower percent({lower}) should less than threshold percent({thr})")
    prio = t.allocatable_evict_priority_threshold
    if prio is None:
        raise ConfigInvalid("AllocatableEvictPriorityThreshold not config")
    if prio > PRIORITY_MID_VALUE_MAX:
        raise ConfigInvalid(
            f"priorityThresholdPercent({prio}) should less than {PRIORITY_MID_VALUE_MAX}, "
            "koor-prod pods should not be killed"
        )


def release_by_used_threshold(
    t: ResourceThresholdStrategy, capacity_bytes: int, node_used_bytes: float
) -> int:
    """Bytes to release (``calculateReleaseByUsedThresholdPercent``)::

    usage% = int(used) x 100 // capacity; release = capacity x (usage% - lower) // 100
    """
    thr = t.memory_evict_threshold_percent
    if thr is None or capacity_bytes <= 0:
        return 0
    usage = int(node_used_bytes) * 100 // capacity_bytes
    if usage < thr:
        return 0
    return capacity_bytes * (usage - _lower(t, thr)) // 100


def release_by_allocatable(
    t: ResourceThresholdStrategy, node: Mapping[str, Any] | None, pods: Sequence[PodMeta]
) -> dict[str, int]:
    """Per class resource (memory, batch-memory, mid-memory) of pods up to the priority threshold:
    ``int((requested/allocatable - lower%) x allocatable)`` once above ``threshold%``; everything when the
    node has none (``calculateReleaseByAllocatableThresholdPercent``)."""
    thr = t.memory_allocatable_evict_threshold_percent
    lower = t.memory_allocatable_evict_lower_percent or 0
    prio_thr = t.allocatable_evict_priority_threshold
    if thr is None or thr < 0 or prio_thr is None:
        return {}
    requested: dict[str, int] = {}
    for meta in pods:
        if priority_value_with_default(meta.manifest) > prio_thr:
            continue
        for name, value in request_from_pod(meta, MEMORY).items():
            requested[name] = requested.get(name, 0) + value
    status = (node or {}).get("status") or {}
    alloc = parse_resource_list(status.get("allocatable") or {}, path="Node.status.allocatable")
    out: dict[str, int] = {}
    for name, req in requested.items():
        total = alloc.get(name, 0)
        if total == 0:
            out[name] = req
            continue
        if req / total > thr / 100:
            out[name] = int((req / total - lower / 100) * total)
    return out


def released_classes(release: Mapping[str, int]) -> set[PriorityClass]:
    return {RESOURCE_CLASS[r] for r in release if r in RESOURCE_CLASS}


def be_pod_evict_infos(
    pods: Sequence[PodMeta], pod_memory_used: Mapping[str, float], feature: str
) -> list[PodEvictInfo]:
    """BE pods (by label) the feature may evict, ordered (``getSortedBEPodInfos``): lower priority first when
    both have different ones; then more memory first; pods without usage last, by name descending."""
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


def priority_evict_infos(
    pods: Sequence[PodMeta],
    feature: str,
    priority_threshold: int,
    pod_memory_used: Mapping[str, float],
    *,
    by_request: bool,
) -> list[PodEvictInfo]:
    """Candidates of ``MemoryEvict``/``MemoryAllocatableEvict`` (``getPodEvictInfoAndSortByPriority``):
    active, allowed, priority <= threshold, opted in, with a memory metric. ``memory_used`` is the used bytes
    x 1000, as upstream computes it."""
    infos = []
    for meta in pods:
        if not meta.is_active or not eviction_policy_allowed(feature, meta.pod):
            continue
        priority = priority_value_with_default(meta.manifest)
        if priority > priority_threshold or not pod_evict_enabled(meta.pod):
            continue
        if meta.uid not in pod_memory_used:
            continue
        infos.append(
            PodEvictInfo(
                pod=meta,
                priority=priority,
                eviction_priority=pod_eviction_priority(meta.pod),
                label_priority=pod_priority_label(meta.pod, priority),
                memory_used=int(pod_memory_used[meta.uid] * 1000),
                memory_request=request_type_and_value(meta, MEMORY)[1],
            )
        )
    if by_request:
        return sort_by_eviction_order(infos, lambda a, b: a.memory_request > b.memory_request)
    return sort_by_eviction_order(infos, lambda a, b: a.memory_used > b.memory_used)
