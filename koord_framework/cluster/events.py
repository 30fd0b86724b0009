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
        while len(self._data) > self.size:
            self._data.popitem(last=False)

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
    messages: set[str]
    last: float


@dataclass(slots=True)
class _Observation:
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
        # The three keys nest (object ⊂ aggregate ⊂ event): built once per event, as this runs per bind.
        now = self.clock.now()
        okey = event.object_key()
        akey = f"{okey}\x00{event.type}\x00{event.reason}"
        ekey = f"{akey}\x00{event.involved.get('fieldPath', '')}\x00{event.message}"
        aggregated, key = self._aggregate(event, akey, ekey, now)
        observed, update = self._observe(aggregated, key)
        if not self._allow(okey, now):
            return None
        return CorrelatedEvent(observed, update, key)

    def update_state(self, key: str, stored: Event) -> None:
        """Remember what the server stored (name, version, count) so the next repeat patches it."""
        self._observed.add(
            key, _Observation(stored.count, stored.first_timestamp, stored.name, stored.resource_version)
        )

    def forget(self, key: str) -> None:
        """The Event is gone from the server: the next repeat creates it afresh."""
        self._observed.add(key, _Observation(0, 0.0, "", ""))

    def _aggregate(self, event: Event, akey: str, ekey: str, now: float) -> tuple[Event, str]:
        record: _Aggregate | None = self._aggregates.get(akey)
        if record is None or now - record.last > self.max_interval:
            record = _Aggregate(set(), now)
        record.messages.add(event.message)
        record.last = now
        self._aggregates.add(akey, record)
        if len(record.messages) < self.max_events:
            return event, ekey
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

    def _observe(self, event: Event, key: str) -> tuple[Event, bool]:
        # The event is the recorder's own (built for this call): rewritten in place, not copied.
        last: _Observation | None = self._observed.get(key)
        observed = event
        update = last is not None and last.count > 0
        if last is not None and update:
            observed.name = last.name
            observed.resource_version = last.resource_version
            observed.first_timestamp = last.first_timestamp
            observed.count = last.count + 1
        self._observed.add(
            key,
            _Observation(observed.count, observed.first_timestamp, observed.name, observed.resource_version),
        )
        return observed, update

    def _allow(self, okey: str, now: float) -> bool:
        bucket: _TokenBucket | None = self._spam.get(okey)
        if bucket is None:
            bucket = _TokenBucket(self.spam_qps, self.spam_burst, now)
            self._spam.add(okey, bucket)
        return bucket.try_accept(now)


_name_lock = threading.Lock()
_last_ns = 0


def _event_name(object_name: str) -> str:
    """``<object>.<hex nanoseconds>`` as client-go names Events; strictly increasing in this process, so
    two events of one object in the same nanosecond (or on a coarse clock) never share a name."""
    global _last_ns
    with _name_lock:
        _last_ns = max(time.time_ns(), _last_ns + 1)
        stamp = _last_ns
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
            self._events[(meta["namespace"], meta["name"])] = stored
            while len(self._events) > self.limit:
                self._events.popitem(last=False)
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
        self._queue: queue.Queue[Event | None] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._registries: set[int] = set()

    # --- recording ---------------------------------------------------------------------------------------
    def record(self, record: EventRecord) -> None:
        """Record an event about an object; never blocks and never raises for a write that fails."""
        event = self.build(record)
        self.stats.recorded += 1
        if not self.asynchronous:
            with self._lock:
                self._send(event)
            return
        self._ensure_thread()
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.stats.dropped += 1
            log.debug("event queue full: dropping %s for %s", event.reason, event.involved.get("name"))

    def build(self, record: EventRecord) -> Event:
        """The ``core/v1`` Event for ``record`` (involved object, namespace, source, times)."""
        info = self.kinds.get(record.kind)
        namespaced = info.namespaced if info is not None else bool(record.namespace)
        namespace = (record.namespace or "default") if namespaced else "default"
        involved: dict[str, str] = {"kind": record.kind, "name": record.name}
        if namespaced:
            involved["namespace"] = record.namespace or "default"
        if info is not None:
            involved["apiVersion"] = info.api_version
        for key in ("uid", "apiVersion", "resourceVersion", "fieldPath"):
            value = record.extra.get(key)
            if value:
                involved[key] = str(value)
        component = record.component or self.component
        instance = self._instances.get(component)
        if instance is None:
            instance = self._instances.setdefault(component, reporting_instance(component))
        now = record.time or self.clock.now()
        message = record.message
        if len(message) > NOTE_LENGTH_LIMIT:
            message = message[: NOTE_LENGTH_LIMIT - 4] + " ..."  # as kube-scheduler's truncateMessage
        return Event(
            namespace=namespace,
            involved=involved,
            reason=record.reason,
            message=message,
            type=record.type,
            component=component,
            instance=instance,
            action=record.action or str(record.extra.get("action") or ""),
            timestamp=now,
            name=_event_name(record.name),
            first_timestamp=now,
            last_timestamp=now,
        )

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
        result = self.correlator.correlate(event)
        if result is None:
            self.stats.spam_filtered += 1
            return
        if result.event.message.startswith(COMBINED_PREFIX) and not event.message.startswith(COMBINED_PREFIX):
            self.stats.aggregated += 1
        tries = 0
        while True:
            try:
                self._write(result)
                return
            except ClusterError as err:
                tries += 1
                if not self.retryable(err) or tries >= self.max_tries or self._closing.is_set():
                    self.stats.failed += 1
                    log.debug(
                        "event %s for %s not written: %s", event.reason, event.involved.get("name"), err
                    )
                    return
                sleep = self.retry_sleep * (random.random() if tries == 1 else 1.0)
                if self._closing.wait(sleep):
                    self.stats.failed += 1
                    return

    def _write(self, result: CorrelatedEvent) -> None:
        event = result.event
        stored: Obj | None = None
        if result.update:
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
        self.correlator.update_state(result.key, event)


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
