"""The Scheduler: profiles by ``schedulerName``, the scheduling cycle, the binding cycle, Permit waits.

Modelled on kube-scheduler's ``schedule_one.go``. One pod at a time goes through a *scheduling cycle*:

    snapshot update → PreFilter → Filter (the first numFeasibleNodesToFind nodes that fit, searched from a
    rotating start) → [PostFilter when none fits] → PreScore → Score → pick the best (ties broken by a seeded
    ``random.Random``) → assume in the cache → Reserve → Permit

and then a *binding cycle* (PreBind → one merge patch of PreBind's pod changes → Bind → PostBind). Binding
runs in worker threads concurrently with the next scheduling cycle (``async_binding=True``, what a live
scheduler does) or right after the scheduling cycle in the calling thread (the default, deterministic mode
``koord simulate`` uses). A pod that Permit holds (``Wait``) is parked as a ``WaitingPod`` until every waiting
plugin allows it, any plugin rejects it, or its timeout passes on the scheduler's clock; only then does its
binding cycle run. Any failure after assume runs Unreserve (reverse order), forgets the pod and requeues it
with backoff.

``run_until_idle`` drives a simulation on a ``VirtualClock``: it schedules while pods are ready, and when
nothing is, jumps the clock to the next timer (a backoff ending, a Permit timeout). It stops when nothing is
left, or when no progress is possible: after a pod has been tried ``STALL_ATTEMPTS`` times since the last
binding, deletion or node change, its timers no longer move the clock (retrying would repeat the same
failure forever).
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from time import perf_counter
from typing import TYPE_CHECKING, Any

import numpy as np

from koord_framework.api.objects import NodeRecord, PodInfo, copy_pod_info
from koord_framework.cluster.clock import Clock, VirtualClock
from koord_framework.cluster.events import register_recorder_metrics
from koord_framework.cluster.informer import NodeCache, PodCache, SharedInformer
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import ClusterError
from koord_framework.featuregates import FeatureGates, gates_for
from koord_framework.scheduler.cache import SchedulerCache, Snapshot
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.framework import (
    PODS_TO_ACTIVATE,
    Framework,
    PluginLayout,
    PluginScores,
    RowStatuses,
    distinct_statuses,
    narrowing_plugins,
)
from koord_framework.scheduler.frameworkext import ReservePodQueue, is_reserve_pod, reservation_name_of
from koord_framework.scheduler.handle import SchedulerHandle
from koord_framework.scheduler.interface import (
    BackgroundController,
    ClusterEvent,
    ControllerProvider,
    NextPodPlugin,
    NodeToStatusReader,
    QueuedPodInfo,
    WaitingPod,
)
from koord_framework.scheduler.metrics import SchedulerMetrics
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.queue import SchedulingQueue
from koord_framework.scheduler.reporting import REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE, FailureReporter
from koord_framework.scheduler.status import SUCCESS, Code, Status
from koord_framework.scheduler.table import Int64Array
from koord_framework.scheduler.workers import Workers

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from koord_framework.config.loader import LoadedSchedulerConfig, ResolvedSchedulerProfile

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
STALL_ATTEMPTS = 3
"""Attempts of a pod since the last progress after which its timers stop moving a simulation's clock."""
CONTROLLER_JOIN_SECONDS = 10.0
"""How long ``close`` waits for a concurrent controller's tick in flight (a status write behind the rate
limit) before it lets go and says so."""
NO_NODES_MESSAGE = "no nodes available to schedule pods"
_MAX_NEXT_POD_ANSWERS = 1 << 20
"""Answers of one NextPod plugin per pop before the queue decides (a guard against a plugin that loops)."""

EVENT_POD_ADD = ClusterEvent("Pod", "Add")
EVENT_POD_UPDATE = ClusterEvent("Pod", "Update")
EVENT_POD_DELETE = ClusterEvent("Pod", "Delete")
EVENT_NODE_ADD = ClusterEvent("Node", "Add")
EVENT_NODE_UPDATE = ClusterEvent("Node", "Update")


# --- profiles ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProfileSpec:
    """A profile ready to run: its name, plugin layout, validated (or raw) args and percentage."""

    scheduler_name: str
    layout: PluginLayout
    args: Mapping[str, Any] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None

    @classmethod
    def from_resolved(cls, prof: ResolvedSchedulerProfile) -> ProfileSpec:
        return cls(
            prof.scheduler_name,
            PluginLayout.from_effective(prof.plugins),
            dict(prof.args),
            prof.percentage_of_nodes_to_score,
        )


def default_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort's order, used when no profile has a QueueSort plugin: priority, then queue time."""
    pa, pb = a.pod.priority_value, b.pod.priority_value
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def default_sort_key(info: QueuedPodInfo) -> tuple[int, float]:
    """``default_less`` as a key: ``default_less(a, b)`` iff ``key(a) < key(b)``."""
    return (-info.pod.priority_value, info.timestamp)


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: adaptive 50 - nodes/125 percent (>= 5%), >= 100 nodes."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage <= 0:
        percentage = 50 - num_all_nodes // 125
        if percentage < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            percentage = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * percentage // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


# --- outcomes -----------------------------------------------------------------------------------------
@dataclass(slots=True)
class PodOutcome:
    """The latest result of one pod (kept when ``record_outcomes``): what ``koord simulate`` reports."""

    pod: PodInfo
    profile: str
    status: str
    """``Scheduled``, ``Unschedulable``, ``Waiting`` or ``Binding`` (assumed, binding not finished)."""
    node: str | None = None
    message: str = ""
    code: Code = Code.SUCCESS
    plugin: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    filter: dict[str, Status] | None = None
    """Node → the status that rejected it (``explain``)."""
    scores: dict[str, dict[str, tuple[int, int, int]]] | None = None
    """Node → plugin → (raw, normalized, weighted) (``explain``)."""
    totals: dict[str, int] | None = None
    attempts: int = 0
    nominated_node: str = ""
    notes: list[str] = field(default_factory=list)
    """Lines of the profile's ``CycleExplainer`` plugins (``explain``)."""


@dataclass(slots=True)
class Diagnosis:
    """Why no node fit (kube-scheduler's ``FitError``)."""

    num_all_nodes: int
    statuses: Mapping[str, Status] = field(default_factory=dict)
    absent: Status | None = None
    """Status of every node not in ``statuses`` (nodes a PreFilter result excluded)."""
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def message(self) -> str:
        """kube-scheduler's ``FitError.Error()``: ``0/N nodes are available: <counts>. <preemption>.``."""
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter_msg:
            msg += f" {self.pre_filter_msg}."
        else:
            histogram = self._histogram()
            if histogram:
                msg += f" {', '.join(histogram)}."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}."
        return msg

    def message_v1_20(self) -> str:
        """kube-scheduler v1.20's ``FitError.Error()``, what its Events and PodScheduled condition say:
        the sorted reason counts only (a PreFilter rejection counted once per node, no preemption part)."""
        return f"0/{self.num_all_nodes} nodes are available: {', '.join(self._histogram())}."

    def _histogram(self) -> list[str]:
        counts: dict[str, int] = {}
        per_status = (
            self.statuses.counts()
            if isinstance(self.statuses, RowStatuses)
            else [(s, 1) for s in self.statuses.values()]
        )
        for s, n in per_status:
            for reason in s.reasons:
                counts[reason] = counts.get(reason, 0) + n
        missing = self.num_all_nodes - len(self.statuses)
        if missing > 0 and self.absent is not None:
            for reason in self.absent.reasons:
                counts[reason] = counts.get(reason, 0) + missing
        return sorted(f"{n} {reason}" for reason, n in counts.items())


