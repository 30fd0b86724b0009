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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from koord_framework.api.objects import PodInfo
from koord_framework.handle import BaseHandle
from koord_framework.plugin import ExtensionPoint, Plugin, PluginArgs
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable

if TYPE_CHECKING:
    from koord_framework.cluster.informer import SharedInformer


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
    name: str
    score: int


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """What may make an unschedulable pod schedulable: a kind and an action (Add, Update, Delete)."""

    kind: str
    action: str = "*"


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
    """What the framework gives every plugin: cluster access (``BaseHandle``), shared caches, the snapshot,
    waiting pods."""

    @property
    @abc.abstractmethod
    def informer(self) -> SharedInformer:
        """The shared informer: plugins read CRDs (NodeMetric, PodGroup, ...) and register handlers here."""

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

    def activate_pods(self, pods: Iterable[PodInfo]) -> None:
        """Move these pods, if they wait in backoff or as unschedulable, to the active queue (they go through
        PreEnqueue again). For plugins whose own state change makes parked pods schedulable (a gang that
        just got its last member)."""
        raise NotImplementedError(f"{type(self).__name__} cannot activate pods")

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


# --- extension points -----------------------------------------------------------------------------
class SchedulerPlugin(Plugin):
    """Base of scheduler plugins: constructed once per profile with validated args and the handle."""

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        self.args = args
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


class PostFilterPlugin(ExtensionPoint):
    """Called when no node passed Filter (preemption lives here). Stops at the first Success."""

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


EXTENSION_POINTS: dict[str, type[ExtensionPoint]] = {
    cls.extension_point: cls
    for cls in (
        PreEnqueuePlugin,
        QueueSortPlugin,
        PreFilterPlugin,
        FilterPlugin,
        PostFilterPlugin,
        PreScorePlugin,
        ScorePlugin,
        ReservePlugin,
        PermitPlugin,
        PreBindPlugin,
        BindPlugin,
        PostBindPlugin,
    )
}
"""Extension-point name (as profiles spell it, capitalised) -> ABC."""

PROFILE_KEYS: dict[str, str] = {name[0].lower() + name[1:]: name for name in EXTENSION_POINTS}
"""Profile YAML key (``preFilter``) -> extension-point name (``PreFilter``)."""


def implements(cls: type, point: str) -> bool:
    return issubclass(cls, EXTENSION_POINTS[point])


__all__ = [
    "EXTENSION_POINTS",
    "PROFILE_KEYS",
    "BindPlugin",
    "BoolArray",
    "ClusterEvent",
    "CycleState",
    "EnqueueExtensions",
    "FilterPlugin",
    "Handle",
    "Int64Array",
    "NextPodPlugin",
    "NodeInfo",
    "NodeScore",
    "NodeTable",
    "PermitPlugin",
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
    "Status",
    "VectorFilter",
    "VectorScore",
    "WaitingPod",
    "implements",
]
