"""The scheduler's extension points: one ABC each, with the contract a plugin author relies on.

Modelled on kube-scheduler's ``pkg/scheduler/framework/interface.go``. A plugin class subclasses
``koord_framework.plugin.Plugin`` and the ABCs of the points it implements; it is constructed once per
profile as ``PluginClass(args, handle)``.

Call order for one pod (one *scheduling cycle*, then a *binding cycle* that runs concurrently with the next
pod's scheduling cycle)::

    PreEnqueue → (queue, ordered by QueueSort) → PreFilter → Filter (per node) → [PostFilter if no node fits]
    → PreScore → Score (per node) → NormalizeScore → Reserve → Permit
    → binding cycle: (wait for Permit) → PreBind → Bind → PostBind

Failure anywhere after Reserve runs every Reserve plugin's ``unreserve`` in reverse order.

Every method receives ``state: CycleState`` (per pod, per cycle) and ``pod: PodInfo`` (the slim record; never
mutate it — PreBind plugins put changes into ``state.pod_mutation``). Statuses use
``koord_framework.scheduler.status``; a plugin may raise, and the framework turns the exception into an
``Error`` status naming the plugin.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast, overload

import numpy as np

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.port import Informer
from koord_framework.handle import BaseHandle
from koord_framework.plugin import ArgsT, ExtensionPoint, Plugin
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_framework.scheduler.topologymanager import NUMATopologyHintProvider

_EMPTY_ROWS: Int64Array = np.zeros(0, dtype=np.int64)

PODS_TO_ACTIVATE = "kubernetes.io/pods-to-activate"
"""CycleState key of a ``dict[str, PodInfo]`` (uid → pod) that plugins fill to have pods moved to the active
queue after this cycle (kube-scheduler's ``PodsToActivate``; Coscheduling uses it for a gang's siblings)."""


# --- values passed between the framework and plugins ---------------------------------------------------
@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the scheduling queue (what QueueSort compares)."""

    pod: PodInfo
    timestamp: float
    """When the pod was added to the queue (or last moved back to the active queue)."""
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)


