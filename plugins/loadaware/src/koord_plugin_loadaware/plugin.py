"""``LoadAwareScheduling``: keep pods off hot nodes, prefer lightly loaded ones (Koordinator ``loadaware``).

Filter rejects a node when its usage after placing the pod would exceed a threshold (percent of
allocatable); Score prefers the node with the most free capacity after placing it. "Usage" is what koordlet
reports in the node's ``NodeMetric`` plus estimates for the pods it cannot have seen yet (the assign cache),
plus the incoming pod's own estimate. Reserve/Unreserve keep the assign cache in step with this scheduler's
decisions, so a burst of pods does not all land on the node that looked idle a second ago.

Every decision exists twice: per node (``filter``/``score``, straight from the Koordinator algorithm and used
for explanations) and over the whole node table (``filter_all``/``score_all``, NumPy over columns kept up to
date by events). The conformance tests hold the two to identical results.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import numpy as np

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.qos import PriorityClass
from koord_framework.explain.hooks import ExplainSection, NodeExplainer
from koord_framework.plugin import PluginArgs
from koord_framework.scheduler.constant_arrays import all_pass
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import (
    ClusterEvent,
    CodedStatuses,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeUsageEstimate,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    SchedulerPlugin,
    ScorePlugin,
    UsageEstimatingPlugin,
    VectorFilter,
    VectorFilterStatuses,
    VectorScore,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import MAX_NODE_SCORE, Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_plugin_loadaware.args import LoadAwareSchedulingArgs
from koord_plugin_loadaware.assign_cache import AssignCache, NodeLoad
from koord_plugin_loadaware.columns import CachedResult, LoadColumns, NodeView, ShapeCache
from koord_plugin_loadaware.estimator import Estimator, go_round, load_estimator
from koord_plugin_loadaware.feed import ClusterFeed
from koord_plugin_loadaware.metrics import LoadAwareMetrics, Reason, build_collectors, weak_call
from koord_plugin_loadaware.nodemetric import MetricReport
from koord_plugin_loadaware.profile import FilterProfile, base_profile, node_profile
from koord_plugin_loadaware.vectors import Vec, Vectorizer

__all__ = [
    "ERR_AGGREGATED_USAGE_EXCEED_THRESHOLD",
    "ERR_NODE_METRIC_EXPIRED",
    "ERR_USAGE_EXCEED_THRESHOLD",
    "NAME",
    "LoadAwareScheduling",
]

NAME: Final = "LoadAwareScheduling"
STATE_KEY: Final = "IncomingPodEstimated" + NAME
_INCOMING_MEMO_SIZE: Final = 4096
"""Distinct pod estimates remembered (a workload has a few shapes; the bound keeps odd ones in check)."""
ERR_NODE_METRIC_EXPIRED: Final = "node(s) nodeMetric expired"
ERR_USAGE_EXCEED_THRESHOLD: Final = "node(s) {} usage exceed threshold"
ERR_AGGREGATED_USAGE_EXCEED_THRESHOLD: Final = "node(s) {} aggregated usage exceed threshold"


@dataclass(frozen=True, slots=True)
class IncomingPod:
    """What PreFilter works out once per pod: its estimate and how it is judged.

    Shared by every pod the estimator gives the same key (see ``Estimator.estimate_key``): it is immutable,
    and ``estimated`` is only ever copied.
    """

    estimated: Vec
    shape: tuple[int, ...]
    """The estimate as a hashable key: pods of one shape share the vectorised results."""
    prod: bool
    daemonset: bool
    filter_key: tuple[tuple[int, ...], bool]
    """The key of this pod's cached Filter verdicts: (shape, judged as prod)."""
    score_key: tuple[tuple[int, ...], bool]
    """The key of this pod's cached scores: (shape, scored by prod usage)."""

    def clone(self) -> IncomingPod:
        return self  # immutable


def is_daemonset_pod(pod: PodInfo) -> bool:
    """DaemonSet pods must run on their node whatever its load (any owner reference of kind DaemonSet)."""
    # Most pods have no owner reference: skip building the generator then.
    return bool(pod.owner_refs) and any(ref.kind == "DaemonSet" for ref in pod.owner_refs)


