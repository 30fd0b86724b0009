"""The event recorder every component uses: client-go's correlation, a per-object budget, never blocking.

``ClusterPort.record_event`` hands an ``EventRecord`` to an ``EventRecorder``; the recorder turns it into a
``core/v1`` Event and passes it through an ``EventCorrelator`` with the semantics of client-go's
``tools/record`` (``events_cache.go``), which kube-scheduler, kubelet and the controllers share:

* **aggregation**: events with the same source, object, type and reason but different messages are counted
  per (source, object, type, reason); from the 10th distinct message within 10 minutes on, they are written
  as one event whose message is ``(combined from similar events): <latest message>``;
* **deduplication**: an event identical to one already written (same key, message included) is not written
  again: the existing Event is patched with ``count + 1``, a new ``lastTimestamp`` and the message, and
  keeps its ``firstTimestamp`` (an LRU of 4096 keys, as client-go's);
* **spam filter**: a token bucket per object and source (burst 25, one token every 5 minutes) drops what
  exceeds the object's budget; client-go's key leaves the reason out, so one chatty reason spends the
  object's whole budget.

Recording never blocks the caller. The asynchronous recorder (the real cluster) queues up to
``capacity`` events for one background sender thread, which correlates and writes them; when the queue is
full new events are dropped and counted (``dropped``), as client-go's broadcaster drops when its channel is
full. A write that fails because the server cannot be reached is retried (12 tries, 10 s apart, the first
sleep randomised) unless the recorder is closing; any other error loses the event, as in client-go. The
synchronous recorder (the embedded cluster, virtual clocks) correlates and writes in the caller's thread.

Events about cluster-scoped objects (Nodes, Reservations) are written to namespace ``default``, as kubelet
and kube-scheduler put them. kube-scheduler v1.20 writes through client-go's newer ``events.k8s.io/v1``
recorder; koord writes ``core/v1`` Events with the same reason, message (the ``note``), type, action and
reporting controller (``kubectl describe`` shows both alike), because the ``core/v1`` API lets the
correlator bump ``count``/``lastTimestamp`` of an existing Event, which ``events.k8s.io/v1`` refuses.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import random
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from koord_framework.cluster.clock import Clock, WallClock, format_time
from koord_framework.cluster.kinds import KINDS, KindInfo
from koord_framework.cluster.port import EventRecord, Obj
from koord_framework.errors import ClusterError, NotFoundError

__all__ = [
    "AGGREGATE_MAX_EVENTS",
    "AGGREGATE_MAX_INTERVAL",
    "BAD_ANNOTATIONS",
    "COMBINED_PREFIX",
    "EVENTS_METRIC",
    "MAX_QUEUED_EVENTS",
    "SPAM_BURST",
    "SPAM_QPS",
    "BadAnnotations",
    "CorrelatedEvent",
    "Event",
    "EventCorrelator",
    "EventRecorder",
    "EventWriter",
    "MemoryEventWriter",
    "RecorderCollector",
    "RecorderStats",
    "register_recorder_metrics",
    "reporting_instance",
]

log = logging.getLogger(__name__)

MAX_LRU_CACHE_ENTRIES = 4096
"""Keys each correlator cache remembers (client-go's ``maxLruCacheEntries``)."""
SPAM_BURST = 25
"""Events an object may receive at once (client-go's ``defaultSpamBurst``)."""
SPAM_QPS = 1.0 / 300.0
"""Refill of an object's budget: one event every 5 minutes (client-go's ``defaultSpamQPS``)."""
AGGREGATE_MAX_EVENTS = 10
"""Distinct messages of one (source, object, type, reason) before they are combined."""
AGGREGATE_MAX_INTERVAL = 600.0
"""Seconds after which an aggregation record starts afresh."""
COMBINED_PREFIX = "(combined from similar events): "
MAX_QUEUED_EVENTS = 1000
"""Events waiting for the sender before new ones are dropped (client-go's ``maxQueuedEvents``)."""
MAX_TRIES_PER_EVENT = 12
RETRY_SLEEP = 10.0
NOTE_LENGTH_LIMIT = 1024
"""The API server refuses longer messages on Events that carry a reporting controller."""


_stamp_cache: tuple[int, str] = (-1, "")


def _stamp(epoch: float) -> str:
    """``format_time`` memoised for the current second (strftime dominates the cost of a write)."""
    global _stamp_cache
    second = int(epoch)
    cached = _stamp_cache
    if cached[0] == second:
        return cached[1]
    text = format_time(second)
    _stamp_cache = (second, text)
    return text


def _note(message: str) -> str:
    """The message as the API server accepts it (kube-scheduler's ``truncateMessage``)."""
    if len(message) > NOTE_LENGTH_LIMIT:
        return message[: NOTE_LENGTH_LIMIT - 4] + " ..."
    return message


def reporting_instance(component: str) -> str:
    """``<component>-<host>``, as client-go's recorder names the instance (``POD_NAME`` in a pod)."""
    return f"{component}-{os.environ.get('POD_NAME') or socket.gethostname()}"[:128]


@dataclass(slots=True)
class Event:
    """A ``core/v1`` Event as the recorder builds and the correlator rewrites it."""

    namespace: str
    """The Event's own namespace (``default`` for cluster-scoped objects)."""
    involved: dict[str, str]
    reason: str
    message: str
    type: str
    component: str
    instance: str
    action: str
    timestamp: float
    name: str = ""
    count: int = 1
    first_timestamp: float = 0.0
    last_timestamp: float = 0.0
    resource_version: str = ""

    def object_key(self) -> str:
        inv = self.involved
        return "\x00".join(
            (
                self.component,
                inv.get("kind", ""),
                inv.get("namespace", ""),
                inv.get("name", ""),
                inv.get("uid", ""),
                inv.get("apiVersion", ""),
            )
        )

    def manifest(self) -> Obj:
        """The ``core/v1`` Event object to create."""
        obj: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "involvedObject": dict(self.involved),
            "reason": self.reason,
            "message": self.message,
            "type": self.type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": _stamp(self.first_timestamp),
            "lastTimestamp": _stamp(self.last_timestamp),
            "count": self.count,
        }
        if self.action:
            obj["action"] = self.action
        return obj

    def patch(self) -> Obj:
        """The merge patch client-go sends for a repeated event: the count, the last time, the message."""
        return {
            "count": self.count,
            "lastTimestamp": _stamp(self.last_timestamp),
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class CorrelatedEvent:
    """What to write: a new Event, or a patch of the existing one (``update``)."""

    event: Event
    update: bool
    key: str


class _LRU:
    """A bounded mapping that forgets the least recently used key (golang-lru's ``Cache``)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[str, Any] = OrderedDict()

    def get(self, key: str) -> Any:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def add(self, key: str, value: Any) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        self.trim()

    def trim(self) -> None:
        """Forget the least recently used keys beyond ``size``."""
        data = self._data
        while len(data) > self.size:
            data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class _TokenBucket:
    """client-go's ``flowcontrol`` token bucket on a given clock: starts full, refills at ``qps``."""

    __slots__ = ("burst", "last", "qps", "tokens")

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self.qps, self.burst = qps, burst
        self.tokens = float(burst)
        self.last = now

    def try_accept(self, now: float) -> bool:
        if now > self.last:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
            self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass(slots=True)
class _Aggregate:
    """The distinct messages of similar events seen within the aggregation window, and when last."""

    messages: set[str]
    last: float


@dataclass(slots=True)
class _Observation:
    """How often one event was recorded, and the Event object that counts it on the server."""

    count: int
    first_timestamp: float
    name: str
    resource_version: str


class EventCorrelator:
    """Aggregation, deduplication and the spam filter of client-go's ``EventCorrelator``, on ``clock``.

    Not thread-safe: one sender (or the caller, synchronously) uses it.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        spam_burst: int = SPAM_BURST,
        spam_qps: float = SPAM_QPS,
        max_events: int = AGGREGATE_MAX_EVENTS,
        max_interval: float = AGGREGATE_MAX_INTERVAL,
        cache_size: int = MAX_LRU_CACHE_ENTRIES,
    ) -> None:
        self.clock = clock
        self.spam_burst, self.spam_qps = spam_burst, spam_qps
        self.max_events, self.max_interval = max_events, max_interval
        self._spam = _LRU(cache_size)
        self._aggregates = _LRU(cache_size)
        self._observed = _LRU(cache_size)

    def correlate(self, event: Event) -> CorrelatedEvent | None:
        """What to write for ``event``, or None when the object's budget is spent."""
        found = self._correlate(event)
        return None if found is None else CorrelatedEvent(found[0], found[1], found[2])

    def _correlate(self, event: Event) -> tuple[Event, bool, str] | None:
        # This runs per bind (the Scheduled event), so the three caches are used through their
        # OrderedDicts directly, touching each key once: a key already present is moved to the end (what
        # ``_LRU.get`` then ``_LRU.add`` of the same key amounts to), a new one is added and the cache
        # trimmed. The three keys nest (object ⊂ aggregate ⊂ event): built once per event.
        now = self.clock.now()
        okey = event.object_key()
        akey = f"{okey}\x00{event.type}\x00{event.reason}"
        aggregates = self._aggregates._data
        record: _Aggregate | None = aggregates.get(akey)
        if record is None:
            record = aggregates[akey] = _Aggregate(set(), now)
            if len(aggregates) > self._aggregates.size:
                self._aggregates.trim()
        else:
            aggregates.move_to_end(akey)
            if now - record.last > self.max_interval:
                record = aggregates[akey] = _Aggregate(set(), now)
        aggregated, key = self._aggregate(event, record, akey, now)
        observed = self._observed._data
        last: _Observation | None = observed.get(key)
        update = last is not None and last.count > 0
        if last is None:
            observed[key] = _Observation(
                aggregated.count, aggregated.first_timestamp, aggregated.name, aggregated.resource_version
            )
            if len(observed) > self._observed.size:
                self._observed.trim()
        else:
            # The event is the recorder's own (built for this call): rewritten in place, not copied.
            observed.move_to_end(key)
            if update:
                aggregated.name = last.name
                aggregated.resource_version = last.resource_version
                aggregated.first_timestamp = last.first_timestamp
                aggregated.count = last.count + 1
            observed[key] = _Observation(
                aggregated.count, aggregated.first_timestamp, aggregated.name, aggregated.resource_version
            )
        spam = self._spam._data
        bucket: _TokenBucket | None = spam.get(okey)
        if bucket is None:
            bucket = spam[okey] = _TokenBucket(self.spam_qps, self.spam_burst, now)
            if len(spam) > self._spam.size:
                self._spam.trim()
        else:
            spam.move_to_end(okey)
        if not bucket.try_accept(now):
            return None
        return aggregated, update, key

    def update_state(self, key: str, stored: Event) -> None:
        """Remember what the server stored (name, version, count) so the next repeat patches it."""
        observed = self._observed._data
        observed[key] = _Observation(
            stored.count, stored.first_timestamp, stored.name, stored.resource_version
        )
        observed.move_to_end(key)
        if len(observed) > self._observed.size:
            self._observed.trim()

    def forget(self, key: str) -> None:
        """The Event is gone from the server: the next repeat creates it afresh."""
        self._observed.add(key, _Observation(0, 0.0, "", ""))

    def _aggregate(self, event: Event, record: _Aggregate, akey: str, now: float) -> tuple[Event, str]:
        """Count ``event``'s message in ``record``; from ``max_events`` distinct messages on, the combined
        event keyed by ``akey``, otherwise ``event`` keyed by its own key."""
        record.messages.add(event.message)
        record.last = now
        if len(record.messages) < self.max_events:
            return event, f"{akey}\x00{event.involved.get('fieldPath', '')}\x00{event.message}"
        # Keep the set at its bound; which message leaves does not matter (Go's PopAny).
        record.messages.pop()
        combined = replace(
            event,
            name=_event_name(event.involved.get("name", "")),
            message=COMBINED_PREFIX + event.message,
            count=1,
            first_timestamp=now,
            last_timestamp=now,
            resource_version="",
        )
        return combined, akey


_name_lock = threading.Lock()
_last_ns = 0


def _event_name(object_name: str) -> str:
    """``<object>.<hex nanoseconds>`` as client-go names Events; strictly increasing in this process, so
    two events of one object in the same nanosecond (or on a coarse clock) never share a name."""
    global _last_ns
    with _name_lock:
        now = time.time_ns()
        stamp = _last_ns = now if now > _last_ns else _last_ns + 1
    return f"{object_name}.{stamp:x}"


class EventWriter(Protocol):
    """Where correlated Events go: the embedded cluster's store or the API server."""

    def create_event(self, manifest: Obj) -> Obj:
        """Create the Event; returns it as stored (``metadata.resourceVersion`` set)."""

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        """Merge-patch an existing Event; ``NotFoundError`` when it is gone."""


class MemoryEventWriter:
    """Events kept in memory by namespace and name (the embedded cluster's; bounded like an API server's
    event TTL would bound them, oldest first)."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._events: OrderedDict[tuple[str, str], Obj] = OrderedDict()
        self._version = 0
        self._lock = threading.Lock()

    def create_event(self, manifest: Obj) -> Obj:
        meta = manifest["metadata"]
        with self._lock:
            self._version += 1
            stored = {**manifest, "metadata": {**meta, "resourceVersion": str(self._version)}}
            events = self._events
            events[(meta["namespace"], meta["name"])] = stored
            while len(events) > self.limit:
                events.popitem(last=False)
            return stored

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        with self._lock:
            current = self._events.get((namespace, name))
            if current is None:
                raise NotFoundError(f"events {namespace}/{name}: not found")
            self._version += 1
            stored = {
                **current,
                **patch,
                "metadata": {**current["metadata"], "resourceVersion": str(self._version)},
            }
            self._events[(namespace, name)] = stored
            return stored

    def list(self, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            return [e for (ns, _), e in self._events.items() if namespace is None or ns == namespace]

    def __iter__(self) -> Iterator[Obj]:
        return iter(self.list())


@dataclass(slots=True)
class RecorderStats:
    """Counters of a recorder (exported as ``koord_events_total{result=...}``)."""

    recorded: int = 0
    created: int = 0
    patched: int = 0
    aggregated: int = 0
    spam_filtered: int = 0
    dropped: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "created": self.created,
            "patched": self.patched,
            "aggregated": self.aggregated,
            "spam_filtered": self.spam_filtered,
            "dropped": self.dropped,
            "failed": self.failed,
        }


class EventRecorder:
    """Turns ``EventRecord``s into correlated Events written by ``writer``.

    ``asynchronous`` (the real cluster): ``record`` only queues; a daemon thread correlates and writes.
    Otherwise ``record`` correlates and writes at once (the embedded cluster, deterministic on a virtual
    clock). ``retryable`` says whether a write error is worth retrying (the server could not be reached).
    """

    def __init__(
        self,
        writer: EventWriter,
        *,
        component: str,
        clock: Clock | None = None,
        kinds: Mapping[str, KindInfo] = KINDS,
        asynchronous: bool = False,
        capacity: int = MAX_QUEUED_EVENTS,
        retryable: Callable[[ClusterError], bool] | None = None,
        retry_sleep: float = RETRY_SLEEP,
        max_tries: int = MAX_TRIES_PER_EVENT,
        correlator: EventCorrelator | None = None,
    ) -> None:
        self.writer = writer
        self.component = component
        self.clock: Clock = clock if clock is not None else WallClock()
        self.kinds = kinds
        self.asynchronous = asynchronous
        self.correlator = correlator if correlator is not None else EventCorrelator(self.clock)
        self.retryable = retryable if retryable is not None else (lambda _err: False)
        self.retry_sleep = retry_sleep
        self.max_tries = max_tries
        self.stats = RecorderStats()
        self._instances: dict[str, str] = {}
        self._kind_shapes: dict[str, tuple[bool, str]] = {}
        """(namespaced, apiVersion) of the kinds ``kinds`` knows, looked up once each."""
        self._queue: queue.Queue[Event | None] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._registries: set[int] = set()

    # --- recording ---------------------------------------------------------------------------------------
    def record(self, record: EventRecord) -> None:
        """Record an event about an object; never blocks and never raises for a write that fails."""
        if not self.asynchronous:
            self.stats.recorded += 1
            with self._lock:
                if not self._record_first(record):
                    self._send(self.build(record))
            return
        event = self.build(record)
        self.stats.recorded += 1
        self._ensure_thread()
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.stats.dropped += 1
            log.debug("event queue full: dropping %s for %s", event.reason, event.involved.get("name"))

    def build(self, record: EventRecord) -> Event:
        """The ``core/v1`` Event for ``record`` (involved object, namespace, source, times)."""
        namespace, involved = self._involved(record)
        component = record.component or self.component
        now = record.time or self.clock.now()
        return Event(
            namespace=namespace,
            involved=involved,
            reason=record.reason,
            message=_note(record.message),
            type=record.type,
            component=component,
            instance=self._instance(component),
            action=record.action or str(record.extra.get("action") or ""),
            timestamp=now,
            name=_event_name(record.name),
            first_timestamp=now,
            last_timestamp=now,
        )

    def _involved(self, record: EventRecord) -> tuple[str, dict[str, str]]:
        """The Event's namespace and its ``involvedObject``."""
        kind = record.kind
        shape = self._kind_shapes.get(kind)
        if shape is None:
            info = self.kinds.get(kind)
            if info is not None:
                # Kinds are only ever added to a registry: what was found stays true.
                shape = self._kind_shapes[kind] = (info.namespaced, info.api_version)
        namespaced = shape[0] if shape is not None else bool(record.namespace)
        namespace = (record.namespace or "default") if namespaced else "default"
        involved: dict[str, str] = {"kind": kind, "name": record.name}
        if namespaced:
            involved["namespace"] = namespace
        if shape is not None:
            involved["apiVersion"] = shape[1]
        extra = record.extra
        if extra:
            for key in ("uid", "apiVersion", "resourceVersion", "fieldPath"):
                value = extra.get(key)
                if value:
                    involved[key] = str(value)
        return namespace, involved

    def _instance(self, component: str) -> str:
        instance = self._instances.get(component)
        if instance is None:
            instance = self._instances.setdefault(component, reporting_instance(component))
        return instance

    def _record_first(self, record: EventRecord) -> bool:
        """Correlate and write ``record`` when it is the first of its kind (the common case: one
        ``Scheduled`` event per bound pod); False, having changed nothing, when it is not.

        "First" means no aggregation record for its (source, object, type, reason) and no observation of
        the event itself: the correlator would then add both, charge the object's budget and create the
        Event as it stands. This does exactly that without building an ``Event`` (and its manifest, and
        the observation twice); anything else takes ``build`` and ``_send``.
        """
        corr = self.correlator
        if corr.max_events <= 1:
            return False
        namespace, involved = self._involved(record)
        component = record.component or self.component
        get = involved.get
        okey = "\x00".join(
            (component, record.kind, get("namespace", ""), record.name, get("uid", ""), get("apiVersion", ""))
        )
        akey = f"{okey}\x00{record.type}\x00{record.reason}"
        aggregates = corr._aggregates._data
        if akey in aggregates:
            return False
        message = _note(record.message)
        ekey = f"{akey}\x00{get('fieldPath', '')}\x00{message}"
        observed = corr._observed._data
        if ekey in observed:
            return False
        timestamp = record.time or self.clock.now()
        now = corr.clock.now()
        aggregates[akey] = _Aggregate({message}, now)
        if len(aggregates) > corr._aggregates.size:
            corr._aggregates.trim()
        name = _event_name(record.name)
        observation = observed[ekey] = _Observation(1, timestamp, name, "")
        if len(observed) > corr._observed.size:
            corr._observed.trim()
        spam = corr._spam._data
        bucket: _TokenBucket | None = spam.get(okey)
        if bucket is None:
            bucket = spam[okey] = _TokenBucket(corr.spam_qps, corr.spam_burst, now)
            if len(spam) > corr._spam.size:
                corr._spam.trim()
        else:
            spam.move_to_end(okey)
        if not bucket.try_accept(now):
            self.stats.spam_filtered += 1
            return True
        instance = self._instance(component)
        action = record.action or str(record.extra.get("action") or "")
        stamp = _stamp(timestamp)
        manifest: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": record.reason,
            "message": message,
            "type": record.type,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if action:
            manifest["action"] = action
        try:
            stored = self.writer.create_event(manifest)
        except ClusterError as err:
            event = Event(
                namespace=namespace,
                involved=dict(involved),
                reason=record.reason,
                message=message,
                type=record.type,
                component=component,
                instance=instance,
                action=action,
                timestamp=timestamp,
                name=name,
                first_timestamp=timestamp,
                last_timestamp=timestamp,
            )
            self._deliver(event, False, ekey, err)
            return True
        self.stats.created += 1
        # What ``update_state`` would store; the observation was added last, so it is still the newest.
        meta = stored.get("metadata") or {}
        observation.name = str(meta.get("name") or name)
        observation.resource_version = str(meta.get("resourceVersion") or "")
        count = stored.get("count")
        if isinstance(count, int) and count > 0:
            observation.count = count
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued event was written (or given up); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.01)
        return self._queue.unfinished_tasks == 0

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (within ``timeout``), then stop the sender; retries stop at once."""
        self.flush(timeout)
        self._closing.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(None)
            thread.join(timeout)

    # --- the sender ------------------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None and not self._closing.is_set():
                self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            try:
                if event is None:
                    return
                self._send(event)
            except Exception:  # the sender must outlive any one event
                log.exception("recording event %s failed", event.reason if event else "")
            finally:
                self._queue.task_done()

    def _send(self, event: Event) -> None:
        result = self.correlator._correlate(event)
        if result is None:
            self.stats.spam_filtered += 1
            return
        observed, update, key = result
        if observed is not event and not event.message.startswith(COMBINED_PREFIX):
            self.stats.aggregated += 1
        self._deliver(observed, update, key)

    def _deliver(self, event: Event, update: bool, key: str, error: ClusterError | None = None) -> None:
        """Write the correlated ``event``, retrying what ``retryable`` says is worth it; ``error`` is the
        failure of a first try made already."""
        tries = 0
        while True:
            if error is None:
                try:
                    self._write(event, update, key)
                    return
                except ClusterError as err:
                    error = err
            tries += 1
            if not self.retryable(error) or tries >= self.max_tries or self._closing.is_set():
                self.stats.failed += 1
                log.debug("event %s for %s not written: %s", event.reason, event.involved.get("name"), error)
                return
            sleep = self.retry_sleep * (random.random() if tries == 1 else 1.0)
            if self._closing.wait(sleep):
                self.stats.failed += 1
                return
            error = None

    def _write(self, event: Event, update: bool, key: str) -> None:
        stored: Obj | None = None
        if update:
            try:
                stored = self.writer.patch_event(event.namespace, event.name, event.patch())
                self.stats.patched += 1
            except NotFoundError:
                # Expired or deleted meanwhile: create it again under the same name.
                event.resource_version = ""
                stored = None
        if stored is None:
            stored = self.writer.create_event(event.manifest())
            self.stats.created += 1
        meta = stored.get("metadata") or {}
        event.name = str(meta.get("name") or event.name)
        event.resource_version = str(meta.get("resourceVersion") or "")
        count = stored.get("count")
        if isinstance(count, int) and count > 0:
            event.count = count
        self.correlator.update_state(key, event)


class BadAnnotations:
    """Says once per pod (and value) that an annotation is malformed, naming the object and the field.

    A malformed annotation fails the pod's every scheduling attempt (or is skipped by every reconcile
    loop); logging each time would flood the log, logging never leaves no trace. The memory is an LRU of
    ``size`` (uid, annotation, value) keys, so a corrected and re-broken value is said again.
    """

    def __init__(self, logger: logging.Logger | None = None, size: int = MAX_LRU_CACHE_ENTRIES) -> None:
        self.log = logger if logger is not None else log
        self._seen = _LRU(size)
        self._lock = threading.Lock()

    def report(self, kind: str, key: str, uid: str, annotation: str, value: str, error: object) -> bool:
        """Log ``<kind> <key>: malformed annotation <annotation>: <error>`` unless already said; True when
        logged."""
        return self.once(
            uid or key, annotation, value, f"{kind} {key}: malformed annotation {annotation}: {error}"
        )

    def once(self, uid: str, annotation: str, value: str, message: str) -> bool:
        """Log ``message`` (which names object and field) once per (uid, annotation, value)."""
        seen_key = "\x00".join((uid, annotation, value))
        with self._lock:
            if self._seen.get(seen_key) is not None:
                return False
            self._seen.add(seen_key, True)
        self.log.warning("%s", message)
        return True


BAD_ANNOTATIONS = BadAnnotations()
"""The process's one memory of malformed annotations already logged (plugins share it)."""


EVENTS_METRIC = "koord_events"
"""``koord_events_total{result=...}``: what became of the events components recorded."""


class RecorderCollector:
    """Exports a recorder's counters when scraped (costs nothing while recording)."""

    def __init__(self, recorder: EventRecorder) -> None:
        self.recorder = recorder

    def collect(self) -> list[Any]:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(
            EVENTS_METRIC,
            "Events recorded, by what became of them (created, patched as a repeat, aggregated, "
            "spam_filtered, dropped on a full queue, failed).",
            labels=["result"],
        )
        for result, n in self.recorder.stats.as_dict().items():
            family.add_metric([result], float(n))
        return [family]

    def describe(self) -> list[Any]:
        return []


def register_recorder_metrics(cluster: object, registry: Any) -> bool:
    """Export the cluster's recorder on ``registry`` (once per registry); False when it has none."""
    recorder = getattr(cluster, "event_recorder", None)
    if not isinstance(recorder, EventRecorder) or registry is None:
        return False
    if id(registry) in recorder._registries:
        return True
    registry.register(RecorderCollector(recorder))
    recorder._registries.add(id(registry))
    return True
