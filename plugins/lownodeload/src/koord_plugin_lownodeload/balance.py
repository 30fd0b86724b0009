"""Moving load: ``evictPodsFromSourceNodes``, ``balancePods``, ``podFitsAnyNodeWithThreshold``, ``evictPods``.

For each overloaded source node (most loaded first) its candidate pods are split into removable and not:
a pod is removable when the pod filter admits it and, with ``nodeFit``, it fits some underloaded target
node — NodeFit (selectors, taints, requests against allocatable minus requests, schedulable) and the
target's usage plus the pod's measured usage stays within the target's high thresholds. The first such
target *keeps* the pod's usage added, even if the pod is not evicted in the end (Koordinator does so: it
bounds how many pods become removable by the targets' headroom).

Removable pods are sorted (``sorter`` with the usage key) and evicted one by one while the source is still
overloaded and the targets' total headroom (Σ high threshold − usage) stays positive for every resource.

The target search is vectorised: per candidate pod one NumPy pass over all targets finds the first that
fits, instead of a Python loop per target; a running per-resource maximum of the targets' headroom rejects
pods that cannot fit anywhere without touching the targets at all.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt
from koord_lib_descheduling.sorter import sort_pods_by_usage

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import CPU, MEMORY, PODS
from koord_framework.api.selectors import (
    DO_NOT_SCHEDULE_EFFECTS,
    RequiredNodeAffinity,
    find_untolerated_taint,
)
from koord_framework.descheduler.interface import EvictOptions, Evictor
from koord_framework.descheduler.node_usage import NodePods, usage_percentages
from koord_plugin_lownodeload.classify import NodeLoad, overutilized

log = logging.getLogger("koord.descheduler.lownodeload")

_BASIC = frozenset({CPU, MEMORY, PODS})

PodFilter = Callable[[PodInfo], bool]
ReasonFn = Callable[[NodeLoad, bool], str]
ContinueFn = Callable[[NodeLoad, Mapping[str, int], bool], bool]


def available_usage(nodes: Sequence[NodeLoad], names: Sequence[str], prod: bool) -> dict[str, int]:
    """``targetAvailableUsage``: Σ (high threshold − usage) over ``nodes`` per resource (may be negative)."""
    total = dict.fromkeys(names, 0)
    for load in nodes:
        usage = load.usage.prod_usage if prod else load.usage.usage
        thresholds = load.thresholds.prod_high if prod else load.thresholds.high
        for name in names:
            total[name] += thresholds[name] - usage[name]
    return total


def _node_usage(load: NodeLoad) -> Mapping[str, int]:
    return load.usage.usage


def _prod_usage(load: NodeLoad) -> Mapping[str, int]:
    return load.usage.prod_usage


def _node_high(load: NodeLoad) -> Mapping[str, int]:
    return load.thresholds.high


def _prod_high(load: NodeLoad) -> Mapping[str, int]:
    return load.thresholds.prod_high


class Targets:
    """The underloaded nodes of one phase, as arrays, with first-fit placement of pods."""

    _REFRESH_MAX_EVERY = 64
    _WINDOW = 32

    def __init__(
        self,
        loads: Sequence[NodeLoad],
        names: Sequence[str],
        prod: bool,
        node_pods: Callable[[str], NodePods],
        floor: Sequence[int] | None = None,
    ) -> None:
        self.loads = list(loads)
        self.names = list(names)
        self.prod = prod
        self._node_pods = node_pods
        usage_of = _prod_usage if prod else _node_usage
        limit_of = _prod_high if prod else _node_high
        # Resources × targets: each resource's headroom is one contiguous vector, so the per-pod check is a
        # few whole-vector comparisons (a reduction across a short last axis is far slower in NumPy).
        shape = (len(self.names), len(self.loads))
        used = np.array([[usage_of(x)[n] for x in self.loads] for n in self.names], dtype=np.int64).reshape(
            shape
        )
        self.limits = np.array(
            [[limit_of(x)[n] for x in self.loads] for n in self.names], dtype=np.int64
        ).reshape(shape)
        self.headroom = self.limits - used
        self._rows = list(self.headroom)
        self._lists: list[list[int]] = self.headroom.tolist()
        """The same headroom as Python lists: a scalar read of a list is much cheaper than of an array."""
        # ``floor``: per resource, the least usage any candidate pod has. A target whose headroom is below
        # it in some resource can take no candidate, ever (headroom only shrinks), so the search starts
        # after the leading run of such targets, and first looks at a short window there: first-fit puts
        # most pods on the first open target.
        self._floor = list(floor) if floor is not None else [0] * len(self.names)
        self._front = 0
        self._advance_front()
        self._max_headroom: list[int] = (
            self.headroom.max(axis=1).tolist() if len(self.loads) else [0] * len(self.names)
        )
        self._since_refresh = 0
        self._requested: list[Mapping[str, int]] | None = None
        self._available: dict[str, npt.NDArray[np.int64]] = {}
        self._static: dict[str, npt.NDArray[np.bool_]] = {}
        self._masks: dict[
            tuple[str, tuple[tuple[str, int], ...]], tuple[npt.NDArray[np.bool_], list[bool]]
        ] = {}

    # --- NodeFit pieces ----------------------------------------------------------------------------
    def _requested_on_targets(self) -> list[Mapping[str, int]]:
        if self._requested is None:
            self._requested = [self._node_pods(load.name).requested for load in self.loads]
        return self._requested

    def _available_of(self, name: str) -> npt.NDArray[np.int64]:
        """``nodeAvailableResources`` for one resource over the targets."""
        col = self._available.get(name)
        if col is None:
            requested = self._requested_on_targets()
            values = []
            for load, req in zip(self.loads, requested):
                alloc = load.usage.node.allocatable
                if name in _BASIC or name in alloc:
                    values.append(alloc.get(name, 0) - req.get(name, 0))
                else:
                    values.append(0)
            col = np.array(values, dtype=np.int64)
            self._available[name] = col
        return col

    @staticmethod
    def _signature(pod: PodInfo) -> str:
        return json.dumps(
            [pod.node_selector, pod.affinity, list(pod.tolerations)], sort_keys=True, default=str
        )

    def _static_mask(self, pod: PodInfo, signature: str) -> npt.NDArray[np.bool_]:
        """Targets the pod may go to by selectors, affinity, taints and schedulability."""
        mask = self._static.get(signature)
        if mask is None:
            affinity = RequiredNodeAffinity.of(pod) if signature else None
            values = []
            for load in self.loads:
                node = load.usage.node
                ok = not node.unschedulable
                ok = (
                    ok
                    and find_untolerated_taint(node.taints, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS) is None
                )
                ok = ok and (affinity is None or affinity.match_node(node))
                values.append(ok)
            mask = np.array(values, dtype=bool)
            self._static[signature] = mask
        return mask

    def _fit_mask(self, pod: PodInfo) -> tuple[npt.NDArray[np.bool_], list[bool]]:
        """NodeFit over the targets (everything but the usage check), as an array and as a list; the same
        for pods that share placement constraints and requests, which pods of one workload do."""
        constrained = pod.node_selector or pod.affinity or pod.tolerations
        signature = self._signature(pod) if constrained else ""
        key = (signature, tuple(pod.requests.items()))
        cached = self._masks.get(key)
        if cached is None:
            mask = self._static_mask(pod, signature).copy()
            for name, value in pod.requests.items():
                # Go compares MilliValue()s; the integer order is the same.
                mask &= self._available_of(name) >= value
            cached = self._masks[key] = (mask, cast("list[bool]", mask.tolist()))
        return cached

    # --- placement ----------------------------------------------------------------------------------
    def place(self, pod: PodInfo, metric: Mapping[str, int]) -> bool:
        """Whether the pod fits a target; the first fitting target keeps the pod's usage added."""
        if not self.loads:
            return False
        m = [metric.get(n, 0) for n in self.names]
        # The per-resource maximum headroom only ever over-estimates (headroom only shrinks), so a pod
        # over it fits nowhere; it is refreshed now and then to stay tight.
        for want, most in zip(m, self._max_headroom):
            if want > most:
                return False
        mask, mask_list = self._fit_mask(pod)
        idx = self._first_fit_near(mask_list, m)
        if idx < 0:
            idx = self._first_fit(mask, m, self._front + self._WINDOW, len(self.loads))
            if idx < 0:
                return False
        for row, values, want in zip(self._rows, self._lists, m):
            row[idx] -= want
            values[idx] -= want
        if idx == self._front:
            self._advance_front()
        self._since_refresh += 1
        if self._since_refresh >= self._REFRESH_MAX_EVERY:
            self._max_headroom = self.headroom.max(axis=1).tolist()
            self._since_refresh = 0
        return True

    def _first_fit_near(self, mask: list[bool], m: Sequence[int]) -> int:
        """``_first_fit`` over the window after the front, in plain Python (most pods stop at once)."""
        lists = self._lists
        for t in range(self._front, min(self._front + self._WINDOW, len(mask))):
            if mask[t] and all(values[t] >= want for values, want in zip(lists, m)):
                return t
        return -1

    def _first_fit(self, mask: npt.NDArray[np.bool_], m: Sequence[int], lo: int, hi: int) -> int:
        """The first target in ``[lo, hi)`` passing ``mask`` with headroom for ``m``; -1 when none."""
        if lo >= hi:
            return -1
        fits = mask[lo:hi]
        for row, want in zip(self._rows, m):
            fits = fits & (row[lo:hi] >= want)
        i = int(fits.argmax())
        return lo + i if fits[i] else -1

    def _advance_front(self) -> None:
        lists, floor, n = self._lists, self._floor, len(self.loads)
        front = self._front
        while front < n and any(values[front] < least for values, least in zip(lists, floor)):
            front += 1
        self._front = front

    def write_back(self) -> None:
        """Copy the (increased) usage back into the nodes' usage maps."""
        used = (self.limits - self.headroom).T.tolist()
        for row, load in zip(used, self.loads):
            target = load.usage.prod_usage if self.prod else load.usage.usage
            for name, value in zip(self.names, row):
                target[name] = value