def least_used_score(used: int, capacity: int) -> int:
    if capacity == 0 or used > capacity:
        return 0
    return (capacity - used) * MAX_NODE_SCORE // capacity


def load_aware_score(
    dominant_weight: int, weights: Sequence[int], used: Sequence[int], alloc: Sequence[int]
) -> int:
    """Weighted free-capacity score plus the dominant (least free) resource's score times its weight."""
    node_score = 0
    dominant = MAX_NODE_SCORE if dominant_weight else 0
    weight_sum = dominant_weight
    for i, weight in enumerate(weights):
        score = least_used_score(used[i], alloc[i])
        node_score += score * weight
        weight_sum += weight
        dominant = min(dominant, score)
    node_score += dominant * dominant_weight
    return node_score // weight_sum if weight_sum > 0 else 0


class LoadAwareScheduling(
    SchedulerPlugin[LoadAwareSchedulingArgs],
    PreFilterPlugin,
    FilterPlugin,
    VectorFilter,
    VectorFilterStatuses,
    ScorePlugin,
    VectorScore,
    ReservePlugin,
    EnqueueExtensions,
    UsageEstimatingPlugin,
    NodeExplainer,
):
    """Koordinator's LoadAwareScheduling: Filter and Score by node usage from NodeMetric plus estimates."""

    name: ClassVar[str] = NAME
    Args: ClassVar[type[PluginArgs]] = LoadAwareSchedulingArgs

    def __init__(self, args: LoadAwareSchedulingArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        parsed = self.args
        self.la_args: LoadAwareSchedulingArgs = parsed
        self.vectorizer = Vectorizer(parsed.resource_names())
        self.estimator: Estimator = load_estimator(parsed, handle)
        self.base_profile: FilterProfile = base_profile(parsed, self.vectorizer)
        weights = self.vectorizer.to_vec(parsed.resource_weights)
        self.dominant_weight = parsed.dominant_resource_weight
        self.score_weights: Vec | None = weights if (self.dominant_weight or any(weights)) else None
        self._weight_sum = sum(weights) + self.dominant_weight
        score_agg = parsed.aggregated_score()
        self.score_aggregation: tuple[str, int] | None = (
            (score_agg[0], round(score_agg[1] * 1e9)) if score_agg is not None else None
        )
        self.columns = LoadColumns(len(self.vectorizer), parsed.node_metric_expiration_seconds)
        resources = len(self.vectorizer)
        self._filter_cache = ShapeCache(
            self._filter_codes, self._filter_code_of_row, self.columns, value_range=2 + 2 * resources
        )
        self._score_cache = ShapeCache(self._scores, self._score_of_row, self.columns)
        # Per reason code (see _PASS): the Filter status and the rejection counter's labels.
        self._code_statuses = [self._status_of_code(code) for code in range(2 + 2 * resources)]
        self._code_labels: list[tuple[str, str]] = [("", ""), (Reason.NODE_METRIC_EXPIRED, "")]
        self._code_labels += [(Reason.USAGE, name) for name in self.vectorizer.names]
        self._code_labels += [(Reason.AGGREGATED_USAGE, name) for name in self.vectorizer.names]
        self._incoming_memo: dict[Hashable, IncomingPod] = {}
        self._now = handle.clock.now
        self._no_node = NodeView(
            self.vectorizer.empty(), self.vectorizer.empty(), self.vectorizer.empty(), None, 0
        )
        self._bound_rows = 0
        self._node_views: dict[str, tuple[NodeRecord, NodeView, FilterProfile]] = {}
        registry = handle.metrics
        collectors = handle.shared(
            "koord_plugin_loadaware.metrics", lambda: build_collectors(registry), scope="component"
        )
        self.metrics = LoadAwareMetrics(
            collectors,
            handle.profile_name,
            staleness=weak_call(self, "_oldest_metric_age"),
            expired=weak_call(self, "_expired_node_count"),
            without=weak_call(self, "_nodes_without_metric"),
            assigned=weak_call(self, "_assigned_pod_count"),
        )
        self.feed = ClusterFeed(parsed, self.vectorizer, self.estimator, handle.clock.now, self.metrics)
        self.cache: AssignCache = self.feed.cache
        self._lock = self.feed.lock
        self.feed.subscribe(handle.informer)

    def close(self) -> None:
        """Stop following the informer: it is the scheduler's and outlives this plugin."""
        self.feed.unsubscribe()

    # --- events -----------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("NodeMetric", "Add"),
            ClusterEvent("NodeMetric", "Update"),
            ClusterEvent("NodeMetric", "Delete"),
        ]

    # --- per-node views ---------------------------------------------------------------------------------
    def _node_view(self, record: NodeRecord) -> tuple[NodeView, FilterProfile]:
        """The node's allocatable, filter profile and usage limits, worked out once per Node object."""
        cached = self._node_views.get(record.name)
        if cached is not None and cached[0] is record:
            return cached[1], cached[2]
        alloc = self.vectorizer.to_vec(self.estimator.estimate_node(record))
        profile = node_profile(self.base_profile, record.annotations, self.vectorizer)
        if profile.aggregated is not None:
            view = NodeView(alloc, profile.aggregated, profile.prod, profile.agg_type, profile.agg_window_ns)
        else:
            view = NodeView(alloc, profile.usage, profile.prod, None, 0)
        self._node_views[record.name] = (record, view, profile)
        return view, profile

    def _stale(self, size: int) -> bool:
        """Whether ``_sync`` has anything to do: the table grew, or some node's row must be rewritten.

        False is the usual answer for all but the first call of a cycle. Reading the two collections without
        the lock is safe: an event that lands just after this check is taken by the next sync, exactly as if
        it had arrived after this call.
        """
        feed = self.feed
        return size > self._bound_rows or bool(feed.dirty) or bool(feed.node_pending)

    def _sync(self, table: NodeTable | None = None) -> None:
        """Bring the columns up to date: rows the table gained, and nodes something happened to."""
        table = table if table is not None else self.handle.table
        if not self._stale(table.size):
            return
        with self._lock:
            if table.size > self._bound_rows:
                self.columns.ensure(table.size)
                self.feed.dirty.update(table.names[self._bound_rows : table.size])
                self._bound_rows = table.size
            for name in self.feed.take_dirty(self.handle.node_info):
                row = table.index.get(name)
                if row is None:
                    continue
                info = self.handle.node_info(name)
                if info is None:
                    self._node_views.pop(name, None)
                    self.columns.write(row, self._no_node, None, None)
                    continue
                view, _ = self._node_view(info.node)
                self.columns.write(row, view, self.cache.get(name), self.score_aggregation)
            self.columns.trim_log()

    def _expired(self, metric: MetricReport, now: float) -> bool:
        """Koordinator's ``isNodeMetricExpired``."""
        if metric.update_time is None:
            return True
        expiration = self.la_args.node_metric_expiration_seconds
        return expiration > 0 and now - metric.update_time >= expiration

    # --- PreFilter ----------------------------------------------------------------------------------------
    def incoming(self, state: CycleState, pod: PodInfo) -> IncomingPod:
        """The pod's estimate for this cycle (computed once, then read from the cycle state)."""
        found = state.get(STATE_KEY)
        if isinstance(found, IncomingPod):
            return found
        incoming = self._estimate_incoming(pod)
        state.write(STATE_KEY, incoming)
        return incoming

    def _estimate_incoming(self, pod: PodInfo) -> IncomingPod:
        """The pod's ``IncomingPod``, shared with earlier pods the estimator says estimate the same."""
        prod = pod.priority_class is PriorityClass.PROD
        daemonset = is_daemonset_pod(pod)
        key = self.estimator.estimate_key(pod)
        memo_key = (key, prod, daemonset) if key is not None else None
        if memo_key is not None:
            found = self._incoming_memo.get(memo_key)
            if found is not None:
                return found
        vec = self.vectorizer.to_vec(self.estimator.estimate_pod(pod))
        shape = tuple(vec)
        incoming = IncomingPod(
            vec,
            shape,
            prod,
            daemonset,
            filter_key=(shape, prod),
            score_key=(shape, self.la_args.score_according_prod_usage and prod),
        )
        if memo_key is not None:
            if len(self._incoming_memo) >= _INCOMING_MEMO_SIZE:
                self._incoming_memo.clear()
            self._incoming_memo[memo_key] = incoming
        return incoming

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        self.incoming(state, pod)
        self._sync()
        return None, Status.success()

    # --- Filter -------------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        # Rejections are counted in filter_all only: the framework calls filter on nodes filter_all already
        # rejected (to get their reasons), and for preemption what-ifs, neither of which is a new rejection.
        with self._lock:
            return self._filter_one(state, pod, node)[0]

    def _filter_one(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[Status, dict[str, Any]]:
        """Filter for one node, with the numbers behind the decision (for ``explain``)."""
        incoming = self.incoming(state, pod)
        if incoming.daemonset:
            return Status.success(), {"skipped": "DaemonSet pod"}
        view, profile = self._node_view(node.node)
        alloc = view.alloc
        prod_pod = profile.prod_enabled and incoming.prod
        aggregated = False
        if prod_pod:
            thresholds = profile.prod
        elif profile.aggregated is not None:
            thresholds, aggregated = profile.aggregated, True
        else:
            thresholds = profile.usage
        detail: dict[str, Any] = {"mode": "prod" if prod_pod else "aggregated" if aggregated else "node"}
        if not any(thresholds):
            return Status.success(), {**detail, "skipped": "thresholds disabled"}
        load = self.cache.get(node.name)
        metric = load.metric if load is not None else None
        if load is None or metric is None:
            return Status.success(), {**detail, "skipped": "no NodeMetric"}
        if self.la_args.filter_expired_node_metrics and self._expired(metric, self.handle.clock.now()):
            if self.la_args.enable_schedule_when_node_metrics_expired:
                return Status.success(), {**detail, "skipped": "NodeMetric expired, scheduling allowed"}
            return Status.unschedulable(ERR_NODE_METRIC_EXPIRED), {**detail, "expired": True}
        if not metric.has_info:
            return Status.success(), {**detail, "skipped": "NodeMetric has no status.nodeMetric"}
        if aggregated:
            existing = load.existing_estimate(False, profile.agg_type, profile.agg_window_ns)
        else:
            existing = load.existing_estimate(prod_pod)
        assert existing is not None  # the node has a NodeMetric
        used = [e + i for e, i in zip(existing, incoming.estimated)]
        usage: dict[str, dict[str, int]] = {}
        verdict = Status.success()
        for i, threshold in enumerate(thresholds):
            if threshold == 0 or alloc[i] <= 0:  # Koordinator skips 0; a negative allocatable is nonsense too
                continue
            percent = go_round(float(used[i]) / float(alloc[i]) * 100)
            name = self.vectorizer.names[i]
            usage[name] = {
                "percent": percent,
                "threshold": threshold,
                "used": used[i],
                "allocatable": alloc[i],
            }
            if percent > threshold and verdict.is_success:
                template = ERR_AGGREGATED_USAGE_EXCEED_THRESHOLD if aggregated else ERR_USAGE_EXCEED_THRESHOLD
                verdict = Status.unschedulable(template.format(name))
        return verdict, {**detail, "usage": usage}

    # Reason codes of the vectorised Filter, per row: 0 passes, 1 NodeMetric expired, 2 + r the usage of
    # resource r exceeds its threshold, 2 + R + r the same for an aggregated (percentile) threshold.
    _PASS: ClassVar[int] = 0
    _EXPIRED: ClassVar[int] = 1

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        incoming = self.incoming(state, pod)
        n = rows.size
        if incoming.daemonset or n == 0:
            return all_pass(n)
        if not self.columns.gated_rows:
            self._sync(table)
            if not self.columns.gated_rows:  # no node has a threshold (Koordinator's shipped profile)
                return all_pass(n)
        size = self._prepare(table)
        verdicts = self._filter_cache.get(incoming.filter_key, size)
        if verdicts.counts[self._PASS] == size:  # no node rejects this pod shape
            return all_pass(n)
        passed: BoolArray = verdicts.is_zero.take(rows)
        rejected = n - int(np.count_nonzero(passed))
        if rejected:
            self._count_rejections(verdicts, rows, passed, rejected)
        return passed

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> CodedStatuses:
        """What ``filter`` says on each row ``filter_all`` rejected, from the same reason codes.

        An unschedulable pod needs the reason of every node; asking ``filter`` node by node costs ~30 µs
        each, which on 1,000 nodes is most of a failed cycle. The codes already name the reason, so the
        answer is the code array itself and one status per distinct code.
        """
        incoming = self.incoming(state, pod)
        size = self._prepare(table)
        codes = self._filter_cache.get(incoming.filter_key, size).values.take(rows)
        if codes.size == 0:
            return CodedStatuses.from_codes(codes, self._status_of_code)
        # What CodedStatuses.from_codes gives (distinct codes in ascending order, each row's index among
        # them), from a count per code instead of np.unique's sort: there are only 2 + 2R codes.
        present: list[int] = np.flatnonzero(np.bincount(codes, minlength=len(self._code_statuses))).tolist()
        if len(present) == 1:
            ids: Int64Array = np.zeros(codes.size, dtype=np.int64)
        else:
            index = np.zeros(len(self._code_statuses), dtype=np.int64)
            index[present] = np.arange(len(present), dtype=np.int64)
            ids = index.take(codes)
        return CodedStatuses(ids, [self._code_statuses[code] for code in present])

    def _status_of_code(self, code: int) -> Status:
        if code == self._PASS:
            return Status.success()
        if code == self._EXPIRED:
            return Status.unschedulable(ERR_NODE_METRIC_EXPIRED)
        resources = len(self.vectorizer)
        r = code - 2
        if r < resources:
            return Status.unschedulable(ERR_USAGE_EXCEED_THRESHOLD.format(self.vectorizer.names[r]))
        return Status.unschedulable(
            ERR_AGGREGATED_USAGE_EXCEED_THRESHOLD.format(self.vectorizer.names[r - resources])
        )

    def _prepare(self, table: NodeTable) -> int:
        """Columns and expiry brought up to date for this call; returns the table size."""
        size = table.size
        if self._stale(size):
            self._sync(table)
        now = self._now()
        if not self.columns.expiry_current(now):
            with self._lock:
                self.columns.refresh_expiry(now, size)
                self.columns.trim_log()
        return size

    def _filter_codes(self, key: Any, rows: Int64Array | None, size: int) -> Int64Array:
        """Filter's verdict for ``rows`` (None: all rows) and one pod shape ``(estimate, prod)``."""
        estimate, prod = key
        c = self.columns
        c.flush()

        def pick(column: Any) -> Any:
            return column[:size] if rows is None else column.take(rows)

        gate = pick(c.gate_usage)
        prod_rows = pick(c.prod_on) if prod else None
        if prod_rows is not None:
            gate = np.where(prod_rows, pick(c.gate_prod), gate)
        codes = np.zeros(gate.size, dtype=np.int64)
        if not gate.any():
            return codes
        active = gate & pick(c.has_info)
        if self.la_args.filter_expired_node_metrics:
            expired = pick(c.expired)
            if not self.la_args.enable_schedule_when_node_metrics_expired:
                codes[gate & expired] = self._EXPIRED
            active &= ~expired
        aggregated = pick(c.is_agg)
        if prod_rows is not None:
            aggregated = aggregated & ~prod_rows
        resources = len(estimate)
        # Reversed, so that a row's code ends up naming its first violating resource, as Koordinator reports.
        for r in reversed(range(resources)):
            room = pick(c.room_usage[r])
            if prod_rows is not None:
                room = np.where(prod_rows, pick(c.room_prod[r]), room)
            hit = active & (room <= estimate[r])
            codes[hit] = np.where(aggregated[hit], 2 + resources + r, 2 + r)
        return codes

    def _filter_code_of_row(self, key: Any, row: int) -> int:
        """``_filter_codes`` for one row, from its ``RowData`` (the same decisions in the same order)."""
        estimate, prod = key
        data = self.columns.rows[row] if row < len(self.columns.rows) else None
        if data is None:
            return self._PASS
        use_prod = prod and data.prod_on
        if not (data.gate_prod if use_prod else data.gate_usage):
            return self._PASS
        if self.la_args.filter_expired_node_metrics and self.columns.expired[row]:
            return self._PASS if self.la_args.enable_schedule_when_node_metrics_expired else self._EXPIRED
        if not data.has_info:
            return self._PASS
        rooms = data.room_prod if use_prod else data.room_usage
        offset = 2 + (len(estimate) if data.is_agg and not use_prod else 0)
        for r, est in enumerate(estimate):
            if rooms[r] <= est:
                return offset + r
        return self._PASS

    def _count_rejections(
        self, verdicts: CachedResult, rows: Int64Array, passed: BoolArray, rejected: int
    ) -> None:
        """Add the ``rejected`` rows of this call to the rejection counter, by reason code.

        When a single reason occurs anywhere in the table (the usual case), every rejected row has it and
        there is nothing to count row by row.
        """
        reasons = verdicts.present()
        if reasons[0] == self._PASS:
            reasons = reasons[1:]
        if len(reasons) == 1:
            reason, resource = self._code_labels[reasons[0]]
            self.metrics.rejected(reason, resource, rejected)
            return
        codes = verdicts.values.take(rows)[~passed]
        per_code = np.bincount(codes, minlength=len(verdicts.counts)).tolist()
        for code in reasons:
            reason, resource = self._code_labels[code]
            self.metrics.rejected(reason, resource, per_code[code])

    # --- Score --------------------------------------------------------------------------------------------
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        with self._lock:
            return self._score_one(state, pod, node)[0], Status.success()

    def _score_one(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, dict[str, Any]]:
        weights = self.score_weights
        if weights is None:
            return 0, {"skipped": "score weights disabled"}
        incoming = self.incoming(state, pod)
        load = self.cache.get(node.name)
        metric = load.metric if load is not None else None
        if load is None or metric is None:
            return 0, {"skipped": "no NodeMetric"}
        if self._expired(metric, self.handle.clock.now()):
            return 0, {"skipped": "NodeMetric expired"}
        if not metric.has_info:
            return 0, {"skipped": "NodeMetric has no status.nodeMetric"}
        alloc = self._node_view(node.node)[0].alloc
        prod_pod = self.la_args.score_according_prod_usage and incoming.prod
        if not prod_pod and self.score_aggregation is not None:
            existing = load.existing_estimate(False, *self.score_aggregation)
        else:
            existing = load.existing_estimate(prod_pod)
        assert existing is not None
        used = [e + i for e, i in zip(existing, incoming.estimated)]
        score = load_aware_score(self.dominant_weight, weights, used, alloc)
        free = {name: least_used_score(used[i], alloc[i]) for i, name in enumerate(self.vectorizer.names)}
        return score, {
            "mode": "prod" if prod_pod else "node",
            "used": self.vectorizer.to_list(used),
            "free": free,
        }

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        n = rows.size
        if self.score_weights is None or n == 0:
            return np.zeros(n, dtype=np.int64)
        incoming = self.incoming(state, pod)
        size = self._prepare(table)
        out: Int64Array = self._score_cache.get(incoming.score_key, size).values.take(rows)
        return out

    def _scores(self, key: Any, rows: Int64Array | None, size: int) -> Int64Array:
        """Raw Score for ``rows`` (None: all rows) and one pod shape ``(estimate, prod)``."""
        estimate, prod_pod = key
        weights = self.score_weights
        assert weights is not None
        c = self.columns
        c.flush()

        def pick(column: Any) -> Any:
            return column[:size] if rows is None else column.take(rows)

        existing = c.ex_prod if prod_pod else c.ex_score
        n = size if rows is None else rows.size
        total = np.zeros(n, dtype=np.int64)
        dominant = np.full(n, MAX_NODE_SCORE, dtype=np.int64) if self.dominant_weight else None
        for r, est in enumerate(estimate):
            alloc = pick(c.alloc[r])
            used = pick(existing[r]) + est
            free = (alloc - used) * MAX_NODE_SCORE // np.where(alloc == 0, 1, alloc)
            least = np.where((alloc == 0) | (used > alloc), 0, free)
            if weights[r]:
                total += least * weights[r]
            if dominant is not None:
                np.minimum(dominant, least, out=dominant)
        if dominant is not None:
            total += dominant * self.dominant_weight
        scores = total // self._weight_sum if self._weight_sum > 0 else total * 0
        ok = pick(c.has_metric) & pick(c.has_info) & ~pick(c.expired)
        out: Int64Array = np.where(ok, scores, 0)
        return out

    def _score_of_row(self, key: Any, row: int) -> int:
        """``_scores`` for one row, from its ``RowData``."""
        estimate, prod_pod = key
        data = self.columns.rows[row] if row < len(self.columns.rows) else None
        if data is None or not (data.has_metric and data.has_info) or self.columns.expired[row]:
            return 0
        weights = self.score_weights
        assert weights is not None
        existing = data.ex_prod if prod_pod else data.ex_score
        used = [e + est for e, est in zip(existing, estimate)]
        return load_aware_score(self.dominant_weight, weights, used, data.alloc)

    # --- Reserve --------------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        found = state.get(STATE_KEY)
        estimated = found.estimated if isinstance(found, IncomingPod) else None
        with self._lock:
            self.cache.assign(node_name, pod, estimated)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        with self._lock:
            self.cache.unassign(node_name, pod.uid)

    # --- explanations and introspection ---------------------------------------------------------------------
    def explain(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> dict[str, Any]:
        """Why this node passes or fails and how it scores: usage percent vs threshold per resource,
        the raw score and the NodeMetric's age. Side-effect free (no metrics recorded)."""
        with self._lock:
            status, filter_detail = self._filter_one(state, pod, node)
            score, score_detail = self._score_one(state, pod, node)
            load = self.cache.get(node.name)
            metric = load.metric if load is not None else None
        age = None
        if metric is not None and metric.update_time is not None:
            age = self.handle.clock.now() - metric.update_time
        return {
            "filter": {"status": status.code.label, "reasons": list(status.reasons), **filter_detail},
            "score": {"raw": score, **score_detail},
            "nodeMetricAgeSeconds": age,
            "estimatedPod": self.vectorizer.to_list(self.incoming(state, pod).estimated),
        }

    def estimate_node_usage(self, node: NodeInfo) -> NodeUsageEstimate | None:
        """The usage a non-prod pod's Filter starts from (reported usage plus the estimates of pods not
        reported yet; the percentile one when aggregated filtering is on), and the thresholds it is held to.
        """
        with self._lock:
            load = self.cache.get(node.name)
            metric = load.metric if load is not None else None
            if load is None or metric is None or not metric.has_info:
                return None
            view, profile = self._node_view(node.node)
            if profile.aggregated is not None:
                used = load.existing_estimate(False, profile.agg_type, profile.agg_window_ns)
                thresholds = profile.aggregated
            else:
                used = load.existing_estimate(False)
                thresholds = profile.usage
            expired = self._expired(metric, self.handle.clock.now())
        names = self.vectorizer.names
        return NodeUsageEstimate(
            used=dict(zip(names, used or [0] * len(names))),
            allocatable=dict(zip(names, view.alloc)),
            thresholds={n: t for n, t in zip(names, thresholds) if t},
            expired=expired,
        )

    def explain_node(self, node_name: str) -> ExplainSection:
        """``koord explain node``: usage plus estimates against the thresholds, the assigned pods."""
        from koord_plugin_loadaware.explain import explain_node

        return explain_node(self, node_name)

    def node_load(self, node_name: str) -> NodeLoad | None:
        """The assign-cache entry of a node (assigned pods, NodeMetric, running sums)."""
        return self.cache.get(node_name)

    def _oldest_metric_age(self) -> float:
        now = self.handle.clock.now()
        ages = [
            now - n.metric.update_time for n in self.cache if n.metric and n.metric.update_time is not None
        ]
        return max(ages, default=0.0)

    def _expired_node_count(self) -> float:
        now = self.handle.clock.now()
        return float(sum(1 for n in self.cache if n.metric is not None and self._expired(n.metric, now)))

    def _nodes_without_metric(self) -> float:
        table = self.handle.table
        with_metric = {n.name for n in self.cache if n.metric is not None}
        present = (name for row, name in enumerate(table.names) if table.present[row])
        return float(sum(1 for name in present if name not in with_metric))

    def _assigned_pod_count(self) -> float:
        return float(self.cache.pod_count)
