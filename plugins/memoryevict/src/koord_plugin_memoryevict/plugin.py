"""``BEMemoryEvict``: evict pods when the node runs short of memory (Koordinator's ``memoryEvictor``).

Each tick, unless within ``coolTimeSeconds`` (4 s) of the last eviction, the configured triggers run in
Koordinator's order -- ``BEMemoryEvict``, ``MemoryAllocatableEvict``, ``MemoryEvict`` -- and
``kill_and_evict_pods`` evicts through the cluster's Eviction API until the released memory covers the gap.
Unlike CPU eviction there is no cool time right after start (upstream starts from the zero time).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from koord_framework.api.qos import priority_class_with_default
from koord_framework.api.resources import MEMORY
from koord_framework.koordlet.eviction import (
    EVICT_REASON_PREFIX,
    EvictTask,
    PodEvictInfo,
    ReleaseTarget,
    kill_and_evict_pods,
    request_from_pod,
    task_remaining,
)
from koord_framework.koordlet.helpers import collect_pod_metrics_last, node_status_resources
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.qos import IntervalArgs, QOSContext, QOSStrategy
from koord_framework.koordlet.states import NodeState
from koord_framework.plugin import PluginArgs
from koord_plugin_memoryevict.policy import (
    ConfigInvalid,
    be_pod_evict_infos,
    check_allocatable_config,
    check_used_threshold_config,
    priority_evict_infos,
    release_by_allocatable,
    release_by_used_threshold,
    released_classes,
)

Trigger = Literal["BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict"]
TRIGGER_ORDER: tuple[Trigger, ...] = ("BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict")
DEFAULT_TRIGGERS: tuple[Trigger, ...] = ("BEMemoryEvict",)


class BEMemoryEvictArgs(IntervalArgs):
    """Args of ``BEMemoryEvict``. Thresholds come from the NodeSLO (``resourceUsedThresholdWithBE``)."""

    cool_time_seconds: float = Field(default=4.0, ge=0)
    """No eviction within this many seconds of the previous one (``--memory-evict-cool-time-seconds``)."""
    triggers: list[Trigger] = Field(default_factory=lambda: list(DEFAULT_TRIGGERS), min_length=1)
    """Which of Koordinator's memory eviction features run (always in the order BEMemoryEvict,
    MemoryAllocatableEvict, MemoryEvict): the feature gates of the same names."""


class BEMemoryEvict(QOSStrategy):
    """Evict BE pods (and, opt-in, low-priority pods) when node memory usage or requests run high."""

    name: ClassVar[str] = "BEMemoryEvict"
    Args: ClassVar[type[PluginArgs]] = BEMemoryEvictArgs
    feature: ClassVar[str] = "BEMemoryEvict"

    def __init__(self, args: PluginArgs, context: QOSContext) -> None:
        super().__init__(args, context)
        assert isinstance(args, BEMemoryEvictArgs)
        self.cool_time = args.cool_time_seconds
        self.triggers = [t for t in TRIGGER_ORDER if t in args.triggers]
        self.last_evict_time = float("-inf")

    def tick(self, now: float) -> None:
        if now < self.last_evict_time + self.cool_time:
            return
        state = self.context.state
        slo, node = state.node_slo, state.node_manifest
        if slo is None or node is None:
            self.decide("skipped: no node or NodeSLO yet")
            return
        capacity = node_status_resources(node).get(MEMORY, 0)
        if capacity <= 0:
            self.decide(f"skipped: node memory capacity {capacity} is not valid")
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

    def build_task(
        self, trigger: Trigger, t: ResourceThresholdStrategy, state: NodeState, capacity: int, now: float
    ) -> EvictTask | None:
        ctx = self.context
        interval = ctx.collect_interval_seconds
        reason = EVICT_REASON_PREFIX + trigger
        if trigger in ("BEMemoryEvict", "MemoryEvict"):
            check_used_threshold_config(t, needs_priority=trigger == "MemoryEvict")
            used = ctx.metrics.last(MetricKind.NODE_MEMORY_USAGE, now, 2 * interval)
            if used is None:
                self.decide(f"{trigger}: skipped, no recent node memory sample")
                return None
            release = release_by_used_threshold(t, capacity, used)
            if release <= 0:
                return None
            pod_used = collect_pod_metrics_last(
                ctx.metrics, MetricKind.POD_MEMORY_USAGE, state.pods, now, interval
            )
            if trigger == "BEMemoryEvict":
                infos = be_pod_evict_infos(state.pods, pod_used, trigger)
            else:
                assert t.evict_enabled_priority_threshold is not None
                infos = priority_evict_infos(
                    state.pods, trigger, t.evict_enabled_priority_threshold, pod_used, by_request=False
                )
            self.decide(
                f"{trigger}: node memory {int(used)} of {capacity} bytes is over the threshold",
                releaseBytes=release,
            )
            return EvictTask(
                reason,
                infos,
                ReleaseTarget.RESOURCE_USED,
                {MEMORY: release},
                lambda i: {MEMORY: i.memory_used},
            )
        check_allocatable_config(t)
        to_release = release_by_allocatable(t, state.node_manifest, state.pods)
        if not to_release:
            return None
        classes = released_classes(to_release)
        pod_used = collect_pod_metrics_last(
            ctx.metrics, MetricKind.POD_MEMORY_USAGE, state.pods, now, interval
        )
        assert t.allocatable_evict_priority_threshold is not None
        infos = priority_evict_infos(
            state.pods, trigger, t.allocatable_evict_priority_threshold, pod_used, by_request=True
        )

        def pod_resource(info: PodEvictInfo) -> dict[str, int] | None:
            if priority_class_with_default(info.pod.manifest) not in classes:
                return None
            return request_from_pod(info.pod, MEMORY)

        return EvictTask(reason, infos, ReleaseTarget.RESOURCE_REQUEST, to_release, pod_resource)