@dataclass
class BalanceContext:
    pool: str
    names: list[str]
    dry_run: bool
    node_fit: bool
    weights: Mapping[str, int]
    evictor: Evictor
    pod_filter: PodFilter
    node_pods: Callable[[str], NodePods]
    continue_eviction: ContinueFn
    reason: ReasonFn
    plugin_name: str


def evict_pods_from_source_nodes(
    ctx: BalanceContext,
    sources: Sequence[NodeLoad],
    low: Sequence[NodeLoad],
    prod_sources: Sequence[NodeLoad],
    prod_low: Sequence[NodeLoad],
    both_low: Sequence[NodeLoad],
) -> None:
    names = ctx.names
    only_low = available_usage(low, names, prod=False)
    prod_only = available_usage(prod_low, names, prod=True)
    both_total = available_usage(both_low, names, prod=False)
    prod_both = available_usage(both_low, names, prod=True)

    node_total = {n: only_low[n] + both_total[n] for n in names}
    balance_pods(ctx, sources, [*low, *both_low], node_total, prod=False)

    # The both-low nodes serve both phases: what the node phase used of the shared headroom is gone.
    for n in names:
        both_total[n] = min(both_total[n], node_total[n])
    prod_total = {n: prod_only[n] + min(prod_both[n], both_total[n]) for n in names}
    balance_pods(ctx, prod_sources, [*prod_low, *both_low], prod_total, prod=True)


