"""The threshold-eviction machinery the CPU and memory eviction strategies (``BECPUEvict``,
``BEMemoryEvict``) both build on. Koordinator shares the same pieces between its ``cpuevict`` and
``memoryevict`` plugins through ``qosmanager/helpers`` and ``qosmanager/plugins/util``; here they are a
family library (ADR 0005): plugins never import each other, and the framework keeps only what its runtime
calls.

* ``ThresholdEvictStrategy`` -- the round both strategies run: cool time, the configured triggers in
  Koordinator's order (a trigger whose NodeSLO thresholds are invalid is skipped with the reason in the
  decision journal), one ``kill_and_evict_pods`` over all tasks, a journal entry per task. It also builds the
  ``*AllocatableEvict`` task, which is the same for both resources.
* ``release_by_used_percent`` -- the ``*Evict`` release: node usage above ``threshold%`` back to ``lower%``.
* ``release_by_allocatable`` / ``check_allocatable_config`` -- ``*AllocatableEvict``: what pods up to a
  priority requested beyond ``lower%`` of the node's (batch/mid) allocatable.
* ``priority_evict_infos`` -- the candidates of the priority-based triggers, in eviction order.

What differs between the resources (the ``BE*Evict`` trigger, how node usage is sampled, the used-threshold
config messages) stays in the plugins.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar

from koord_framework.api.qos import (
    PriorityClass,
    priority_class_with_default,
    priority_value_with_default,
)
from koord_framework.api.resources import (
    BATCH_CPU,
    BATCH_MEMORY,
    CPU,
    MID_CPU,
    MID_MEMORY,
    parse_resource_list,
)
from koord_framework.koordlet.eviction import (
    EVICT_REASON_PREFIX,
    EvictTask,
    PodEvictInfo,
    ReleaseTarget,
    eviction_policy_allowed,
    kill_and_evict_pods,
    pod_evict_enabled,
    pod_eviction_priority,
    pod_priority_label,
    request_from_pod,
    request_type_and_value,
    sort_by_eviction_order,
    task_remaining,
)
from koord_framework.koordlet.helpers import collect_pod_metrics_last, node_status_resources
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.qos import QOSContext, QOSStrategy
from koord_framework.koordlet.states import NodeState, PodMeta
from koord_framework.plugin import ArgsT

__all__ = [
    "PRIORITY_MID_VALUE_MAX",
    "RELEASE_BUFFER_PERCENT",
    "RESOURCE_CLASS",
    "ConfigInvalid",
    "EvictResource",
    "ThresholdEvictStrategy",
    "check_allocatable_config",
    "lower_percent_or_default",
    "priority_evict_infos",
    "release_by_allocatable",
    "release_by_used_percent",
    "released_classes",
]

EvictResource = Literal["cpu", "memory"]
"""The two resources Koordinator evicts for."""

RELEASE_BUFFER_PERCENT: Final = 2
"""``cpuReleaseBufferPercent`` / ``memoryReleaseBufferPercent``: default lower percent = threshold - 2."""
PRIORITY_MID_VALUE_MAX: Final = 7999
"""``PriorityMidValueMax``: allocatable eviction never reaches koord-prod pods."""

RESOURCE_CLASS: Final = {
    BATCH_CPU: PriorityClass.BATCH,
    BATCH_MEMORY: PriorityClass.BATCH,
    MID_CPU: PriorityClass.MID,
    MID_MEMORY: PriorityClass.MID,
}
"""``ReverseResourceNameMap``: which priority class consumes a batch/mid resource."""


class ConfigInvalid(ValueError):
    """The NodeSLO thresholds do not allow this trigger (the message is Koordinator's)."""


def lower_percent_or_default(lower_percent: int | None, threshold_percent: int) -> int:
    """The ``*EvictLowerPercent`` to release down to; threshold - 2 when unset."""
    return lower_percent if lower_percent is not None else threshold_percent - RELEASE_BUFFER_PERCENT


def release_by_used_percent(
    capacity: int, used: int, threshold_percent: int | None, lower_percent: int | None
) -> int:
    """What to release so node usage, once at or above ``threshold%``, returns to ``lower%``
    (``calculate[Milli]ReleaseByUsedThresholdPercent``; the percent is an integer, as upstream)::

    usage% = used x 100 // capacity; release = capacity x (usage% - lower) // 100
    """
    if threshold_percent is None or capacity <= 0:
        return 0
    usage = used * 100 // capacity
    if usage < threshold_percent:
        return 0
    return capacity * (usage - lower_percent_or_default(lower_percent, threshold_percent)) // 100


# --- *AllocatableEvict -----------------------------------------------------------------------------------


def _allocatable_thresholds(
    t: ResourceThresholdStrategy, resource: EvictResource
) -> tuple[int | None, int | None]:
    if resource == CPU:
        return t.cpu_allocatable_evict_threshold_percent, t.cpu_allocatable_evict_lower_percent
    return t.memory_allocatable_evict_threshold_percent, t.memory_allocatable_evict_lower_percent


def check_allocatable_config(t: ResourceThresholdStrategy | None, resource: EvictResource) -> None:
    """``isAllocatableThresholdConfigValid``: a threshold >= 0, a lower percent below it, and an
    ``allocatableEvictPriorityThreshold`` no higher than koord-mid. Koordinator words the negative-threshold
    error differently for cpu and memory; both are kept verbatim."""
    if t is None:
        raise ConfigInvalid("ResourceThresholdStrategy not config")
    field = "CPU" if resource == CPU else "Memory"
    thr, lower = _allocatable_thresholds(t, resource)
    if thr is None:
        raise ConfigInvalid(f"{field}AllocatableEvictThresholdPercent not config")
    if thr < 0:
        at_least = "should equal or greater than 0" if resource == CPU else "should greater than 0"
        raise ConfigInvalid(f"threshold percent({thr}) {at_least}")
    if lower is None:
        raise ConfigInvalid(f"{field}AllocatableEvictLowerPercent not config")
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


def release_by_allocatable(
    t: ResourceThresholdStrategy,
    node: Mapping[str, Any] | None,
    pods: Sequence[PodMeta],
    resource: EvictResource,
) -> dict[str, int]:
    """Per class resource (``cpu``/``batch-cpu``/``mid-cpu`` or the memory ones), what the pods up to the
    priority threshold requested beyond ``lower%`` of the node's allocatable, once above ``threshold%``;
    everything when the node has none (``calculate[Milli]ReleaseByAllocatableThresholdPercent``)."""
    thr, lower_or_none = _allocatable_thresholds(t, resource)
    lower = lower_or_none or 0
    prio_thr = t.allocatable_evict_priority_threshold
    if thr is None or thr < 0 or prio_thr is None:
        return {}
    requested: dict[str, int] = {}
    for meta in pods:
        if priority_value_with_default(meta.manifest) > prio_thr:
            continue
        for name, value in request_from_pod(meta, resource).items():
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
            # Upstream computes cpu as "request - lower% x allocatable" and memory through the ratio; the
            # two differ in float rounding, so each keeps its own formula.
            if resource == CPU:
                out[name] = int(req - lower / 100 * total)
            else:
                out[name] = int((req / total - lower / 100) * total)
    return out


def released_classes(release: Mapping[str, int]) -> set[PriorityClass]:
    """The priority classes whose batch/mid resources a release names."""
    return {RESOURCE_CLASS[r] for r in release if r in RESOURCE_CLASS}


# --- candidates of the priority-based triggers -----------------------------------------------------------


def _measure(info: PodEvictInfo, resource: EvictResource, *, requested: bool) -> int:
    if resource == CPU:
        return info.milli_cpu_request if requested else info.milli_cpu_used
    return info.memory_request if requested else info.memory_used


def priority_evict_infos(
    pods: Sequence[PodMeta],
    feature: str,
    priority_threshold: int,
    pod_used: Mapping[str, float],
    resource: EvictResource,
    *,
    by_request: bool,
) -> list[PodEvictInfo]:
    """Candidates of ``*Evict``/``*AllocatableEvict`` (``getPodEvictInfoAndSortByPriority``): active, allowed
    by the eviction-policy annotation, priority <= threshold, labelled ``koordinator.sh/eviction-enabled:
    "true"``, with a usage metric; in eviction order, then requested (``by_request``) or used descending.

    The used value is the metric x 1000, as upstream computes it for both resources: cores become
    milli-cores, and memory bytes are counted 1000-fold (so one pod usually covers a memory release)."""
    infos = []
    for meta in pods:
        if not meta.is_active or not eviction_policy_allowed(feature, meta.pod):
            continue
        priority = priority_value_with_default(meta.manifest)
        if priority > priority_threshold or not pod_evict_enabled(meta.pod):
            continue
        if meta.uid not in pod_used:
            continue
        info = PodEvictInfo(
            pod=meta,
            priority=priority,
            eviction_priority=pod_eviction_priority(meta.pod),
            label_priority=pod_priority_label(meta.pod, priority),
        )
        used = int(pod_used[meta.uid] * 1000)
        request = request_type_and_value(meta, resource)[1]
        if resource == CPU:
            info.milli_cpu_used, info.milli_cpu_request = used, request
        else:
            info.memory_used, info.memory_request = used, request
        infos.append(info)
    return sort_by_eviction_order(
        infos,
        lambda a, b: (
            _measure(a, resource, requested=by_request) > _measure(b, resource, requested=by_request)
        ),
    )


# --- the strategy round ----------------------------------------------------------------------------------

TriggerT = TypeVar("TriggerT", bound=str)


class ThresholdEvictStrategy(QOSStrategy[ArgsT], Generic[TriggerT, ArgsT]):
    """Base of the eviction strategies. Subclasses set ``resource`` and ``pod_usage_metric`` and build one
    task per trigger in ``build_task`` (raising ``ConfigInvalid`` when the NodeSLO does not allow it).

    Each tick, unless within the cool time of the last eviction, the triggers run in the order given (the
    plugin passes Koordinator's order), and ``kill_and_evict_pods`` evicts through the cluster's Eviction
    API until the tasks are met; every task's outcome goes to the decision journal."""

    resource: ClassVar[EvictResource]
    """The node capacity that must be valid before any trigger runs."""
    pod_usage_metric: ClassVar[MetricKind]
    """The per-pod usage the priority-based candidates are measured by."""

    def __init__(
        self,
        args: ArgsT,
        context: QOSContext,
        *,
        triggers: Sequence[TriggerT],
        cool_time_seconds: float,
        last_evict_time: float,
    ) -> None:
        super().__init__(args, context)
        self.cool_time = cool_time_seconds
        self.triggers = list(triggers)
        self.last_evict_time = last_evict_time

    @abc.abstractmethod
    def build_task(
        self, trigger: TriggerT, t: ResourceThresholdStrategy, state: NodeState, capacity: int, now: float
    ) -> EvictTask | None:
        """The task of one trigger (``None``: nothing to release); ``capacity`` is the node's ``resource``."""

    def tick(self, now: float) -> None:
        if now - self.last_evict_time < self.cool_time:
            return
        state = self.context.state
        slo, node = state.node_slo, state.node_manifest
        if slo is None or node is None:
            self.decide("skipped: no node or NodeSLO yet")
            return
        capacity = node_status_resources(node).get(self.resource, 0)
        if capacity <= 0:
            self.decide(f"skipped: node {self.resource} capacity {capacity} is not valid")
            return
        tasks: list[EvictTask] = []
        for trigger in self.triggers:
            try:
                task = self.build_task(trigger, slo.threshold, state, capacity, now)
            except ConfigInvalid as err:
                self.decide(f"{trigger}: skipped, invalid config: {err}")
                continue
            if task is not None:
                tasks.append(task)
        if not tasks:
            return
        released, newly = kill_and_evict_pods(self.context.evictor, tasks)
        if newly:
            self.last_evict_time = now
        for task in tasks:
            left = task_remaining(task.to_release, released.get(task.release_target))
            self.decide(
                f"{task.reason}: {'released' if not left else 'could not release all'}",
                toRelease=dict(task.to_release),
                released=dict(released.get(task.release_target, {})),
                remaining=left,
                candidates=[i.pod.key for i in task.sorted_pods],
            )

    def pod_usage(self, state: NodeState, now: float) -> dict[str, float]:
        """The pods' newest ``pod_usage_metric`` samples (uid -> value)."""
        ctx = self.context
        return collect_pod_metrics_last(
            ctx.metrics, self.pod_usage_metric, state.pods, now, ctx.collect_interval_seconds
        )

    def allocatable_task(
        self, trigger: TriggerT, t: ResourceThresholdStrategy, state: NodeState, now: float
    ) -> EvictTask | None:
        """``*AllocatableEvict``: release what pods up to ``allocatableEvictPriorityThreshold`` requested
        beyond the allocatable threshold, largest request first; a pod counts only when its priority class
        is one whose resource is released."""
        check_allocatable_config(t, self.resource)
        to_release = release_by_allocatable(t, state.node_manifest, state.pods, self.resource)
        if not to_release:
            return None
        classes = released_classes(to_release)
        used = self.pod_usage(state, now)
        assert t.allocatable_evict_priority_threshold is not None
        infos = priority_evict_infos(
            state.pods, trigger, t.allocatable_evict_priority_threshold, used, self.resource, by_request=True
        )
        resource = self.resource

        def pod_resource(info: PodEvictInfo) -> dict[str, int] | None:
            if priority_class_with_default(info.pod.manifest) not in classes:
                return None
            return request_from_pod(info.pod, resource)

        return EvictTask(
            EVICT_REASON_PREFIX + trigger, infos, ReleaseTarget.RESOURCE_REQUEST, to_release, pod_resource
        )
