"""``BECPUEvict``: evict pods to give CPU back (Koordinator's ``cpuEvictor``).

Each tick, unless within ``coolTimeSeconds`` of the last eviction (also right after start, as upstream), the
configured triggers run in Koordinator's order -- ``BECPUEvict``, ``CPUAllocatableEvict``, ``CPUEvict`` --
each building a task (what to release, the candidates in order) from the NodeSLO thresholds and the metric
cache; then ``kill_and_evict_pods`` evicts through the cluster's Eviction API until the tasks are met. A
trigger whose thresholds are not configured is skipped with the reason in the decision journal. That round
and the ``CPUAllocatableEvict`` task are the framework's ``ThresholdEvictStrategy``, shared with memory.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from koord_lib_evictpolicy.evict_policy import (
    EvictResource,
    ThresholdEvictStrategy,
    priority_evict_infos,
)
from pydantic import Field

from koord_framework.api.resources import BATCH_CPU, CPU
from koord_framework.koordlet.eviction import EVICT_REASON_PREFIX, EvictTask, ReleaseTarget
from koord_framework.koordlet.metrics.cache import MetricKind, Window
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.qos import IntervalArgs, QOSContext
from koord_framework.koordlet.states import NodeState
from koord_framework.plugin import PluginArgs
from koord_plugin_cpuevict.policy import (
    BECPUSample,
    be_milli_allocatable,
    be_pod_evict_infos,
    check_satisfaction_config,
    check_used_threshold_config,
    milli_release_by_be_satisfaction,
    milli_release_by_used_threshold,
    pod_batch_milli_cpu_request,
)

Trigger = Literal["BECPUEvict", "CPUAllocatableEvict", "CPUEvict"]
TRIGGER_ORDER: tuple[Trigger, ...] = ("BECPUEvict", "CPUAllocatableEvict", "CPUEvict")
DEFAULT_TRIGGERS: tuple[Trigger, ...] = ("BECPUEvict",)


class BECPUEvictArgs(IntervalArgs):
    """Args of ``BECPUEvict``. Thresholds come from the node's NodeSLO (``resourceUsedThresholdWithBE``)."""

    cool_time_seconds: float = Field(default=20.0, ge=0)
    """No eviction within this many seconds of the previous one, nor right after start
    (``--cpu-evict-cool-time-seconds``)."""
    triggers: list[Trigger] = Field(default_factory=lambda: list(DEFAULT_TRIGGERS), min_length=1)
    """Which of Koordinator's CPU eviction features run (they run in the order BECPUEvict,
    CPUAllocatableEvict, CPUEvict whatever the order here); the feature gates ``BECPUEvict``,
    ``CPUAllocatableEvict`` and ``CPUEvict``."""


def _sample(w: Window, last: bool = False) -> tuple[float, int]:
    if not w:
        return 0.0, 0
    return (w.last() if last else w.avg()), w.count


class BECPUEvict(ThresholdEvictStrategy[Trigger, BECPUEvictArgs]):
    """Evict BE pods starved of CPU, and (opt-in) pods over the CPU allocatable or usage thresholds."""

    name: ClassVar[str] = "BECPUEvict"
    Args: ClassVar[type[PluginArgs]] = BECPUEvictArgs
    feature: ClassVar[str] = "BECPUEvict"
    resource: ClassVar[EvictResource] = CPU
    pod_usage_metric: ClassVar[MetricKind] = MetricKind.POD_CPU_USAGE

    def __init__(self, args: BECPUEvictArgs, context: QOSContext) -> None:
        super().__init__(
            args,
            context,
            triggers=[t for t in TRIGGER_ORDER if t in args.triggers],
            cool_time_seconds=args.cool_time_seconds,
            # Upstream starts the cool time at construction: no eviction right after the agent starts.
            last_evict_time=context.clock.now(),
        )

    def build_task(
        self, trigger: Trigger, t: ResourceThresholdStrategy, state: NodeState, capacity: int, now: float
    ) -> EvictTask | None:
        if trigger == "CPUAllocatableEvict":
            return self.allocatable_task(trigger, t, state, now)
        reason = EVICT_REASON_PREFIX + trigger
        if trigger == "BECPUEvict":
            check_satisfaction_config(t)
            release = self.be_satisfaction_release(t, state, now)
            if release <= 0:
                return None
            return EvictTask(
                reason,
                be_pod_evict_infos(state.pods, self.pod_usage(state, now), trigger),
                ReleaseTarget.RESOURCE_REQUEST,
                {BATCH_CPU: release},
                lambda info: {BATCH_CPU: pod_batch_milli_cpu_request(info.pod)},
            )
        check_used_threshold_config(t)
        interval = self.context.collect_interval_seconds
        window = max(int(interval), t.cpu_evict_time_window_seconds or 0)
        w = self.context.metrics.query(MetricKind.NODE_CPU_USAGE, now - window, now)
        if not w:
            self.decide("CPUEvict: skipped, no node cpu samples")
            return None
        release = milli_release_by_used_threshold(t, capacity, w.avg())
        if release <= 0:
            return None
        assert t.evict_enabled_priority_threshold is not None
        infos = priority_evict_infos(
            state.pods,
            trigger,
            t.evict_enabled_priority_threshold,
            self.pod_usage(state, now),
            CPU,
            by_request=False,
        )
        return EvictTask(
            reason, infos, ReleaseTarget.RESOURCE_USED, {CPU: release}, lambda i: {CPU: i.milli_cpu_used}
        )

    def be_satisfaction_release(self, t: ResourceThresholdStrategy, state: NodeState, now: float) -> int:
        """Query the BE cpu metrics (average over the window, last value) and compute the release."""
        ctx = self.context
        # Deliberately at least 1 s: upstream truncates a sub-second interval to 0, which makes the sample
        # count check fail for any window >= 3 s and so disables the trigger (see README).
        interval = int(ctx.collect_interval_seconds) or 1
        window = max(interval, t.cpu_evict_time_window_seconds or 0)
        m = ctx.metrics

        def sample(start: float, last: bool) -> BECPUSample:
            usage, c1 = _sample(m.query(MetricKind.BE_CPU_USAGE, start, now), last)
            request, c2 = _sample(m.query(MetricKind.BE_CPU_REQUEST, start, now), last)
            limit, c3 = _sample(m.query(MetricKind.BE_CPU_REAL_LIMIT, start, now), last)
            return BECPUSample(min(c1, c2, c3), usage, request, limit)

        avg = sample(now - window, last=False)
        current = sample(now - 2 * ctx.collect_interval_seconds, last=True)
        release = milli_release_by_be_satisfaction(
            t,
            avg,
            current,
            be_milli_allocatable(state.node_manifest),
            window_seconds=window,
            interval_seconds=interval,
        )
        details: dict[str, Any] = {
            "avg": avg.__repr__(),
            "current": current.__repr__(),
            "releaseMilli": release,
        }
        if release > 0:
            self.decide("BECPUEvict: BE cpu satisfaction too low", **details)
        return release