@dataclass(slots=True)
class PreFilterResult:
    """A PreFilter may narrow the candidate nodes. ``None`` node_names means 'all nodes'."""

    node_names: set[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(slots=True)
class PostFilterResult:
    """A PostFilter (preemption) that made room nominates a node; the pod is retried later."""

    nominated_node: str = ""


@dataclass(slots=True)
class NodeScore:
    """A node's score from one Score plugin."""

    name: str
    score: int


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """What may make an unschedulable pod schedulable: a kind and an action (Add, Update, Delete)."""

    kind: str
    action: str = "*"


class NodeToStatusReader(Mapping[str, Status]):
    """What PostFilter gets: node name → the status that rejected the node (kube-scheduler's
    ``NodeToStatusReader``).

    Nodes a PreFilter result excluded are covered too (with the status that excluded them), so the map may
    be far larger than the nodes Filter visited; ``codes(rows)`` answers for many snapshot rows at once (the
    ``Code`` of each row's status, -1 for none), so that preemption can set aside the nodes it cannot help
    without a lookup per node. The framework passes one; tests may pass a plain mapping, so check with
    ``isinstance`` before calling ``codes``.
    """

    @abc.abstractmethod
    def codes(self, rows: Int64Array) -> Int64Array:
        """Per snapshot row: the ``Code`` (as an int) of its status, -1 for rows without one."""


class SnapshotView(Protocol):
    """The nodes of the current scheduling cycle, as rows of one ``NodeTable``, with a change log.

    kube-scheduler's ``SharedLister``, plus what per-row caches need: every replacement or removal of a
    node's ``NodeInfo`` appends its row to a log, so a plugin that keeps per-row aggregates (pods matching a
    selector, a verdict per pod shape) recounts only ``rows_changed_since(seq)`` instead of every node.
    Read-only: never modify what it returns.
    """

    @property
    def table(self) -> NodeTable:
        """The numeric columns of every row (allocatable, requested, ...)."""

    @property
    def by_row(self) -> Sequence[NodeInfo | None]:
        """Row → the node's ``NodeInfo`` (None for rows of removed nodes)."""

    @property
    def node_list(self) -> Sequence[NodeInfo]:
        """Present nodes in row order (what ``Handle.node_infos()`` returns)."""

    @property
    def rows(self) -> Int64Array:
        """Rows of ``node_list``."""

    @property
    def change_seq(self) -> int:
        """Position in the change log after the last change."""

    def rows_changed_since(self, seq: int) -> list[int] | None:
        """Rows replaced or removed since ``change_seq`` was ``seq`` (repeats possible); None when that part
        of the log was dropped: rebuild from scratch then."""

    def get(self, name: str) -> NodeInfo | None:
        """The node's ``NodeInfo``, or None."""

    def rows_of(self, names: Iterable[str]) -> Int64Array:
        """Rows of the present nodes among ``names``, in row order (unknown names dropped)."""

    def have_pods_with_affinity(self) -> Sequence[NodeInfo]:
        """Nodes with at least one pod that has pod (anti-)affinity."""

    def have_pods_with_required_anti_affinity(self) -> Sequence[NodeInfo]:
        """Nodes with at least one pod that has required pod anti-affinity."""


# --- the handle -----------------------------------------------------------------------------------
class WaitingPod(abc.ABC):
    """A pod held at Permit. Any plugin may ``allow`` (per plugin) or ``reject`` it."""

    @property
    @abc.abstractmethod
    def pod(self) -> PodInfo: ...

    @property
    @abc.abstractmethod
    def node_name(self) -> str: ...

    @abc.abstractmethod
    def pending_plugins(self) -> list[str]: ...

    @abc.abstractmethod
    def allow(self, plugin: str) -> None:
        """Clear ``plugin``'s wait; the pod proceeds when no plugin still waits."""

    @abc.abstractmethod
    def reject(self, plugin: str, message: str) -> None:
        """Fail the pod's Permit: it is unreserved and requeued."""


class Handle(BaseHandle):
    """What the framework gives every plugin (kube-scheduler's ``framework.Handle``): cluster access, the
    metrics registry and per-handle shared slots (``BaseHandle``), the informer, the cycle's snapshot,
    waiting pods, the nominator and the queue's activation, and the framework's runners that preemption
    calls."""

    @property
    @abc.abstractmethod
    def informer(self) -> Informer:
        """The shared informer: plugins read CRDs (NodeMetric, PodGroup, ...) and register handlers here."""

    @property
    def snapshot(self) -> SnapshotView | None:
        """The snapshot of the current scheduling cycle (refreshed at the start of every cycle), with its
        change log; None for a handle that keeps none (a hand-made test handle): plugins then fall back to
        walking ``node_infos()``."""
        return None

    def parsed_pod(self, obj: Mapping[str, Any]) -> PodInfo | None:
        """The scheduler's own record of this very pod manifest (same resourceVersion), or None (a handle
        without a pod cache, a version the cache does not hold yet). A handler of the informer's Pod events
        reads it instead of parsing the pod again: the scheduler's cache handles every event first. The
        record is shared and read-only."""
        return None

    def parsed_node(self, obj: Mapping[str, Any]) -> NodeRecord | None:
        """The scheduler's own record of this very node manifest, or None (as ``parsed_pod``)."""
        return None

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """Pods nominated to ``node_name`` by preemption and not bound yet (kube-scheduler's
        ``PodNominator``). A handle without a queue has none."""
        return []

    def nominated_node_names(self) -> AbstractSet[str]:
        """Nodes with at least one nominated pod."""
        return frozenset()

    def activate_pods(self, pods: Iterable[PodInfo]) -> None:
        """Move pods waiting in backoff or as unschedulable to the active queue (kube-scheduler's
        ``Activate``; Coscheduling wakes a gang's siblings so). In a scheduling cycle, filling the
        ``PODS_TO_ACTIVATE`` cycle-state entry does the same once the cycle ends."""
        raise NotImplementedError(f"{type(self).__name__} has no scheduling queue to activate pods in")

    @abc.abstractmethod
    def node_infos(self) -> Sequence[NodeInfo]:
        """The snapshot of this cycle: every schedulable node, with bound and assumed pods."""

    @abc.abstractmethod
    def node_info(self, name: str) -> NodeInfo | None: ...

    @property
    @abc.abstractmethod
    def table(self) -> NodeTable: ...

    @abc.abstractmethod
    def get_waiting_pod(self, uid: str) -> WaitingPod | None: ...

    @abc.abstractmethod
    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None: ...

    @abc.abstractmethod
    def run_filter_with_nominated_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """Run every Filter plugin on ``node`` as the framework would (used by preemption what-ifs)."""

    @abc.abstractmethod
    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> Status: ...

    @abc.abstractmethod
    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status: ...

    def feature_enabled(self, name: str) -> bool:
        """Whether koord-scheduler's feature gate ``name`` is on (``--feature-gates``; Koordinator's
        ``k8sfeature.DefaultFeatureGate.Enabled``). A handle without a scheduler (a hand-made test handle)
        answers Koordinator's default; a gate koord-scheduler does not register raises ``KeyError``."""
        from koord_framework.featuregates import gates_for

        return gates_for("scheduler").enabled(name)

    def numa_topology_hint_providers(self) -> Sequence[NUMATopologyHintProvider]:
        """The profile's plugins that feed the NUMA topology manager, in profile order (Koordinator's
        ``GetNUMATopologyHintProvider``). A handle without a profile has none."""
        return ()


# --- controllers -------------------------------------------------------------------------------------
class BackgroundController(abc.ABC):
    """Work a plugin runs in the scheduler process beside the scheduling cycles (Koordinator's
    ``frameworkext.Controller``: quota status writers, revoke loops).

    The live scheduler calls ``tick`` from its loop; simulations do not (they have no wall time to spend).
    """

    concurrent: ClassVar[bool] = False
    """True: the live scheduler ticks this controller on a thread of its own, as Koordinator starts each
    controller in its own goroutine, so that its API writes (waiting behind the client's rate limit) never
    hold up scheduling cycles. Only for a controller that guards the state it shares with the plugin's
    extension points (a lock, as ElasticQuota's quota set has). ``tick_controllers`` called directly (tests,
    one-shot runs) still ticks it in the caller's thread."""

    @abc.abstractmethod
    def tick(self, now: float) -> float | None:
        """Do what is due at ``now``; return when the controller next wants to run (None: not again)."""


class ControllerProvider(abc.ABC):
    """A plugin that runs controllers; the scheduler asks once, after constructing the plugin."""

    @abc.abstractmethod
    def new_controllers(self) -> list[BackgroundController]: ...


# --- extension points -----------------------------------------------------------------------------
class SchedulerPlugin(Plugin[ArgsT]):
    """Base of scheduler plugins: constructed once per profile with validated args and the handle."""

    def __init__(self, args: ArgsT, handle: Handle) -> None:
        # Validated again when given raw (a mapping in a test): ``self.args`` is always ``Args``.
        self.args = cast(ArgsT, type(self).parse_args(args))
        self.handle = handle


class EnqueueExtensions(ExtensionPoint):
    """Which cluster events may make a pod this plugin rejected schedulable again (queueing hints).

    A plugin without it is assumed to be helped by any node or pod change.
    """

    extension_point: ClassVar[str] = ""

    @abc.abstractmethod
    def events_to_register(self) -> list[ClusterEvent]: ...


class PreEnqueuePlugin(ExtensionPoint):
    """Gate before the active queue. Non-success keeps the pod out of scheduling until a relevant event."""

    extension_point: ClassVar[str] = "PreEnqueue"

    @abc.abstractmethod
    def pre_enqueue(self, pod: PodInfo) -> Status: ...


class QueueSortPlugin(ExtensionPoint):
    """Orders the active queue. Exactly one QueueSort plugin per profile (all profiles must agree)."""

    extension_point: ClassVar[str] = "QueueSort"

    @abc.abstractmethod
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


class NextPodPlugin(abc.ABC):
    """Chooses the next pod to schedule ahead of the queue (Koordinator's ``frameworkext.NextPodPlugin``).

    Not a profile extension point: a plugin enabled in a profile that also subclasses this is asked before
    every pop. ``next_pod`` returns the uid of a pending pod the scheduler should take out of the queue
    (wherever it waits, skipping this plugin's own PreEnqueue gate) and schedule now, or None to let the queue
    decide. A uid the queue cannot give (the pod is in flight, gone, not this scheduler's, or held back by
    another plugin's PreEnqueue) is reported to ``next_pod_skipped`` and the plugin is asked again.
    Coscheduling uses it to schedule a gang's members back to back.
    """

    @abc.abstractmethod
    def next_pod(self) -> str | None: ...

    def next_pod_skipped(self, uid: str) -> None:  # noqa: B027 - optional hook, empty by default
        """The pod ``next_pod`` named could not be taken from the queue (see the class docstring)."""


class ReportingPlugin(abc.ABC):
    """A plugin with its own section in ``koord simulate``'s report (Coscheduling: one row per gang).

    Not a profile extension point: asked once, after the simulation, by the simulation driver. ``report``
    returns JSON-able rows (the ``plugins.<Name>`` list of ``--output json``); ``report_columns`` names the
    keys of a row the table form shows, in order.
    """

    report_columns: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def report(self, explain: bool) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class NodeUsageEstimate:
    """A node's usage as a usage-aware plugin sees it (LoadAware: the NodeMetric's usage plus the estimates of
    the pods it has not reported yet), in raw units (milli-CPU, bytes)."""

    used: Mapping[str, int]
    allocatable: Mapping[str, int]
    """What the plugin divides by (LoadAware: allocatable, amplified if the node is)."""
    thresholds: Mapping[str, int] = field(default_factory=dict)
    """Usage thresholds (percent) a non-prod pod is filtered against; a resource absent is not checked."""
    expired: bool = False
    """The node's metric is older than the plugin accepts."""


class UsageEstimatingPlugin(abc.ABC):
    """A plugin that estimates node usage (LoadAware). Not an extension point: ``koord compare`` asks it once
    per node after a run, to report estimated utilisation and threshold violations side by side."""

    @abc.abstractmethod
    def estimate_node_usage(self, node: NodeInfo) -> NodeUsageEstimate | None:
        """The node's estimated usage now; None when the plugin knows no usage for it (no metric)."""


class PreFilterExtensions(abc.ABC):
    """Incremental PreFilter-state updates for preemption what-ifs (a pod added to or removed from a node)."""

    @abc.abstractmethod
    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status: ...

    @abc.abstractmethod
    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status: ...


class PreFilterPlugin(ExtensionPoint):
    """Once per cycle before Filter: compute state, reject early, or narrow the nodes.

    Returns ``(result, status)``. ``Skip`` means this plugin's Filter is not called for this pod. A rejection
    stops the cycle (the status is the pod's failure). Results of several plugins are intersected; an empty
    intersection makes the pod unschedulable (UnschedulableAndUnresolvable).
    """

    extension_point: ClassVar[str] = "PreFilter"

    @abc.abstractmethod
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]: ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(ExtensionPoint):
    """Is this node feasible for the pod? Called per node, in profile order, stopping at the first failure.

    Must be side-effect free and must not depend on the order nodes are visited (the framework may
    evaluate nodes in any order, and in the vectorised form all at once).

    A plugin may also subclass ``VectorFilter`` to filter every node at once.
    """

    extension_point: ClassVar[str] = "Filter"

    @abc.abstractmethod
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status: ...


