"""Node load from NodeMetrics: what load-aware descheduling measures, parsed once and summed fast.

A NodeMetric (``slo.koordinator.sh/v1alpha1``, one per node, written by koordlet) reports the node's system
usage and one usage entry per pod. Koordinator's LowNodeLoad (``getNodeUsage`` in
``pkg/descheduler/framework/plugins/loadaware/utilization_util.go``) derives, per node and resource:

* ``usage[r]      = systemUsage[r] + Σ podsMetric[*].podUsage[r]``   (every entry, known pod or not)
* ``prodUsage[r]  = Σ podUsage[r]`` over entries whose ``ns/name`` is a prod pod now on the node
* ``usage[pods]   = number of pods on the node`` (not Succeeded/Failed); ``prodUsage[pods]`` likewise

Parsing quantity strings is the expensive part, so ``NodeMetricInfo`` parses a NodeMetric once (the cache
keeps it per resourceVersion) and pre-sums the pod entries; a round then only adds integers. Thresholds
are percentages of the node's *raw* allocatable (``node.koordinator.sh/raw-allocatable`` when it parses,
else ``status.allocatable``), computed over all nodes at once with NumPy, truncating exactly as Go's
``int64(float64(p) * 0.01 * float64(capacity))`` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from koord_framework.api.constants import ANNOTATION_NODE_RAW_ALLOCATABLE
from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.qos import PriorityClass
from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import CPU, PODS, parse_resource_list
from koord_framework.cluster.clock import parse_time

FloatMatrix = npt.NDArray[np.float64]
IntMatrix = npt.NDArray[np.int64]

_EMPTY: Mapping[str, int] = {}


@dataclass(frozen=True, slots=True)
class NodeMetricInfo:
    """One NodeMetric, parsed: usage as canonical integers (cpu milli-cores, the rest by ``Value()``)."""

    name: str
    update_time: float | None
    has_node_metric: bool
    """``status.nodeMetric`` is present; LowNodeLoad ignores a node whose NodeMetric lacks it."""
    system_usage: Mapping[str, int]
    pod_entries: tuple[tuple[str, Mapping[str, int]], ...]
    """``(namespace/name, podUsage)`` in the order reported, duplicates kept (they count twice in sums)."""
    pod_usage: Mapping[str, Mapping[str, int]]
    """``namespace/name`` -> podUsage; for a duplicated entry the last one wins, as in Go's map."""
    pods_total: Mapping[str, int]
    """Σ podUsage over every entry, per resource."""
    resource_version: str = ""
    duplicates: bool = False
    """Some ``namespace/name`` is reported twice (each entry then counts in sums)."""

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any]) -> NodeMetricInfo:
        """Parse a NodeMetric; a bad quantity raises ``QuantityError`` naming the field."""
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        node_metric = status.get("nodeMetric")
        system: dict[str, int] = {}
        if isinstance(node_metric, Mapping):
            sys_usage = node_metric.get("systemUsage") or {}
            system = parse_resource_list(
                sys_usage.get("resources") or {}, path="status.nodeMetric.systemUsage.resources"
            )
        entries: list[tuple[str, Mapping[str, int]]] = []
        by_key: dict[str, Mapping[str, int]] = {}
        totals: dict[str, int] = {}
        for i, pm in enumerate(status.get("podsMetric") or ()):
            if not isinstance(pm, Mapping):
                raise QuantityError(f"status.podsMetric[{i}]: expected a mapping")
            key = f"{pm.get('namespace') or ''}/{pm.get('name') or ''}"
            usage = parse_resource_list(
                (pm.get("podUsage") or {}).get("resources") or {},
                path=f"status.podsMetric[{i}].podUsage.resources",
            )
            entries.append((key, usage))
            by_key[key] = usage
            for name, value in usage.items():
                totals[name] = totals.get(name, 0) + value
        return cls(
            name=str(meta.get("name") or ""),
            update_time=parse_time(status.get("updateTime")),
            has_node_metric=isinstance(node_metric, Mapping),
            system_usage=system,
            pod_entries=tuple(entries),
            pod_usage=by_key,
            pods_total=totals,
            resource_version=str(meta.get("resourceVersion") or ""),
            duplicates=len(by_key) != len(entries),
        )

    def expired(self, now: float, expiration_seconds: int | None) -> bool:
        """Koordinator's check: with an expiration configured, a NodeMetric without ``updateTime`` or older
        than the expiration is stale; without one, every NodeMetric that has a ``nodeMetric`` is used."""
        if expiration_seconds is None:
            return False
        if self.update_time is None:
            return True
        return expiration_seconds > 0 and now - self.update_time >= expiration_seconds