class NodeToStatus(NodeToStatusReader):
    """Node → rejection status for PostFilter, lazily covering nodes outside ``explicit`` with ``absent``.

    ``codes(rows)`` answers for many snapshot rows at once (the ``Code`` of each row's status, -1 for none),
    so that preemption can set aside the nodes it cannot help without a lookup per node.
    """

    def __init__(
        self,
        explicit: Mapping[str, Status],
        absent: Status | None,
        nodes: Sequence[str] | Callable[[], Sequence[str]],
        table_index: Mapping[str, int] | None = None,
    ) -> None:
        self._explicit = explicit
        self._absent = absent
        self._nodes_or_source = nodes
        self._name_list: Sequence[str] | None = None
        self._table_index = table_index

    @property
    def _nodes(self) -> Sequence[str]:
        if self._name_list is None:
            source = self._nodes_or_source
            self._name_list = source() if callable(source) else source
        return self._name_list

    def codes(self, rows: Int64Array) -> Int64Array:
        """Per snapshot row: the ``Code`` of its status, -1 for rows without one."""
        explicit = self._explicit
        if isinstance(explicit, RowStatuses):
            out = explicit.codes(rows)
        else:
            out = np.full(rows.shape[0], -1, dtype=np.int64)
            if explicit:
                if self._table_index is None:
                    raise ValueError("NodeToStatus.codes needs the table index for a plain mapping")
                position = {r: i for i, r in enumerate(rows.tolist())}
                for name, st in explicit.items():
                    i = position.get(self._table_index.get(name, -1))
                    if i is not None:
                        out[i] = int(st.code)
        if self._absent is not None:
            out[out < 0] = int(self._absent.code)
        return out

    def __getitem__(self, name: str) -> Status:
        s = self._explicit.get(name)
        if s is not None:
            return s
        if self._absent is not None and name in self._names():
            return self._absent
        raise KeyError(name)

    def _names(self) -> set[str]:
        names = getattr(self, "_name_set", None)
        if names is None:
            names = set(self._nodes)
            self._name_set = names
        return names

    def __iter__(self) -> Iterator[str]:
        if self._absent is None:
            return iter(self._explicit)
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes) if self._absent is not None else len(self._explicit)


@dataclass(slots=True)
class _CycleResult:
    """What one scheduling cycle decided, with the details ``--explain`` reports."""

    node: str | None
    status: Status
    diagnosis: Diagnosis | None = None
    filter: dict[str, Status] | None = None
    scores: dict[str, dict[str, tuple[int, int, int]]] | None = None
    totals: dict[str, int] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Binding:
    """Everything the binding cycle of one assumed pod needs."""

    fw: Framework
    state: CycleState
    info: QueuedPodInfo
    pod: PodInfo
    """The assumed pod (``node_name`` set)."""
    node: str
    cycle: int
    started: float
    result: _CycleResult
    written: dict[str, str] = field(default_factory=dict)
    """Annotations PreBind put on the pod (for the report)."""


# --- Permit waiting ------------------------------------------------------------------------------------
class _WaitingPod(WaitingPod):
    """A pod held at Permit: pending plugins with their deadlines on the scheduler's clock."""

    def __init__(
        self, binding: _Binding, waits: Mapping[str, float], now: float, on_done: Callable[..., None]
    ) -> None:
        self.binding = binding
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[float, float]] = {p: (now + t, t) for p, t in waits.items()}
        self._done = False
        self._on_done = on_done
        self.since = now

    @property
    def pod(self) -> PodInfo:
        return self.binding.pod

    @property
    def node_name(self) -> str:
        return self.binding.node

    def pending_plugins(self) -> list[str]:
        with self._lock:
            return list(self._pending)

    def deadline(self) -> float | None:
        with self._lock:
            if self._done or not self._pending:
                return None
            return min(d for d, _ in self._pending.values())

    def allow(self, plugin: str) -> None:
        with self._lock:
            if self._done:
                return
            self._pending.pop(plugin, None)
            if self._pending:
                return
            self._done = True
        self._on_done(self, Status())

    def reject(self, plugin: str, message: str) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._on_done(self, Status(Code.UNSCHEDULABLE, (message,), plugin))

    def expire(self, now: float) -> bool:
        """Reject on behalf of the first plugin whose timeout passed; returns whether it did."""
        with self._lock:
            if self._done:
                return False
            late = [(d, p, t) for p, (d, t) in self._pending.items() if d <= now]
        if not late:
            return False
        _, plugin, timeout = min(late)
        self.reject(plugin, f"rejected due to timeout after waiting {_seconds(timeout)} at plugin {plugin}")
        return True


