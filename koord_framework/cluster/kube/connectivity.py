"""Whether the API server answers, said in a few log lines instead of one per failed request.

During an API server outage every request fails: urllib3 logs a warning for each of its retries, and every
component that retries (watches, the lease, binders, the event sender) would log its own failure, thousands
of lines for a 20 s outage at a high QPS. ``Connectivity`` follows the transport's requests instead and
says it once: one line when the server stops answering, one summary every ``summary_every`` seconds while
it stays down (failed requests and the log lines held back), one line when it answers again.

``ConnectionNoiseFilter`` holds back, while some API server is unreachable, warnings that only repeat that
fact (urllib3's ``Retrying (...)`` lines always: the retries are counted by the failures they end in);
errors and everything unrelated to connectivity still pass.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable

__all__ = ["CONNECTION_MARKERS", "NOISY_LOGGERS", "ConnectionNoiseFilter", "Connectivity", "install_filter"]

log = logging.getLogger(__name__)

CONNECTION_MARKERS = (
    "Max retries exceeded",
    "Connection refused",
    "Connection reset",
    "ConnectionError",
    "NewConnectionError",
    "ProtocolError",
    "RemoteDisconnected",
    "Connection aborted",
    "timed out",
    "Read timed out",
    "EOF occurred",
    "Failed to establish a new connection",
    # The lean client's own words for a stream or answer the server cut (kube/http.py).
    "cut short",
    "closed the connection",
    "Response ended prematurely",
    "IncompleteRead",
)
"""Texts of the errors a request gets when the server does not answer at all."""

NOISY_LOGGERS = (
    "urllib3.connectionpool",
    "koord_framework.cluster.kube.watch",
    "koord_framework.cluster.kube.leader",
    "koord_framework.cluster.kube.adapter",
    "koord_framework.cluster.informer",
    "koord_framework.scheduler.scheduler",
    "koord_framework.scheduler.reporting",
    "koord_framework.descheduler",
    "koord_framework.koordlet",
    "koord_framework.manager",
    "koord_framework.component",
)
"""Loggers whose connection warnings are held back during an outage."""

_trackers: weakref.WeakSet[Connectivity] = weakref.WeakSet()
_install_lock = threading.Lock()
_installed: ConnectionNoiseFilter | None = None


class Connectivity:
    """Reachability of one API server, from the outcome of its requests. Thread-safe and cheap while up."""

    def __init__(
        self,
        host: str,
        *,
        summary_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger = log,
    ) -> None:
        self.host = host
        self.summary_every = summary_every
        self._clock = clock
        self._log = logger
        self._lock = threading.Lock()
        self.down = False
        self.since = 0.0
        self.failures = 0
        self.held_back = 0
        self.outages = 0
        self._last_summary = 0.0
        _trackers.add(self)

    def ok(self) -> None:
        """A request got an answer (any HTTP status)."""
        if not self.down:
            return
        with self._lock:
            if not self.down:
                return
            self.down = False
            took = self._clock() - self.since
            failures, held = self.failures, self.held_back
            self.failures = self.held_back = 0
        self._log.warning(
            "API server %s is reachable again after %.1f s (%d requests failed, %d log lines held back)",
            self.host,
            took,
            failures,
            held,
        )

    def failed(self, error: object) -> None:
        """A request got no answer: connection refused, reset, or timed out."""
        now = self._clock()
        with self._lock:
            if not self.down:
                self.down = True
                self.outages += 1
                self.since = self._last_summary = now
                self.failures = 1
                first = True
            else:
                self.failures += 1
                first = False
                if now - self._last_summary < self.summary_every:
                    return
                self._last_summary = now
            failures, held = self.failures, self.held_back
        if first:
            self._log.warning("API server %s is unreachable: %s", self.host, _short(error))
        else:
            self._log.warning(
                "API server %s still unreachable after %.0f s: %d requests failed, %d log lines held back",
                self.host,
                now - self.since,
                failures,
                held,
            )

    def note_held_back(self) -> None:
        with self._lock:
            self.held_back += 1


def _short(error: object) -> str:
    text = str(error)
    # urllib3's MaxRetryError repeats the URL and the pool; the cause at its end is what matters.
    cut = text.rfind("Caused by ")
    if cut >= 0:
        text = text[cut + len("Caused by ") :].rstrip(")")
    return text[:300]


class ConnectionNoiseFilter(logging.Filter):
    """Drops urllib3's retry warnings, and connection warnings while an API server is unreachable."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "urllib3.connectionpool" and record.levelno <= logging.WARNING:
            return not record.getMessage().startswith("Retrying (")
        if record.levelno > logging.WARNING or record.name == __name__:
            return True
        if getattr(record, "koord_held_back", False):
            return False  # seen by another of the filter's places already
        down = [t for t in list(_trackers) if t.down]
        if not down:
            return True
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += " " + str(record.exc_info[1])
        if any(marker in text for marker in CONNECTION_MARKERS):
            record.koord_held_back = True
            down[0].note_held_back()
            return False
        return True


def install_filter() -> ConnectionNoiseFilter:
    """Attach the filter to the noisy loggers, once per process."""
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = ConnectionNoiseFilter()
            # A logger's filters see only its own records, not its children's: attach to every logger
            # under the noisy names that exists now (components import their modules before connecting),
            # and to the root handlers for the rest.
            existing = [n for n in logging.Logger.manager.loggerDict if n.startswith(NOISY_LOGGERS)]
            for name in {*NOISY_LOGGERS, *existing}:
                logging.getLogger(name).addFilter(_installed)
            for handler in logging.getLogger().handlers:
                handler.addFilter(_installed)
        return _installed
