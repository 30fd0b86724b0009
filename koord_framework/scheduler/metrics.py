"""The scheduler's Prometheus metrics, on a registry the caller owns (never the global ``REGISTRY``).

Names follow kube-scheduler's with a ``koord_`` prefix. Timing must not cost more than it measures, so:

* per-plugin durations are recorded only in *sampled* cycles (every ``sample_every``-th cycle, 10% by default,
  as kube-scheduler samples ``pluginMetricsSamplePercent``), and a per-node plugin is timed once per phase
  (all its nodes together) rather than once per node;
* labelled children are looked up once and cached, so an observation is one dict lookup and one
  ``observe``;
* queue lengths are read at scrape time by a collector, costing nothing while scheduling.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    return tuple(start * factor**i for i in range(count))


PLUGIN_DURATION = "koord_scheduler_plugin_duration_seconds"
EXTENSION_POINT_DURATION = "koord_scheduler_framework_extension_point_duration_seconds"
SCHEDULE_ATTEMPTS = "koord_scheduler_schedule_attempts_total"
ATTEMPT_DURATION = "koord_scheduler_scheduling_attempt_duration_seconds"
PERMIT_WAIT_DURATION = "koord_scheduler_permit_wait_duration_seconds"
PREEMPTION_ATTEMPTS = "koord_scheduler_preemption_attempts_total"
PENDING_PODS = "koord_scheduler_pending_pods"


class _PendingPodsCollector:
    """Reports queue lengths when scraped; the scheduler installs the function that reads them."""

    def __init__(self) -> None:
        self.source: Callable[[], Mapping[str, int]] | None = None

    def collect(self) -> list[Any]:
        family = GaugeMetricFamily(
            PENDING_PODS, "Number of pending pods, by the queue type.", labels=["queue"]
        )
        if self.source is not None:
            for queue, n in sorted(self.source().items()):
                family.add_metric([queue], float(n))
        return [family]

    def describe(self) -> list[Any]:
        return []


class SchedulerMetrics:
    """All scheduler metrics of one scheduler instance."""

    def __init__(self, registry: CollectorRegistry | None = None, *, sample_every: int = 10) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.sample_every = max(1, sample_every)
        r = self.registry
        self.plugin_duration = Histogram(
            PLUGIN_DURATION,
            "Duration for running a plugin at a specific extension point (sampled cycles).",
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20),
            registry=r,
        )
        self.extension_point_duration = Histogram(
            EXTENSION_POINT_DURATION,
            "Latency for running all plugins of a specific extension point (sampled cycles).",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.schedule_attempts = Counter(
            SCHEDULE_ATTEMPTS,
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            ATTEMPT_DURATION,
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=exponential_buckets(0.0001, 2, 16),
            registry=r,
        )
        self.permit_wait_duration = Histogram(
            PERMIT_WAIT_DURATION,
            "Duration of waiting on permit, in seconds of the scheduler's clock.",
            ["result"],
            buckets=exponential_buckets(0.001, 2, 20),
            registry=r,
        )
        self.preemption_attempts = Counter(
            PREEMPTION_ATTEMPTS, "Total preemption attempts in the cluster till now.", registry=r
        )
        self._pending = _PendingPodsCollector()
        r.register(self._pending)
        self._plugin_children: dict[tuple[str, str, str], Any] = {}
        self._point_children: dict[tuple[str, str, str], Any] = {}
        self._attempt_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._cycle = 0

    # --- sampling -----------------------------------------------------------------------------------
    def sample_cycle(self) -> bool:
        """Whether the cycle starting now records plugin timings (deterministic: every n-th cycle)."""
        self._cycle += 1
        return self._cycle % self.sample_every == 0

    # --- observations -------------------------------------------------------------------------------
    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        key = (plugin, point, status)
        child = self._plugin_children.get(key)
        if child is None:
            child = self._plugin_children[key] = self.plugin_duration.labels(plugin, point, status)
        child.observe(seconds)

    def observe_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        key = (point, status, profile)
        child = self._point_children.get(key)
        if child is None:
            child = self._point_children[key] = self.extension_point_duration.labels(point, status, profile)
        child.observe(seconds)

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        key = (result, profile)
        children = self._attempt_children.get(key)
        if children is None:
            children = self._attempt_children[key] = (
                self.schedule_attempts.labels(result, profile),
                self.attempt_duration.labels(result, profile),
            )
        children[0].inc()
        children[1].observe(seconds)

    def set_pending_source(self, source: Callable[[], Mapping[str, int]]) -> None:
        self._pending.source = source
