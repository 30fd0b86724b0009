"""Metrics of the node agent: the cache of recent samples, the collector filling it, the NodeMetric report."""

from koord_framework.koordlet.metrics.cache import Aggregation, MetricCache, MetricKind, Window
from koord_framework.koordlet.metrics.collector import NODE_CPU_INFO_KEY, CollectResult, ResourceCollector
from koord_framework.koordlet.metrics.reporter import NodeMetricReporter

__all__ = [
    "NODE_CPU_INFO_KEY",
    "Aggregation",
    "CollectResult",
    "MetricCache",
    "MetricKind",
    "NodeMetricReporter",
    "ResourceCollector",
    "Window",
]
