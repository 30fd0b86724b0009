"""The measures ``koord compare`` reports for one run, from the scheduler's view of the cluster after it.

* utilisation: per node, requested / allocatable and (when a usage-estimating plugin such as LoadAware is
  there) estimated usage / allocatable, in percent, summarised as a distribution;
* fragmentation: per node, the largest pod shape that still fits (free CPU and free memory, nothing when the
  node's pod count is full), and how much free capacity is *stranded*: free CPU on nodes that cannot give the
  reference pod its memory, and the other way round;
* LoadAware threshold violations: nodes whose estimated usage is over a usage threshold (rounded to a whole
  percent, as LoadAware's Filter does);
* unschedulable reasons: kube-scheduler's ``0/N nodes are available: 3 Insufficient cpu, ...`` split into
  its reasons (a pod counts once per reason), any other message (a quota's, a gang's) taken whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.resources import CPU, MEMORY, format_resource
from koord_framework.scheduler.interface import NodeUsageEstimate

__all__ = [
    "BINS",
    "NodeRow",
    "distribution",
    "fragmentation",
    "go_percent",
    "reasons_of",
    "violations",
]

BINS: tuple[int, ...] = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
"""Histogram bin edges in percent; the last bin counts everything at or above 100."""
RESOURCES = (CPU, MEMORY)
_FIT_ERROR = re.compile(r"^0/\d+ nodes are available: (.*)$", re.S)
_COUNTED = re.compile(r"^\d+ (.*)$", re.S)


@dataclass
class NodeRow:
    """One node after a run, as the scheduler's cache holds it."""

    name: str
    allocatable: Mapping[str, int]
    requested: Mapping[str, int]
    pods: int
    estimate: NodeUsageEstimate | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def free(self, resource: str) -> int:
        return max(self.allocatable.get(resource, 0) - self.requested.get(resource, 0), 0)

    @property
    def full(self) -> bool:
        """No pod fits any more: the node's pod count is at its allocatable ``pods``."""
        limit = self.allocatable.get("pods")
        return limit is not None and self.pods >= limit

    def requested_percent(self, resource: str) -> float | None:
        alloc = self.allocatable.get(resource, 0)
        return 100.0 * self.requested.get(resource, 0) / alloc if alloc > 0 else None

    def estimated_percent(self, resource: str) -> float | None:
        est = self.estimate
        if est is None:
            return None
        alloc = est.allocatable.get(resource, 0)
        return 100.0 * est.used.get(resource, 0) / alloc if alloc > 0 else None


def go_percent(used: int, allocatable: int) -> int:
    """LoadAware's ``math.Round(used / allocatable * 100)``: halves away from zero."""
    value = float(used) / float(allocatable) * 100
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of sorted values."""
    if not ordered:
        return 0.0
    rank = max(math.ceil(q * len(ordered)) - 1, 0)
    return ordered[min(rank, len(ordered) - 1)]


def distribution(values: Iterable[float | None]) -> dict[str, Any] | None:
    """Summary and histogram of percentages (``None`` values, nodes without the measure, are left out)."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    counts = [0] * len(BINS)
    for v in ordered:
        index = min(int(v // 10), len(BINS) - 1) if v >= 0 else 0
        counts[index] += 1
    return {
        "nodes": len(ordered),
        "mean": round(sum(ordered) / len(ordered), 2),
        "min": round(ordered[0], 2),
        "p50": round(_quantile(ordered, 0.5), 2),
        "p90": round(_quantile(ordered, 0.9), 2),
        "p99": round(_quantile(ordered, 0.99), 2),
        "max": round(ordered[-1], 2),
        "histogram": {"bins": list(BINS), "counts": counts},
    }


def fragmentation(rows: Sequence[NodeRow], reference: Mapping[str, int] | None) -> dict[str, Any]:
    """Free capacity, the largest shape one node can still take, and what is stranded for ``reference``."""
    out: dict[str, Any] = {
        "reference": {k: format_resource(k, v) for k, v in (reference or {}).items()} or None
    }
    usable = [r for r in rows if not r.full]
    fitting = 0
    for row in usable:
        if reference and all(row.free(res) >= reference.get(res, 0) for res in RESOURCES):
            fitting += 1
    for res in RESOURCES:
        other = MEMORY if res == CPU else CPU
        free = sum(r.free(res) for r in usable)
        largest = max((r.free(res) for r in usable), default=0)
        entry: dict[str, Any] = {
            "free": format_resource(res, free),
            "largestOnOneNode": format_resource(res, largest),
        }
        if reference:
            need = reference.get(other, 0)
            stranded = sum(r.free(res) for r in usable if r.free(other) < need)
            stranded += sum(r.free(res) for r in rows if r.full)
            total = free + sum(r.free(res) for r in rows if r.full)
            entry["stranded"] = format_resource(res, stranded)
            entry["strandedPercent"] = round(100.0 * stranded / total, 2) if total else 0.0
        out[res] = entry
    out["nodesFittingReference"] = fitting if reference else None
    out["fullNodes"] = len(rows) - len(usable)
    return out


def violations(rows: Sequence[NodeRow], limit: int = 50) -> dict[str, Any] | None:
    """Nodes over a LoadAware usage threshold now; None when no node has an estimate."""
    estimated = [r for r in rows if r.estimate is not None]
    if not estimated:
        return None
    per_resource: dict[str, int] = {}
    over: list[dict[str, Any]] = []
    expired = 0
    for row in estimated:
        est = row.estimate
        assert est is not None
        if est.expired:
            expired += 1
        hot: dict[str, dict[str, int]] = {}
        for res, threshold in sorted(est.thresholds.items()):
            alloc = est.allocatable.get(res, 0)
            if alloc <= 0:
                continue
            percent = go_percent(est.used.get(res, 0), alloc)
            if percent > threshold:
                per_resource[res] = per_resource.get(res, 0) + 1
                hot[res] = {"percent": percent, "threshold": threshold}
        if hot:
            over.append({"node": row.name, "over": hot})
    return {
        "nodes": len(over),
        "byResource": dict(sorted(per_resource.items())),
        "expiredMetrics": expired,
        "nodesWithoutEstimate": len(rows) - len(estimated),
        "worst": sorted(over, key=lambda o: -max(v["percent"] - v["threshold"] for v in o["over"].values()))[
            :limit
        ],
    }


def reasons_of(message: str) -> list[str]:
    """The reasons of one unschedulable pod's message, each once."""
    text = message.strip()
    if not text:
        return ["(no message)"]
    m = _FIT_ERROR.match(text)
    if m is None:
        return [text]
    # The node-count histogram ends at the first sentence end; notes (a gang's, preemption's) may follow.
    histogram = m.group(1).strip().split(". ", 1)[0].rstrip(".")
    if '"' in histogram:  # a plugin's own message quoting another: one reason, kept whole
        return [histogram]
    reasons: list[str] = []
    for part in re.split(r", (?=\d+ )", histogram):
        counted = _COUNTED.match(part.strip())
        reason = (counted.group(1) if counted else part).strip()
        if reason and reason not in reasons:
            reasons.append(reason)
    return reasons or [text]