class WaitingPods:
    """The waiting pods of every profile, by uid."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, _WaitingPod] = {}

    def add(self, wp: _WaitingPod) -> None:
        with self._lock:
            self._pods[wp.pod.uid] = wp

    def remove(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def get(self, uid: str) -> _WaitingPod | None:
        with self._lock:
            return self._pods.get(uid)

    def list(self) -> list[_WaitingPod]:
        with self._lock:
            return list(self._pods.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)


def _seconds(value: float) -> str:
    return f"{value:g}s"


# --- the scheduler ---------------------------------------------------------------------------------------
class Scheduler:
    """A scheduler over a cluster port with one or more profiles."""

    def __init__(
        self,
        cluster: ClusterPort,
        profiles: Sequence[ProfileSpec],
        *,
        informer: SharedInformer | None = None,
        metrics_registry: CollectorRegistry | None = None,
        seed: int | None = 0,
        percentage_of_nodes_to_score: int = 0,
        pod_initial_backoff_seconds: float = 1.0,
        pod_max_backoff_seconds: float = 10.0,
        async_binding: bool = False,
        binding_workers: int = 16,
        explain: bool = False,
        record_outcomes: bool = False,
        assumed_pod_ttl: float = 0.0,
        feature_gates: FeatureGates | None = None,
    ) -> None:
        if not profiles:
            raise ValueError("a scheduler needs at least one profile")
        names = [p.scheduler_name for p in profiles]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate schedulerName among profiles: {names}")
        self.cluster = cluster
        self.clock: Clock = cluster.clock
        self.feature_gates = feature_gates if feature_gates is not None else gates_for("scheduler")
        """koord-scheduler's gates, read by every profile's framework and plugins
        (``Handle.feature_enabled``)."""
        self.informer = informer if informer is not None else SharedInformer(cluster)
        self.metrics = SchedulerMetrics(metrics_registry)
        self.rng = random.Random(seed)
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.explain = explain
        self.record_outcomes = record_outcomes or explain
        self.outcomes: dict[str, PodOutcome] = {}
        self.cache = SchedulerCache(self.clock, ttl=assumed_pod_ttl)
        self.snapshot = Snapshot()
        self.waiting = WaitingPods()
        self._next_start = 0
        self._epoch = 0
        self._stall: dict[str, tuple[int, int]] = {}
        self._bindings: deque[Callable[[], None]] = deque()
        self._async = async_binding
        self._executor = Workers(binding_workers, "binder") if async_binding else None
        self._inflight_lock = threading.Lock()
        self._inflight = 0
        self._idle = threading.Condition(self._inflight_lock)
        self._started = False
        self._stopped = False
        self.scheduled_count = 0
        self.attempt_count = 0
        self.reporter = FailureReporter(cluster, self.informer.get)
        """Events and the PodScheduled condition, as kube-scheduler records them."""
        if metrics_registry is not None:
            register_recorder_metrics(cluster, metrics_registry)
        self.abandoned_bindings = 0

        self.reserve_pod_queue = _ReservePodQueue(self)
        self.shared_slots: dict[Any, Any] = {}
        """What plugins of every profile share (``Handle.shared(scope="component")``)."""
        # The typed caches exist before the plugins, so that plugin constructors can share them. Pods and
        # nodes are listed at once (the API server serialises 5,000 pods while the node list is read).
        self.informer.ensure_all(("Pod", "Node"))
        self.pod_cache: PodCache = PodCache(self.informer)
        self.node_cache: NodeCache = NodeCache(self.informer)
        self.handles: dict[str, SchedulerHandle] = {}
        self.frameworks: dict[str, Framework] = {}
        for spec in profiles:
            handle = SchedulerHandle(self, spec.scheduler_name)
            fw = Framework(
                spec.scheduler_name,
                spec.layout,
                spec.args,
                handle,
                self.metrics,
                percentage_of_nodes_to_score=spec.percentage_of_nodes_to_score,
                feature_gates=self.feature_gates,
            )
            handle.bind_framework(fw)
            self.handles[spec.scheduler_name] = handle
            self.frameworks[spec.scheduler_name] = fw
        self._next_pod_plugins: list[tuple[str, NextPodPlugin]] = [
            (name, inst)
            for fw in self.frameworks.values()
            for name, inst in fw.plugins.items()
            if isinstance(inst, NextPodPlugin)
        ]
        first = next(iter(self.frameworks.values()))
        less = first.less if first.queue_sort else default_less
        sort_key = getattr(first.queue_sort[0][1], "sort_key", None) if first.queue_sort else default_sort_key
        self._events = self._collect_events()
        self._interest_cache: dict[ClusterEvent, frozenset[str]] = {}
        self.queue = SchedulingQueue(
            less,
            self.clock,
            initial_backoff=pod_initial_backoff_seconds,
            max_backoff=pod_max_backoff_seconds,
            pre_enqueue=self._pre_enqueue,
            interest=self._interest,
            sort_key=sort_key if callable(sort_key) else None,
        )
        self.metrics.set_pending_source(self.queue.lengths)
        self.controllers: list[BackgroundController] = [
            c
            for fw in self.frameworks.values()
            for plugin in fw.plugins.values()
            if isinstance(plugin, ControllerProvider)
            for c in plugin.new_controllers()
        ]
        self._controller_due: list[float | None] = [0.0] * len(self.controllers)
        self._controller_threads: list[threading.Thread] = []

    @classmethod
    def from_config(cls, cluster: ClusterPort, loaded: LoadedSchedulerConfig, **kwargs: Any) -> Scheduler:
        """A scheduler for a loaded ``KubeSchedulerConfiguration`` (its backoff and percentage settings)."""
        cfg = loaded.config
        kwargs.setdefault("percentage_of_nodes_to_score", cfg.percentage_of_nodes_to_score)
        kwargs.setdefault("pod_initial_backoff_seconds", float(cfg.pod_initial_backoff_seconds))
        kwargs.setdefault("pod_max_backoff_seconds", float(cfg.pod_max_backoff_seconds))
        return cls(cluster, [ProfileSpec.from_resolved(p) for p in loaded.profiles], **kwargs)

    # --- wiring ----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Follow the cluster: nodes and pods into the cache and queue, then their changes as they come."""
        if self._started:
            return
        self._started = True
        self.node_cache.add_listener(self._on_node_add, self._on_node_update, self._on_node_delete)
        self.pod_cache.add_listener(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        for node in self.node_cache.all():
            self.cache.add_node(node)
        # Replaying existing pods moves parked pods once at the end rather than once per bound pod: the
        # moves are idempotent, and on a large cluster 150,000 of them cost seconds.
        bound = False
        for pod in self.pod_cache.all():
            bound |= self._add_pod(pod)
        if bound:
            self._move(EVENT_POD_ADD)
        self.reserve_pod_queue.start()
        for kind in sorted({ev.kind for evs in self._events.values() if evs for ev in evs}):
            if kind in self.cluster.kinds and kind not in ("Pod", "Node"):
                # The informer replays existing objects to ``on_add`` at registration; those are not events.
                relay = _EventRelay(self, kind)
                self.informer.add_handler(kind, relay.on_add, relay.on_update, relay.on_delete)
                relay.armed = True

    def close(self) -> None:
        """Stop scheduling and the queue; bindings already on the wire finish, those still queued behind
        the client's rate limit are abandoned (unreserved and forgotten: their pods stay pending for the
        next leader), so that stopping takes a bounded time whatever the backlog."""
        self._stopped = True
        self.queue.close()
        for thread in self._controller_threads:
            # A tick in flight finishes (its write lands before the Lease is let go); they poll ``_stopped``.
            thread.join(timeout=CONTROLLER_JOIN_SECONDS)
            if thread.is_alive():
                log.warning(
                    "controller thread %s did not stop within %.0f s", thread.name, CONTROLLER_JOIN_SECONDS
                )
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            if self.abandoned_bindings:
                log.info(
                    "stopped: abandoned %d queued bindings; their pods stay pending",
                    self.abandoned_bindings,
                )
        for fw in self.frameworks.values():
            fw.close()  # every plugin's close(), once

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def responsible_for(self, pod: PodInfo) -> bool:
        return pod.scheduler_name in self.frameworks

    def framework_for(self, pod: PodInfo) -> Framework | None:
        return self.frameworks.get(pod.scheduler_name)

    # --- event handlers ---------------------------------------------------------------------------------
    def _on_node_add(self, node: NodeRecord) -> None:
        self.cache.add_node(node)
        self._epoch += 1  # new room is progress: stalled pods get their retries (and timers) back
        self._move(EVENT_NODE_ADD)

    def _on_node_update(self, old: NodeRecord, new: NodeRecord) -> None:
        self.cache.update_node(old, new)
        if _node_changed(old, new):
            self._epoch += 1
            self._move(EVENT_NODE_UPDATE)

    def _on_node_delete(self, node: NodeRecord) -> None:
        self.cache.remove_node(node.name)

    def _on_pod_add(self, pod: PodInfo) -> None:
        if self._add_pod(pod):
            self._move(EVENT_POD_ADD)

    def _add_pod(self, pod: PodInfo) -> bool:
        """Count a bound pod on its node or queue a pending one; returns whether it was counted."""
        if pod.node_name:
            if not pod.is_terminal:
                self.cache.add_pod(pod)
                return True
        elif self.responsible_for(pod) and not pod.is_terminating and not pod.is_terminal:
            self.queue.add(pod)
        return False

    def _on_pod_update(self, old: PodInfo, new: PodInfo) -> None:
        if new.node_name:
            if not old.node_name:
                self.queue.delete(new.uid)
            if new.is_terminal:
                self.cache.remove_pod(new)
                self._epoch += 1
                self._move(EVENT_POD_DELETE)
                return
            self.cache.add_pod(new)
            self._move(EVENT_POD_ADD if not old.node_name else EVENT_POD_UPDATE)
            return
        if not self.responsible_for(new):
            return
        if new.is_terminating or new.is_terminal:
            self.queue.delete(new.uid)
            return
        if self.cache.is_assumed(new.uid):
            return  # in flight; the binding cycle owns it
        # kube's isPodUpdated: a change of the status alone (the PodScheduled condition this scheduler
        # writes after a failure) keeps a parked pod parked.
        self.queue.update(new, retry=_spec_changed(old, new))

    def _on_pod_delete(self, pod: PodInfo) -> None:
        if pod.node_name:
            self.cache.remove_pod(pod)
            self._epoch += 1
            self._move(EVENT_POD_DELETE)
            return
        self.queue.delete(pod.uid)
        wp = self.waiting.get(pod.uid)
        if wp is not None:
            wp.reject("", "removed")

    def _move(self, event: ClusterEvent, pre_check: Callable[[PodInfo], bool] | None = None) -> None:
        self.queue.move_all_on_event(event, pre_check)

    def _collect_events(self) -> dict[str, list[ClusterEvent] | None]:
        out: dict[str, list[ClusterEvent] | None] = {}
        for fw in self.frameworks.values():
            for name, evs in fw.events_to_register().items():
                if name not in out or evs is None:
                    out[name] = evs
                elif out[name] is not None:
                    out[name] = [*(out[name] or []), *evs]
        return out

    def _interest(self, event: ClusterEvent) -> frozenset[str]:
        cached = self._interest_cache.get(event)
        if cached is not None:
            return cached
        names = frozenset(
            name
            for name, evs in self._events.items()
            if evs is None or any(_matches(ev, event) for ev in evs)
        )
        self._interest_cache[event] = names
        return names

    def _pre_enqueue(self, pod: PodInfo) -> Status:
        fw = self.frameworks.get(pod.scheduler_name)
        if fw is None or not fw.pre_enqueue:
            return Status()
        s = fw.run_pre_enqueue(pod)
        if not s.is_success and self.record_outcomes:
            self.outcomes[pod.uid] = PodOutcome(
                pod,
                fw.profile_name,
                "Unschedulable",
                None,
                s.message or f"gated by {s.plugin}",
                s.code,
                s.plugin,
            )
        return s

    # --- the scheduling cycle ---------------------------------------------------------------------------
    def _pop(self, *, block: bool = False, timeout: float | None = None) -> QueuedPodInfo | None:
        """The next pod: the one a NextPod plugin names (taken out of the queue), else the queue's head."""
        for name, plugin in self._next_pod_plugins:
            # Each answer is one the plugin will not give again, so this ends; the bound is a safety net.
            for _ in range(_MAX_NEXT_POD_ANSWERS):
                try:
                    uid = plugin.next_pod()
                except Exception:
                    log.exception("NextPod of plugin %s failed", name)
                    break
                if uid is None:
                    break
                gate = self.queue.gate_of(uid)
                # Another plugin's PreEnqueue gate is respected; only the asking plugin's own is lifted.
                info = self.queue.take(uid) if not gate or gate == name else None
                if info is not None:
                    return info
                plugin.next_pod_skipped(uid)
        return self.queue.pop(block=block, timeout=timeout)

    def schedule_one(self) -> bool:
        """Pop one pod and run its scheduling cycle (and, in deterministic mode, its binding cycle)."""
        info = self._pop()
        if info is None:
            return False
        self._scheduling_cycle(info)
        self._drain_bindings()
        return True

    def _scheduling_cycle(self, info: QueuedPodInfo) -> None:
        pod = info.pod
        cycle = self.queue.scheduling_cycle
        fw = self.frameworks.get(pod.scheduler_name)
        # Skip pods being deleted, and pods the cache already counts (assumed, or bound meanwhile).
        if fw is None or pod.is_terminating or self.cache.get_pod(pod.uid) is not None:
            self.queue.done(pod.uid)
            return
        started = perf_counter()
        self.attempt_count += 1
        self._count_attempt(pod.uid)
        state = CycleState()
        state.record_metrics = self.metrics.sample_cycle()
        state.write(PODS_TO_ACTIVATE, {})
        self.cache.update_snapshot(self.snapshot)
        result = self._schedule_pod(fw, state, pod)
        if self.explain and fw.explainers:
            result.notes = fw.run_explain(state, pod, result.node)
        if result.node is None:
            self._after_failed_cycle(fw, state, info, result, cycle, started)
            return
        host = result.node
        assumed = with_node(pod, host)
        try:
            self.cache.assume_pod(assumed)
        except ValueError as exc:
            result.status = Status.as_error(exc)
            self._fail(fw, info, result, cycle, started, pod, REASON_SCHEDULER_ERROR)
            return
        self.queue.delete_nominated(pod.uid)
        s = fw.run_reserve(state, assumed, host)
        if not s.is_success:
            fw.run_unreserve(state, assumed, host)
            self.cache.forget_pod(assumed)
            result.status, result.node = s, None
            self._fail(fw, info, result, cycle, started, pod, REASON_SCHEDULER_ERROR)
            return
        s, waits = fw.run_permit(state, assumed, host)
        if not s.is_success and not s.is_wait:
            fw.run_unreserve(state, assumed, host)
            self.cache.forget_pod(assumed)
            result.status, result.node = s, None
            reason = REASON_UNSCHEDULABLE if s.is_rejected else REASON_SCHEDULER_ERROR
            self._fail(fw, info, result, cycle, started, pod, reason)
            return
        self.queue.done(pod.uid)
        self._activate(state)
        binding = _Binding(fw, state, info, assumed, host, cycle, started, result)
        if s.is_wait:
            wp = _WaitingPod(binding, waits, self.clock.now(), self._on_permit_done)
            self.waiting.add(wp)
            self._record(binding, "Waiting", s)
            return
        self._record(binding, "Binding", s)
        self._submit(binding)

    def _schedule_pod(self, fw: Framework, state: CycleState, pod: PodInfo) -> _CycleResult:
        snap = self.snapshot
        num_all = len(snap)
        if num_all == 0:
            return _CycleResult(None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_NODES_MESSAGE,)))
        pre, s = fw.run_pre_filter(state, pod)
        if not s.is_success:
            if not s.is_rejected:
                return _CycleResult(None, s)
            diag = Diagnosis(num_all, absent=s, pre_filter_msg=s.message)
            if s.code is Code.PENDING:
                diag.pending_plugins = _plugins_of(s)
            else:
                diag.unschedulable_plugins = _plugins_of(s)
            filt = dict.fromkeys((ni.name for ni in snap.node_list), s) if self.explain else None
            return _CycleResult(None, Status(s.code, (diag.message(),), s.plugin), diag, filt)
        absent: Status | None = None
        if pre is not None and pre.node_names is not None:
            candidates = snap.rows_of(pre.node_names)
            narrowing = narrowing_plugins(state)
            if len(narrowing) == 1:
                msg = f"node(s) didn't satisfy plugin {narrowing[0]}"
            else:
                msg = f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}] simultaneously"
            absent = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (msg,), ",".join(narrowing))
        else:
            candidates = snap.rows
        feasible: Int64Array | None = None
        statuses: Mapping[str, Status] = {}
        rejected_plugins: set[str] = set()
        # A pod that preemption nominated to a node tries that node first and takes it if it fits
        # (kube-scheduler's evaluateNominatedNode). With ``explain`` the full search still runs, for the
        # report.
        forced: int | None = None
        nominated = pod.nominated_node or self.queue.nominated_node_of(pod.uid)
        if nominated:
            row = snap.table.index.get(nominated)
            if row is not None and snap.get(nominated) is not None and bool(np.any(candidates == row)):
                one = fw.find_feasible(
                    state, pod, np.array([row], dtype=np.int64), start=0, num_to_find=1, want_reasons=False
                )
                if one.error is not None:
                    return _CycleResult(None, one.error)
                if one.feasible.size:
                    forced = row
                    if not self.explain:
                        feasible = one.feasible
        if feasible is None:
            percentage = fw.percentage_of_nodes_to_score
            if percentage is None:
                percentage = self.percentage_of_nodes_to_score
            n = int(candidates.size)
            to_find = n if self.explain else num_feasible_nodes_to_find(percentage, n)
            out = fw.find_feasible(
                state, pod, candidates, start=self._next_start, num_to_find=to_find, want_reasons=self.explain
            )
            if out.error is not None:
                return _CycleResult(None, out.error)
            self._next_start = (self._next_start + out.processed) % num_all
            feasible = out.feasible
            statuses = out.statuses
            rejected_plugins = set(out.rejected_by)
        filt = None
        if self.explain:
            filt = dict(statuses)
            if absent is not None:
                inside = set(candidates.tolist())
                for ni in snap.node_list:
                    if ni.row not in inside:
                        filt[ni.name] = absent
        if feasible.size == 0:
            diag = Diagnosis(num_all, statuses, absent, {p for p in rejected_plugins if p})
            for st in distinct_statuses(statuses):
                if st.plugin:
                    diag.unschedulable_plugins.update(_plugins_of(st))
            return _CycleResult(None, Status(Code.UNSCHEDULABLE, (diag.message(),)), diag, filt)
        table = snap.table
        if forced is not None and not self.explain:
            return _CycleResult(table.names[forced], SUCCESS, None, filt)
        if feasible.size == 1 and not self.explain:
            return _CycleResult(table.names[int(feasible[0])], SUCCESS, None, filt)
        # Feasible rows always have a NodeInfo in the snapshot; the list is built only if someone reads it
        # (vectorised Score plugins do not).
        infos: Sequence[NodeInfo] = RowNodes(fw.cycle_view(state).by_row, feasible)
        scores: dict[str, dict[str, tuple[int, int, int]]] | None = None
        totals_out: dict[str, int] | None = None
        if fw.has_score_plugins:
            s = fw.run_pre_score(state, pod, infos)
            if not s.is_success:
                return _CycleResult(None, s, None, filt)
            outcome, s = fw.run_score(state, pod, feasible, infos, explain=self.explain)
            if outcome is None:
                return _CycleResult(None, s, None, filt)
            totals = outcome.totals
            if outcome.plugins is not None:
                scores = _explain_scores(infos, outcome.plugins)
        else:
            totals = np.ones(feasible.size, dtype=np.int64)
        if self.explain:
            totals_out = {ni.name: int(v) for ni, v in zip(infos, totals.tolist())}
        if forced is not None:
            return _CycleResult(table.names[forced], SUCCESS, None, filt, scores, totals_out)
        pick = self._select_host(totals)
        return _CycleResult(table.names[int(feasible[pick])], SUCCESS, None, filt, scores, totals_out)

    def _select_host(self, totals: Int64Array) -> int:
        """Index of a best-scored node; among equals, one drawn from the seeded generator.

        kube-scheduler samples the reservoir one tied node at a time; a single uniform draw among the ties is
        the same distribution with one random number per pod.
        """
        if totals.size == 1:
            return 0
        best = totals.max()
        ties = np.flatnonzero(totals == best)
        if ties.size == 1:
            return int(ties[0])
        return int(ties[self.rng.randrange(int(ties.size))])

    # --- failures ----------------------------------------------------------------------------------------
    def _after_failed_cycle(
        self,
        fw: Framework,
        state: CycleState,
        info: QueuedPodInfo,
        result: _CycleResult,
        cycle: int,
        started: float,
    ) -> None:
        diag = result.diagnosis
        if diag is not None and fw.has_post_filter_plugins and result.status.code is not Code.PENDING:
            node_list = self.snapshot.node_list
            filtered = NodeToStatus(
                diag.statuses, diag.absent, lambda: [ni.name for ni in node_list], self.snapshot.table.index
            )
            self.metrics.preemption_attempts.inc()
            pf_result, pf_status = fw.run_post_filter(state, info.pod, filtered)
            if pf_status.is_error:
                log.warning("PostFilter failed for pod %s: %s", info.pod.key, pf_status)
            diag.post_filter_msg = pf_status.message if not pf_status.is_success else ""
            result.status = Status(result.status.code, (diag.message(),), result.status.plugin)
            if pf_result is not None and pf_result.nominated_node:
                self._nominate(info.pod, pf_result.nominated_node)
        self._fail(fw, info, result, cycle, started, info.pod)

    def _nominate(self, pod: PodInfo, node: str) -> None:
        self.queue.add_nominated(pod, node)
        if is_reserve_pod(pod):
            # No Pod in the API: the nomination lives in the queue (Koordinator's AddNominatedReservePod).
            return
        try:
            self.cluster.patch(
                "Pod", pod.name, pod.namespace, {"status": {"nominatedNodeName": node}}, status=True
            )
        except ClusterError as exc:
            log.warning("could not record nominated node %s of pod %s: %s", node, pod.key, exc)

    def _fail(
        self,
        fw: Framework,
        info: QueuedPodInfo,
        result: _CycleResult,
        cycle: int,
        started: float,
        pod: PodInfo,
        reason: str = REASON_UNSCHEDULABLE,
    ) -> None:
        s = result.status
        unsched: set[str] = set()
        pending: set[str] = set()
        if result.diagnosis is not None:
            unsched = result.diagnosis.unschedulable_plugins
            pending = result.diagnosis.pending_plugins
        elif s.is_rejected and s.plugin:
            (pending if s.code is Code.PENDING else unsched).update(_plugins_of(s))
        self._requeue(info, unsched, pending, cycle)
        # After the requeue, as kube-scheduler's recordSchedulingFailure: the condition's own update event
        # then finds the pod parked. v1.20 reports every failure of the scheduling algorithm as
        # Unschedulable, and failures after a node was chosen (assume, Reserve, an erroring Permit) as
        # SchedulerError.
        message = s.message or s.code.label
        if result.diagnosis is not None and reason == REASON_UNSCHEDULABLE:
            message = result.diagnosis.message_v1_20()
        self._report_failure(fw, pod, reason, message)
        label = "error" if s.is_error else "unschedulable"
        self.metrics.observe_attempt(label, fw.profile_name, perf_counter() - started)
        if self.record_outcomes:
            self.outcomes[pod.uid] = PodOutcome(
                pod,
                fw.profile_name,
                "Unschedulable",
                None,
                s.message or s.code.label,
                s.code,
                s.plugin,
                filter=result.filter,
                scores=result.scores,
                totals=result.totals,
                attempts=info.attempts,
                nominated_node=self.queue.nominated_node_of(pod.uid),
                notes=result.notes,
            )

    def _report_failure(self, fw: Framework, pod: PodInfo, reason: str, message: str) -> None:
        try:
            if is_reserve_pod(pod):
                self.reporter.reservation_failed(fw.profile_name, reservation_name_of(pod), pod.uid, message)
            else:
                self.reporter.pod_failed(fw.profile_name, pod.namespace, pod.name, pod.uid, reason, message)
        except Exception:  # reporting must never stop scheduling
            log.exception("could not report the scheduling failure of pod %s", pod.key)

    def _requeue(self, info: QueuedPodInfo, unsched: set[str], pending: set[str], cycle: int) -> None:
        """Back into the queue, unless the pod is gone or was bound meanwhile (handleSchedulingFailure)."""
        if is_reserve_pod(info.pod):
            found = self.reserve_pod_queue.pending_pod(info.pod.uid)
        else:
            found = self.pod_cache.get(info.pod.namespace, info.pod.name)
        if found is None or found.uid != info.pod.uid or found.node_name:
            self.queue.delete(info.pod.uid)
            return
        current = found
        self.queue.requeue_failed(
            info, unschedulable_plugins=unsched, pending_plugins=pending, pod=current, cycle=cycle
        )

    def _activate(self, state: CycleState) -> None:
        pods = state.get(PODS_TO_ACTIVATE)
        if pods:
            self.queue.activate(list(pods.values()))
            pods.clear()

    # --- binding --------------------------------------------------------------------------------------
    def _submit(self, binding: _Binding) -> None:
        if self._executor is None:
            self._bindings.append(lambda: self._binding_cycle(binding))
            return
        if self._stopped:  # the workers are gone or going: nothing new goes on the wire
            self._abandon(binding)
            return
        with self._inflight_lock:
            self._inflight += 1
        self._executor.submit(self._run_async, binding)

    def _run_async(self, binding: _Binding) -> None:
        try:
            if self._stopped:
                self._abandon(binding)
                return
            self._binding_cycle(binding)
        except Exception:
            log.exception("binding cycle of pod %s crashed", binding.pod.key)
        finally:
            with self._idle:
                self._inflight -= 1
                self._idle.notify_all()

    def _abandon(self, b: _Binding) -> None:
        """A binding not started before ``close``: give back what its pod held, write nothing."""
        try:
            b.fw.run_unreserve(b.state, b.pod, b.node)
        finally:
            self.cache.forget_pod(b.pod)
            self.abandoned_bindings += 1

    def _drain_bindings(self) -> None:
        while self._bindings:
            self._bindings.popleft()()

    def wait_for_bindings(self, timeout: float | None = None) -> bool:
        """Async mode: block until no binding cycle is in flight."""
        self._drain_bindings()
        with self._idle:
            return self._idle.wait_for(lambda: self._inflight == 0, timeout)

    def _on_permit_done(self, wp: _WaitingPod, status: Status) -> None:
        self.waiting.remove(wp.pod.uid)
        binding = wp.binding
        result = "allowed" if status.is_success else "rejected"
        self.metrics.permit_wait_duration.labels(result).observe(max(0.0, self.clock.now() - wp.since))
        if status.is_success:
            self._record(binding, "Binding", status)
            self._submit(binding)
            return
        if self._executor is None:
            self._bindings.append(lambda: self._binding_failed(binding, status))
        else:
            with self._inflight_lock:
                self._inflight += 1
            self._executor.submit(self._run_failure_async, binding, status)

    def _run_failure_async(self, binding: _Binding, status: Status) -> None:
        try:
            self._binding_failed(binding, status)
        finally:
            with self._idle:
                self._inflight -= 1
                self._idle.notify_all()

    def _binding_cycle(self, b: _Binding) -> None:
        fw, state, pod, node = b.fw, b.state, b.pod, b.node
        # A PreBind plugin may apply the batched changes itself and replace the mutation (Koordinator's
        # DefaultPreBind does); keep the original object to report what was written.
        mutation = state.pod_mutation
        s = fw.run_pre_bind(state, pod, node)
        b.written = {**mutation.annotations, **state.pod_mutation.annotations}
        if s.is_success and not state.pod_mutation.is_empty():
            try:
                if is_reserve_pod(pod):
                    # A reserve pod's PreBind changes belong to its Reservation (cluster-scoped).
                    patch = state.pod_mutation.as_merge_patch()
                    self.cluster.patch_no_result("Reservation", reservation_name_of(pod), "", patch)
                else:
                    # The stored pod is not read back: the binding cycle goes on with ``pod``.
                    self.cluster.patch_no_result(
                        "Pod", pod.name, pod.namespace, state.pod_mutation.as_merge_patch()
                    )
            except ClusterError as exc:
                s = Status.as_error(exc)
        if s.is_success:
            s = fw.run_bind(state, pod, node)
            if s.is_skip:
                s = Status(Code.ERROR, (f"no bind plugin bound pod {pod.key}",))
        if not s.is_success:
            self._binding_failed(b, s)
            return
        self.cache.finish_binding(pod)
        fw.run_post_bind(state, pod, node)
        self._epoch += 1
        self.scheduled_count += 1
        self.metrics.observe_attempt("scheduled", fw.profile_name, perf_counter() - b.started)
        if not is_reserve_pod(pod):
            self.reporter.scheduled(fw.profile_name, pod.namespace, pod.name, pod.uid, node)
        self._record(b, "Scheduled", s)
        self._activate(state)

    def _binding_failed(self, b: _Binding, status: Status) -> None:
        """Unreserve (reverse order), forget the assumed pod, requeue it, and let others use what it held."""
        fw, state, pod, node = b.fw, b.state, b.pod, b.node
        fw.run_unreserve(state, pod, node)
        self.cache.forget_pod(pod)
        not_self: Callable[[PodInfo], bool] = lambda p: p.uid != pod.uid  # noqa: E731
        original = with_node(pod, "")
        b.info.pod = original
        plugins = _plugins_of(status) if status.is_rejected else set()
        if status.is_rejected:
            self._requeue(b.info, plugins, set(), b.cycle)
            self._move(EVENT_POD_DELETE, not_self)
        else:
            self._move(EVENT_POD_DELETE, not_self)
            self._requeue(b.info, set(), set(), b.cycle)
        reason = REASON_UNSCHEDULABLE if status.is_rejected else REASON_SCHEDULER_ERROR
        self._report_failure(fw, original, reason, status.message or status.code.label)
        label = "error" if status.is_error else "unschedulable"
        self.metrics.observe_attempt(label, fw.profile_name, perf_counter() - b.started)
        if self.record_outcomes:
            prev = self.outcomes.get(pod.uid)
            self.outcomes[pod.uid] = PodOutcome(
                original,
                fw.profile_name,
                "Unschedulable",
                None,
                status.message or status.code.label,
                status.code,
                status.plugin,
                filter=prev.filter if prev else None,
                scores=prev.scores if prev else None,
                totals=prev.totals if prev else None,
                attempts=b.info.attempts,
            )

    def _record(self, b: _Binding, status: str, s: Status) -> None:
        if not self.record_outcomes:
            return
        annotations = dict(b.written) if status == "Scheduled" else {}
        message = ""
        if status == "Waiting":
            wp = self.waiting.get(b.pod.uid)
            plugins = ", ".join(wp.pending_plugins()) if wp is not None else ""
            message = f"waiting at Permit for {plugins}" if plugins else s.message
        self.outcomes[b.pod.uid] = PodOutcome(
            b.pod,
            b.fw.profile_name,
            status,
            b.node,
            message,
            s.code,
            s.plugin,
            annotations,
            b.result.filter,
            b.result.scores,
            b.result.totals,
            b.info.attempts,
            notes=b.result.notes,
        )

    # --- timers and the simulation driver -------------------------------------------------------------
    def expire_permits(self) -> int:
        """Reject waiting pods whose Permit timeout has passed on the scheduler's clock."""
        now = self.clock.now()
        n = 0
        for wp in self.waiting.list():
            if wp.expire(now):
                n += 1
        return n

    def _count_attempt(self, uid: str) -> None:
        epoch, count = self._stall.get(uid, (-1, 0))
        self._stall[uid] = (self._epoch, count + 1 if epoch == self._epoch else 1)

    def _live(self, uid: str) -> bool:
        epoch, count = self._stall.get(uid, (-1, 0))
        return epoch != self._epoch or count < STALL_ATTEMPTS

    def next_timer(self) -> float | None:
        """The earliest timer that can still change something: a backoff ending or a Permit timeout."""
        best: float | None = None
        for until, info in self.queue.backoff_pods():
            if self._live(info.pod.uid):
                best = until
                break
        for wp in self.waiting.list():
            d = wp.deadline()
            if d is not None and self._live(wp.pod.uid) and (best is None or d < best):
                best = d
        return best

    def run_until_idle(
        self, *, on_cycle: Callable[[], None] | None = None, max_cycles: int | None = None
    ) -> int:
        """Schedule until nothing more can happen; returns the number of scheduling cycles run.

        When no pod is ready, the clock jumps to the next live timer (a ``VirtualClock`` is set; another
        clock is slept on). Pods the unschedulable map holds are not flushed by jumping the clock: nothing has
        changed for them. When no live timer is left but pods still wait at Permit, the clock jumps to their
        deadlines so that they end rejected (see ``_final_permit_deadline``).
        """
        self.start()
        cycles = 0
        final: dict[int, int] = {}
        while not self._stopped:
            self._drain_bindings()
            if self._executor is not None:
                self.wait_for_bindings()
            info = self._pop()
            if info is not None:
                self._scheduling_cycle(info)
                self._drain_bindings()
                cycles += 1
                if on_cycle is not None:
                    on_cycle()
                if max_cycles is not None and cycles >= max_cycles:
                    break
                continue
            if self.expire_permits():
                continue
            when = self.next_timer()
            if when is None:
                when = self._final_permit_deadline(final)
                if when is None:
                    break
                final[self._epoch] = final.get(self._epoch, 0) + 1
            now = self.clock.now()
            if when > now:
                if isinstance(self.clock, VirtualClock):
                    self.clock.set(when)
                else:
                    self.clock.sleep(when - now)
            self.expire_permits()
            self.queue.flush_unschedulable_leftover()
        self._drain_bindings()
        return cycles

    def tick_controllers(self) -> float | None:
        """Run the plugins' controllers that are due; returns the earliest next due time."""
        now = self.clock.now()
        for i, controller in enumerate(self.controllers):
            due = self._controller_due[i]
            if due is not None and due <= now:
                try:
                    self._controller_due[i] = controller.tick(now)
                except Exception:  # a controller's failure must not stop scheduling
                    log.exception("controller %s failed; retrying in 1 s", type(controller).__name__)
                    self._controller_due[i] = now + 1.0
        pending = [d for d in self._controller_due if d is not None]
        return min(pending) if pending else None

    def _start_controller_threads(self, stop: threading.Event) -> None:
        """Move the ``concurrent`` controllers off the scheduling loop onto threads of their own."""
        for i, controller in enumerate(self.controllers):
            if not controller.concurrent or self._controller_due[i] is None:
                continue
            self._controller_due[i] = None  # the loop's tick_controllers leaves it to its thread from now on
            thread = threading.Thread(
                target=self._controller_loop,
                args=(controller, stop),
                name=f"controller-{type(controller).__name__}",
                daemon=True,
            )
            self._controller_threads.append(thread)
            thread.start()

    def _controller_loop(self, controller: BackgroundController, stop: threading.Event) -> None:
        due: float | None = 0.0
        while due is not None and not stop.is_set() and not self._stopped:
            now = self.clock.now()
            if due <= now:
                try:
                    due = controller.tick(now)
                except Exception:  # a controller's failure must not end its thread
                    log.exception("controller %s failed; retrying in 1 s", type(controller).__name__)
                    due = now + 1.0
                continue
            # Bounded so that close() (which sets ``_stopped``, not ``stop``) is noticed within a second.
            stop.wait(min(due - now, 1.0))

    def _final_permit_deadline(self, final: Mapping[int, int]) -> float | None:
        """When nothing else can happen, the earliest Permit deadline of the pods still waiting.

        Nothing will ever allow them (the simulation has no more events), so their timeouts decide: jumping
        to them reports those pods rejected with their plugin's reason instead of leaving them holding
        resources. Bounded per progress epoch, since a rejected pod may be retried and wait again.
        """
        if final.get(self._epoch, 0) >= STALL_ATTEMPTS:
            return None
        deadlines = [d for wp in self.waiting.list() if (d := wp.deadline()) is not None]
        return min(deadlines) if deadlines else None

    def run(self, stop: threading.Event, *, poll: float = 0.5) -> None:
        """The live loop: schedule as pods come, until ``stop`` is set (bindings run asynchronously)."""
        self.start()
        self._start_controller_threads(stop)
        last_flush = self.clock.now()
        while not stop.is_set() and not self._stopped:
            self.expire_permits()
            self.tick_controllers()
            now = self.clock.now()
            if now - last_flush >= 30.0:
                self.queue.flush_unschedulable_leftover()
                self.cache.cleanup_expired()
                last_flush = now
            timeout = poll
            for wp in self.waiting.list():
                d = wp.deadline()
                if d is not None:
                    timeout = max(0.0, min(timeout, d - now))
            info = self._pop(block=True, timeout=timeout)
            if info is not None:
                self._scheduling_cycle(info)
            self._drain_bindings()

    # --- reports -----------------------------------------------------------------------------------------
    def pending_pods(self) -> list[tuple[str, QueuedPodInfo]]:
        return self.queue.pending()


