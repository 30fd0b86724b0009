"""Writes the node's ``NodeMetric`` status (``slo.koordinator.sh/v1alpha1``) from the metric cache, shaped
exactly as Koordinator's koordlet reports it (``states_nodemetric.go``):

* ``nodeMetric.nodeUsage`` / ``systemUsage``: averages over the aggregate window (``metricCollectPolicy.
  aggregateDurationSeconds``, default 300 s, at least 60 s);
* ``nodeMetric.aggregatedNodeUsages`` / ``aggregatedSystemUsages``: for each duration of
  ``nodeAggregatePolicy.durations`` (default 5m, 10m, 30m) the avg/p50/p90/p95/p99 -- left empty while the
  samples cover less than half the duration (cold start);
* ``podsMetric``: each pod's average usage with its priority and QoS class (with defaults), sorted by
  namespace/name; ``hostApplicationMetric`` likewise;
* ``prodReclaimableMetric`` / ``prodPeakMetric``: what prod pods requested but do not use at their peak,
  and that peak. Koordinator predicts the peak from decaying histograms kept for days; this agent uses the
  same formulas (p95 cpu, p98 memory, +safety margin; cold-start pods count with their request) over the
  samples its cache holds, which is the aggregate window.

CPU is reported in milli-cores (``int(cores * 1000)``), memory in bytes, as quantity strings.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from koord_framework.api import qos as qoslib
from koord_framework.api.constants import ANNOTATION_NODE_RAW_ALLOCATABLE
from koord_framework.api.resources import CPU, MEMORY, format_resource, parse_resource_list
from koord_framework.cluster.clock import format_time
from koord_framework.cluster.port import ClusterPort
from koord_framework.config.common import format_duration_ns
from koord_framework.errors import ClusterError, ConflictError, KoordError, NotFoundError
from koord_framework.koordlet.metrics.cache import Aggregation, MetricCache, MetricKind, Window
from koord_framework.koordlet.states import NodeState

log = logging.getLogger(__name__)

DEFAULT_AGGREGATE_SECONDS: Final = 300
MIN_AGGREGATE_SECONDS: Final = 60
DEFAULT_REPORT_INTERVAL_SECONDS: Final = 60
MIN_REPORT_INTERVAL_SECONDS: Final = 30
DEFAULT_AGGREGATE_DURATIONS: Final = (300, 600, 1800)
COLD_START_RATIO: Final = 0.5
_AGGREGATIONS: Final = (Aggregation.AVG, Aggregation.P50, Aggregation.P90, Aggregation.P95, Aggregation.P99)

_GO_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """``"5m"``, ``"1h30m"``, ``"300s"`` -> seconds (Go ``time.ParseDuration``, non-negative)."""
    value = text.strip()
    if value in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for m in _GO_DURATION.finditer(value):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(value):
        raise ValueError(f"invalid duration {text!r}")
    return total


def format_go_duration(seconds: float) -> str:
    """Seconds as Go's ``Duration.String()`` for whole seconds: 300 -> ``"5m0s"``, 3600 -> ``"1h0m0s"``."""
    return format_duration_ns(round(seconds) * 1_000_000_000)


@dataclass(frozen=True, slots=True)
class CollectPolicy:
    aggregate_seconds: float = DEFAULT_AGGREGATE_SECONDS
    report_interval_seconds: float = DEFAULT_REPORT_INTERVAL_SECONDS
    durations: tuple[float, ...] = DEFAULT_AGGREGATE_DURATIONS
    memory_policy: str = "usageWithoutPageCache"

    @classmethod
    def from_spec(
        cls, spec: Mapping[str, Any], default_interval: float = DEFAULT_REPORT_INTERVAL_SECONDS
    ) -> CollectPolicy:
        """The NodeMetric ``spec.metricCollectPolicy`` merged over the defaults, with Koordinator's floors."""
        policy = spec.get("metricCollectPolicy") or {}
        agg = policy.get("aggregateDurationSeconds")
        interval = policy.get("reportIntervalSeconds")
        durations = (policy.get("nodeAggregatePolicy") or {}).get("durations")
        return cls(
            aggregate_seconds=max(float(agg), MIN_AGGREGATE_SECONDS)
            if agg is not None
            else DEFAULT_AGGREGATE_SECONDS,
            report_interval_seconds=(
                max(float(interval), MIN_REPORT_INTERVAL_SECONDS)
                if interval is not None
                else default_interval
            ),
            durations=(
                tuple(parse_go_duration(str(d)) for d in durations)
                if durations
                else DEFAULT_AGGREGATE_DURATIONS
            ),
            memory_policy=str(policy.get("nodeMemoryCollectPolicy") or "usageWithoutPageCache"),
        )


def _resource_map(cpu_cores: float | None, memory: float | None) -> dict[str, Any]:
    """``ResourceMap`` JSON: ``{"resources": {"cpu": "1500m", "memory": "2Gi"}}``; ``{}`` when unknown."""
    if cpu_cores is None or memory is None:
        return {}
    return {
        "resources": {
            CPU: format_resource(CPU, int(cpu_cores * 1000)),
            MEMORY: format_resource(MEMORY, int(memory)),
        }
    }


