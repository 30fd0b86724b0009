"""NodeResourcesFit and NodeResourcesBalancedAllocation (kube-scheduler ``plugins/noderesources``).

Fit's Filter checks pod count and every requested resource against ``allocatable - requested``; its Score
applies one of three strategies over the configured resources. Scoring uses the *non-zero* cpu/memory
requests (100m / 200Mi for a container that requests nothing) for the pod and the node, except
BalancedAllocation, which uses real requests and skips best-effort pods. An extended (scalar) resource the
pod does not request is left out of the score, as is any resource the node does not have.

Both plugins have vectorised forms over the ``NodeTable`` that agree exactly with the per-node forms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.interface import (
    ClusterEvent,
    CodedStatuses,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeInfo,
    NodeTable,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    SchedulerPlugin,
    ScorePlugin,
    VectorFilter,
    VectorFilterStatuses,
    VectorScore,
)
from koord_framework.scheduler.nodeinfo import non_zero_requests
from koord_framework.scheduler.status import Status
from koord_framework.scheduler.table import BoolArray, Int64Array
from koord_plugin_kubernetes._resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    broken_linear,
    broken_linear_array,
    go_div,
    go_div_array,
    go_round,
    go_round_array,
    is_extended,
    is_scalar,
    tracked,
)
from koord_plugin_kubernetes._shared import SharedCaches
from koord_plugin_kubernetes.args import (
    LEAST_ALLOCATED,
    MAX_CUSTOM_PRIORITY_SCORE,
    MOST_ALLOCATED,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
)

MAX_NODE_SCORE = 100
_FIRST_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)


# --- the Filter ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _FitRequest:
    """The resources Filter checks: the pod's requests on tracked names, in kube-scheduler's reason order."""

    checks: tuple[tuple[str, int], ...]
    cache_key: str
    """The row-cache key of these checks, a string: Python hashes a string once, a tuple on every lookup."""

    def clone(self) -> _FitRequest:
        return self


def _fit_request(pod: PodInfo, ignored: frozenset[str], ignored_groups: frozenset[str]) -> _FitRequest:
    req = pod.requests
    checks: list[tuple[str, int]] = [(r, req[r]) for r in _FIRST_RESOURCES if req.get(r, 0) > 0]
    for name in sorted(req):
        value = req[name]
        if name in _FIRST_RESOURCES or value == 0 or not is_scalar(name):
            continue
        if is_extended(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups):
            continue
        checks.append((name, value))
    return _FitRequest(tuple(checks), f"filter{checks!r}")


def insufficient_resources(request: _FitRequest, node: NodeInfo) -> list[str]:
    """The failure reasons of ``fitsRequest`` (empty when the pod fits)."""
    reasons: list[str] = []
    alloc = node.allocatable
    if len(node.pods) + 1 > alloc.get(PODS, 0):
        reasons.append("Too many pods")
    requested = node.requested
    for name, value in request.checks:
        if value > alloc.get(name, 0) - requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def _fits_node(node: NodeInfo, request: _FitRequest) -> bool:
    """``not insufficient_resources(request, node)`` without building the reasons."""
    alloc = node.allocatable
    if len(node.pods) + 1 > alloc.get(PODS, 0):
        return False
    requested = node.requested
    # A plain loop rather than all(): no generator on the path patched for every node a pod lands on.
    for name, value in request.checks:  # noqa: SIM110
        if value > alloc.get(name, 0) - requested.get(name, 0):
            return False
    return True


T = TypeVar("T")


class _RequestsMemo(Generic[T]):
    """Values derived from a pod's requests (and from ``extra``, a hashable of what else they depend on).

    Replicas share one ``requests`` dict (``PodInfo.from_manifest`` caches parsed resources by content, and
    a parsed dict is never modified), so the dict's identity is looked up first; its content second. An
    entry holds the dict it was made for, so its id cannot be reused by another dict meanwhile.
    """

    def __init__(self, build: Callable[[PodInfo, Any], T]) -> None:
        self._build = build
        self._by_identity: dict[int, tuple[dict[str, int], Any, T]] = {}
        self._by_content: dict[tuple[Any, tuple[tuple[str, int], ...]], T] = {}

    def get(self, pod: PodInfo, extra: Any) -> T:
        requests = pod.requests
        hit = self._by_identity.get(id(requests))
        if hit is not None and hit[0] is requests and hit[1] == extra:
            return hit[2]
        key = (extra, tuple(requests.items()))
        found = self._by_content.get(key)
        if found is None:
            if len(self._by_content) >= 1024:
                self._by_content.clear()
            found = self._by_content[key] = self._build(pod, extra)
        if len(self._by_identity) >= 1024:
            self._by_identity.clear()
        self._by_identity[id(requests)] = (requests, extra, found)
        return found


# --- the scorers
_NON_ZERO_CPU, _NON_ZERO_MEMORY, _REQUESTED = 0, 1, 2
"""Where a scored resource's node-side amount comes from (``_ScoreShape.terms``)."""

