"""Prometheus metrics of LoadAwareScheduling, registered on the handle's registry (never the global one).

The names, types and meanings are in ``METRIC_DOCS`` (and the README's Metrics section).

Gauges are computed when scraped, from the plugin's columns, so keeping them costs nothing per pod.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["METRIC_DOCS", "Collectors", "LoadAwareMetrics", "Reason", "build_collectors"]


class Reason:
    """Values of the ``reason`` label (``resource`` is empty for an expired NodeMetric)."""

    USAGE: Final = "usage_exceed_threshold"
    AGGREGATED_USAGE: Final = "aggregated_usage_exceed_threshold"
    NODE_METRIC_EXPIRED: Final = "node_metric_expired"


METRIC_DOCS: Final = {
    "koord_scheduler_loadaware_filter_rejections_total": (
        "counter",
        "profile, reason, resource",
        "Nodes LoadAwareScheduling's Filter rejected, by reason (usage_exceed_threshold, "
        "aggregated_usage_exceed_threshold, node_metric_expired) and resource.",
    ),
    "koord_scheduler_loadaware_nodemetric_staleness_seconds": (
        "gauge",
        "profile",
        "Age of the oldest NodeMetric report among nodes that have one (0 when none).",
    ),
    "koord_scheduler_loadaware_nodemetric_expired_nodes": (
        "gauge",
        "profile",
        "Nodes whose NodeMetric is older than nodeMetricExpirationSeconds or was never updated.",
    ),
    "koord_scheduler_loadaware_nodes_without_nodemetric": (
        "gauge",
        "profile",
        "Schedulable nodes with no NodeMetric (they pass Filter and score 0).",
    ),
    "koord_scheduler_loadaware_assigned_pods": (
        "gauge",
        "profile",
        "Pods in the assign cache (bound or reserved) whose usage the plugin estimates.",
    ),
    "koord_scheduler_loadaware_nodemetric_errors_total": (
        "counter",
        "profile",
        "NodeMetric objects that could not be read (the node is then treated as having no NodeMetric).",
    ),
}


@dataclass(frozen=True)
class Collectors:
    """The plugin's Prometheus collectors of one registry."""

    rejections: Counter
    staleness: Gauge
    expired: Gauge
    without: Gauge
    assigned: Gauge
    errors: Counter


def _doc(name: str) -> str:
    return METRIC_DOCS[name][2]


def build_collectors(registry: CollectorRegistry) -> Collectors:
    """The collectors on ``registry``; build them once per registry (two profiles in one scheduler share
    them, told apart by ``profile``): the plugin keeps them in its handle's component-wide slot."""
    p = "koord_scheduler_loadaware_"
    return Collectors(
        rejections=Counter(
            p + "filter_rejections",
            _doc(p + "filter_rejections_total"),
            ["profile", "reason", "resource"],
            registry=registry,
        ),
        staleness=Gauge(
            p + "nodemetric_staleness_seconds",
            _doc(p + "nodemetric_staleness_seconds"),
            ["profile"],
            registry=registry,
        ),
        expired=Gauge(
            p + "nodemetric_expired_nodes",
            _doc(p + "nodemetric_expired_nodes"),
            ["profile"],
            registry=registry,
        ),
        without=Gauge(
            p + "nodes_without_nodemetric",
            _doc(p + "nodes_without_nodemetric"),
            ["profile"],
            registry=registry,
        ),
        assigned=Gauge(p + "assigned_pods", _doc(p + "assigned_pods"), ["profile"], registry=registry),
        errors=Counter(
            p + "nodemetric_errors", _doc(p + "nodemetric_errors_total"), ["profile"], registry=registry
        ),
    )


class LoadAwareMetrics:
    """The metrics one plugin instance reports, bound to its profile name."""

    def __init__(
        self,
        collectors: Collectors,
        profile: str,
        staleness: Callable[[], float],
        expired: Callable[[], float],
        without: Callable[[], float],
        assigned: Callable[[], float],
    ) -> None:
        c = collectors
        self._rejections = c.rejections
        self._profile = profile
        self._children: dict[tuple[str, str], Any] = {}
        """Labelled children, looked up once (``labels()`` costs more than the increment)."""
        self._errors = c.errors.labels(profile=profile)
        c.staleness.labels(profile=profile).set_function(staleness)
        c.expired.labels(profile=profile).set_function(expired)
        c.without.labels(profile=profile).set_function(without)
        c.assigned.labels(profile=profile).set_function(assigned)

    def rejected(self, reason: str, resource: str = "", count: int = 1) -> None:
        if not count:
            return
        child = self._children.get((reason, resource))
        if child is None:
            child = self._rejections.labels(profile=self._profile, reason=reason, resource=resource)
            self._children[(reason, resource)] = child
        child.inc(count)

    def metric_error(self) -> None:
        self._errors.inc()


def weak_call(obj: object, method: str, default: float = 0.0) -> Callable[[], float]:
    """A scrape callback that does not keep the plugin alive (a dead plugin reads as ``default``)."""
    ref = weakref.ref(obj)

    def call() -> float:
        target = ref()
        return float(getattr(target, method)()) if target is not None else default

    return call
