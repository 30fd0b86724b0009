"""The scheduling queue: kube-scheduler's ``PriorityQueue`` (``pkg/scheduler/backend/queue``).

Three places a pending pod can be:

* **activeQ** — a heap ordered by the profile's QueueSort ``less`` (ties: first added first), popped by the
  scheduling loop;
* **backoffQ** — pods that failed and wait out their backoff (``podInitialBackoffSeconds`` doubling per
  attempt up to ``podMaxBackoffSeconds``), ordered by when the backoff ends;
* **unschedulable pods** — pods rejected by plugins, parked until a cluster event one of those plugins
  registered for (``EnqueueExtensions``) may help them, or until they have been there for
  ``max_unschedulable_seconds`` (5 minutes) and are flushed anyway. Pods a PreEnqueue plugin gates wait
  here too, and are gated again when moved unless the plugin now admits them.

A pod whose scheduling attempt saw a move request (an event that arrived during its cycle) goes to backoffQ
instead of the unschedulable pods: the event may already have helped it. A pod that failed with no rejecting
plugin (an internal error) always goes to backoffQ.

The queue also keeps the nominator (pods nominated to nodes by preemption), which Filter consults.

Thread-safe: one lock, and a condition the blocking ``pop`` waits on.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import Clock
from koord_framework.scheduler.interface import ClusterEvent, QueuedPodInfo
from koord_framework.scheduler.status import Status

LessFunc = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
SortKeyFunc = Callable[[QueuedPodInfo], Any]
"""Optional key form of QueueSort: ``less(a, b)`` iff ``key(a) < key(b)`` (a plugin's ``sort_key``)."""
PreEnqueueFunc = Callable[[PodInfo], Status]
InterestFunc = Callable[[ClusterEvent], frozenset[str] | None]
"""Event → the plugins it may help (``None``: every plugin)."""

ACTIVE, BACKOFF, UNSCHEDULABLE, IN_FLIGHT = "active", "backoff", "unschedulable", "inFlight"

UNSCHEDULABLE_TIMEOUT = ClusterEvent("UnschedulableTimeout", "*")
FORCE_ACTIVATE = ClusterEvent("ForceActivate", "*")


@dataclass(eq=False, slots=True)
class _Entry:
    """A pod in the scheduling queue and where it is (active, backoff, unschedulable, in flight)."""

    info: QueuedPodInfo
    seq: int
    where: str = ""
    cycle: int = 0
    """The scheduling cycle in which the pod was last popped."""
    gated_by: str = ""
    """Non-empty while a PreEnqueue plugin keeps the pod out of activeQ."""
    pending_plugins: set[str] = field(default_factory=set)
    backoff_until: float = 0.0
    parked_at: float = 0.0


class _HeapItem:
    """An activeQ heap element: QueueSort's ``less`` first, insertion order second (a stable, total order).

    The last element is the entry, as in the ``(key, seq, entry)`` tuples used when QueueSort has a
    ``sort_key``: those compare in C and never reach the entry, because ``seq`` is unique.
    """

    __slots__ = ("entry", "less")

    def __init__(self, entry: _Entry, less: LessFunc) -> None:
        self.entry = entry
        self.less = less

    def __getitem__(self, index: int) -> _Entry:
        """``item[-1]`` is the entry, as for the tuple form."""
        return self.entry

    def __lt__(self, other: _HeapItem) -> bool:
        a, b = self.entry, other.entry
        if self.less(a.info, b.info):
            return True
        if self.less(b.info, a.info):
            return False
        return a.seq < b.seq


class SchedulingQueue:
    """activeQ + backoffQ + unschedulable pods + nominator."""

    def __init__(
        self,
        less: LessFunc,
        clock: Clock,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable_seconds: float = 300.0,
        pre_enqueue: PreEnqueueFunc | None = None,
        interest: InterestFunc | None = None,
        sort_key: SortKeyFunc | None = None,
    ) -> None:
        self._less = less
        self._key = sort_key
        self._clock = clock
        self.initial_backoff = float(initial_backoff)
        self.max_backoff = float(max_backoff)
        self.max_unschedulable_seconds = float(max_unschedulable_seconds)
        self._pre_enqueue = pre_enqueue
        self._interest = interest
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._seq = itertools.count()
        self._entries: dict[str, _Entry] = {}
        self._active: list[Any] = []  # _HeapItem, or (key, seq, entry) tuples with a sort key
        self._backoff: list[tuple[float, int, str]] = []  # (until, seq, uid); stale items skipped lazily
        self._unsched: dict[str, _Entry] = {}
        self._unsched_by_plugin: dict[str, set[str]] = {}
        self._parked: deque[tuple[float, str, int]] = deque()  # (parked_at, uid, seq) for the leftover flush
        self._scheduling_cycle = 0
        self._move_request_cycle = -1
        self._closed = False
        self._nominated: dict[str, dict[str, PodInfo]] = {}  # node -> uid -> pod
        self._nominated_node_of: dict[str, str] = {}

    # --- sizes --------------------------------------------------------------------------------------
    def lengths(self) -> dict[str, int]:
        with self._lock:
            gated = sum(1 for e in self._unsched.values() if e.gated_by)
            return {
                ACTIVE: len(self._active),
                BACKOFF: sum(1 for e in self._entries.values() if e.where == BACKOFF),
                UNSCHEDULABLE: len(self._unsched) - gated,
                "gated": gated,
            }

    def __len__(self) -> int:
        with self._lock:
            return sum(1 for e in self._entries.values() if e.where != IN_FLIGHT)

    def __contains__(self, uid: object) -> bool:
        with self._lock:
            return uid in self._entries

    @property
    def scheduling_cycle(self) -> int:
        return self._scheduling_cycle

    def where(self, uid: str) -> str:
        """``active``, ``backoff``, ``unschedulable``, ``inFlight`` or ``""`` (not queued)."""
        with self._lock:
            e = self._entries.get(uid)
            return e.where if e is not None else ""

    def queued_info(self, uid: str) -> QueuedPodInfo | None:
        with self._lock:
            e = self._entries.get(uid)
            return e.info if e is not None else None

    # --- adding and updating ------------------------------------------------------------------------
    def add(self, pod: PodInfo) -> None:
        """A new pending pod: to activeQ, or parked as gated if a PreEnqueue plugin says not yet."""
        with self._lock:
            if pod.uid in self._entries:
                self._entries[pod.uid].info.pod = pod
                return
            now = self._clock.now()
            e = _Entry(QueuedPodInfo(pod, now, 0, now), next(self._seq))
            self._entries[pod.uid] = e
            self._enqueue_active_or_gate(e, now)

    def update(self, pod: PodInfo, *, retry: bool = True) -> None:
        """The pending pod changed: keep its place, and give a parked pod another chance (kube's Update)
        unless ``retry`` is False (only its status changed)."""
        with self._lock:
            e = self._entries.get(pod.uid)
            if e is None:
                self._entries_add_unlocked(pod)
                return
            e.info.pod = pod
            if e.where == UNSCHEDULABLE and retry:
                self._remove_unsched(e)
                now = self._clock.now()
                if not e.gated_by and self._backing_off(e, now):
                    self._push_backoff(e)
                else:
                    self._enqueue_active_or_gate(e, now)

    def _entries_add_unlocked(self, pod: PodInfo) -> None:
        now = self._clock.now()
        e = _Entry(QueuedPodInfo(pod, now, 0, now), next(self._seq))
        self._entries[pod.uid] = e
        self._enqueue_active_or_gate(e, now)

    def delete(self, uid: str) -> None:
        """The pod is gone or bound: forget it wherever it is (stale heap items are skipped lazily)."""
        with self._lock:
            e = self._entries.pop(uid, None)
            if e is not None and e.where == UNSCHEDULABLE:
                self._remove_unsched(e)
            if e is not None:
                e.where = ""
            self._delete_nominated_unlocked(uid)

    # --- popping ------------------------------------------------------------------------------------
    def pop(self, *, block: bool = False, timeout: float | None = None) -> QueuedPodInfo | None:
        """The next pod to schedule (its attempts counted), or None if there is none (yet).

        With ``block``, waits for one until ``timeout`` (seconds of real time) or ``close``.
        """
        with self._cond:
            while True:
                self._flush_backoff_unlocked(self._clock.now())
                while self._active:
                    e: _Entry = heapq.heappop(self._active)[-1]
                    if e.where != ACTIVE or self._entries.get(e.info.pod.uid) is not e:
                        continue
                    self._scheduling_cycle += 1
                    e.where = IN_FLIGHT
                    e.cycle = self._scheduling_cycle
                    e.info.attempts += 1
                    return e.info
                if not block or self._closed:
                    return None
                wait = timeout
                nxt = self._next_backoff_unlocked()
                if nxt is not None:
                    gap = max(0.0, nxt - self._clock.now())
                    wait = gap if wait is None else min(wait, gap)
                if not self._cond.wait(wait if wait is None else max(wait, 0.001)) and timeout is not None:
                    self._flush_backoff_unlocked(self._clock.now())
                    if not self._active:
                        return None

    def take(self, uid: str) -> QueuedPodInfo | None:
        """Pop one particular pod wherever it waits (test harnesses schedule a chosen pod)."""
        with self._cond:
            e = self._entries.get(uid)
            if e is None or e.where == IN_FLIGHT:
                return None
            if e.where == UNSCHEDULABLE:
                self._remove_unsched(e)
            self._scheduling_cycle += 1
            e.where = IN_FLIGHT
            e.cycle = self._scheduling_cycle
            e.info.attempts += 1
            return e.info

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def has_active(self) -> bool:
        with self._lock:
            self._flush_backoff_unlocked(self._clock.now())
            heap = self._active
            while heap:
                e = heap[0][-1]
                if e.where == ACTIVE and self._entries.get(e.info.pod.uid) is e:
                    return True
                heapq.heappop(heap)
            return False

    # --- after an attempt ---------------------------------------------------------------------------
    def done(self, uid: str) -> None:
        """The in-flight pod was scheduled (assumed): it leaves the queue for good."""
        with self._lock:
            e = self._entries.get(uid)
            if e is not None and e.where == IN_FLIGHT:
                del self._entries[uid]
                e.where = ""

    def requeue_failed(
        self,
        info: QueuedPodInfo,
        *,
        unschedulable_plugins: Iterable[str] = (),
        pending_plugins: Iterable[str] = (),
        pod: PodInfo | None = None,
        cycle: int | None = None,
    ) -> str:
        """Put a pod back after a failed attempt (kube's ``AddUnschedulableIfNotPresent``); returns where."""
        with self._cond:
            uid = info.pod.uid
            e = self._entries.get(uid)
            if e is None:
                e = _Entry(info, next(self._seq))
                self._entries[uid] = e
            elif e.where not in (IN_FLIGHT, ""):
                return e.where  # already re-added by an event handler
            if pod is not None:
                info.pod = pod
            if cycle is not None:
                e.cycle = cycle
            e.info = info
            now = self._clock.now()
            info.timestamp = now
            info.unschedulable_plugins = set(unschedulable_plugins)
            e.pending_plugins = set(pending_plugins)
            e.backoff_until = now + self.backoff_duration(info.attempts)
            rejectors = info.unschedulable_plugins | e.pending_plugins
            if self._move_request_cycle >= e.cycle or not rejectors:
                self._push_backoff(e)
            else:
                self._park(e, now)
            self._cond.notify_all()
            return e.where

    def backoff_duration(self, attempts: int) -> float:
        """kube-scheduler's ``calculateBackoffDuration``: initial × 2^(attempts-1), capped."""
        if attempts <= 0:
            return 0.0
        d = self.initial_backoff
        for _ in range(1, attempts):
            if d > self.max_backoff - d:
                return self.max_backoff
            d += d
        return min(d, self.max_backoff)

    # --- moves on events ----------------------------------------------------------------------------
    def move_all_on_event(
        self, event: ClusterEvent, pre_check: Callable[[PodInfo], bool] | None = None
    ) -> int:
        """Move the parked pods that ``event`` may help to activeQ (or backoffQ if still backing off)."""
        with self._cond:
            interested = self._interest(event) if self._interest is not None else None
            if interested is not None and not interested:
                return 0
            self._move_request_cycle = self._scheduling_cycle
            if not self._unsched:
                return 0
            if interested is None:
                candidates = list(self._unsched.values())
            else:
                uids: set[str] = set()
                for plugin in interested:
                    found = self._unsched_by_plugin.get(plugin)
                    if found:
                        uids |= found
                uids |= self._unsched_by_plugin.get("", set())
                candidates = sorted(
                    (self._unsched[u] for u in uids if u in self._unsched), key=lambda e: e.seq
                )
            moved = 0
            now = self._clock.now()
            for e in candidates:
                if pre_check is not None and not pre_check(e.info.pod):
                    continue
                self._remove_unsched(e)
                if not e.gated_by and self._backing_off(e, now):
                    self._push_backoff(e)
                else:
                    self._enqueue_active_or_gate(e, now)
                moved += 1
            if moved:
                self._cond.notify_all()
            return moved

    def activate(self, pods: Iterable[PodInfo]) -> int:
        """Move these pods from backoffQ or the unschedulable pods straight to activeQ."""
        with self._cond:
            moved = 0
            now = self._clock.now()
            for pod in pods:
                e = self._entries.get(pod.uid)
                if e is None or e.where not in (BACKOFF, UNSCHEDULABLE):
                    continue
                if e.where == UNSCHEDULABLE:
                    self._remove_unsched(e)
                e.backoff_until = 0.0
                self._enqueue_active_or_gate(e, now)
                moved += 1
            if moved:
                self._cond.notify_all()
            return moved

    def flush_unschedulable_leftover(self) -> int:
        """Move pods parked longer than ``max_unschedulable_seconds`` (kube flushes them every 30 s)."""
        with self._cond:
            now = self._clock.now()
            moved = 0
            while self._parked and now - self._parked[0][0] > self.max_unschedulable_seconds:
                _, uid, seq = self._parked.popleft()
                e = self._unsched.get(uid)
                if e is None or e.seq != seq or now - e.parked_at <= self.max_unschedulable_seconds:
                    continue
                self._remove_unsched(e)
                if not e.gated_by and self._backing_off(e, now):
                    self._push_backoff(e)
                else:
                    self._enqueue_active_or_gate(e, now)
                moved += 1
            if moved:
                self._cond.notify_all()
            return moved

    def next_backoff_expiry(self) -> float | None:
        with self._lock:
            return self._next_backoff_unlocked()

    def backoff_pods(self) -> list[tuple[float, QueuedPodInfo]]:
        """(backoff end, pod) of every pod in backoffQ, soonest first."""
        with self._lock:
            out = [(e.backoff_until, e.info) for e in self._entries.values() if e.where == BACKOFF]
            out.sort(key=lambda x: x[0])
            return out

    def unschedulable_pods(self) -> list[QueuedPodInfo]:
        with self._lock:
            return [e.info for e in self._unsched.values()]

    def pending(self) -> list[tuple[str, QueuedPodInfo]]:
        """Every queued pod with where it is, in the order it was first added."""
        with self._lock:
            return [(e.where, e.info) for e in sorted(self._entries.values(), key=lambda e: e.seq)]

    def gate_of(self, uid: str) -> str:
        with self._lock:
            e = self._entries.get(uid)
            return e.gated_by if e is not None else ""

    # --- nominator ----------------------------------------------------------------------------------
    def add_nominated(self, pod: PodInfo, node_name: str) -> None:
        with self._lock:
            self._delete_nominated_unlocked(pod.uid)
            if node_name:
                self._nominated.setdefault(node_name, {})[pod.uid] = pod
                self._nominated_node_of[pod.uid] = node_name

    def delete_nominated(self, uid: str) -> None:
        with self._lock:
            self._delete_nominated_unlocked(uid)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        with self._lock:
            return list(self._nominated.get(node_name, {}).values())

    def nominated_node_names(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._nominated) if self._nominated else _NO_NAMES

    def nominated_node_of(self, uid: str) -> str:
        with self._lock:
            return self._nominated_node_of.get(uid, "")

    def _delete_nominated_unlocked(self, uid: str) -> None:
        node = self._nominated_node_of.pop(uid, None)
        if node is not None:
            pods = self._nominated.get(node)
            if pods is not None:
                pods.pop(uid, None)
                if not pods:
                    del self._nominated[node]

    # --- internals (lock held) ----------------------------------------------------------------------
    def _backing_off(self, e: _Entry, now: float) -> bool:
        return e.backoff_until > now

    def _enqueue_active_or_gate(self, e: _Entry, now: float) -> None:
        if self._pre_enqueue is not None:
            s = self._pre_enqueue(e.info.pod)
            if not s.is_success:
                e.gated_by = s.plugin or "PreEnqueue"
                e.pending_plugins = {e.gated_by}
                self._park(e, now)
                return
        e.gated_by = ""
        e.where = ACTIVE
        if self._key is not None:
            heapq.heappush(self._active, (self._key(e.info), e.seq, e))
        else:
            heapq.heappush(self._active, _HeapItem(e, self._less))
        self._cond.notify_all()

    def _push_backoff(self, e: _Entry) -> None:
        e.where = BACKOFF
        heapq.heappush(self._backoff, (e.backoff_until, e.seq, e.info.pod.uid))

    def _park(self, e: _Entry, now: float) -> None:
        e.where = UNSCHEDULABLE
        e.parked_at = now
        uid = e.info.pod.uid
        self._unsched[uid] = e
        rejectors = e.info.unschedulable_plugins | e.pending_plugins
        for plugin in rejectors or {""}:
            self._unsched_by_plugin.setdefault(plugin, set()).add(uid)
        self._parked.append((now, uid, e.seq))

    def _remove_unsched(self, e: _Entry) -> None:
        uid = e.info.pod.uid
        if self._unsched.pop(uid, None) is None:
            return
        for plugin in (e.info.unschedulable_plugins | e.pending_plugins) or {""}:
            s = self._unsched_by_plugin.get(plugin)
            if s is not None:
                s.discard(uid)
                if not s:
                    del self._unsched_by_plugin[plugin]
        e.where = ""

    def _flush_backoff_unlocked(self, now: float) -> None:
        heap = self._backoff
        while heap and heap[0][0] <= now:
            until, seq, uid = heapq.heappop(heap)
            e = self._entries.get(uid)
            if e is None or e.where != BACKOFF or e.seq != seq or e.backoff_until != until:
                continue
            self._enqueue_active_or_gate(e, now)

    def _next_backoff_unlocked(self) -> float | None:
        heap = self._backoff
        while heap:
            until, seq, uid = heap[0]
            e = self._entries.get(uid)
            if e is None or e.where != BACKOFF or e.seq != seq or e.backoff_until != until:
                heapq.heappop(heap)
                continue
            return until
        return None


_NO_NAMES: frozenset[str] = frozenset()