_Term = tuple[int, str, int, int]
"""(source, resource name, the pod's request, weight)."""


@dataclass(frozen=True, slots=True)
class _ScoreShape:
    """A pod's requests as one scorer sees them.

    ``requests`` has one entry per configured resource; ``terms`` keeps only the resources that can count on
    some node (a scalar resource the pod does not request, or a name kube-scheduler does not track, never
    does), with where the node's amount comes from. Pods with equal requests share one shape.
    """

    requests: tuple[int, ...]
    terms: tuple[_Term, ...]
    cache_key: str
    """The row-cache key (a string, hashed once; see ``_FitRequest.cache_key``)."""

    def clone(self) -> _ScoreShape:
        return self


class _AllocationScorer:
    """``resourceAllocationScorer``: per configured resource, (allocatable, requested) of a node, then a strategy."""  # noqa: E501

    def __init__(self, resources: Sequence[tuple[str, int]], use_requested: bool) -> None:
        self.names = [n for n, _ in resources]
        self.weights = [w for _, w in resources]
        self.use_requested = use_requested
        self._scalar = [is_scalar(n) for n in self.names]
        self._weights = np.array(self.weights, dtype=np.int64).reshape(-1, 1)
        self._shapes: _RequestsMemo[_ScoreShape] = _RequestsMemo(self._new_shape)

    def shape(self, pod: PodInfo) -> _ScoreShape:
        """The pod's ``_ScoreShape`` (memoised: replicas ask again and again)."""
        return self._shapes.get(pod, non_zero_requests(pod) if not self.use_requested else None)

    def _new_shape(self, pod: PodInfo, nz: tuple[int, int] | None) -> _ScoreShape:
        requests: list[int] = []
        terms: list[_Term] = []
        for name, scalar, weight in zip(self.names, self._scalar, self.weights, strict=True):
            source = _REQUESTED
            if nz is not None and name == CPU:
                source, pod_req = _NON_ZERO_CPU, nz[0]
            elif nz is not None and name == MEMORY:
                source, pod_req = _NON_ZERO_MEMORY, nz[1]
            else:
                pod_req = pod.requests.get(name, 0)
            requests.append(pod_req)
            if (scalar and pod_req == 0) or not (scalar or name in _FIRST_RESOURCES):
                continue
            terms.append((source, name, pod_req, weight))
        return _ScoreShape(tuple(requests), tuple(terms), f"score{requests!r}")

    @staticmethod
    def node_values(node: NodeInfo, terms: Sequence[_Term]) -> tuple[list[int], list[int], list[int]]:
        """(requested, allocatable, weight) of the resources that count on this node (``_counted``), in
        configured order, as three lists."""
        requested: list[int] = []
        allocatable: list[int] = []
        weights: list[int] = []
        for r, a, weight in _counted(node, terms):
            requested.append(r)
            allocatable.append(a)
            weights.append(weight)
        return requested, allocatable, weights

    def table_matrix(
        self, table: NodeTable, rows: Int64Array, pod_requests: Sequence[int]
    ) -> tuple[Int64Array, Int64Array]:
        """``node_values`` of every row as two (resources × rows) matrices (requested, allocatable), with
        zeros for the resources a row does not count."""
        n = rows.shape[0]
        cols: list[int] = []
        for name, pod_req, scalar in zip(self.names, pod_requests, self._scalar, strict=True):
            used = not (pod_req == 0 and scalar) and (name in _FIRST_RESOURCES or scalar)
            cols.append(table.resource_col(name) if used else -1)  # may grow the table: before gathering
        requested = np.zeros((len(cols), n), dtype=np.int64)
        allocatable = np.zeros((len(cols), n), dtype=np.int64)
        alloc_rows = table.allocatable[rows]
        req_rows: Int64Array | None = None
        for i, (name, pod_req, col) in enumerate(zip(self.names, pod_requests, cols, strict=True)):
            if col < 0:
                continue
            allocatable[i] = alloc_rows[:, col]
            if name == CPU and not self.use_requested:
                base = table.non_zero_cpu[rows]
            elif name == MEMORY and not self.use_requested:
                base = table.non_zero_memory[rows]
            else:
                if req_rows is None:
                    req_rows = table.requested[rows]
                base = req_rows[:, col]
            np.add(base, pod_req, out=requested[i])
        requested[allocatable == 0] = 0
        return requested, allocatable

    def counted(self, allocatable: Int64Array) -> tuple[Int64Array, Int64Array]:
        """Weights of the resources each row counts (allocatable != 0) and their per-row sum."""
        w = self._weights * (allocatable != 0)
        return w, w.sum(axis=0)


