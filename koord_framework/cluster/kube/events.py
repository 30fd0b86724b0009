"""Kubernetes Events, sent in the background so that recording one never delays a scheduling cycle.

client-go's event broadcaster does the same: ``record_event`` queues, one thread posts ``core/v1`` Events,
and when the queue is full (an API server that cannot keep up) new events are dropped and counted rather
than blocking the caller. Events about cluster-scoped objects (Nodes) go to namespace ``default``, as
kubelet and kube-scheduler put them.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.clock import format_time
from koord_framework.cluster.kinds import KINDS, KindInfo
from koord_framework.cluster.kube.transport import Transport
from koord_framework.cluster.port import EventRecord, Obj
from koord_framework.errors import ClusterError

__all__ = ["EventSink", "event_manifest"]

log = logging.getLogger(__name__)

_INVOLVED_KEYS = ("uid", "apiVersion", "resourceVersion", "fieldPath")
"""``EventRecord.extra`` keys that describe the involved object rather than the event."""


def event_manifest(
    event: EventRecord,
    *,
    default_component: str,
    instance: str,
    now: float,
    kinds: Mapping[str, KindInfo] = KINDS,
) -> Obj:
    """The ``core/v1`` Event for a record. Its name is unique per object and nanosecond, as client-go's."""
    info = kinds.get(event.kind)
    namespaced = info.namespaced if info is not None else bool(event.namespace)
    namespace = (event.namespace or "default") if namespaced else "default"
    involved: dict[str, Any] = {"kind": event.kind, "name": event.name}
    if namespaced:
        involved["namespace"] = event.namespace or "default"
    if info is not None:
        involved["apiVersion"] = info.api_version
    for key in _INVOLVED_KEYS:
        value = event.extra.get(key)
        if value:
            involved[key] = str(value)
    component = event.component or default_component
    stamp = format_time(event.time or now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{event.name}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": involved,
        "reason": event.reason,
        "message": event.message[:1024],
        "type": event.type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class EventSink:
    """A bounded queue of events and the thread that posts them."""

    def __init__(self, transport: Transport, *, component: str, capacity: int = 1000) -> None:
        self.transport = transport
        self.component = component
        self.instance = os.environ.get("POD_NAME") or socket.gethostname()
        self._queue: queue.Queue[Obj | None] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.sent = 0
        self.dropped = 0
        self.failed = 0

    def record(self, event: EventRecord) -> None:
        manifest = event_manifest(
            event,
            default_component=self.component,
            instance=self.instance,
            now=time.time(),
            kinds=self.transport.kinds,
        )
        self._ensure_thread()
        try:
            self._queue.put_nowait(manifest)
        except queue.Full:
            self.dropped += 1
            log.debug("event queue full: dropping %s %s", event.reason, event.name)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued event was posted (or failed); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.01)
        return self._queue.unfinished_tasks == 0

    def close(self, timeout: float = 5.0) -> None:
        self.flush(timeout)
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="event-sink", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            manifest = self._queue.get()
            try:
                if manifest is None:
                    return
                namespace = manifest["metadata"]["namespace"]
                self.transport.request(
                    "POST",
                    f"/api/v1/namespaces/{namespace}/events",
                    f"record event {manifest['reason']} for {manifest['involvedObject']['name']}",
                    body=manifest,
                )
                self.sent += 1
            except ClusterError as err:
                # Events are best effort: a namespace being deleted, or a throttled server, loses them.
                self.failed += 1
                log.debug("%s", err)
            finally:
                self._queue.task_done()
