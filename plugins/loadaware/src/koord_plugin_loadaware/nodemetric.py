"""Reading a ``NodeMetric`` (slo.koordinator.sh/v1alpha1) into the vectors the assign cache needs.

koordlet reports, per node: the instant node usage, percentile aggregates over windows, system usage, and
the usage of each pod with its priority class. The plugin parses the object once per update into a
``MetricReport`` and never touches the dict again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import parse_resource_list
from koord_framework.cluster.clock import parse_time
from koord_framework.config.common import DurationError, parse_duration_ns
from koord_plugin_loadaware.vectors import Vec, Vectorizer

__all__ = ["DEFAULT_REPORT_INTERVAL_SECONDS", "MetricReport", "NodeMetricError", "parse_node_metric"]

DEFAULT_REPORT_INTERVAL_SECONDS: Final = 60.0
"""koordlet's default NodeMetric report interval, assumed when the spec does not say."""
PRIORITY_PROD: Final = "koord-prod"

AggKey = tuple[str, int]
"""(aggregation type, window in nanoseconds); window 0 means the longest window the node reports."""


class NodeMetricError(ValueError):
    """A NodeMetric that cannot be read (bad quantity, duration or timestamp); names the field."""


@dataclass(frozen=True, slots=True)
class MetricReport:
    """What LoadAwareScheduling uses of one NodeMetric."""

    name: str
    update_time: float | None
    """``status.updateTime`` (epoch seconds); None when koordlet never reported."""
    report_interval: float
    """``spec.metricCollectPolicy.reportIntervalSeconds`` or 60."""
    has_info: bool
    """``status.nodeMetric`` is present (Filter passes and Score gives 0 without it)."""
    node_usage: Vec | None
    system_usage: Vec | None
    aggregated: Mapping[AggKey, Vec]
    pod_usages: Mapping[str, Vec]
    """Reported usage per ``namespace/name`` (pods reported without usage are left out)."""
    prod_pods: frozenset[str]
    """Pods koordlet reports as ``koord-prod``."""

    def aggregated_usage(self, agg_type: str, window_ns: int) -> Vec | None:
        """Koordinator's ``getTargetAggregatedUsage``: the (type, window) vector; for window 0 with nothing
        reported, the instant node usage."""
        vec = self.aggregated.get((agg_type, window_ns))
        if vec is None and window_ns == 0:
            vec = self.node_usage
        return vec


def _mapping(obj: Any, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _resources(vectorizer: Vectorizer, resource_map: Any, path: str) -> tuple[Vec, bool]:
    """A ``ResourceMap`` (``{resources: {...}}``) as a vector, and whether it listed any resource at all."""
    raw = _mapping(resource_map, "resources") if isinstance(resource_map, Mapping) else {}
    try:
        parsed = parse_resource_list(raw, path=f"{path}.resources")
    except QuantityError as err:
        raise NodeMetricError(str(err)) from err
    return vectorizer.to_vec(parsed), bool(parsed)


def parse_node_metric(obj: Mapping[str, Any], vectorizer: Vectorizer) -> MetricReport:
    meta = _mapping(obj, "metadata")
    spec = _mapping(obj, "spec")
    status = _mapping(obj, "status")
    name = str(meta.get("name") or "")
    try:
        update_time = parse_time(status.get("updateTime"))
    except (TypeError, ValueError) as err:
        raise NodeMetricError(f"status.updateTime: {err}") from err
    interval_raw = _mapping(spec, "metricCollectPolicy").get("reportIntervalSeconds")
    if interval_raw is None:
        report_interval = DEFAULT_REPORT_INTERVAL_SECONDS
    elif isinstance(interval_raw, int) and not isinstance(interval_raw, bool):
        report_interval = float(interval_raw)
    else:
        raise NodeMetricError(
            f"spec.metricCollectPolicy.reportIntervalSeconds: not an integer: {interval_raw!r}"
        )

    info = status.get("nodeMetric")
    node_usage: Vec | None = None
    system_usage: Vec | None = None
    aggregated: dict[AggKey, Vec] = {}
    if isinstance(info, Mapping):
        node_usage, _ = _resources(vectorizer, info.get("nodeUsage"), "status.nodeMetric.nodeUsage")
        system_usage, _ = _resources(vectorizer, info.get("systemUsage"), "status.nodeMetric.systemUsage")
        longest: dict[str, int] = {}
        for i, entry in enumerate(info.get("aggregatedNodeUsages") or ()):
            path = f"status.nodeMetric.aggregatedNodeUsages[{i}]"
            window = _window_ns(entry, path)
            for agg_type, usage in _mapping(entry, "usage").items():
                vec, listed = _resources(vectorizer, usage, f"{path}.usage.{agg_type}")
                if not listed:
                    continue
                aggregated[(str(agg_type), window)] = vec
                if window > longest.get(agg_type, 0):
                    longest[agg_type] = window
        for agg_type, window in longest.items():
            aggregated[(agg_type, 0)] = aggregated[(agg_type, window)]

    pod_usages: dict[str, Vec] = {}
    prod: set[str] = set()
    for i, pod in enumerate(status.get("podsMetric") or ()):
        if not isinstance(pod, Mapping):
            continue
        vec, listed = _resources(vectorizer, pod.get("podUsage"), f"status.podsMetric[{i}].podUsage")
        if not listed:
            continue
        key = f"{pod.get('namespace') or ''}/{pod.get('name') or ''}"
        pod_usages[key] = vec
        if pod.get("priority") == PRIORITY_PROD:
            prod.add(key)

    return MetricReport(
        name=name,
        update_time=update_time,
        report_interval=report_interval,
        has_info=isinstance(info, Mapping),
        node_usage=node_usage,
        system_usage=system_usage,
        aggregated=aggregated,
        pod_usages=pod_usages,
        prod_pods=frozenset(prod),
    )


def _window_ns(entry: Any, path: str) -> int:
    raw = entry.get("duration") if isinstance(entry, Mapping) else None
    if raw is None or raw == "":
        return 0
    if not isinstance(raw, str):
        raise NodeMetricError(f"{path}.duration: not a duration string: {raw!r}")
    try:
        return parse_duration_ns(raw)
    except DurationError as err:
        raise NodeMetricError(f"{path}.duration: {err}") from err