class VectorFilter(abc.ABC):
    """The vectorised form of Filter, over the ``NodeTable``.

    ``filter_all`` returns, for each row in ``rows``, whether that node passes. It must agree exactly with
    ``filter`` node by node (the conformance kit checks this); the framework calls ``filter`` on the failed
    nodes only when it needs their reasons (an unschedulable pod, ``--explain``).
    """

    @abc.abstractmethod
    def filter_all(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> BoolArray: ...


class VectorNormalize(abc.ABC):
    """The vectorised form of ``ScoreExtensions.normalize_score``, for a plugin's score extensions object.

    ``normalize_all`` gets the raw scores of ``rows`` and returns the normalized ones (a new array or the
    same one rewritten). Without it the framework builds a ``list[NodeScore]`` per pod, which on hundreds
    of feasible nodes costs more than the normalisation itself.
    """

    @abc.abstractmethod
    def normalize_all(
        self, state: CycleState, pod: PodInfo, rows: Int64Array, scores: Int64Array
    ) -> Int64Array: ...


class VectorFilterStatuses(abc.ABC):
    """For a ``VectorFilter`` plugin: the statuses ``filter`` would return for rows ``filter_all`` rejected.

    When no node fits, every rejected node needs its status (for the "0/N nodes are available" message and
    for preemption, which skips UnschedulableAndUnresolvable nodes). Without this, the framework calls
    ``filter`` once per rejected node — on thousands of nodes that costs far more than the failed search
    itself. The statuses must equal what ``filter`` returns node by node (share Status objects between rows:
    they are immutable); the framework names the plugin in them.
    """

    @abc.abstractmethod
    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> Sequence[Status]:
        """One status per row of ``rows``; return a ``CodedStatuses`` to skip building a per-row list."""


class CodedStatuses(Sequence[Status]):
    """Per-row statuses held as an index per row into a short list of distinct statuses.

    What ``VectorFilterStatuses.filter_statuses`` may return instead of a list: a plugin whose rejections
    are reason codes per row (an array) then answers thousands of rows with one ``np.unique`` and a status
    per distinct code, and the framework keeps the arrays as they are (``RowStatuses``). On a 1,000-node
    cluster a pod that fits nowhere would otherwise cost a million list entries per thousand such pods. It
    is a ``Sequence[Status]`` too, so code that indexes or iterates it sees one status per row.
    """

    __slots__ = ("distinct", "ids")

    def __init__(self, ids: Int64Array, distinct: Sequence[Status]) -> None:
        self.ids = ids
        """Per row: an index into ``distinct``."""
        self.distinct = list(distinct)

    @classmethod
    def from_codes(cls, codes: Int64Array, status_of: Callable[[int], Status]) -> CodedStatuses:
        """Statuses from integer reason codes per row; ``status_of`` is called once per distinct code."""
        if codes.size == 0:
            return cls(_EMPTY_ROWS, [])
        unique, inverse = np.unique(codes, return_inverse=True)
        ids = inverse.astype(np.int64, copy=False).reshape(-1)
        return cls(ids, [status_of(int(c)) for c in unique.tolist()])

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @overload
    def __getitem__(self, index: int) -> Status: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Status]: ...
    def __getitem__(self, index: int | slice) -> Status | Sequence[Status]:
        if isinstance(index, slice):
            return CodedStatuses(self.ids[index], self.distinct)
        return self.distinct[int(self.ids[index])]

    def __iter__(self) -> Iterator[Status]:
        distinct = self.distinct
        return iter([distinct[i] for i in self.ids.tolist()])


