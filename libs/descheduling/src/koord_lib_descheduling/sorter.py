"""Which pod goes first: Koordinator's ``PodSorter`` and usage scorers (``pkg/descheduler/utils/sorter``).

Pods sort ascending by, in order (the first key that differs decides; the first pod is evicted first):

1. Koordinator priority class: free < batch < mid < prod < none
2. ``spec.priority`` (unset = 0)
3. Kubernetes QoS: BestEffort < Burstable < Guaranteed
4. Koordinator QoS: BE < LS < LSR < LSE = SYSTEM < none
5. ``controller.kubernetes.io/pod-deletion-cost`` (invalid or unset = 0)
6. ``scheduling.koordinator.sh/eviction-cost`` (invalid or unset = 0)
7. extra keys given by the caller (LowNodeLoad adds the usage key: pods with a metric first, then the
   higher usage score first)
8. creation time, newest first

Go sorts with ``sort.Sort`` (unstable), so pods equal on every key may come out in any order there; here
the sort is stable (input order breaks ties), which is one of the orders Go may produce.

Resource values are the canonical integers of ``koord_framework.api.resources`` (cpu in milli-cores, the
rest by ``Value()``), which is exactly what Go's ``getResourceValue`` reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from koord_framework.api.constants import ANNOTATION_EVICTION_COST, ANNOTATION_POD_DELETION_COST
from koord_framework.api.objects import PodInfo
from koord_framework.api.qos import KubeQoS, PriorityClass, QoSClass

PRIORITY_CLASS_ORDER: Mapping[PriorityClass, int] = {
    PriorityClass.FREE: 1,
    PriorityClass.BATCH: 2,
    PriorityClass.MID: 3,
    PriorityClass.PROD: 4,
    PriorityClass.NONE: 5,
}
KOORD_QOS_ORDER: Mapping[QoSClass, int] = {
    QoSClass.BE: 1,
    QoSClass.LS: 2,
    QoSClass.LSR: 3,
    QoSClass.LSE: 4,
    QoSClass.SYSTEM: 4,
    QoSClass.NONE: 5,
}
KUBE_QOS_ORDER: Mapping[KubeQoS, int] = {
    KubeQoS.BEST_EFFORT: 1,
    KubeQoS.BURSTABLE: 2,
    KubeQoS.GUARANTEED: 3,
}

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _valid_first_digit(text: str) -> bool:
    # "+10" and "008" are refused like Kubernetes refuses them; "0" and negatives are fine.
    if not text:
        return False
    first = text[0]
    return first == "-" or text == "0" or "1" <= first <= "9"


def parse_cost(annotations: Mapping[str, str], key: str) -> int:
    """An int32 cost annotation, 0 when absent or invalid (``GetDeletionCostFromPodAnnotations``,
    ``GetEvictionCost``: both default to 0 on error)."""
    value = annotations.get(key)
    if value is None or not _valid_first_digit(value):
        return 0
    try:
        number = int(value, 10)
    except ValueError:
        return 0
    if not _INT32_MIN <= number <= _INT32_MAX:
        return 0
    return number


def deletion_cost(pod: PodInfo) -> int:
    return parse_cost(pod.annotations, ANNOTATION_POD_DELETION_COST)


def eviction_cost(pod: PodInfo) -> int:
    return parse_cost(pod.annotations, ANNOTATION_EVICTION_COST)


def base_sort_key(pod: PodInfo) -> tuple[int, int, int, int, int, int]:
    """Keys 1-6 of the PodSorter for one pod."""
    annotations = pod.annotations
    return (
        PRIORITY_CLASS_ORDER[pod.priority_class],
        pod.priority or 0,
        KUBE_QOS_ORDER[pod.kube_qos],
        KOORD_QOS_ORDER[pod.qos_class],
        parse_cost(annotations, ANNOTATION_POD_DELETION_COST) if annotations else 0,
        parse_cost(annotations, ANNOTATION_EVICTION_COST) if annotations else 0,
    )


def newest_first_key(pod: PodInfo) -> float:
    """Key 8: a newer pod sorts first; a pod without a creation time is the oldest (Go's zero time)."""
    created = pod.creation_time
    return -created if created is not None else math.inf


def sort_pods(pods: list[PodInfo], *extra_keys: Callable[[PodInfo], Any]) -> None:
    """Sort ``pods`` in place with the PodSorter, inserting ``extra_keys`` before the creation time."""
    if len(extra_keys) == 1:
        (extra,) = extra_keys
        pods.sort(key=lambda p: (base_sort_key(p), extra(p), newest_first_key(p)))
    else:
        pods.sort(key=lambda p: (base_sort_key(p), tuple(k(p) for k in extra_keys), newest_first_key(p)))


# --- scorers ------------------------------------------------------------------------------------------
def most_requested_score(requested: int, capacity: int) -> int:
    """``mostRequestedScore``: used share of capacity in [0, 1000], integer; 0 when capacity is 0."""
    if capacity == 0:
        return 0
    requested = min(requested, capacity)
    return requested * 1000 // capacity


def resource_usage_score(
    weights: Mapping[str, int], requested: Mapping[str, int], allocatable: Mapping[str, int]
) -> int:
    """``ResourceUsageScorer``: the weighted mean of ``most_requested_score`` over the resources of
    ``requested`` (an unweighted resource counts with weight 0), integer division; 0 when no weight."""
    score = 0
    weight_sum = 0
    for name, used in requested.items():
        weight = weights.get(name, 0)
        score += most_requested_score(used, allocatable.get(name, 0)) * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    # Go divides int64s: truncation toward zero (scores are non-negative unless weights are negative).
    return int(score / weight_sum) if score < 0 else score // weight_sum


def most_requested_score_pod(requested: int, capacity: int) -> float:
    """``mostRequestedScorePod``: the ratio when below 1, else ``1/ratio + 1`` (a pod that alone covers the
    excess scores above every pod that does not, the closer to the excess the better); 0 for capacity 0."""
    if capacity == 0:
        return 0.0
    ratio = requested / capacity
    if ratio >= 1:
        return 1 / ratio + 1
    return ratio


def pod_usage_score(weights: Mapping[str, int], usage: Mapping[str, int], excess: Mapping[str, int]) -> float:
    """``ResourceUsageScorerPod``: weighted mean of ``most_requested_score_pod`` of a pod's metric against
    the node's excess over its thresholds."""
    score = 0.0
    weight_sum = 0
    for name, used in usage.items():
        weight = weights.get(name, 0)
        score += most_requested_score_pod(used, excess.get(name, 0)) * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0.0
    return score / weight_sum


def usage_key(
    pod_metrics: Mapping[str, Mapping[str, int]], excess: Mapping[str, int], weights: Mapping[str, int]
) -> Callable[[PodInfo], tuple[int, float]]:
    """Key 7 for LowNodeLoad (``Reverse(PodUsage)``): pods with a metric before pods without, then the
    higher usage score first."""

    def key(pod: PodInfo) -> tuple[int, float]:
        metric = pod_metrics.get(pod.key)
        if metric is None:
            return (1, 0.0)
        return (0, -pod_usage_score(weights, metric, excess))

    return key


def sort_pods_by_usage(
    excess: Mapping[str, int],
    pods: list[PodInfo],
    pod_metrics: Mapping[str, Mapping[str, int]],
    weights: Mapping[str, int],
) -> None:
    """``SortPodsByUsage``: the PodSorter with the usage key, in place."""
    sort_pods(pods, usage_key(pod_metrics, excess, weights))


def sort_by_score(names: Sequence[str], score: Mapping[str, int], *, ascending: bool) -> list[str]:
    """Names ordered by an integer score (stable), as ``sortNodesByUsage`` orders nodes."""
    return sorted(names, key=lambda n: score[n] if ascending else -score[n])
