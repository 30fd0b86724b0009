"""Node load and classification for one pool: ``getNodeUsage``, ``getNodeThresholds``, ``classifyNodes``.

All nodes of the pool are measured, their thresholds computed and classified with NumPy over a
nodes × resources matrix; per-node dictionaries are made only for nodes that end up in a class, because
only those are read again (as sources to evict from or targets to move to).

Classes, per node (first match wins):

* under every low threshold and schedulable: ``prod_high`` if prod usage is over a prod high threshold,
  else ``both_low`` if prod usage is also under every prod low threshold (and schedulable), else ``low``;
* else over some high threshold: ``source``;
* else ``prod_high`` if prod usage is over a prod high threshold, ``prod_low`` if under every prod low
  threshold (and schedulable); otherwise the node is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from koord_framework.api.objects import NodeRecord
from koord_framework.descheduler.node_usage import (
    NodeMetricInfo,
    NodePods,
    NodeUsage,
    average_usage_percent,
    compute_node_usage,
    matrix,
    percent_threshold,
)
from koord_plugin_lownodeload.pools import MAX_PERCENTAGE, MIN_PERCENTAGE, Thresholds


@dataclass(slots=True)
class NodeThresholds:
    low: dict[str, int]
    high: dict[str, int]
    prod_low: dict[str, int]
    prod_high: dict[str, int]


@dataclass(slots=True)
class NodeLoad:
    """A classified node: its usage (mutated as pods move) and its thresholds in resource units."""

    usage: NodeUsage
    thresholds: NodeThresholds

    @property
    def name(self) -> str:
        return self.usage.node.name


@dataclass
class Classification:
    resource_names: list[str]
    low: list[NodeLoad] = field(default_factory=list)
    source: list[NodeLoad] = field(default_factory=list)
    prod_low: list[NodeLoad] = field(default_factory=list)
    prod_high: list[NodeLoad] = field(default_factory=list)
    both_low: list[NodeLoad] = field(default_factory=list)
    measured: int = 0
    """Nodes with a usable NodeMetric."""


def _clamp(p: float) -> float:
    return min(max(p, MIN_PERCENTAGE), MAX_PERCENTAGE)


def classify(
    nodes: Sequence[NodeRecord],
    node_pods: Callable[[str], NodePods],
    node_metric: Callable[[str], NodeMetricInfo | None],
    thresholds: tuple[Thresholds, Thresholds, Thresholds, Thresholds],
    *,
    use_deviation: bool,
    now: float,
    expiration_seconds: int | None,
) -> Classification:
    low_pct, high_pct, prod_low_pct, prod_high_pct = thresholds
    names = list(low_pct)
    usages: list[NodeUsage] = []
    for node in nodes:
        u = compute_node_usage(
            node,
            node_pods(node.name),
            node_metric(node.name),
            names,
            now=now,
            expiration_seconds=expiration_seconds,
        )
        if u is not None:
            usages.append(u)
    result = Classification(resource_names=names, measured=len(usages))
    if not usages:
        return result

    alloc = matrix((u.allocatable for u in usages), names)
    used = matrix((u.usage for u in usages), names)
    prod_used = matrix((u.prod_usage for u in usages), names)
    n, r = alloc.shape
    if use_deviation:
        avg = average_usage_percent([u.usage for u in usages], [u.allocatable for u in usages])
        prod_avg = average_usage_percent([u.prod_usage for u in usages], [u.allocatable for u in usages])
        low_thr = np.empty((n, r), dtype=np.int64)
        high_thr = np.empty((n, r), dtype=np.int64)
        prod_low_thr = np.empty((n, r), dtype=np.int64)
        prod_high_thr = np.empty((n, r), dtype=np.int64)
        for j, name in enumerate(names):
            col = alloc[:, j : j + 1]
            # A 0 deviation disables the resource: both thresholds are the whole capacity.
            if low_pct.get(name, 0.0) == MIN_PERCENTAGE:
                low_thr[:, j] = high_thr[:, j] = col[:, 0]
            else:
                a = avg.get(name, 0.0)
                low_thr[:, j] = percent_threshold(col, _clamp(a - low_pct[name]))[:, 0]
                high_thr[:, j] = percent_threshold(col, _clamp(a + high_pct.get(name, 0.0)))[:, 0]
            if prod_low_pct.get(name, 0.0) == MIN_PERCENTAGE:
                prod_low_thr[:, j] = prod_high_thr[:, j] = col[:, 0]
            else:
                a = prod_avg.get(name, 0.0)
                prod_low_thr[:, j] = percent_threshold(col, _clamp(a - prod_low_pct[name]))[:, 0]
                prod_high_thr[:, j] = percent_threshold(col, _clamp(a + prod_high_pct.get(name, 0.0)))[:, 0]
    else:
        low_thr = percent_threshold(alloc, [low_pct.get(x, 0.0) for x in names])
        high_thr = percent_threshold(alloc, [high_pct.get(x, 0.0) for x in names])
        prod_low_thr = percent_threshold(alloc, [prod_low_pct.get(x, 0.0) for x in names])
        prod_high_thr = percent_threshold(alloc, [prod_high_pct.get(x, 0.0) for x in names])

    schedulable = np.fromiter((not u.node.unschedulable for u in usages), dtype=bool, count=n)
    under_low = schedulable & (used <= low_thr).all(axis=1)
    over_high = (used > high_thr).any(axis=1)
    prod_over_high = (prod_used > prod_high_thr).any(axis=1)
    prod_under_low = schedulable & (prod_used <= prod_low_thr).all(axis=1)

    rows = [m.tolist() for m in (low_thr, high_thr, prod_low_thr, prod_high_thr)]

    def load(i: int) -> NodeLoad:
        lo, hi, plo, phi = (dict(zip(names, r[i])) for r in rows)
        return NodeLoad(usages[i], NodeThresholds(lo, hi, plo, phi))

    columns = [cast("list[bool]", a.tolist()) for a in (under_low, over_high, prod_over_high, prod_under_low)]
    flags = zip(*columns)
    for i, (low_i, high_i, prod_high_i, prod_low_i) in enumerate(flags):
        if low_i:
            if prod_high_i:
                result.prod_high.append(load(i))
            elif prod_low_i:
                result.both_low.append(load(i))
            else:
                result.low.append(load(i))
        elif high_i:
            result.source.append(load(i))
        elif prod_high_i:
            result.prod_high.append(load(i))
        elif prod_low_i:
            result.prod_low.append(load(i))
    return result


def overutilized(usage: Mapping[str, int], thresholds: Mapping[str, int]) -> dict[str, int]:
    """``isNodeOverutilized``: the resources (of ``thresholds``) whose usage is above the threshold."""
    out = {}
    for name, limit in thresholds.items():
        used = usage.get(name)
        if used is not None and used > limit:
            out[name] = used
    return out