class PostFilterPlugin(ExtensionPoint):
    """Called when no node passed Filter (preemption lives here). Stops at the first Success.

    ``filtered`` is a ``NodeToStatusReader`` when the framework calls (a plain mapping in some tests).
    """

    extension_point: ClassVar[str] = "PostFilter"

    @abc.abstractmethod
    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]: ...


class PreScorePlugin(ExtensionPoint):
    """Once per cycle before Score with the feasible nodes. ``Skip`` skips this plugin's Score."""

    extension_point: ClassVar[str] = "PreScore"

    @abc.abstractmethod
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status: ...


class ScoreExtensions(abc.ABC):
    @abc.abstractmethod
    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        """Rewrite ``scores`` in place into [MIN_NODE_SCORE, MAX_NODE_SCORE]."""


class ScorePlugin(ExtensionPoint):
    """Rank a feasible node: an integer the framework range-checks after NormalizeScore, then weights.

    A plugin may also subclass ``VectorScore`` to score every feasible node at once.
    """

    extension_point: ClassVar[str] = "Score"

    @abc.abstractmethod
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]: ...

    def score_extensions(self) -> ScoreExtensions | None:
        return None


class VectorScore(abc.ABC):
    """Vectorised Score: raw scores for ``rows`` (before NormalizeScore), identical to ``score``."""

    @abc.abstractmethod
    def score_all(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> Int64Array: ...


class ReservePlugin(ExtensionPoint):
    """Claim resources in plugin caches for the chosen node before binding (the pod is *assumed*).

    ``unreserve`` undoes it when any later step fails; the framework calls it on every Reserve plugin in
    reverse order, also on plugins whose ``reserve`` was never called, so it must be idempotent.
    """

    extension_point: ClassVar[str] = "Reserve"

    @abc.abstractmethod
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...

    @abc.abstractmethod
    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


class PermitPlugin(ExtensionPoint):
    """Approve, deny or delay binding. ``Wait`` with a timeout (seconds) holds the pod as a ``WaitingPod``.

    The pod proceeds once every waiting plugin ``allow``s it; a ``reject`` or a timeout unreserves it.
    """

    extension_point: ClassVar[str] = "Permit"

    @abc.abstractmethod
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]: ...