class NodeMetricReporter:
    """Builds the status from the cache and writes it to the cluster."""

    def __init__(
        self,
        cache: MetricCache,
        *,
        cold_start_seconds: float = 24 * 3600.0,
        safety_margin_percent: int = 10,
        default_report_interval_seconds: float = DEFAULT_REPORT_INTERVAL_SECONDS,
    ) -> None:
        self.cache = cache
        self.default_report_interval_seconds = default_report_interval_seconds
        self.cold_start_seconds = cold_start_seconds
        self.safety_margin_percent = safety_margin_percent

    def policy(self, state: NodeState) -> CollectPolicy:
        try:
            return CollectPolicy.from_spec(state.node_metric_spec, self.default_report_interval_seconds)
        except (TypeError, ValueError) as err:
            log.warning(
                "NodeMetric %s has an invalid metricCollectPolicy (%s); using defaults", state.node_name, err
            )
            return CollectPolicy(report_interval_seconds=self.default_report_interval_seconds)

    # --- building the status --------------------------------------------------------------------------
    def _memory_kind(self, policy: CollectPolicy) -> MetricKind:
        if policy.memory_policy == "usageWithPageCache":
            return MetricKind.NODE_MEMORY_WITH_PAGE_CACHE
        return MetricKind.NODE_MEMORY_USAGE

    def _usage(
        self,
        cpu_kind: MetricKind,
        mem_kind: MetricKind,
        start: float,
        end: float,
        agg: Aggregation,
        *,
        id: str = "",
        cold_start_filter: bool = False,
    ) -> dict[str, Any]:
        cpu = self.cache.query(cpu_kind, start, end, id)
        mem = self.cache.query(mem_kind, start, end, id)
        if not cpu or not mem:
            return {}
        if cold_start_filter and cpu.duration < (end - start) * COLD_START_RATIO:
            return {}
        return _resource_map(cpu.value(agg), mem.value(agg))

    def _aggregated(
        self, cpu_kind: MetricKind, mem_kind: MetricKind, now: float, policy: CollectPolicy
    ) -> list[Any]:
        out = []
        for d in policy.durations:
            usage = {
                agg.value: self._usage(cpu_kind, mem_kind, now - d, now, agg, cold_start_filter=True)
                for agg in _AGGREGATIONS
            }
            out.append({"usage": usage, "duration": format_go_duration(d)})
        return out

    def build_status(self, state: NodeState, now: float) -> dict[str, Any]:
        policy = self.policy(state)
        start = now - policy.aggregate_seconds
        mem_kind = self._memory_kind(policy)
        node_metric = {
            "nodeUsage": self._usage(MetricKind.NODE_CPU_USAGE, mem_kind, start, now, Aggregation.AVG),
            "aggregatedNodeUsages": self._aggregated(MetricKind.NODE_CPU_USAGE, mem_kind, now, policy),
            "systemUsage": self._usage(
                MetricKind.SYSTEM_CPU_USAGE, MetricKind.SYSTEM_MEMORY_USAGE, start, now, Aggregation.AVG
            ),
            "aggregatedSystemUsages": self._aggregated(
                MetricKind.SYSTEM_CPU_USAGE, MetricKind.SYSTEM_MEMORY_USAGE, now, policy
            ),
        }
        pods_metric = []
        for meta in state.pods:
            usage = self._usage(
                MetricKind.POD_CPU_USAGE,
                MetricKind.POD_MEMORY_USAGE,
                start,
                now,
                Aggregation.AVG,
                id=meta.uid,
            )
            if not usage:
                continue
            pods_metric.append(
                {
                    "namespace": meta.pod.namespace,
                    "name": meta.pod.name,
                    "podUsage": usage,
                    "priority": qoslib.priority_class_with_default(meta.manifest).value,
                    "qos": qoslib.qos_class_with_default(meta.manifest).value,
                }
            )
        pods_metric.sort(key=lambda p: (str(p["namespace"]), str(p["name"])))
        host_apps = []
        if state.node_slo is not None:
            for app in state.node_slo.host_applications:
                usage = self._usage(
                    MetricKind.HOST_APP_CPU_USAGE,
                    MetricKind.HOST_APP_MEMORY_USAGE,
                    start,
                    now,
                    Aggregation.AVG,
                    id=app.name,
                )
                if usage:
                    host_apps.append(
                        {"name": app.name, "usage": usage, "priority": app.priority, "qos": app.qos}
                    )
            host_apps.sort(key=lambda a: str(a["name"]))
        reclaimable, peak = self.predict_prod(state, now, policy)
        status: dict[str, Any] = {
            "updateTime": format_time(now),
            "nodeMetric": node_metric,
            "podsMetric": pods_metric,
            "hostApplicationMetric": host_apps,
            "prodReclaimableMetric": {"resource": reclaimable},
        }
        if peak is not None:
            status["prodPeakMetric"] = {"resource": peak}
        return status

    # --- prod reclaimable / peak ---------------------------------------------------------------------
    def predict_prod(
        self, state: NodeState, now: float, policy: CollectPolicy
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Koordinator's pod reclaimable predictor over the cache window: for every prod (or unclassified)
        pod past its cold start, peak = p95 cpu / p98 memory x (1 + margin); reclaimable = request - peak.
        Result = min(allocatable - Σ peaks, Σ reclaimable); peak = Σ peaks + requests of unpredicted pods."""
        ratio = (100 + self.safety_margin_percent) / 100
        reclaim_cpu = reclaim_mem = unrec_cpu = unrec_mem = unpred_cpu = unpred_mem = 0
        start = now - policy.aggregate_seconds
        for meta in state.pods:
            pc = meta.pod.priority_class
            if pc not in (qoslib.PriorityClass.PROD, qoslib.PriorityClass.NONE):
                continue
            req_cpu = meta.pod.requests.get(CPU, 0)
            req_mem = meta.pod.requests.get(MEMORY, 0)
            created = meta.pod.creation_time
            if created is not None and now - created <= self.cold_start_seconds:
                unpred_cpu += req_cpu
                unpred_mem += req_mem
                continue
            if meta.pod.is_terminating or meta.pod.is_terminal:
                continue
            cpu_w: Window = self.cache.query(MetricKind.POD_CPU_USAGE, start, now, meta.uid)
            mem_w: Window = self.cache.query(MetricKind.POD_MEMORY_USAGE, start, now, meta.uid)
            if not cpu_w or not mem_w:
                unpred_cpu += req_cpu
                unpred_mem += req_mem
                continue
            peak_cpu = int(int(cpu_w.percentile(0.95) * 1000) * ratio)
            peak_mem = int(int(mem_w.percentile(0.98)) * ratio)
            unrec_cpu += peak_cpu
            unrec_mem += peak_mem
            reclaim_cpu += max(req_cpu - peak_cpu, 0)
            reclaim_mem += max(req_mem - peak_mem, 0)
        alloc = _allocatable(state)
        if alloc is None:
            return {}, None
        fix_cpu = min(max(alloc.get(CPU, 0) - unrec_cpu, 0), reclaim_cpu)
        fix_mem = min(max(alloc.get(MEMORY, 0) - unrec_mem, 0), reclaim_mem)
        reclaimable = {
            "resources": {CPU: format_resource(CPU, fix_cpu), MEMORY: format_resource(MEMORY, fix_mem)}
        }
        peak = {
            "resources": {
                CPU: format_resource(CPU, unrec_cpu + unpred_cpu),
                MEMORY: format_resource(MEMORY, unrec_mem + unpred_mem),
            }
        }
        return reclaimable, peak

    # --- writing ----------------------------------------------------------------------------------------
    def report(
        self, cluster: ClusterPort, state: NodeState, now: float, *, create: bool = False
    ) -> dict[str, Any] | None:
        """Write the status; returns it, or None when there is no NodeMetric to write to (the SLO controller
        creates it; with ``create`` the agent creates it itself, for an embedded cluster without one)."""
        status = self.build_status(state, now)
        for _attempt in range(3):
            current = cluster.try_get("NodeMetric", state.node_name)
            if current is None:
                if not create:
                    log.info("NodeMetric %s not found; skipping the report", state.node_name)
                    return None
                with contextlib.suppress(ConflictError):
                    cluster.create(
                        {
                            "apiVersion": "slo.koordinator.sh/v1alpha1",
                            "kind": "NodeMetric",
                            "metadata": {"name": state.node_name},
                            "spec": {},
                        }
                    )
                continue
            try:
                cluster.patch(
                    "NodeMetric",
                    state.node_name,
                    "",
                    {"status": replacement_patch(current.get("status"), status)},
                    status=True,
                )
                return status
            except ConflictError:
                continue
            except NotFoundError:
                return None
            except ClusterError as err:
                log.warning("cannot update NodeMetric %s status: %s", state.node_name, err)
                return None
        return None


def _allocatable(state: NodeState) -> dict[str, int] | None:
    node = state.node_manifest
    if node is None:
        return None
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NODE_RAW_ALLOCATABLE)
    if raw:
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, Mapping):
                return parse_resource_list(
                    parsed, path=f"Node.metadata.annotations[{ANNOTATION_NODE_RAW_ALLOCATABLE}]"
                )
        except (ValueError, KoordError):
            pass
    status = node.get("status") or {}
    if status.get("allocatable") is None:
        return None
    return parse_resource_list(status.get("allocatable") or {}, path="Node.status.allocatable")


def replacement_patch(old: Any, new: Any) -> Any:
    """A JSON merge patch (RFC 7386) that turns ``old`` into ``new``: keys only in ``old`` are set to null,
    so a merge-patch of the status subresource replaces it whole (what Koordinator's UpdateStatus does)."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    out: dict[str, Any] = {}
    for key in old:
        if key not in new:
            out[key] = None
    for key, value in new.items():
        out[key] = replacement_patch(old.get(key), value) if key in old else value
    return out
