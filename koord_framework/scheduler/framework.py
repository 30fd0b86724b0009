"""The profile's plugin runner: one ``Framework`` per scheduling profile.

It instantiates the profile's plugins once (each with its validated args and the profile's handle) and runs
every extension point with kube-scheduler's semantics (``pkg/scheduler/framework/runtime/framework.go``):

* PreFilter runs every plugin; ``Skip`` removes that plugin's Filter (and PreFilterExtensions) for the pod;
  ``UnschedulableAndUnresolvable`` stops at once, ``Unschedulable`` is remembered while the rest still run
  (so that preemption sees every plugin's state); node-set results are intersected.
* Filter stops at the first plugin that rejects a node; the rejecting plugin is the node's reason.
* PostFilter stops at the first Success or UnschedulableAndUnresolvable.
* PreScore ``Skip`` removes that plugin's Score; Score → NormalizeScore → range check → weight.
* Reserve stops at the first failure; Unreserve runs on *every* Reserve plugin in reverse order.
* Permit collects ``Wait`` timeouts (capped at 15 minutes); any rejection wins.
* Bind: the first plugin that does not ``Skip`` decides.

The vectorised fast path: a Filter plugin that also subclasses ``VectorFilter`` is evaluated over NumPy rows
of the snapshot's ``NodeTable`` in one call, a Score plugin with ``VectorScore`` likewise. Plugins keep
profile order and first-failure attribution whatever their form, so the vectorised and per-node paths give
identical results; per-node reasons for vectorised rejections are fetched only when somebody needs them (an
unschedulable pod, ``--explain``): all at once from plugins that also subclass ``VectorFilterStatuses``, else
with ``filter`` node by node. They are kept as arrays (``RowStatuses``: a status index per rejected row), so
that a pod no node fits costs array operations rather than a dictionary entry per node. A score extensions
object that subclasses ``VectorNormalize`` normalises arrays likewise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.errors import PluginLoadError
from koord_framework.featuregates import FeatureGates, gates_for
from koord_framework.plugin import Plugin, close_plugins
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import (
    MAX_RESERVATION_SCORE,
    MIN_RESERVATION_SCORE,
    CycleExplainer,
    NodeRestore,
    PreFilterTransformer,
    ReservationExtensions,
    ReservationFilterPlugin,
    ReservationInfo,
    ReservationPreAllocationRestorePlugin,
    ReservationPreBindPlugin,
    ReservationRestorePlugin,
    ReservationScorePlugin,
    is_reserve_pod,
    reservation_name_of,
)
from koord_framework.scheduler.interface import (
    EXTENSION_POINT_TABLE,
    EXTENSION_POINTS,
    PROFILE_KEYS,
    BindPlugin,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    VectorFilter,
    VectorScore,
)

# Public in ``scheduler.interface`` (the plugin API); re-exported here for code that imported them from the
# runner before.
from koord_framework.scheduler.interface import PODS_TO_ACTIVATE as PODS_TO_ACTIVATE
from koord_framework.scheduler.interface import CodedStatuses as CodedStatuses
from koord_framework.scheduler.interface import VectorFilterStatuses as VectorFilterStatuses
from koord_framework.scheduler.interface import VectorNormalize as VectorNormalize
from koord_framework.scheduler.metrics import SchedulerMetrics
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import MAX_NODE_SCORE, MIN_NODE_SCORE, SUCCESS, Code, Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable

if TYPE_CHECKING:
    from koord_framework.config.scheduler import EffectivePlugins

log = logging.getLogger(__name__)

MAX_PERMIT_TIMEOUT = 15 * 60.0
"""kube-scheduler's cap on a Permit plugin's wait (``maxTimeout``)."""


_EMPTY_ROWS: Int64Array = np.zeros(0, dtype=np.int64)
_CHUNK_SLACK = 64
"""Rows beyond 1.5 × numFeasibleNodesToFind in the first vectorised Filter pass (see ``find_feasible``)."""


def default_normalize_all(
    scores: Int64Array, max_priority: int = MAX_NODE_SCORE, reverse: bool = False
) -> Int64Array:
    """kube-scheduler's ``DefaultNormalizeScore`` over an array (Go's truncating integer division)."""
    top = int(scores.max()) if scores.size else 0
    if top <= 0:
        if reverse:
            return np.full(scores.shape, max_priority, dtype=np.int64)
        return scores.astype(np.int64, copy=True)
    prod = scores.astype(np.int64) * max_priority
    value = np.abs(prod) // top * np.sign(prod)
    return max_priority - value if reverse else value


# --- the layout of a profile ------------------------------------------------------------------------
@dataclass(frozen=True)
class PluginLayout:
    """Which plugin runs where: extension-point name (``PreFilter``) → plugin names in call order."""

    points: Mapping[str, tuple[str, ...]]
    weights: Mapping[str, int]
    classes: Mapping[str, type[Plugin]]
    order: tuple[str, ...]
    """Instantiation order (first mention)."""

    @classmethod
    def from_effective(cls, eff: EffectivePlugins) -> PluginLayout:
        """From the config module's merged profile (profile keys such as ``preFilter``)."""
        points = {EXTENSION_POINTS_BY_KEY.get(k, k): tuple(v) for k, v in eff.points.items()}
        order = tuple(n for n in eff.needed if n in eff.classes)
        return cls(points, dict(eff.score_weights), dict(eff.classes), order)

    @classmethod
    def every_point(
        cls, classes: Sequence[type[Plugin]], weights: Mapping[str, int] | None = None
    ) -> PluginLayout:
        """Each class at every extension point it implements, in the given order (like ``multiPoint``)."""
        points: dict[str, list[str]] = {p: [] for p in EXTENSION_POINTS}
        for klass in classes:
            for point in EXTENSION_POINTS:
                if issubclass(klass, EXTENSION_POINTS[point]):
                    points[point].append(klass.name)
        w = {c.name: (weights or {}).get(c.name, 1) for c in classes if issubclass(c, ScorePlugin)}
        return cls(
            {k: tuple(v) for k, v in points.items()},
            w,
            {c.name: c for c in classes},
            tuple(c.name for c in classes),
        )


EXTENSION_POINTS_BY_KEY: dict[str, str] = PROFILE_KEYS


# --- what the framework needs from its handle -------------------------------------------------------
class SnapshotView(Protocol):
    """The part of the cycle's snapshot the runner reads (``koord_framework.scheduler.cache.Snapshot``)."""

    table: NodeTable
    by_row: list[NodeInfo | None]

    @property
    def node_list(self) -> Sequence[NodeInfo]: ...


class RunnerHandle(Protocol):
    """The part of the handle the runner calls (``koord_framework.scheduler.handle.SchedulerHandle``)."""

    @property
    def snapshot(self) -> SnapshotView: ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def nominated_node_names(self) -> AbstractSet[str]: ...


# --- results ------------------------------------------------------------------------------------------
@dataclass(slots=True)
class PluginScores:
    """One plugin's scores over the scored rows (``--explain``)."""

    raw: Int64Array
    normalized: Int64Array
    weighted: Int64Array


@dataclass(slots=True)
class FilterOutcome:
    """The Filter phase of one pod."""

    feasible: Int64Array
    """Rows that passed every Filter, in evaluation order (at most ``num_to_find``)."""
    processed: int
    """Candidates examined (feasible + rejected), for the rotating start index."""
    rejected_by: dict[str, Int64Array] = field(default_factory=dict)
    """Plugin → rows it was the first to reject; filled only when reasons were asked for or nothing fit
    (a pod that found its nodes needs neither)."""
    statuses: Mapping[str, Status] = field(default_factory=dict)
    """Node name → rejection status (a ``RowStatuses``); complete only when reasons were asked for (or
    nothing fit)."""
    error: Status | None = None