def balance_pods(
    ctx: BalanceContext,
    sources: Sequence[NodeLoad],
    targets: Sequence[NodeLoad],
    available: dict[str, int],
    *,
    prod: bool,
) -> None:
    if not targets:
        log.debug("pool %s: no target nodes for %s balancing", ctx.pool, "prod" if prod else "node")
        return
    floor = _least_usage(sources, ctx.names, prod) if ctx.node_fit else None
    target_set = Targets(targets, ctx.names, prod, ctx.node_pods, floor)
    try:
        for src in sources:
            candidates = src.usage.prod_pods if prod else src.usage.pods
            removable: list[PodInfo] = []
            for pod in candidates:
                if not ctx.pod_filter(pod):
                    continue
                if ctx.node_fit:
                    metric = src.usage.pod_metrics.get(pod.key)
                    if metric is None or not target_set.place(pod, metric):
                        continue
                removable.append(pod)
            if not removable:
                continue
            sort_pods_on_overloaded_node(src, removable, ctx.weights, prod)
            evict_pods(ctx, removable, src, available, prod)
    finally:
        target_set.write_back()


def _least_usage(sources: Sequence[NodeLoad], names: Sequence[str], prod: bool) -> list[int]:
    """Per resource, the least measured usage of any candidate pod of ``sources`` (0 when unknown)."""
    least: list[int | None] = [None] * len(names)
    for src in sources:
        metrics = src.usage.pod_metrics
        for pod in src.usage.prod_pods if prod else src.usage.pods:
            metric = metrics.get(pod.key)
            if metric is None:
                continue
            for j, name in enumerate(names):
                value = metric.get(name, 0)
                current = least[j]
                if current is None or value < current:
                    least[j] = value
    return [0 if v is None else v for v in least]


