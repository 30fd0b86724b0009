"""``BEMemoryEvict``: evict pods when the node runs short of memory (Koordinator's ``memoryEvictor``).

Each tick, unless within ``coolTimeSeconds`` (4 s) of the last eviction, the configured triggers run in
Koordinator's order -- ``BEMemoryEvict``, ``MemoryAllocatableEvict``, ``MemoryEvict`` -- and
``kill_and_evict_pods`` evicts through the cluster's Eviction API until the released memory covers the gap.
Unlike CPU eviction there is no cool time right after start (upstream starts from the zero time). That round
and the ``MemoryAllocatableEvict`` task are the framework's ``ThresholdEvictStrategy``, shared with CPU.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from koord_lib_evictpolicy.evict_policy import (
    EvictResource,
    ThresholdEvictStrategy,
    priority_evict_infos,
)
from pydantic import Field

from koord_framework.api.resources import MEMORY
from koord_framework.koordlet.eviction import EVICT_REASON_PREFIX, EvictTask, ReleaseTarget
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.qos import IntervalArgs, QOSContext
from koord_framework.koordlet.states import NodeState
from koord_framework.plugin import PluginArgs
from koord_plugin_memoryevict.policy import (
    be_pod_evict_infos,
    check_used_threshold_config,
    release_by_used_threshold,
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


class BEMemoryEvict(ThresholdEvictStrategy[Trigger, BEMemoryEvictArgs]):
    """Evict BE pods (and, opt-in, low-priority pods) when node memory usage or requests run high."""

    name: ClassVar[str] = "BEMemoryEvict"
    Args: ClassVar[type[PluginArgs]] = BEMemoryEvictArgs
    feature: ClassVar[str] = "BEMemoryEvict"
    resource: ClassVar[EvictResource] = MEMORY
    pod_usage_metric: ClassVar[MetricKind] = MetricKind.POD_MEMORY_USAGE

    def __init__(self, args: BEMemoryEvictArgs, context: QOSContext) -> None:
        super().__init__(
            args,
            context,
            triggers=[t for t in TRIGGER_ORDER if t in args.triggers],
            cool_time_seconds=args.cool_time_seconds,
            last_evict_time=float("-inf"),
        )

    def build_task(
        self, trigger: Trigger, t: ResourceThresholdStrategy, state: NodeState, capacity: int, now: float
    ) -> EvictTask | None:
        if trigger == "MemoryAllocatableEvict":
            return self.allocatable_task(trigger, t, state, now)
        check_used_threshold_config(t, needs_priority=trigger == "MemoryEvict")
        used = self.context.metrics.last(
            MetricKind.NODE_MEMORY_USAGE, now, 2 * self.context.collect_interval_seconds
        )
        if used is None:
            self.decide(f"{trigger}: skipped, no recent node memory sample")
            return None
        release = release_by_used_threshold(t, capacity, used)
        if release <= 0:
            return None
        pod_used = self.pod_usage(state, now)
        if trigger == "BEMemoryEvict":
            infos = be_pod_evict_infos(state.pods, pod_used, trigger)
        else:
            assert t.evict_enabled_priority_threshold is not None
            infos = priority_evict_infos(
                state.pods, trigger, t.evict_enabled_priority_threshold, pod_used, MEMORY, by_request=False
            )
        self.decide(
            f"{trigger}: node memory {int(used)} of {capacity} bytes is over the threshold",
            releaseBytes=release,
        )
        return EvictTask(
            EVICT_REASON_PREFIX + trigger,
            infos,
            ReleaseTarget.RESOURCE_USED,
            {MEMORY: release},
            lambda i: {MEMORY: i.memory_used},
        )