class RowStatuses(Mapping[str, Status]):
    """Node name → rejection status, held as arrays: the rejected rows in order and, per row, an index into
    the short list of distinct statuses (thousands of rejected nodes share a handful of reasons).

    A failed search on a large cluster then costs a few array operations instead of a dictionary entry
    per node: ``counts()`` feeds the "0/N nodes are available" histogram and ``codes(rows)`` lets
    preemption find the nodes where it cannot help, both without visiting nodes one by one.
    """

    __slots__ = ("_by_row", "_index", "_names", "distinct", "ids", "rows")

    def __init__(self, table: NodeTable, rows: Int64Array, ids: Int64Array, distinct: list[Status]) -> None:
        self._names = table.names
        self._index = table.index
        self.rows = rows
        """Rejected rows, in the order their statuses were established."""
        self.ids = ids
        """Per row of ``rows``: its status, an index into ``distinct``."""
        self.distinct = distinct
        self._by_row: Int64Array | None = None

    def _ids_by_row(self) -> Int64Array:
        if self._by_row is None:
            by_row = np.full(len(self._names), -1, dtype=np.int64)
            by_row[self.rows] = self.ids
            self._by_row = by_row
        return self._by_row

    def __getitem__(self, name: str) -> Status:
        row = self._index.get(name)
        by_row = self._ids_by_row()
        if row is None or row >= by_row.shape[0] or by_row[row] < 0:
            raise KeyError(name)
        return self.distinct[int(by_row[row])]

    def __iter__(self) -> Iterator[str]:
        names = self._names
        return iter([names[r] for r in self.rows.tolist()])

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def counts(self) -> list[tuple[Status, int]]:
        """Each distinct status with the number of nodes it rejected."""
        n = np.bincount(self.ids, minlength=len(self.distinct)).tolist()
        return [(st, c) for st, c in zip(self.distinct, n, strict=True) if c]

    def codes(self, rows: Int64Array) -> Int64Array:
        """Per row the ``Code`` of its status, -1 for rows without one."""
        by_row = self._ids_by_row()
        codes = np.array([int(st.code) for st in self.distinct] + [-1], dtype=np.int64)
        return codes[by_row[rows]]  # -1 indexes the trailing "none"


def distinct_statuses(statuses: Mapping[str, Status]) -> list[Status]:
    """The different statuses among ``statuses``' values (cheap for a ``RowStatuses``)."""
    if isinstance(statuses, RowStatuses):
        return [st for st, _ in statuses.counts()]
    return list(statuses.values())


@dataclass(slots=True)
class ScoreOutcome:
    """The weighted totals per feasible node, and each plugin's scores when they are kept."""

    totals: Int64Array
    plugins: dict[str, PluginScores] | None = None


@dataclass(slots=True)
class _Filter:
    """A Filter plugin of the profile, with its vectorised form when it has one."""

    name: str
    plugin: FilterPlugin
    vector: VectorFilter | None


@dataclass(slots=True)
class _Score:
    """A Score plugin of the profile with its weight, vectorised form and normalisation."""

    name: str
    plugin: ScorePlugin
    vector: VectorScore | None
    ext: ScoreExtensions | None
    weight: int


