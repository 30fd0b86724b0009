"""How much CPU to release and whom to evict first, exactly as Koordinator's ``cpuevict`` plugin decides.

Three triggers share the strategy (Koordinator feature names):

* ``BECPUEvict`` -- BE pods get too little of the CPU they requested: satisfaction = BE CPU limit (what the
  suppression leaves them, or the node's batch-cpu allocatable with ``evictByAllocatable``) / BE request.
  Below ``cpuEvictBESatisfactionLowerPercent`` while BE really uses its limit, release batch-cpu requests
  until satisfaction is back at ``...UpperPercent``.
* ``CPUAllocatableEvict`` -- pods up to ``allocatableEvictPriorityThreshold`` requested more than
  ``cpuAllocatableEvictThresholdPercent`` of the node's (batch/mid) cpu allocatable.
* ``CPUEvict`` -- the node's CPU usage is above ``cpuEvictThresholdPercent``.

The release and candidate rules the two priority-based triggers share with memory eviction live in
``koord_lib_evictpolicy.evict_policy``; this module keeps what is CPU's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from koord_lib_evictpolicy.evict_policy import (
    ConfigInvalid,
    lower_percent_or_default,
    release_by_allocatable,
    release_by_used_percent,
)

from koord_framework.api.qos import QoSClass
from koord_framework.api.resources import BATCH_CPU, CPU, parse_resource_list
from koord_framework.koordlet.eviction import PodEvictInfo, eviction_policy_allowed, sort_by_less
from koord_framework.koordlet.nodeslo import CPUEvictPolicy, ResourceThresholdStrategy
from koord_framework.koordlet.states import PodMeta

__all__ = [
    "BECPUSample",
    "ConfigInvalid",
    "be_milli_allocatable",
    "be_pod_evict_infos",
    "check_satisfaction_config",
    "check_used_threshold_config",
    "milli_release_by_allocatable",
    "milli_release_by_be_satisfaction",
    "milli_release_by_used_threshold",
    "pod_batch_milli_cpu_request",
]

BE_CPU_SATISFACTION_LOW_PERCENT_MAX: Final = 60
BE_CPU_SATISFACTION_UPPER_PERCENT_MAX: Final = 100
BE_CPU_USAGE_THRESHOLD_PERCENT: Final = 90
DEFAULT_MIN_ALLOCATABLE_BATCH_MILLI_CPU: Final = 1


# --- config checks ---------------------------------------------------------------------------------------


def check_satisfaction_config(t: ResourceThresholdStrategy | None) -> None:
    """``isSatisfactionConfigValid``: lower in (0, 60], upper in (0, 100), upper >= lower."""
    if t is None:
        raise ConfigInvalid("ResourceThresholdStrategy not config")
    low, upper = t.cpu_evict_be_satisfaction_lower_percent, t.cpu_evict_be_satisfaction_upper_percent
    if low is None or upper is None:
        raise ConfigInvalid(
            "CPUEvictBESatisfactionLowerPercent or CPUEvictBESatisfactionUpperPercent not config"
        )
    if low > BE_CPU_SATISFACTION_LOW_PERCENT_MAX or low <= 0:
        raise ConfigInvalid(
            f"CPUEvictBESatisfactionLowerPercent({low}) is not valid! "
            f"must (0,{BE_CPU_SATISFACTION_LOW_PERCENT_MAX}]"
        )
    if upper >= BE_CPU_SATISFACTION_UPPER_PERCENT_MAX or upper <= 0:
        raise ConfigInvalid(
            f"CPUEvictBESatisfactionUpperPercent({upper}) is not valid,"
            f"must (0,{BE_CPU_SATISFACTION_UPPER_PERCENT_MAX})"
        )
    if upper < low:
        raise ConfigInvalid(
            f"CPUEvictBESatisfactionUpperPercent({upper}) < CPUEvictBESatisfactionLowerPercent({low})"
        )


def check_used_threshold_config(t: ResourceThresholdStrategy | None) -> None:
    """``isUsedThresholdConfigValid``: a threshold >= 0, lower (default threshold - 2) below it, and an
    ``evictEnabledPriorityThreshold``."""
    if t is None:
        raise ConfigInvalid("ResourceThresholdStrategy not config")
    thr = t.cpu_evict_threshold_percent
    if thr is None:
        raise ConfigInvalid("CPUEvictThresholdPercent not config")
    if thr < 0:
        raise ConfigInvalid(f"threshold percent({thr}) should greater than 0")
    lower = lower_percent_or_default(t.cpu_evict_lower_percent, thr)
    if lower >= thr:
        raise ConfigInvalid(f"lower percent({lower}) should less than threshold percent({thr})")
    if t.evict_enabled_priority_threshold is None:
        raise ConfigInvalid("EvictEnabledPriorityThreshold not config")


# --- BECPUEvict: satisfaction ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BECPUSample:
    """BE CPU in milli-cores over a query window (average or last), with the sample count."""

    count: int
    usage: float
    request: float
    real_limit: float


def be_milli_allocatable(node: Mapping[str, Any] | None) -> float:
    """Node allocatable ``kubernetes.io/batch-cpu`` (milli-cores); -1 when missing or negative, and 1 when
    zero so the usage check still works when batch capacity was taken away (``getBEMilliAllocatable``)."""
    status = (node or {}).get("status") or {}
    alloc = status.get("allocatable")
    if alloc is None:
        return -1
    values = parse_resource_list(alloc, path="Node.status.allocatable")
    if BATCH_CPU not in values or values[BATCH_CPU] < 0:
        return -1
    if values[BATCH_CPU] == 0:
        return DEFAULT_MIN_ALLOCATABLE_BATCH_MILLI_CPU
    return float(values[BATCH_CPU])


def is_be_cpu_usage_high_enough(usage: float, limit: float, threshold_percent: int | None) -> bool:
    """BE uses (nearly) all it may: limit <= 0 -> no; limit < 1 core -> yes; else usage/limit >= threshold."""
    if limit <= 0:
        return False
    if limit < 1000:
        return True
    thr = threshold_percent if threshold_percent is not None else BE_CPU_USAGE_THRESHOLD_PERCENT
    return usage / limit >= thr / 100


def release_by_satisfaction(request: float, limit: float, t: ResourceThresholdStrategy) -> int:
    """Milli-cores of BE requests to release so satisfaction (limit/request) returns to the upper percent;
    0 while satisfaction is above the lower percent (``calculateResourceMilliToReleaseBySatisfaction``)."""
    if request <= 0:
        return 0
    lower = t.cpu_evict_be_satisfaction_lower_percent or 0
    upper = t.cpu_evict_be_satisfaction_upper_percent or 0
    satisfaction = limit / request
    if satisfaction > lower / 100:
        return 0
    gap = upper / 100 - satisfaction
    if gap <= 0:
        return 0
    return int(request * gap)


def is_avg_query_result_valid(window_seconds: int, interval_seconds: int, count: int) -> bool:
    """Enough samples to trust an average: ``count x interval >= window / 3``."""
    return count * interval_seconds >= window_seconds // 3


def milli_release_by_be_satisfaction(
    t: ResourceThresholdStrategy,
    avg: BECPUSample,
    current: BECPUSample | None,
    allocatable_milli: float,
    *,
    window_seconds: int,
    interval_seconds: int,
) -> int:
    """Batch-cpu milli-cores to release (``calculateMilliReleaseByBESatisfaction``): the average over the
    window must ask for a release *and* the current values must too; the smaller wins (the current request
    and limit usually equal the average, then the average result stands)."""
    by_allocatable = t.cpu_evict_policy is CPUEvictPolicy.EVICT_BY_ALLOCATABLE
    avg_limit = allocatable_milli if by_allocatable else avg.real_limit
    if not is_avg_query_result_valid(window_seconds, interval_seconds, avg.count):
        return 0
    if not is_be_cpu_usage_high_enough(avg.usage, avg_limit, t.cpu_evict_be_usage_threshold_percent):
        return 0
    release = release_by_satisfaction(avg.request, avg_limit, t)
    if release <= 0:
        return 0
    cur = current or BECPUSample(0, 0.0, 0.0, 0.0)
    cur_limit = allocatable_milli if by_allocatable else cur.real_limit
    if not is_be_cpu_usage_high_enough(cur.usage, cur_limit, t.cpu_evict_be_usage_threshold_percent):
        return 0
    if cur.request == avg.request and cur_limit == avg_limit:
        return release
    by_current = release_by_satisfaction(cur.request, cur_limit, t)
    if by_current <= 0:
        return 0
    return min(release, by_current)


def pod_batch_milli_cpu_request(meta: PodMeta) -> int:
    """Σ positive batch-cpu requests of app and sidecar containers."""
    return sum(
        max(c.requests.get(BATCH_CPU, 0), 0) for c in meta.pod.containers if c.kind in ("app", "sidecar")
    )


def be_pod_evict_infos(
    pods: Sequence[PodMeta], pod_cpu_used: Mapping[str, float], feature: str
) -> list[PodEvictInfo]:
    """BE pods (by label) the feature may evict, ordered: lower priority first when both have one and they
    differ, else the higher used/requested CPU first (``getBEPodEvictInfoAndSort``)."""
    infos = []
    for meta in pods:
        if meta.raw_qos is not QoSClass.BE or not eviction_policy_allowed(feature, meta.pod):
            continue
        info = PodEvictInfo(pod=meta)
        if meta.uid in pod_cpu_used:
            info.milli_cpu_used = int(pod_cpu_used[meta.uid] * 1000)
        info.milli_cpu_request = pod_batch_milli_cpu_request(meta)
        if info.milli_cpu_request > 0:
            info.cpu_usage = info.milli_cpu_used / info.milli_cpu_request
        infos.append(info)

    def less(a: PodEvictInfo, b: PodEvictInfo) -> bool:
        pa, pb = a.pod.pod.priority, b.pod.pod.priority
        if pa is None or pb is None or pa == pb:
            return a.cpu_usage > b.cpu_usage
        return pa < pb

    return sort_by_less(infos, less)


# --- CPUEvict: node usage -----------------------------------------------------------------------------


def milli_release_by_used_threshold(
    t: ResourceThresholdStrategy, capacity_milli: int, node_used_cores: float
) -> int:
    """CPU milli-cores to release (``calculateMilliReleaseByUsedThresholdPercent``)::

    usage% = int(used x 1000) x 100 // capacity; release = capacity x (usage% - lower) // 100
    """
    return release_by_used_percent(
        capacity_milli, int(node_used_cores * 1000), t.cpu_evict_threshold_percent, t.cpu_evict_lower_percent
    )


# --- CPUAllocatableEvict ---------------------------------------------------------------------------------


def milli_release_by_allocatable(
    t: ResourceThresholdStrategy, node: Mapping[str, Any] | None, pods: Sequence[PodMeta]
) -> dict[str, int]:
    """Per class resource (cpu, batch-cpu, mid-cpu), what pods up to the priority threshold requested beyond
    ``lower%`` of the node's allocatable, once above ``threshold%``; everything when the node has none
    (``calculateMilliReleaseByAllocatableThresholdPercent``)."""
    return release_by_allocatable(t, node, pods, CPU)