def _nonnegative(*arrays: Int64Array) -> bool:
    return all(not a.size or int(a.min()) >= 0 for a in arrays)


def _div(numerator: Int64Array, denominator: Int64Array) -> Int64Array:
    """Go's truncating division where ``denominator`` is non-zero (anything where it is zero); plain floor
    division, two NumPy calls instead of six, when nothing is negative."""
    if _nonnegative(numerator, denominator):
        return numerator // np.maximum(denominator, 1)
    return go_div_array(numerator, denominator)


def _least_matrix(scorer: _AllocationScorer, requested: Int64Array, allocatable: Int64Array) -> Int64Array:
    """``_least`` for every row at once."""
    per = np.where(requested > allocatable, 0, _div((allocatable - requested) * MAX_NODE_SCORE, allocatable))
    w, weight_sum = scorer.counted(allocatable)
    node_score = (per * w).sum(axis=0)
    return np.where(weight_sum == 0, 0, _div(node_score, weight_sum))


def _most_matrix(scorer: _AllocationScorer, requested: Int64Array, allocatable: Int64Array) -> Int64Array:
    """``_most`` for every row at once."""
    per = _div(np.minimum(requested, allocatable) * MAX_NODE_SCORE, allocatable)
    w, weight_sum = scorer.counted(allocatable)
    node_score = (per * w).sum(axis=0)
    return np.where(weight_sum == 0, 0, _div(node_score, weight_sum))


def _balanced_matrix(requested: Int64Array, allocatable: Int64Array) -> Int64Array:
    """``_balanced`` for every row at once."""
    n = requested.shape[1]
    if requested.shape[0] == 2 and (not n or int(allocatable.min()) > 0):
        # The common case, two resources every node has: the same float operations as the per-node form.
        f = np.minimum(requested.astype(np.float64) / allocatable.astype(np.float64), 1.0)
        std = np.abs((f[0] - f[1]) / 2)
        out: Int64Array = np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        return out
    return _balanced_array(list(requested), list(allocatable), n)


def _counted(node: NodeInfo, terms: Sequence[_Term]) -> Iterator[tuple[int, int, int]]:
    """(requested with the pod, allocatable, weight) of each resource that counts on ``node``: those it has
    a non-zero allocatable of (kube-scheduler's (0, 0) pair, which every strategy skips). cpu and memory
    come from the non-zero sums where the strategy scores those."""
    alloc = node.allocatable
    node_requested = node.requested
    for source, name, pod_req, weight in terms:
        a = alloc.get(name, 0)
        if a == 0:
            continue
        if source == _NON_ZERO_CPU:
            r = node.non_zero_cpu + pod_req
        elif source == _NON_ZERO_MEMORY:
            r = node.non_zero_memory + pod_req
        else:
            r = node_requested.get(name, 0) + pod_req
        yield r, a, weight