class PreBindPlugin(ExtensionPoint):
    """Work before Bind (write allocation annotations into ``state.pod_mutation``). Failure unreserves."""

    extension_point: ClassVar[str] = "PreBind"

    @abc.abstractmethod
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


class BindPlugin(ExtensionPoint):
    """Bind the pod. ``Skip`` passes to the next bind plugin; the first non-Skip status decides."""

    extension_point: ClassVar[str] = "Bind"

    @abc.abstractmethod
    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


class PostBindPlugin(ExtensionPoint):
    """Informational, after a successful bind (clean-up, metrics). Cannot fail the pod."""

    extension_point: ClassVar[str] = "PostBind"

    @abc.abstractmethod
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@dataclass(frozen=True)
class PointSpec:
    """One scheduler extension point: its name, its profile key, its ABC and what a profile enables there."""

    name: str
    """As plugin classes declare it and profiles' ``Plugins`` keys capitalise it: ``PreFilter``."""
    abc: type[ExtensionPoint]
    doc: str
    """What the point's ``Plugins`` entry enables (the profile schema's description)."""

    @property
    def key(self) -> str:
        """The profile YAML key: ``preFilter``."""
        return self.name[0].lower() + self.name[1:]

    @property
    def field(self) -> str:
        """The snake_case attribute of the ``Plugins`` model: ``pre_filter``."""
        return "".join("_" + c.lower() if c.isupper() else c for c in self.name).lstrip("_")