class _ReservePodQueue(ReservePodQueue):
    """Reserve pods of Reservations: Pending ones into the queue, Available ones counted in the cache.

    Reserve pods have no Pod object, so the scheduler keeps the pending ones here (a failed cycle requeues
    from this table, as it does a pod from the pod cache). Before ``start`` the queue does not exist yet
    (plugins register their informer handlers while being built): pending pods wait here until then.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._lock = threading.Lock()
        self._pending: dict[str, PodInfo] = {}
        self._started = False

    def start(self) -> None:
        with self._lock:
            self._started = True
            pending = list(self._pending.values())
        for pod in pending:
            if self._scheduler.responsible_for(pod):
                self._scheduler.queue.add(pod)

    def pending_pod(self, uid: str) -> PodInfo | None:
        with self._lock:
            return self._pending.get(uid)

    def enqueue_reserve_pod(self, pod: PodInfo) -> None:
        s = self._scheduler
        with self._lock:
            known = pod.uid in self._pending
            self._pending[pod.uid] = pod
            started = self._started
        if not started or not s.responsible_for(pod) or s.cache.get_pod(pod.uid) is not None:
            return
        if known:
            s.queue.update(pod)
        else:
            s.queue.add(pod)

    def dequeue_reserve_pod(self, uid: str) -> None:
        with self._lock:
            self._pending.pop(uid, None)
            started = self._started
        if started:
            self._scheduler.queue.delete(uid)

    def count_reserve_pod(self, pod: PodInfo) -> None:
        with self._lock:
            self._pending.pop(pod.uid, None)
            started = self._started
        if started:
            self._scheduler.queue.delete(pod.uid)
        self._scheduler.cache.add_pod(pod)

    def uncount_reserve_pod(self, pod: PodInfo) -> None:
        s = self._scheduler
        if s.cache.get_pod(pod.uid) is None:
            return
        s.cache.remove_pod(pod)
        s._epoch += 1
        with self._lock:
            started = self._started
        if started:
            s._move(EVENT_POD_DELETE)


class _EventRelay:
    """Turns changes of a kind some plugin registered for (NodeMetric, PodGroup, ...) into queue moves.

    The informer replays the objects it already holds to ``on_add`` at registration; those are not events,
    so adds count only once ``armed``.
    """

    def __init__(self, scheduler: Scheduler, kind: str) -> None:
        self._scheduler = scheduler
        self._kind = kind
        self.armed = False

    def on_add(self, _obj: Any) -> None:
        if self.armed:
            self._scheduler._move(ClusterEvent(self._kind, "Add"))

    def on_update(self, _old: Any, _new: Any) -> None:
        self._scheduler._move(ClusterEvent(self._kind, "Update"))

    def on_delete(self, _obj: Any) -> None:
        self._scheduler._move(ClusterEvent(self._kind, "Delete"))


class RowNodes(Sequence[NodeInfo]):
    """The ``NodeInfo`` of each of ``rows``, as a sequence built on first use (most cycles never use it)."""

    __slots__ = ("_by_row", "_list", "_rows")

    def __init__(self, by_row: Sequence[NodeInfo | None], rows: Int64Array) -> None:
        self._by_row = by_row
        self._rows = rows
        self._list: list[NodeInfo] | None = None

    def _nodes(self) -> list[NodeInfo]:
        if self._list is None:
            self._list = list(map(self._by_row.__getitem__, self._rows.tolist()))  # type: ignore[arg-type]
        return self._list

    def __len__(self) -> int:
        return int(self._rows.shape[0])

    def __getitem__(self, index: Any) -> Any:
        return self._nodes()[index]

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self._nodes())


def with_node(pod: PodInfo, node_name: str) -> PodInfo:
    """A copy of ``pod`` placed on ``node_name`` (twice as fast as ``dataclasses.replace``; once per pod)."""
    copy = copy_pod_info(pod)
    copy.node_name = node_name
    return copy


_STATUS_FIELDS = frozenset(
    {"phase", "start_time", "scheduled_time", "initialized_time", "nominated_node", "resource_version"}
)
_SPEC_FIELDS: tuple[str, ...] = ()


def _spec_changed(old: PodInfo, new: PodInfo) -> bool:
    """Whether anything but the pod's status changed (records share unchanged values, so ``is`` is
    usually enough)."""
    global _SPEC_FIELDS
    if not _SPEC_FIELDS:
        _SPEC_FIELDS = tuple(f.name for f in dataclass_fields(PodInfo) if f.name not in _STATUS_FIELDS)
    for name in _SPEC_FIELDS:
        a, b = getattr(old, name), getattr(new, name)
        if a is not b and a != b:
            return True
    return False


def _matches(registered: ClusterEvent, event: ClusterEvent) -> bool:
    if registered.kind not in ("*", event.kind):
        return False
    if registered.action == "*" or event.action == "*":
        return True
    return event.action in registered.action.split("|")


def _plugins_of(s: Status) -> set[str]:
    return {p for p in s.plugin.split(",") if p} if s.plugin else set()


def _node_changed(old: NodeRecord, new: NodeRecord) -> bool:
    return (
        old.allocatable != new.allocatable
        or old.labels != new.labels
        or old.taints != new.taints
        or old.unschedulable != new.unschedulable
        or old.ready != new.ready
        or old.annotations != new.annotations
    )


def _explain_scores(
    infos: Sequence[Any], plugins: Mapping[str, PluginScores]
) -> dict[str, dict[str, tuple[int, int, int]]]:
    out: dict[str, dict[str, tuple[int, int, int]]] = {ni.name: {} for ni in infos}
    for name, ps in plugins.items():
        for ni, raw, norm, w in zip(infos, ps.raw.tolist(), ps.normalized.tolist(), ps.weighted.tolist()):
            out[ni.name][name] = (int(raw), int(norm), int(w))
    return out