def _least_node(node: NodeInfo, shape: _ScoreShape) -> int:
    """LeastAllocated on one node: per counted resource ``(allocatable - requested) × 100 / allocatable``
    (0 when over), weighted mean, without building ``node_values``' lists: it is the default strategy,
    patched into the row cache for every node a pod lands on."""
    node_score = weight_sum = 0
    for r, a, weight in _counted(node, shape.terms):
        if r <= a:  # an over-committed resource scores 0
            free = (a - r) * MAX_NODE_SCORE  # >= 0
            # Floor division is Go's truncating one when nothing is negative (the usual a > 0).
            node_score += (free // a if a > 0 else go_div(free, a)) * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    return node_score // weight_sum if node_score >= 0 and weight_sum > 0 else go_div(node_score, weight_sum)


def _most(requested: list[int], allocatable: list[int], weights: list[int]) -> int:
    node_score = weight_sum = 0
    for r, a, w in zip(requested, allocatable, weights, strict=True):
        if a == 0:
            continue
        node_score += go_div(min(r, a) * MAX_NODE_SCORE, a) * w
        weight_sum += w
    return 0 if weight_sum == 0 else go_div(node_score, weight_sum)


def _rtcr(
    shape: list[tuple[int, int]], requested: list[int], allocatable: list[int], weights: list[int]
) -> int:
    node_score = weight_sum = 0
    for r, a, w in zip(requested, allocatable, weights, strict=True):
        if a == 0:
            continue
        p = 100 if r > a else go_div(r * 100, a)
        s = broken_linear(shape, p)
        if s > 0:
            node_score += s * w
            weight_sum += w
    return 0 if weight_sum == 0 else go_round(float(node_score) / float(weight_sum))


def _weighted(
    per_resource: list[Int64Array], counted: list[BoolArray], weights: list[int], n: int
) -> tuple[Int64Array, Int64Array]:
    node_score = np.zeros(n, dtype=np.int64)
    weight_sum = np.zeros(n, dtype=np.int64)
    for s, c, w in zip(per_resource, counted, weights, strict=True):
        node_score += np.where(c, s * w, 0)
        weight_sum += np.where(c, w, 0)
    return node_score, weight_sum


def _rtcr_array(
    shape: list[tuple[int, int]],
    requested: list[Int64Array],
    allocatable: list[Int64Array],
    weights: list[int],
    n: int,
) -> Int64Array:
    scores: list[Int64Array] = []
    counted: list[BoolArray] = []
    for r, a in zip(requested, allocatable, strict=True):
        p = np.where(r > a, 100, go_div_array(r * 100, a))
        s = broken_linear_array(shape, p)
        scores.append(s)
        counted.append((a != 0) & (s > 0))
    ns, ws = _weighted(scores, counted, weights, n)
    ratio = ns.astype(np.float64) / np.where(ws == 0, 1, ws).astype(np.float64)
    return np.where(ws == 0, 0, go_round_array(ratio))


def _balanced_node(node: NodeInfo, shape: _ScoreShape) -> int:
    """BalancedAllocation on one node from the requested fractions of the counted resources, in one pass
    (it is patched into the row cache for every node a pod lands on)."""
    fractions: list[float] = []
    for r, a, _ in _counted(node, shape.terms):
        f = float(r) / float(a)
        fractions.append(1.0 if f > 1 else f)
    return _balanced_of(fractions)


def _balanced_of(fractions: list[float]) -> int:
    """The score of the requested fractions (each capped at 1): 100 × (1 − their standard deviation)."""
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total = 0.0
        for f in fractions:
            total += f
        mean = total / len(fractions)
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def _balanced_array(requested: list[Int64Array], allocatable: list[Int64Array], n: int) -> Int64Array:
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.float64)
    first = np.zeros(n, dtype=np.float64)
    second = np.zeros(n, dtype=np.float64)
    fracs: list[tuple[BoolArray, np.ndarray]] = []
    for r, a in zip(requested, allocatable, strict=True):
        valid = a != 0
        f = np.minimum(r.astype(np.float64) / np.where(valid, a, 1).astype(np.float64), 1.0)
        f = np.where(valid, f, 0.0)
        total = np.where(valid, total + f, total)
        first = np.where(valid & (count == 0), f, first)
        second = np.where(valid & (count == 1), f, second)
        count += valid
        fracs.append((valid, f))
    std = np.zeros(n, dtype=np.float64)
    std = np.where(count == 2, np.abs((first - second) / 2), std)
    if len(fracs) > 2:
        safe = np.where(count == 0, 1, count).astype(np.float64)
        mean = total / safe
        acc = np.zeros(n, dtype=np.float64)
        for valid, f in fracs:
            acc = np.where(valid, acc + (f - mean) * (f - mean), acc)
        std = np.where(count > 2, np.sqrt(acc / safe), std)
    return np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)