_raw_alloc_memo: dict[str, dict[str, int] | None] = {}


def raw_allocatable(node: NodeRecord) -> Mapping[str, int]:
    """``GetNodeRawAllocatableFromNode``: the raw-allocatable annotation when it parses, else allocatable.

    The annotation replaces allocatable wholesale (a resource it does not list has no capacity).
    """
    text = node.annotations.get(ANNOTATION_NODE_RAW_ALLOCATABLE)
    if text is None:
        return node.allocatable
    if text not in _raw_alloc_memo:
        parsed: dict[str, int] | None
        try:
            raw = json.loads(text)
            parsed = None if raw is None else parse_resource_list(raw)
        except (ValueError, QuantityError):
            parsed = None
        if len(_raw_alloc_memo) > 4096:
            _raw_alloc_memo.clear()
        _raw_alloc_memo[text] = parsed
    result = _raw_alloc_memo[text]
    return node.allocatable if result is None else result


@dataclass(slots=True)
class NodeUsage:
    """One node's load for a descheduling round; ``usage`` and ``prod_usage`` change as pods move."""

    node: NodeRecord
    allocatable: Mapping[str, int]
    """Raw allocatable (what percentages are of)."""
    pods: Sequence[PodInfo]
    prod_pods: Sequence[PodInfo]
    usage: dict[str, int]
    prod_usage: dict[str, int]
    pod_metrics: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True, slots=True)
class NodePods:
    """The pods occupying a node and what its NodeMetric says of the prod ones (kept by the cache)."""

    pods: tuple[PodInfo, ...]
    """Pods bound to the node that are not Succeeded/Failed."""
    prod_pods: tuple[PodInfo, ...]
    """Those whose priority class (with default) is ``koord-prod``."""
    prod_usage: Mapping[str, int]
    """Σ of the NodeMetric's podUsage entries of the prod pods, every resource (empty without a metric)."""
    requested: Mapping[str, int]
    """Σ of the requests of ``pods`` per resource, and ``pods``: their number (``NodeUtilization``)."""


def node_pods(pods: Sequence[PodInfo], metric: NodeMetricInfo | None) -> NodePods:
    """Build ``NodePods`` from the pods bound to a node (any phase) and its NodeMetric."""
    prod = PriorityClass.PROD
    live = tuple(p for p in pods if p.phase not in ("Succeeded", "Failed"))
    prod_pods = tuple(p for p in live if p.priority_class is prod)
    prod_usage: dict[str, int] = {}
    if prod_pods and metric is not None:
        # Σ over the metric's entries of prod pods; with no key reported twice, looking the prod pods up
        # is the same sum and cheaper than walking every entry.
        if metric.duplicates:
            prod_keys = {p.key for p in prod_pods}
            chosen = [u for key, u in metric.pod_entries if key in prod_keys]
        else:
            by_key = metric.pod_usage
            chosen = [u for u in (by_key.get(f"{p.namespace}/{p.name}") for p in prod_pods) if u is not None]
        for pod_usage in chosen:
            for r, value in pod_usage.items():
                prod_usage[r] = prod_usage.get(r, 0) + value
    requested: dict[str, int] = {}
    for p in live:
        for r, value in p.requests.items():
            if value:
                requested[r] = requested.get(r, 0) + value
    requested[PODS] = len(live)
    return NodePods(live, prod_pods, prod_usage, requested)