EXTENSION_POINT_TABLE: tuple[PointSpec, ...] = (
    PointSpec("PreEnqueue", PreEnqueuePlugin, "Gate pods before they enter the active queue."),
    PointSpec(
        "QueueSort", QueueSortPlugin, "Orders the queue; exactly one plugin, the same in every profile."
    ),
    PointSpec(
        "PreFilter", PreFilterPlugin, "Once per pod before Filter: compute state, reject early, narrow."
    ),
    PointSpec("Filter", FilterPlugin, "Is a node feasible for the pod? Plugins run in order per node."),
    PointSpec("PostFilter", PostFilterPlugin, "Runs only when no node fits (preemption)."),
    PointSpec("PreScore", PreScorePlugin, "Once per pod before Score, with the feasible nodes."),
    PointSpec("Score", ScorePlugin, "Ranks feasible nodes; each plugin's score is multiplied by its weight."),
    PointSpec("Reserve", ReservePlugin, "Claims resources in plugin caches for the chosen node."),
    PointSpec("Permit", PermitPlugin, "Approves, denies or delays binding."),
    PointSpec("PreBind", PreBindPlugin, "Work before Bind (allocation annotations)."),
    PointSpec(
        "Bind",
        BindPlugin,
        "Binds the pod; the first plugin that does not skip wins. At least one is required.",
    ),
    PointSpec("PostBind", PostBindPlugin, "Informational, after a successful bind."),
)
"""The scheduler's extension points in kube-scheduler's call order: the one table the profile keys, the
``Plugins`` model of the configuration and the framework's runner lists are derived from."""

EXTENSION_POINTS: dict[str, type[ExtensionPoint]] = {p.name: p.abc for p in EXTENSION_POINT_TABLE}
"""Extension-point name (as profiles spell it, capitalised) -> ABC."""

PROFILE_KEYS: dict[str, str] = {p.key: p.name for p in EXTENSION_POINT_TABLE}
"""Profile YAML key (``preFilter``) -> extension-point name (``PreFilter``)."""


def implements(cls: type, point: str) -> bool:
    return issubclass(cls, EXTENSION_POINTS[point])


__all__ = [
    "EXTENSION_POINTS",
    "EXTENSION_POINT_TABLE",
    "PODS_TO_ACTIVATE",
    "PROFILE_KEYS",
    "BackgroundController",
    "BindPlugin",
    "BoolArray",
    "ClusterEvent",
    "CodedStatuses",
    "ControllerProvider",
    "CycleState",
    "EnqueueExtensions",
    "FilterPlugin",
    "Handle",
    "Int64Array",
    "NextPodPlugin",
    "NodeInfo",
    "NodeScore",
    "NodeTable",
    "NodeToStatusReader",
    "NodeUsageEstimate",
    "PermitPlugin",
    "PointSpec",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "ReportingPlugin",
    "ReservePlugin",
    "SchedulerPlugin",
    "ScoreExtensions",
    "ScorePlugin",
    "SnapshotView",
    "Status",
    "UsageEstimatingPlugin",
    "VectorFilter",
    "VectorFilterStatuses",
    "VectorNormalize",
    "VectorScore",
    "WaitingPod",
    "implements",
]