# --- NodeResourcesFit
_PRE_FILTER_KEY = "PreFilterNodeResourcesFit"
_PRE_SCORE_KEY = "PreScoreNodeResourcesFit"


class NodeResourcesFit(
    SchedulerPlugin[NodeResourcesFitArgs],
    PreFilterPlugin,
    FilterPlugin,
    VectorFilter,
    VectorFilterStatuses,
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    EnqueueExtensions,
    SharedCaches,
):
    """Filters nodes without room for the pod's requests; scores by the configured strategy."""

    name = "NodeResourcesFit"
    Args = NodeResourcesFitArgs

    def __init__(self, args: NodeResourcesFitArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self._ignored = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self.strategy = strategy.type
        self.scorer = _AllocationScorer([(r.name, r.weight) for r in strategy.resources], use_requested=False)
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        ratio = strategy.requested_to_capacity_ratio
        self.shape = [(p.utilization, p.score * scale) for p in ratio.shape] if ratio is not None else []
        self._fit_requests: _RequestsMemo[_FitRequest] = _RequestsMemo(
            lambda pod, _: _fit_request(pod, self._ignored, self._ignored_groups)
        )
        self._score_node: Callable[[NodeInfo, _ScoreShape], int] = (
            _least_node if self.strategy == LEAST_ALLOCATED else self._score_from_lists
        )

    # PreFilter / Filter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        state.write(_PRE_FILTER_KEY, self._fit_request(pod))
        return None, Status.success()

    def _fit_request(self, pod: PodInfo) -> _FitRequest:
        return self._fit_requests.get(pod, None)

    def _request(self, state: CycleState, pod: PodInfo) -> _FitRequest:
        req = state.get(_PRE_FILTER_KEY)
        if req is None:
            req = self._fit_request(pod)
        return req  # type: ignore[no-any-return]

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        reasons = insufficient_resources(self._request(state, pod), node)
        return Status.unschedulable(*reasons) if reasons else Status.success()

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        req = self._request(state, pod)
        cache = self.shared_row_cache
        if cache is None:
            return self._fits(table, rows, req)
        return cache.take_mask(req.cache_key, rows, self._fits, _fits_node, req)

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> Sequence[Status]:
        req = self._request(state, pod)
        if len(req.checks) > 62:  # more than a bit mask holds: node by node
            names = table.names
            statuses = []
            for r in rows.tolist():
                ni = self.handle.node_info(names[r])
                statuses.append(self.filter(state, pod, ni) if ni is not None else Status.unschedulable())
            return statuses
        pods_col = table.resource_col(PODS)
        cols = [table.resource_col(name) for name, _ in req.checks]
        alloc = table.allocatable[rows]
        requested = table.requested[rows]
        code = (table.pod_count[rows] + 1 > alloc[:, pods_col]).astype(np.int64)
        for bit, ((_, value), col) in enumerate(zip(req.checks, cols, strict=True), start=1):
            code |= (value > alloc[:, col] - requested[:, col]).astype(np.int64) << bit

        def status_of(c: int) -> Status:
            reasons = ["Too many pods"] if c & 1 else []
            reasons += [f"Insufficient {name}" for i, (name, _) in enumerate(req.checks) if c >> (i + 1) & 1]
            return Status.unschedulable(*reasons) if reasons else Status.success()

        return CodedStatuses.from_codes(code, status_of)

    @staticmethod
    def _fits(table: NodeTable, rows: Int64Array, req: _FitRequest) -> BoolArray:
        pods_col = table.resource_col(PODS)
        cols = [table.resource_col(name) for name, _ in req.checks]  # may grow the table: before gathering
        alloc = table.allocatable[rows]
        ok: BoolArray = table.pod_count[rows] + 1 <= alloc[:, pods_col]
        if cols:
            requested = table.requested[rows]
            for (_, value), col in zip(req.checks, cols, strict=True):
                ok &= value <= alloc[:, col] - requested[:, col]
        return ok

    # PreScore / Score
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        state.write(_PRE_SCORE_KEY, self.scorer.shape(pod))
        return Status.success()

    def _score_shape(self, state: CycleState, pod: PodInfo) -> _ScoreShape:
        found = state.get(_PRE_SCORE_KEY)
        return found if found is not None else self.scorer.shape(pod)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return self._score_node(node, self._score_shape(state, pod)), Status.success()

    def _score_from_lists(self, node: NodeInfo, shape: _ScoreShape) -> int:
        requested, allocatable, weights = self.scorer.node_values(node, shape.terms)
        if self.strategy == MOST_ALLOCATED:
            return _most(requested, allocatable, weights)
        return _rtcr(self.shape, requested, allocatable, weights)

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        shape = self._score_shape(state, pod)
        cache = self.shared_row_cache
        if cache is None:
            return self._scores(table, rows, shape)
        return cache.take(shape.cache_key, rows, self._scores, self._score_node, shape)

    def _scores(self, table: NodeTable, rows: Int64Array, shape: _ScoreShape) -> Int64Array:
        requested, allocatable = self.scorer.table_matrix(table, rows, shape.requests)
        if self.strategy == LEAST_ALLOCATED:
            return _least_matrix(self.scorer, requested, allocatable)
        if self.strategy == MOST_ALLOCATED:
            return _most_matrix(self.scorer, requested, allocatable)
        n = rows.shape[0]
        return _rtcr_array(self.shape, list(requested), list(allocatable), self.scorer.weights, n)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add"), ClusterEvent("Node", "Update")]


# --- NodeResourcesBalancedAllocation
_BALANCED_KEY = "PreScoreNodeResourcesBalancedAllocation"


class NodeResourcesBalancedAllocation(
    SchedulerPlugin[NodeResourcesBalancedAllocationArgs],
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    SharedCaches,
):
    """Prefers nodes whose requested fractions of the configured resources stay close to each other."""

    name = "NodeResourcesBalancedAllocation"
    Args = NodeResourcesBalancedAllocationArgs

    def __init__(self, args: NodeResourcesBalancedAllocationArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.scorer = _AllocationScorer([(r.name, r.weight) for r in args.resources], use_requested=True)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        shape = self.scorer.shape(pod)
        if not any(shape.requests):
            # Best-effort pods would all stack on the emptiest-looking node (kubernetes#129138).
            return Status.skip()
        state.write(_BALANCED_KEY, shape)
        return Status.success()

    def _score_shape(self, state: CycleState, pod: PodInfo) -> _ScoreShape | None:
        found = state.get(_BALANCED_KEY)
        if found is None:
            found = self.scorer.shape(pod)
            if not any(found.requests):
                return None
        return found  # type: ignore[no-any-return]

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        shape = self._score_shape(state, pod)
        if shape is None:
            return 0, Status.success()
        return _balanced_node(node, shape), Status.success()

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        shape = self._score_shape(state, pod)
        if shape is None:
            return np.zeros(rows.shape[0], dtype=np.int64)
        cache = self.shared_row_cache
        if cache is None:
            return self._scores(table, rows, shape)
        return cache.take(shape.cache_key, rows, self._scores, _balanced_node, shape)

    def _scores(self, table: NodeTable, rows: Int64Array, shape: _ScoreShape) -> Int64Array:
        requested, allocatable = self.scorer.table_matrix(table, rows, shape.requests)
        return _balanced_matrix(requested, allocatable)


__all__ = ["NodeResourcesBalancedAllocation", "NodeResourcesFit", "insufficient_resources", "tracked"]