def compute_node_usage(
    node: NodeRecord,
    pods: NodePods,
    metric: NodeMetricInfo | None,
    resource_names: Sequence[str],
    *,
    now: float,
    expiration_seconds: int | None,
) -> NodeUsage | None:
    """``getNodeUsage`` for one node; None when the node has no usable NodeMetric.

    ``pods`` must have been built from ``metric`` (``node_pods``); the cache keeps it so.
    """
    if metric is None or not metric.has_node_metric or metric.expired(now, expiration_seconds):
        return None
    system = metric.system_usage
    totals = metric.pods_total
    prod_sum = pods.prod_usage
    usage = {r: system.get(r, 0) + totals.get(r, 0) for r in resource_names}
    prod_usage = {r: prod_sum.get(r, 0) for r in resource_names}
    usage[PODS] = len(pods.pods)
    prod_usage[PODS] = len(pods.prod_pods)
    return NodeUsage(
        node=node,
        allocatable=raw_allocatable(node),
        pods=pods.pods,
        prod_pods=pods.prod_pods,
        usage=usage,
        prod_usage=prod_usage,
        pod_metrics=metric.pod_usage,
    )


# --- vectorised helpers -----------------------------------------------------------------------------------
def matrix(rows: Iterable[Mapping[str, int]], columns: Sequence[str]) -> IntMatrix:
    """Rows of resource lists as an int64 matrix over ``columns`` (a missing entry is 0)."""
    flat = [row.get(c, 0) for row in rows for c in columns]
    width = len(columns)
    if not flat or not width:
        return np.zeros((len(flat) // width if width else 0, width), dtype=np.int64)
    return np.array(flat, dtype=np.int64).reshape(len(flat) // width, width)


def percent_threshold(allocatable: IntMatrix, percents: npt.ArrayLike) -> IntMatrix:
    """``resourceThreshold`` for every node and resource at once: ``int64(p * 0.01 * capacity)``.

    ``percents`` broadcasts against ``allocatable`` (one value per resource, or one per node and resource).
    The float operations happen in the same order as Go's so the truncated results agree bit for bit.
    """
    p = np.asarray(percents, dtype=np.float64)
    product = (p * 0.01) * allocatable.astype(np.float64)
    return np.trunc(product).astype(np.int64)


def average_usage_percent(
    usages: Sequence[Mapping[str, int]], allocatables: Sequence[Mapping[str, int]]
) -> dict[str, float]:
    """``calcAverageResourceUsagePercent``: per resource, Σ (used / capacity × 100) over nodes with
    non-zero capacity, divided by the number of *all* nodes. Resources are those of the usage maps."""
    sums: dict[str, float] = {}
    for usage, alloc in zip(usages, allocatables):
        for name, used in usage.items():
            total = alloc.get(name, 0)
            if total == 0:
                continue
            sums[name] = sums.get(name, 0.0) + used / total * 100.0
    n = len(usages)
    return {name: total / n for name, total in sums.items()} if n else {}


def usage_percentages(usage: Mapping[str, int], allocatable: Mapping[str, int]) -> dict[str, float]:
    """``resourceUsagePercentages``: 100 × used / capacity per resource of ``usage`` with non-zero capacity.

    Go divides ``MilliValue()``s in float64; the same milli-values are used here (cpu integers already are
    milli-cores, the rest are scaled by 1000) so the rounding, and so the printed percentages, agree.
    """
    out: dict[str, float] = {}
    for name, used in usage.items():
        total = allocatable.get(name, 0)
        if total:
            scale = 1 if name == CPU else 1000
            out[name] = 100 * float(used * scale) / float(total * scale)
    return out


def cpu_first(names: Iterable[str]) -> list[str]:
    """Resource names in a stable order for tables and matrices: cpu, memory, then the rest sorted."""
    ordered = sorted(set(names))
    head = [n for n in (CPU, "memory") if n in ordered]
    return head + [n for n in ordered if n not in head]


__all__ = [
    "NodeMetricInfo",
    "NodePods",
    "NodeUsage",
    "average_usage_percent",
    "compute_node_usage",
    "cpu_first",
    "matrix",
    "node_pods",
    "percent_threshold",
    "raw_allocatable",
    "usage_percentages",
]