class Framework:
    """Runs one profile's plugins. Cheap per call: plugin lists are resolved once, here."""

    def __init__(
        self,
        profile_name: str,
        layout: PluginLayout,
        args: Mapping[str, Any],
        handle: Any,
        metrics: SchedulerMetrics,
        *,
        percentage_of_nodes_to_score: int | None = None,
        feature_gates: FeatureGates | None = None,
    ) -> None:
        self.profile_name = profile_name
        self.feature_gates = feature_gates if feature_gates is not None else gates_for("scheduler")
        """koord-scheduler's gates (``--feature-gates``; Koordinator's defaults when not given)."""
        self.layout = layout
        self.handle = handle
        self.metrics = metrics
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.plugins: dict[str, Plugin] = {}
        self.closed = False
        for name in layout.order:
            klass = layout.classes[name]
            _check_vector_forms(name, klass)
            try:
                parsed = klass.parse_args(args.get(name))
                self.plugins[name] = klass(parsed, handle)  # type: ignore[call-arg]
            except Exception as exc:
                raise PluginLoadError("koord.scheduler.plugins", name, klass.__module__, exc) from exc

        def at(point: str) -> list[tuple[str, Any]]:
            out = []
            for name in layout.points.get(point, ()):
                inst = self.plugins.get(name)
                if inst is None:
                    raise ValueError(f"profile {profile_name}: plugin {name} at {point} was not instantiated")
                if not isinstance(inst, EXTENSION_POINTS[point]):
                    raise ValueError(f"profile {profile_name}: plugin {name} does not implement {point}")
                out.append((name, inst))
            return out

        # One list per row of the extension-point table; the typed attributes below are views of it.
        self.by_point: dict[str, list[tuple[str, Any]]] = {p.name: at(p.name) for p in EXTENSION_POINT_TABLE}
        points = self.by_point
        self.pre_enqueue: list[tuple[str, PreEnqueuePlugin]] = points["PreEnqueue"]
        self.queue_sort: list[tuple[str, QueueSortPlugin]] = points["QueueSort"]
        self.pre_filter: list[tuple[str, PreFilterPlugin]] = points["PreFilter"]
        self.filters: list[_Filter] = [
            _Filter(n, p, p if isinstance(p, VectorFilter) else None) for n, p in points["Filter"]
        ]
        self.post_filter: list[tuple[str, PostFilterPlugin]] = points["PostFilter"]
        self.pre_score: list[tuple[str, PreScorePlugin]] = points["PreScore"]
        self.scores: list[_Score] = [
            _Score(
                n,
                p,
                p if isinstance(p, VectorScore) else None,
                p.score_extensions(),
                int(layout.weights.get(n, 1) or 1),
            )
            for n, p in points["Score"]
        ]
        self.reserve: list[tuple[str, ReservePlugin]] = points["Reserve"]
        self.permit: list[tuple[str, PermitPlugin]] = points["Permit"]
        self.pre_bind: list[tuple[str, PreBindPlugin]] = points["PreBind"]
        self.bind: list[tuple[str, BindPlugin]] = points["Bind"]
        self.post_bind: list[tuple[str, PostBindPlugin]] = points["PostBind"]
        # Koordinator's extensions (frameworkext): transformers in PreFilter order, the reservation hooks on
        # every plugin of the profile that implements them, in instantiation order.
        self.transformers: list[tuple[str, PreFilterTransformer]] = [
            (n, p) for n, p in self.pre_filter if isinstance(p, PreFilterTransformer)
        ]
        self.reservation_extensions = _ReservationRunner(self.plugins)
        self.explainers: list[tuple[str, CycleExplainer]] = [
            (n, p) for n, p in self.plugins.items() if isinstance(p, CycleExplainer)
        ]

    def close(self) -> None:
        """Call every plugin's ``close`` once, in reverse construction order; a failure is logged and the
        rest still close."""
        if not self.closed:
            self.closed = True
            close_plugins(self.plugins, f"profile {self.profile_name}")

    # --- introspection ------------------------------------------------------------------------------
    def plugin(self, name: str) -> Plugin:
        return self.plugins[name]

    @property
    def has_filter_plugins(self) -> bool:
        return bool(self.filters)

    @property
    def has_score_plugins(self) -> bool:
        return bool(self.scores)

    @property
    def has_post_filter_plugins(self) -> bool:
        return bool(self.post_filter)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """The QueueSort order (kube-scheduler requires exactly one QueueSort plugin)."""
        if not self.queue_sort:
            return False
        return self.queue_sort[0][1].less(a, b)

    def events_to_register(self) -> dict[str, list[ClusterEvent] | None]:
        """Plugin → the events that may help pods it rejected; ``None`` means every event."""
        out: dict[str, list[ClusterEvent] | None] = {}
        for name, inst in self.plugins.items():
            if isinstance(inst, EnqueueExtensions):
                try:
                    out[name] = list(inst.events_to_register())
                except Exception:
                    log.exception("plugin %s: events_to_register failed; assuming every event", name)
                    out[name] = None
            else:
                out[name] = None
        return out

    # --- metrics helper -----------------------------------------------------------------------------
    def _observe(self, plugin: str, point: str, status: Status, t0: float) -> None:
        self.metrics.observe_plugin(plugin, point, status.code.label, perf_counter() - t0)

    # --- PreEnqueue ---------------------------------------------------------------------------------
    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        for name, p in self.pre_enqueue:
            try:
                s = p.pre_enqueue(pod)
            except Exception as exc:
                s = Status.as_error(exc)
            if not s.is_success:
                return s.with_plugin(name)
        return SUCCESS

    # --- PreFilter ----------------------------------------------------------------------------------
    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """Every PreFilter plugin; returns the merged node-set result and the first rejection."""
        sampled = state.record_metrics
        t_point = perf_counter() if sampled else 0.0
        nodes = self.handle.snapshot.node_list
        if self.transformers:
            s = self._run_before_pre_filter(state, pod)
            if not s.is_success:
                return None, s
            view: CycleView | None = state.get(_VIEW_KEY)
            if view is not None and view.affinity_changed:
                nodes = view.node_list
        result: PreFilterResult | None = None
        narrowing: list[str] = []
        returned = SUCCESS
        for name, p in self.pre_filter:
            t0 = perf_counter() if sampled else 0.0
            try:
                r, s = p.pre_filter(state, pod, nodes)
            except Exception as exc:
                r, s = None, Status.as_error(exc)
            if sampled:
                self._observe(name, "PreFilter", s, t0)
            if s.code is Code.SKIP:
                state.skip_filter.add(name)
                continue
            if not s.is_success:
                s = s.with_plugin(name)
                if s.code in (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING):
                    returned = s
                    break
                if s.code is Code.UNSCHEDULABLE:
                    # Keep going: preemption needs every plugin's PreFilter state (kubernetes#119770).
                    if returned.is_success:
                        returned = s
                    continue
                returned = s
                break
            if r is not None and r.node_names is not None:
                narrowing.append(name)
                result = PreFilterResult(set(r.node_names)) if result is None else result.merge(r)
                if result.node_names is not None and not result.node_names:
                    if len(narrowing) == 1:
                        msg = f"node(s) didn't satisfy plugin {narrowing[0]}"
                    else:
                        msg = (
                            f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}] simultaneously"
                        )
                    returned = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (msg,), ",".join(narrowing))
                    break
        if sampled:
            self.metrics.observe_point(
                "PreFilter", returned.code.label, self.profile_name, perf_counter() - t_point
            )
        if result is not None and narrowing:
            state.write(_NARROWING_KEY, tuple(narrowing))
        if self.transformers and returned.is_success:
            returned = self._run_after_pre_filter(state, pod, result)
        return result, returned

    # --- Koordinator's transformers (frameworkext) ----------------------------------------------------
    def _run_before_pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Every transformer's ``before_pre_filter``; their node restores make the cycle's ``CycleView``."""
        merged: dict[str, list[PodInfo]] = {}
        for name, t in self.transformers:
            try:
                restore, s = t.before_pre_filter(state, pod)
            except Exception as exc:
                return _plugin_error(name, "BeforePreFilter", exc)
            if not s.is_success:
                if s.is_rejected:
                    return s.with_plugin(name)
                return Status(Code.ERROR, (f"running BeforePreFilter of {name}: {s.message}",), name, s.error)
            if restore is not None:
                for node, pods in restore.remove_pods.items():
                    merged.setdefault(node, []).extend(pods)
        if merged:
            state.write(_VIEW_KEY, CycleView.restored(self.handle.snapshot, NodeRestore(merged)))
        return SUCCESS

    def _run_after_pre_filter(
        self, state: CycleState, pod: PodInfo, result: PreFilterResult | None
    ) -> Status:
        for name, t in self.transformers:
            try:
                s = t.after_pre_filter(state, pod, result)
            except Exception as exc:
                return _plugin_error(name, "AfterPreFilter", exc)
            if not s.is_success:
                if s.is_rejected:
                    return s.with_plugin(name)
                return Status(Code.ERROR, (f"running AfterPreFilter of {name}: {s.message}",), name, s.error)
        return SUCCESS

    def run_explain(self, state: CycleState, pod: PodInfo, node_name: str | None) -> list[str]:
        """Every ``CycleExplainer``'s lines, prefixed with the plugin's name (a failing one is logged)."""
        out: list[str] = []
        for name, p in self.explainers:
            try:
                out += [f"{name}: {line}" for line in p.explain_cycle(state, pod, node_name)]
            except Exception:
                log.exception("explain of plugin %s failed for pod %s", name, pod.key)
        return out

    def cycle_view(self, state: CycleState) -> SnapshotView:
        """The nodes this pod's cycle sees: the snapshot, with the nodes transformers restored replaced."""
        view: CycleView | None = state.get(_VIEW_KEY)
        return view if view is not None else self.handle.snapshot

    @staticmethod
    def _overrides(state: CycleState) -> dict[int, NodeInfo]:
        view: CycleView | None = state.get(_VIEW_KEY)
        return view.overrides if view is not None else _NO_OVERRIDES

    @staticmethod
    def _restored_positions(state: CycleState, rows: Int64Array) -> Int64Array:
        view: CycleView = state.read(_VIEW_KEY)
        return np.flatnonzero(view.restored_rows[rows])

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> Status:
        return self._run_pre_filter_extension("add", state, pod, to_add, node)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self._run_pre_filter_extension("remove", state, pod, to_remove, node)

    def _run_pre_filter_extension(
        self, which: str, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> Status:
        """AddPod or RemovePod on every PreFilter plugin not skipped for the pod; a failure is an Error."""
        for name, p in self.pre_filter:
            if name in state.skip_filter:
                continue
            ext = p.pre_filter_extensions()
            if ext is None:
                continue
            s = _safe_ext(ext, which, state, pod, other, node)
            if not s.is_success:
                point = "AddPod" if which == "add" else "RemovePod"
                msg = f"running {point} on PreFilter plugin {name}: {s.message}"
                return Status(Code.ERROR, (msg,), name)
        return SUCCESS

    # --- Filter -------------------------------------------------------------------------------------
    def run_filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """Every Filter plugin on one node, stopping at the first rejection (the per-node form only)."""
        for f in self.filters:
            if f.name in state.skip_filter:
                continue
            s = _filter_one(f, state, pod, node)
            if not s.is_success:
                return s
        return SUCCESS

    def run_filter_with_nominated_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """kube-scheduler's two passes: with the node's nominated pods of >= priority, then without them.

        A node fits only if both pass: resources and anti-affinity fail more easily with the nominated pods
        counted, affinity more easily without them. The ``SkipFilterWithNominatedPods`` gate runs the first
        pass only.
        """
        nominated = [
            p
            for p in self.handle.nominated_pods_for_node(node.name)
            if p.uid != pod.uid and p.priority_value >= pod.priority_value
        ]
        if not nominated:
            return self.run_filter(state, pod, node)
        node_with = node.clone()
        state_with = state.clone()
        for other in nominated:
            if other.uid in node_with.pods:
                continue
            node_with.add_pod(other)
            s = self.run_pre_filter_extension_add_pod(state_with, pod, other, node_with)
            if not s.is_success:
                return s
        s = self.run_filter(state_with, pod, node_with)
        if not s.is_success or self.feature_gates.enabled("SkipFilterWithNominatedPods"):
            return s  # the gate skips the second pass (Koordinator's runFilterPluginsWithNominatedPods)
        return self.run_filter(state, pod, node)

    def find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        candidates: Int64Array,
        *,
        start: int,
        num_to_find: int,
        want_reasons: bool,
    ) -> FilterOutcome:
        """The first ``num_to_find`` feasible rows of ``candidates`` rotated to begin at ``start``.

        Deterministic version of kube-scheduler's ``findNodesThatPassFilters``: the nodes examined are exactly
        those up to and including the ``num_to_find``-th feasible one in rotated order, whichever form
        (vectorised or per-node) each plugin has. Vectorised plugins run first, over a prefix of the rotated
        candidates about 1.5 times ``num_to_find`` long (then over the rest only if that prefix holds too
        few feasible nodes); per-node plugins then visit the survivors in order and the search stops as soon
        as enough nodes fit. Filters are side-effect free and independent of the order nodes are visited, so
        this finds the same nodes as running each node's plugins in profile order; first-failure attribution
        (the rejecting plugin of a node) is restored exactly in ``_fill_reasons`` when reasons are needed.
        """
        n = int(candidates.size)
        if n == 0:
            return FilterOutcome(_EMPTY_ROWS, 0)
        start %= n
        k = min(max(num_to_find, 1), n)
        plugins = [f for f in self.filters if f.name not in state.skip_filter]
        if not plugins:
            return FilterOutcome(_rotated(candidates, start, 0, k).copy(), k)
        snap = self.cycle_view(state)
        table, by_row = snap.table, snap.by_row
        overrides = self._overrides(state)
        sampled = state.record_metrics
        t_point = perf_counter() if sampled else 0.0
        rejected_pos: dict[str, list[Int64Array]] = {}
        node_status: dict[int, Status] = {}  # position -> status, for per-node rejections
        vector = [f for f in plugins if f.vector is not None]
        per_node = [f for f in plugins if f.vector is None]
        nominated_nodes = self.handle.nominated_node_names()
        spent: dict[str, float] = {}
        found: list[Int64Array] = []
        count = 0
        processed = n
        # The search stops at the k-th feasible node, so the vectorised filters first run over a prefix of
        # the rotated candidates somewhat longer than k (a NumPy call costs per row, too); only when that
        # prefix holds fewer than k feasible nodes do they run over the rest.
        lo = 0
        hi = n if want_reasons else min(n, k + k // 2 + _CHUNK_SLACK)
        while lo < n and count < k:
            positions: Int64Array = _positions(lo, hi)
            rows = _rotated(candidates, start, lo, hi)
            # Where the restored rows sit among this chunk's rows: found once per chunk and narrowed with
            # the rows (a gather per vectorised filter used to find the same two or three rows again).
            touched = self._restored_positions(state, rows) if overrides else _EMPTY_ROWS
            for f in vector:
                if rows.size == 0:
                    break
                t0 = perf_counter() if sampled else 0.0
                try:
                    mask = _as_mask(f.vector.filter_all(state, pod, table, rows), rows.size, f.name)  # type: ignore[union-attr]
                except Exception as exc:
                    return FilterOutcome(_EMPTY_ROWS, 0, error=_plugin_error(f.name, "Filter", exc))
                if touched.size:
                    mask = _restored_mask(f, state, pod, rows, mask, overrides, touched)
                if sampled:
                    spent[f.name] = spent.get(f.name, 0.0) + perf_counter() - t0
                # count_nonzero is a plain C loop; ndarray.all() goes through the generic reduction
                # machinery and costs twice as much on a few hundred rows, five times per pod.
                if np.count_nonzero(mask) != mask.shape[0]:
                    rejected_pos.setdefault(f.name, []).append(positions[~mask])
                    if touched.size:
                        # A restored row's new position: how many rows before it survive the mask.
                        kept = mask[touched]
                        touched = (np.cumsum(mask)[touched] - 1)[kept]
                    positions = positions[mask]
                    rows = rows[mask]
            if not per_node and not nominated_nodes:
                need = k - count
                if rows.size >= need:
                    processed = int(positions[need - 1]) + 1
                    rows = rows[:need]
                found.append(rows)
                count += int(rows.size)
            else:
                hits: list[int] = []
                row_list = rows.tolist()
                for i, row in enumerate(row_list):
                    ni = by_row[row]
                    assert ni is not None
                    failed: Status | None = None
                    for f in per_node:
                        t0 = perf_counter() if sampled else 0.0
                        s = _filter_one(f, state, pod, ni)
                        if sampled:
                            spent[f.name] = spent.get(f.name, 0.0) + perf_counter() - t0
                        if s.code is Code.SUCCESS:
                            continue
                        if s.code is Code.ERROR:
                            return FilterOutcome(_EMPTY_ROWS, 0, error=s)
                        failed = s
                        break
                    if failed is None and ni.name in nominated_nodes:
                        s = self.run_filter_with_nominated_pods(state, pod, ni)
                        if s.code is Code.ERROR:
                            return FilterOutcome(_EMPTY_ROWS, 0, error=s)
                        if not s.is_success:
                            failed = s
                    if failed is not None:
                        pos = int(positions[i])
                        node_status[pos] = failed
                        rejected_pos.setdefault(failed.plugin or "", []).append(positions[i : i + 1])
                        continue
                    hits.append(row)
                    count += 1
                    if count == k:
                        processed = int(positions[i]) + 1
                        break
                found.append(np.array(hits, dtype=np.int64))
            lo, hi = hi, n
        feasible = np.concatenate(found) if len(found) > 1 else (found[0] if found else _EMPTY_ROWS)
        if sampled:
            for name, secs in spent.items():
                self.metrics.observe_plugin(name, "Filter", "Success", secs)
        outcome = FilterOutcome(np.ascontiguousarray(feasible, dtype=np.int64), processed)
        if want_reasons or feasible.size == 0:
            for name, parts in rejected_pos.items():
                p = np.concatenate(parts) if len(parts) > 1 else parts[0]
                p = p[p < processed]
                if p.size:
                    outcome.rejected_by[name] = candidates[(np.sort(p) + start) % n]
            order = np.concatenate((candidates[start:], candidates[:start]))
            self._fill_reasons(state, pod, outcome, order, node_status, processed)
        if sampled:
            label = "Success" if feasible.size else "Unschedulable"
            self.metrics.observe_point("Filter", label, self.profile_name, perf_counter() - t_point)
        return outcome

    def _fill_reasons(
        self,
        state: CycleState,
        pod: PodInfo,
        outcome: FilterOutcome,
        order: Int64Array,
        node_status: dict[int, Status],
        processed: int,
    ) -> None:
        """Each rejected node's status from the plugin that rejects it first in profile order.

        A per-node rejection is already exact (every vectorised plugin and every earlier per-node plugin
        passed that node). A node a vectorised plugin rejected is run through the per-node chain: an earlier
        per-node plugin may reject it first; if none does, the vectorised form disagrees with ``filter``,
        which is reported as an Error naming the plugin. The vectorised pass ran in profile order, so every
        vectorised plugin before the rejecting one passed the node: when no per-node plugin precedes it, the
        chain starts at the rejecting plugin, whose ``filter_statuses`` (``VectorFilterStatuses``) then
        answers for all its rows at once.
        """
        snap = self.cycle_view(state)
        overrides = self._overrides(state)
        statuses = _StatusTable()
        done: set[int] = set()
        for position, st in node_status.items():
            if position < processed:
                row = int(order[position])
                statuses.add([row], np.zeros(1, dtype=np.int64), [st])
                done.add(row)
        active = [f for f in self.filters if f.name not in state.skip_filter]
        for name, rejected in outcome.rejected_by.items():
            first = next((i for i, f in enumerate(active) if f.name == name), 0)
            if any(f.vector is None for f in active[:first]):
                first = 0
            chain = active[first:]
            rows = rejected[~np.isin(rejected, list(done))] if done else rejected
            if overrides and rows.size:
                # Restored nodes: the vectorised forms saw the snapshot's row, so their reasons come from the
                # per-node chain over the restored NodeInfo.
                touched = np.isin(rows, np.fromiter(overrides, dtype=np.int64, count=len(overrides)))
                if touched.any():
                    found: list[Status] = []
                    for row in rows[touched].tolist():
                        st = _run_chain(chain, state, pod, overrides[row])
                        if st.is_success:
                            msg = f"plugin {name}: rejected restored node {overrides[row].name} it accepts"
                            st = Status(Code.ERROR, (msg,), name)
                        found.append(st)
                    statuses.add(rows[touched], np.arange(len(found), dtype=np.int64), found)
                    rows = rows[~touched]
            if not rows.size:
                continue
            if chain[0].name == name and isinstance(chain[0].plugin, VectorFilterStatuses):
                bulk = self._bulk_statuses(chain[0], state, pod, rows)
                if isinstance(bulk, Status):
                    outcome.error = bulk
                    return
                ids, distinct = bulk
                passed = [i for i, st in enumerate(distinct) if st.is_success]
                redo = np.flatnonzero(np.isin(ids, passed)).tolist() if passed else []
                rest = chain[1:]
            else:
                ids, distinct = np.zeros(rows.size, dtype=np.int64), [SUCCESS]
                redo, rest = list(range(rows.size)), chain
            if redo:
                ids = ids.copy()
                for i in redo:
                    # The per-node chain as ``filter`` runs it (after the bulk-answering plugin if it passed).
                    ni = snap.by_row[int(rows[i])]
                    assert ni is not None
                    st = _run_chain(rest, state, pod, ni)
                    if st.is_success:
                        msg = f"plugin {name}: filter_all rejected node {ni.name} but filter accepts it"
                        st = Status(Code.ERROR, (msg,), name)
                    ids[i] = len(distinct)
                    distinct.append(st)
            statuses.add(rows, ids, distinct)
        outcome.statuses = statuses.build(snap.table)
        outcome.rejected_by = statuses.rows_by_plugin()

    def _bulk_statuses(
        self, f: _Filter, state: CycleState, pod: PodInfo, rows: Int64Array
    ) -> tuple[Int64Array, list[Status]] | Status:
        """``filter_statuses`` of ``f`` for ``rows`` as (per row an index into the distinct statuses, the
        distinct statuses named after the plugin as ``_filter_one`` names them), or an Error status."""
        plugin = f.plugin
        assert isinstance(plugin, VectorFilterStatuses)
        table = self.handle.snapshot.table
        try:
            found = plugin.filter_statuses(state, pod, table, rows)
        except Exception as exc:
            return _plugin_error(f.name, "Filter", exc)
        if len(found) != len(rows):
            msg = f"plugin {f.name}: filter_statuses gave {len(found)} statuses for {len(rows)} nodes"
            return Status(Code.ERROR, (msg,), f.name)
        if isinstance(found, CodedStatuses):
            ids, plain = np.asarray(found.ids, dtype=np.int64), found.distinct
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= len(plain)):
                msg = f"plugin {f.name}: filter_statuses gave an index outside its {len(plain)} statuses"
                return Status(Code.ERROR, (msg,), f.name)
        else:
            # Thousands of rows share a few status objects: index them by identity with C-level loops.
            keys = list(map(id, found))
            position = {k: i for i, k in enumerate(dict.fromkeys(keys))}
            ids = np.array(list(map(position.__getitem__, keys)), dtype=np.int64)
            originals: dict[int, Status] = {}
            for st in found:
                if len(originals) == len(position):
                    break
                originals.setdefault(id(st), st)
            plain = [originals[k] for k in position]
        distinct: list[Status] = []
        for st in plain:
            if st.is_rejected:
                st = st.with_plugin(f.name)
            elif not st.is_success:
                text = f"running {f.name!r} filter plugin: {st.code.label} {st.message}".strip()
                st = Status(Code.ERROR, (text,), f.name)
            distinct.append(st)
        return ids, distinct

    # --- PostFilter ---------------------------------------------------------------------------------
    def run_post_filter(
        self, state: CycleState, pod: PodInfo, filtered: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        sampled = state.record_metrics
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for name, p in self.post_filter:
            t0 = perf_counter() if sampled else 0.0
            try:
                r, s = p.post_filter(state, pod, filtered)
            except Exception as exc:
                r, s = None, Status.as_error(exc)
            if sampled:
                self._observe(name, "PostFilter", s, t0)
            if s.is_success:
                return r, s.with_plugin(name)
            if s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return r, s.with_plugin(name)
            if not s.is_rejected:
                return None, Status(Code.ERROR, s.reasons, name, s.error)
            if r is not None and r.nominated_node:
                result = r
            reasons.extend(s.reasons)
            rejector = rejector or name
        return result, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)

    # --- PreScore / Score ---------------------------------------------------------------------------
    def run_pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        sampled = state.record_metrics
        for name, p in self.pre_score:
            t0 = perf_counter() if sampled else 0.0
            try:
                s = p.pre_score(state, pod, nodes)
            except Exception as exc:
                s = Status.as_error(exc)
            if sampled:
                self._observe(name, "PreScore", s, t0)
            if s.code is Code.SKIP:
                state.skip_score.add(name)
                continue
            if not s.is_success:
                return Status(Code.ERROR, (f"running PreScore plugin {name}: {s.message}",), name, s.error)
        return SUCCESS

    def run_score(
        self,
        state: CycleState,
        pod: PodInfo,
        rows: Int64Array,
        nodes: Sequence[NodeInfo],
        *,
        explain: bool = False,
        only: AbstractSet[str] | None = None,
    ) -> tuple[ScoreOutcome | None, Status]:
        """Score, NormalizeScore, range check and weights over ``rows`` (``nodes`` aligned with them).

        ``only`` restricts scoring to those plugins (test harnesses look at one plugin at a time).
        """
        sampled = state.record_metrics
        t_point = perf_counter() if sampled else 0.0
        table = self.handle.snapshot.table
        size = int(rows.size)
        totals = np.zeros(size, dtype=np.int64)
        details: dict[str, PluginScores] | None = {} if explain else None
        overrides = self._overrides(state)
        # The restored rows among ``rows``: the same for every plugin, found once.
        touched = self._restored_positions(state, rows) if overrides else _EMPTY_ROWS
        for sc in self.scores:
            if sc.name in state.skip_score or (only is not None and sc.name not in only):
                continue
            t0 = perf_counter() if sampled else 0.0
            if sc.vector is not None:
                try:
                    raw = np.asarray(sc.vector.score_all(state, pod, table, rows), dtype=np.int64)
                except Exception as exc:
                    return None, _plugin_error(sc.name, "Score", exc)
                if raw.shape != (size,):
                    return None, Status(
                        Code.ERROR,
                        (f"plugin {sc.name}: score_all returned shape {raw.shape}, want ({size},)",),
                        sc.name,
                    )
                if touched.size:
                    try:
                        raw = _restored_scores(sc.plugin, state, pod, rows, raw, overrides, touched)
                    except Exception as exc:
                        return None, _plugin_error(sc.name, "Score", exc)
            else:
                raw = np.empty(size, dtype=np.int64)
                plugin = sc.plugin
                for i, ni in enumerate(nodes):
                    try:
                        v, s = plugin.score(state, pod, ni)
                    except Exception as exc:
                        return None, _plugin_error(sc.name, "Score", exc)
                    if not s.is_success:
                        return None, Status(
                            Code.ERROR, (f"plugin {sc.name} failed with: {s.message}",), sc.name
                        )
                    raw[i] = v
            if sampled:
                self.metrics.observe_plugin(sc.name, "Score", "Success", perf_counter() - t0)
            normalized = raw
            if sc.ext is not None:
                t0 = perf_counter() if sampled else 0.0
                if isinstance(sc.ext, VectorNormalize):
                    try:
                        normalized = np.asarray(
                            sc.ext.normalize_all(state, pod, rows, raw.copy()), dtype=np.int64
                        )
                        s = SUCCESS
                    except Exception as exc:
                        s = Status.as_error(exc)
                else:
                    names = map(table.names.__getitem__, rows.tolist())
                    scores = list(map(NodeScore, names, raw.tolist()))
                    try:
                        s = sc.ext.normalize_score(state, pod, scores)
                    except Exception as exc:
                        s = Status.as_error(exc)
                    if s.is_success:
                        normalized = np.fromiter((x.score for x in scores), dtype=np.int64, count=size)
                if sampled:
                    self._observe(sc.name, "ScoreExtensionNormalize", s, t0)
                if not s.is_success:
                    return None, Status(Code.ERROR, (f"plugin {sc.name} failed with: {s.message}",), sc.name)
            # One reduction checks both bounds: as unsigned, a negative score is larger than any valid one.
            if size and int(normalized.view(np.uint64).max()) > MAX_NODE_SCORE - MIN_NODE_SCORE:
                bad = (
                    int(normalized.max()) if int(normalized.max()) > MAX_NODE_SCORE else int(normalized.min())
                )
                return None, Status(
                    Code.ERROR,
                    (
                        f"plugin {sc.name} returns an invalid score {bad}, it should in the range of "
                        f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                    ),
                    sc.name,
                )
            weighted = normalized if sc.weight == 1 else normalized * sc.weight
            totals += weighted
            if details is not None:
                details[sc.name] = PluginScores(raw, normalized, weighted)
        if sampled:
            self.metrics.observe_point("Score", "Success", self.profile_name, perf_counter() - t_point)
        return ScoreOutcome(totals, details), SUCCESS

    # --- Reserve / Permit ---------------------------------------------------------------------------
    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self._run_until_failure(
            state, "Reserve", [(n, partial(p.reserve, state, pod, node_name)) for n, p in self.reserve]
        )

    def _run_until_failure(
        self, state: CycleState, point: str, calls: Sequence[tuple[str, Callable[[], Status]]]
    ) -> Status:
        """Reserve's and PreBind's shape: each plugin in order, the first failure stops the point — a
        rejection as the plugin said it, anything else as an Error naming the plugin."""
        sampled = state.record_metrics
        for name, call in calls:
            t0 = perf_counter() if sampled else 0.0
            try:
                s = call()
            except Exception as exc:
                s = Status.as_error(exc)
            if sampled:
                self._observe(name, point, s, t0)
            if not s.is_success:
                if s.is_rejected:
                    return s.with_plugin(name)
                return Status(Code.ERROR, (f"running {point} plugin {name}: {s.message}",), name, s.error)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every Reserve plugin's ``unreserve`` in reverse order; a failing one does not stop the rest."""
        for name, p in reversed(self.reserve):
            try:
                p.unreserve(state, pod, node_name)
            except Exception:
                log.exception("Unreserve of plugin %s failed for pod %s", name, pod.key)

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, dict[str, float]]:
        """Success, a rejection, or Wait with the per-plugin timeouts (seconds, capped at 15 minutes)."""
        sampled = state.record_metrics
        waits: dict[str, float] = {}
        for name, p in self.permit:
            t0 = perf_counter() if sampled else 0.0
            try:
                s, timeout = p.permit(state, pod, node_name)
            except Exception as exc:
                s, timeout = Status.as_error(exc), 0.0
            if sampled:
                self._observe(name, "Permit", s, t0)
            if s.is_success:
                continue
            if s.is_rejected:
                return s.with_plugin(name), {}
            if s.is_wait:
                waits[name] = min(max(float(timeout), 0.0), MAX_PERMIT_TIMEOUT)
                continue
            return Status(Code.ERROR, (f"running Permit plugin {name}: {s.message}",), name, s.error), {}
        if waits:
            msg = f'one or more plugins asked to wait and no plugin rejected pod "{pod.name}"'
            return Status(Code.WAIT, (msg,)), waits
        return SUCCESS, waits

    # --- binding cycle ------------------------------------------------------------------------------
    def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        if is_reserve_pod(pod):
            return self._run_pre_bind_reservation(state, pod, node_name)
        return self._run_until_failure(
            state, "PreBind", [(n, partial(p.pre_bind, state, pod, node_name)) for n, p in self.pre_bind]
        )

    def _run_pre_bind_reservation(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """PreBind of a reserve pod (Koordinator's extender): only ``ReservationPreBindPlugin``s run, with the
        Reservation object; the scheduler then patches what they wrote onto the Reservation in one patch."""
        hooks = [(n, p) for n, p in self.pre_bind if isinstance(p, ReservationPreBindPlugin)]
        if not hooks:
            return SUCCESS
        name = reservation_name_of(pod)
        obj = self.handle.informer.get("Reservation", name)
        if obj is None:
            return Status(Code.ERROR, (f"reservation {name} of reserve pod {pod.key} not found",))
        return self._run_until_failure(
            state,
            "PreBindReservation",
            [(n, partial(p.pre_bind_reservation, state, obj, node_name)) for n, p in hooks],
        )

    def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """The first bind plugin that does not Skip decides; Skip when every one skips (or there is none)."""
        sampled = state.record_metrics
        status = Status(Code.SKIP)
        for name, p in self.bind:
            t0 = perf_counter() if sampled else 0.0
            try:
                status = p.bind(state, pod, node_name)
            except Exception as exc:
                status = Status.as_error(exc)
            if sampled:
                self._observe(name, "Bind", status, t0)
            if status.is_skip:
                continue
            if not status.is_success:
                if status.is_rejected:
                    return status.with_plugin(name)
                return Status(
                    Code.ERROR, (f"running Bind plugin {name}: {status.message}",), name, status.error
                )
            return status
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for name, p in self.post_bind:
            try:
                p.post_bind(state, pod, node_name)
            except Exception:
                log.exception("PostBind of plugin %s failed for pod %s", name, pod.key)


_NARROWING_KEY = "koord.framework/prefilter-narrowing-plugins"
"""CycleState key: the PreFilter plugins whose node sets narrowed the candidates (for diagnosis)."""


def narrowing_plugins(state: CycleState) -> tuple[str, ...]:
    value = state.get(_NARROWING_KEY, ())
    return tuple(value)


# --- small helpers ------------------------------------------------------------------------------------
_VECTOR_FORMS: tuple[tuple[type, type, str], ...] = (
    (VectorFilter, FilterPlugin, "filter"),
    (VectorScore, ScorePlugin, "score"),
)


def _check_vector_forms(name: str, klass: type[Plugin]) -> None:
    """A vectorised form without its extension point's ABC would never be called: the plugin would silently
    not filter (or score) at all. Refuse it."""
    for vector, point, verb in _VECTOR_FORMS:
        if issubclass(klass, vector) and not issubclass(klass, point):
            raise PluginLoadError(
                "koord.scheduler.plugins",
                name,
                klass.__module__,
                TypeError(
                    f"{klass.__name__} subclasses {vector.__name__} but not {point.__name__}, so it would "
                    f"never {verb}; add {point.__name__} to its bases"
                ),
            )


class _StatusTable:
    """Rejected rows in order with an index per row into the distinct statuses (built into RowStatuses)."""

    def __init__(self) -> None:
        self._rows: list[Int64Array] = []
        self._ids: list[Int64Array] = []
        self._distinct: list[Status] = []
        self._index: dict[int, int] = {}  # id(status) -> position in _distinct
        self._built: tuple[Int64Array, Int64Array] = (_EMPTY_ROWS, _EMPTY_ROWS)

    def add(self, rows: Sequence[int] | Int64Array, ids: Int64Array, distinct: Sequence[Status]) -> None:
        """``rows[i]`` has status ``distinct[ids[i]]``."""
        remap = np.empty(len(distinct), dtype=np.int64)
        for i, st in enumerate(distinct):
            j = self._index.get(id(st))
            if j is None:
                j = self._index[id(st)] = len(self._distinct)
                self._distinct.append(st)
            remap[i] = j
        self._rows.append(np.asarray(rows, dtype=np.int64))
        self._ids.append(remap[ids])

    def build(self, table: NodeTable) -> RowStatuses:
        rows = np.concatenate(self._rows) if self._rows else _EMPTY_ROWS
        ids = np.concatenate(self._ids) if self._ids else _EMPTY_ROWS
        self._built = (rows, ids)
        return RowStatuses(table, rows, ids, self._distinct)

    def rows_by_plugin(self) -> dict[str, Int64Array]:
        rows, ids = self._built
        by_plugin: dict[str, list[int]] = {}
        for i, st in enumerate(self._distinct):
            by_plugin.setdefault(st.plugin, []).append(i)
        if len(by_plugin) == 1:
            return {plugin: np.sort(rows) for plugin in by_plugin}
        return {plugin: np.sort(rows[np.isin(ids, found)]) for plugin, found in by_plugin.items()}


def _run_chain(chain: Sequence[_Filter], state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
    for f in chain:
        s = _filter_one(f, state, pod, node)
        if not s.is_success:
            return s
    return SUCCESS


def _filter_one(f: _Filter, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
    """One plugin on one node; anything but Success or a rejection becomes an Error naming the plugin."""
    try:
        s = f.plugin.filter(state, pod, node)
    except Exception as exc:
        return _plugin_error(f.name, "Filter", exc)
    if s.code is Code.SUCCESS:
        return s
    if s.is_rejected:
        return s.with_plugin(f.name)
    return Status(
        Code.ERROR, (f"running {f.name!r} filter plugin: {s.code.label} {s.message}".strip(),), f.name
    )


def _shared_arange(size: int) -> Int64Array:
    whole = np.arange(size, dtype=np.int64)
    whole.flags.writeable = False
    return whole


_ARANGE: list[Int64Array] = [_shared_arange(1024)]


def _positions(lo: int, hi: int) -> Int64Array:
    """``np.arange(lo, hi)`` as a read-only view of one shared arange that grows on demand: a fresh arange
    per pod costs more than the slice."""
    whole = _ARANGE[0]
    if hi > whole.shape[0]:
        whole = _ARANGE[0] = _shared_arange(max(hi, 2 * whole.shape[0]))
    return whole[lo:hi]


def _rotated(candidates: Int64Array, start: int, lo: int, hi: int) -> Int64Array:
    """Positions ``lo:hi`` of ``candidates`` rotated to begin at ``start`` (without rotating all of it)."""
    n = candidates.shape[0]
    a, b = start + lo, start + hi
    if b <= n:
        return candidates[a:b]
    if a >= n:
        return candidates[a - n : b - n]
    return np.concatenate((candidates[a:], candidates[: b - n]))


def _plugin_error(name: str, point: str, exc: BaseException) -> Status:
    return Status(Code.ERROR, (f"running {point} plugin {name}: {type(exc).__name__}: {exc}",), name, exc)


def _as_mask(value: Any, size: int, name: str) -> BoolArray:
    mask = np.asarray(value, dtype=np.bool_)
    if mask.shape != (size,):
        raise ValueError(f"filter_all of {name} returned shape {mask.shape}, want ({size},)")
    return mask


def _safe_ext(
    ext: PreFilterExtensions, which: str, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
) -> Status:
    try:
        if which == "add":
            return ext.add_pod(state, pod, other, node)
        return ext.remove_pod(state, pod, other, node)
    except Exception as exc:
        return Status.as_error(exc)


# --- the cycle's node view (frameworkext transformers) ---------------------------------------------
_VIEW_KEY = "koord.framework/cycle-view"
_NO_OVERRIDES: dict[int, NodeInfo] = {}


class CycleView:
    """The snapshot as one pod's cycle sees it once transformers restored nodes (``NodeRestore``).

    Only restored nodes differ: each is a clone with the listed pods taken off. The ``NodeTable`` is the
    snapshot's, unchanged: vectorised forms may read whole-table caches kept on the snapshot, so on the few
    restored rows the framework asks the per-node forms instead (``_restored_mask``/``_restored_scores``).
    """

    __slots__ = ("affinity_changed", "by_row", "node_list", "overrides", "restored_rows", "table")

    def __init__(
        self,
        snap: SnapshotView,
        by_row: list[NodeInfo | None],
        node_list: Sequence[NodeInfo],
        overrides: dict[int, NodeInfo],
    ) -> None:
        self.table = snap.table
        self.by_row = by_row
        self.node_list = node_list
        self.overrides = overrides
        """Row -> restored NodeInfo."""
        flags = np.zeros(len(by_row), dtype=np.bool_)
        if overrides:
            flags[np.fromiter(overrides, dtype=np.int64, count=len(overrides))] = True
        self.restored_rows = flags
        """Per snapshot row: whether it is restored (one gather finds them among any rows)."""
        self.affinity_changed = False
        """Whether a removed pod had pod (anti-)affinity. If not, PreFilter gets the snapshot's own node
        list: what PreFilter plugins derive from the list (inter-pod affinity terms of existing pods) is
        the same, and they keep their O(1) paths for it."""

    @classmethod
    def restored(cls, snap: SnapshotView, restore: NodeRestore) -> CycleView:
        overrides: dict[int, NodeInfo] = {}
        affinity = False
        index = snap.table.index
        for node, pods in restore.remove_pods.items():
            row = index.get(node)
            if row is None or row >= len(snap.by_row):
                continue
            current = snap.by_row[row]
            if current is None:
                continue
            clone = overrides.get(row) or current.clone()
            for p in pods:
                if p.uid in clone.pods:
                    affinity = affinity or p.uid in clone.pods_with_affinity
                    clone.remove_pod(p)
            overrides[row] = clone
        if not overrides:
            return cls(snap, snap.by_row, snap.node_list, overrides)
        by_row = list(snap.by_row)
        for row, ni in overrides.items():
            by_row[row] = ni
        view = cls(snap, by_row, _RestoredNodes(snap.node_list, overrides), overrides)
        view.affinity_changed = affinity
        return view


class _RestoredNodes(Sequence[NodeInfo]):
    """The snapshot's node list with restored nodes swapped in, without copying a thousand entries per pod
    (PreFilter plugins rarely look at the list)."""

    __slots__ = ("_list", "_nodes", "_overrides")

    def __init__(self, nodes: Sequence[NodeInfo], overrides: Mapping[int, NodeInfo]) -> None:
        self._nodes = nodes
        self._overrides = overrides
        self._list: list[NodeInfo] | None = None

    def __len__(self) -> int:
        return len(self._nodes)

    @overload
    def __getitem__(self, index: int) -> NodeInfo: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[NodeInfo]: ...
    def __getitem__(self, index: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        if isinstance(index, slice):
            return [self._overrides.get(ni.row, ni) for ni in self._nodes[index]]
        ni = self._nodes[index]
        return self._overrides.get(ni.row, ni)

    def __iter__(self) -> Iterator[NodeInfo]:
        if self._list is None:
            get = self._overrides.get
            self._list = [get(ni.row, ni) for ni in self._nodes]
        return iter(self._list)


def _restored_mask(
    f: _Filter,
    state: CycleState,
    pod: PodInfo,
    rows: Int64Array,
    mask: BoolArray,
    overrides: dict[int, NodeInfo],
    touched: Int64Array,
) -> BoolArray:
    """``mask`` with the restored rows (positions ``touched``) answered by ``filter`` on their restored
    NodeInfo."""
    if touched.size == 0:
        return mask
    out = np.array(mask, dtype=np.bool_, copy=True)
    for i in touched.tolist():
        out[i] = _filter_one(f, state, pod, overrides[int(rows[i])]).is_success
    return out


def _restored_scores(
    plugin: ScorePlugin,
    state: CycleState,
    pod: PodInfo,
    rows: Int64Array,
    raw: Int64Array,
    overrides: dict[int, NodeInfo],
    touched: Int64Array,
) -> Int64Array:
    """``raw`` with the restored rows (positions ``touched``) scored by ``score`` on their restored
    NodeInfo."""
    if touched.size == 0:
        return raw
    out = raw.copy()
    for i in touched.tolist():
        value, s = plugin.score(state, pod, overrides[int(rows[i])])
        if not s.is_success:
            raise RuntimeError(s.message)
        out[i] = value
    return out


class _ReservationRunner(ReservationExtensions):
    """Runs the reservation hooks over a profile's plugins (Koordinator's ``RunReservationExtension*``)."""

    def __init__(self, plugins: Mapping[str, Plugin]) -> None:
        self.restore = [(n, p) for n, p in plugins.items() if isinstance(p, ReservationRestorePlugin)]
        self.pre_allocation_restore = [
            (n, p) for n, p in plugins.items() if isinstance(p, ReservationPreAllocationRestorePlugin)
        ]
        self.filters = [(n, p) for n, p in plugins.items() if isinstance(p, ReservationFilterPlugin)]
        self.scores = [(n, p) for n, p in plugins.items() if isinstance(p, ReservationScorePlugin)]

    @property
    def has_restore_plugins(self) -> bool:
        return bool(self.restore)

    def run_pre_restore_reservation(self, state: CycleState, pod: PodInfo) -> Status:
        return _until_failure(
            self.restore, "PreRestoreReservation", lambda p: p.pre_restore_reservation(state, pod)
        )

    def run_restore_reservation(
        self,
        state: CycleState,
        pod: PodInfo,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node: NodeInfo,
    ) -> Status:
        return _until_failure(
            self.restore,
            "RestoreReservation",
            lambda p: p.restore_reservation(state, pod, matched, unmatched, node),
        )

    def run_pre_restore_reservation_pre_allocation(
        self, state: CycleState, reservation: ReservationInfo
    ) -> Status:
        return _until_failure(
            self.pre_allocation_restore,
            "PreRestoreReservationPreAllocation",
            lambda p: p.pre_restore_reservation_pre_allocation(state, reservation),
        )

    def run_restore_reservation_pre_allocation(
        self,
        state: CycleState,
        reservation: ReservationInfo,
        pre_allocatable: Sequence[PodInfo],
        node: NodeInfo,
    ) -> Status:
        return _until_failure(
            self.pre_allocation_restore,
            "RestoreReservationPreAllocation",
            lambda p: p.restore_reservation_pre_allocation(state, reservation, pre_allocatable, node),
        )

    def run_filter_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node: NodeInfo
    ) -> Status:
        return _until_failure(
            self.filters, "FilterReservation", lambda p: p.filter_reservation(state, pod, reservation, node)
        )

    def run_filter_nominate_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> Status:
        return _until_failure(
            self.filters,
            "FilterNominateReservation",
            lambda p: p.filter_nominate_reservation(state, pod, reservation, node_name),
        )

    def run_score_reservation(
        self, state: CycleState, pod: PodInfo, reservations: Sequence[ReservationInfo], node_name: str
    ) -> tuple[list[int], Status]:
        totals = [0] * len(reservations)
        for name, p in self.scores:
            values: list[int] = []
            for r in reservations:
                try:
                    value, s = p.score_reservation(state, pod, r, node_name)
                except Exception as exc:
                    return [], _plugin_error(name, "ScoreReservation", exc)
                if not s.is_success:
                    return [], Status(Code.ERROR, (f"running ScoreReservation of {name}: {s.message}",), name)
                values.append(int(value))
            try:
                s = p.normalize_reservation_score(state, pod, values)
            except Exception as exc:
                return [], _plugin_error(name, "NormalizeReservationScore", exc)
            if not s.is_success:
                return [], Status(Code.ERROR, (f"running Normalize on Score plugins: {s.message}",), name)
            for i, value in enumerate(values):
                if not MIN_RESERVATION_SCORE <= int(value) <= MAX_RESERVATION_SCORE:
                    msg = (
                        f"plugin {name!r} returns an invalid score {value}, it should in the range of "
                        f"[{MIN_RESERVATION_SCORE}, {MAX_RESERVATION_SCORE}]"
                    )
                    return [], Status(Code.ERROR, (msg,), name)
                totals[i] += int(value)
        return totals, SUCCESS


_P = TypeVar("_P")


def _until_failure(plugins: Sequence[tuple[str, _P]], point: str, call: Callable[[_P], Status]) -> Status:
    """``call`` on each plugin in order, each through ``_guard``: the first status that is not a success,
    else SUCCESS (the reservation hooks' runners)."""
    for name, plugin in plugins:
        s = _guard(name, point, partial(call, plugin))
        if not s.is_success:
            return s
    return SUCCESS


def _guard(name: str, point: str, call: Callable[[], Status]) -> Status:
    """One hook call: a rejection named after the plugin, anything else an Error naming it."""
    try:
        s = call()
    except Exception as exc:
        return _plugin_error(name, point, exc)
    if s.is_success:
        return SUCCESS
    if s.is_rejected:
        return s.with_plugin(name)
    return Status(Code.ERROR, (f"running {point} of {name}: {s.message}",), name, s.error)