def sort_pods_on_overloaded_node(
    src: NodeLoad, pods: list[PodInfo], weights: Mapping[str, int], prod: bool
) -> None:
    """``sortPodsOnOneOverloadedNode``: only the over-used resources weigh, against their excess."""
    usage = src.usage.prod_usage if prod else src.usage.usage
    limits = src.thresholds.prod_high if prod else src.thresholds.high
    over = overutilized(usage, limits)
    excess = {name: used - limits[name] for name, used in over.items()}
    over_weights = {name: weights.get(name, 0) for name in over}
    sort_pods_by_usage(excess, pods, src.usage.pod_metrics, over_weights)


def evict_pods(
    ctx: BalanceContext, pods: Sequence[PodInfo], src: NodeLoad, available: dict[str, int], prod: bool
) -> None:
    usage = src.usage.usage
    prod_usage = src.usage.prod_usage
    for pod in pods:
        if not ctx.continue_eviction(src, available, prod):
            return
        if not ctx.pod_filter(pod):
            continue
        if ctx.dry_run:
            log.info("pool %s: would evict %s from %s (dry run)", ctx.pool, pod.key, src.name)
        else:
            options = EvictOptions(plugin_name=ctx.plugin_name, reason=ctx.reason(src, prod))
            if not ctx.evictor.evict(pod, options):
                log.info("pool %s: failed to evict %s from %s", ctx.pool, pod.key, src.name)
                continue
        metric = src.usage.pod_metrics.get(pod.key)
        if metric is None:
            continue
        for name in available:
            q = 1 if name == PODS else metric.get(name, 0)
            available[name] -= q
            if name in usage:
                usage[name] -= q
            if prod and name in prod_usage:
                prod_usage[name] -= q


def eviction_reason(high_pct: Mapping[str, float], prod_high_pct: Mapping[str, float]) -> ReasonFn:
    """``overUtilizedEvictionReason``: which resources are over, with usage and threshold percentages."""
    names = sorted(high_pct)

    def reason(load: NodeLoad, prod: bool) -> str:
        if prod:
            usage, limits, percents, kind = (
                load.usage.prod_usage,
                load.thresholds.prod_high,
                prod_high_pct,
                "prod",
            )
        else:
            usage, limits, percents, kind = load.usage.usage, load.thresholds.high, high_pct, "node"
        over = overutilized(usage, limits)
        pct = usage_percentages(usage, load.usage.allocatable)
        infos = [
            f"{kind} {name} usage({pct.get(name, 0.0):.2f}%)>threshold({percents.get(name, 0.0):.2f}%)"
            for name in names
            if name in over
        ]
        return "node is overutilized, " + ", ".join(infos)

    return reason
