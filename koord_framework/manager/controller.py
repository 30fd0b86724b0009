"""Level-triggered reconcilers over the shared informer, as controller-runtime runs them.

Each controller has its own queue of keys (node names); informer events only mark keys dirty, and a
reconcile reads the current state from the informer, so repeated or lost events do not matter. A
reconcile that raises is logged, counted and retried with backoff (5 ms doubling to 1000 s, as
controller-runtime's default rate limiter); it never stops the loop nor the other controllers. A reconcile
that returns a number of seconds is reconciled again after them (``Result{RequeueAfter}``); an event on the
key meanwhile reconciles it at once.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

__all__ = ["Controller", "ControllerLoop", "Reconciler"]

log = logging.getLogger("koord.manager")

BACKOFF_BASE = 0.005
BACKOFF_MAX = 1000.0


class Reconciler(Protocol):
    """What a controller does for one key."""

    name: str

    def all_keys(self) -> Iterable[str]:
        """Every key the controller owns (a full resync enqueues them)."""

    def reconcile(self, key: str) -> float | None:
        """Bring ``key``'s objects to the desired state; raise to be retried with backoff. A number: the
        seconds after which the key is reconciled again."""


class Controller:
    """One reconciler and its queue."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.reconciler = reconciler
        self.name = reconciler.name
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}
        self._requeue_at: dict[str, float] = {}

    def enqueue(self, key: str) -> None:
        with self._lock:
            self._dirty.add(key)

    def enqueue_all(self) -> None:
        keys = list(self.reconciler.all_keys())
        with self._lock:
            self._dirty.update(keys)

    def pending(self) -> bool:
        with self._lock:
            return bool(self._dirty)

    def _take(self, now: float) -> list[str]:
        with self._lock:
            for k, at in list(self._requeue_at.items()):
                if at <= now:
                    del self._requeue_at[k]
                    self._dirty.add(k)
            due = [k for k in self._dirty if self._retry_at.get(k, 0.0) <= now]
            self._dirty.difference_update(due)
        return sorted(due)

    def next_retry(self) -> float | None:
        with self._lock:
            times = [self._retry_at[k] for k in self._dirty if k in self._retry_at]
            times += self._requeue_at.values()
        return min(times) if times else None

    def process(self, errors: Counter, now: Callable[[], float] = time.monotonic) -> int:
        """Reconcile every due key once; returns how many were reconciled."""
        keys = self._take(now())
        for key in keys:
            try:
                after = self.reconciler.reconcile(key)
            except Exception as exc:  # one key's failure is retried, never fatal (controller-runtime)
                n = self._failures.get(key, 0) + 1
                self._failures[key] = n
                delay = min(BACKOFF_BASE * 2 ** (n - 1), BACKOFF_MAX)
                with self._lock:
                    self._retry_at[key] = now() + delay
                    self._dirty.add(key)
                errors.labels(controller=self.name).inc()
                log.warning(
                    "controller %s: reconcile %s failed (retry in %.3fs): %s", self.name, key, delay, exc
                )
            else:
                self._failures.pop(key, None)
                with self._lock:
                    self._retry_at.pop(key, None)
                    if after is None:
                        self._requeue_at.pop(key, None)
                    else:
                        self._requeue_at[key] = now() + after
        return len(keys)


class ControllerLoop:
    """Runs several controllers in one thread, round-robin, woken by ``kick``."""

    def __init__(self, controllers: Iterable[Controller], registry: CollectorRegistry, resync: float) -> None:
        self.controllers = list(controllers)
        self.resync = resync
        self._wake = threading.Event()
        self.errors = Counter(
            "koord_manager_reconcile_errors",
            "Reconciles that raised, by controller.",
            ["controller"],
            registry=registry,
        )
        self.reconciles = Counter(
            "koord_manager_reconciles",
            "Keys reconciled, by controller.",
            ["controller"],
            registry=registry,
        )

    def kick(self) -> None:
        self._wake.set()

    def run_once(self) -> int:
        # No cyclic collection during a round: with every node, pod and NodeMetric cached, the full
        # collections a round over every node triggers scan all of them (a third of the manager's first
        # pass). A round makes little cyclic garbage; the collector runs again right after it.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            done = 0
            for c in self.controllers:
                n = c.process(self.errors)
                if n:
                    self.reconciles.labels(controller=c.name).inc(n)
                done += n
            return done
        finally:
            if was_enabled:
                gc.enable()

    def run(self, stop: threading.Event, on_round: Callable[[], None] | None = None) -> None:
        # A stop ends the wait below at once: otherwise SIGTERM waited for the next resync (a minute by
        # default), past the drain's 30 s grace.
        waker = threading.Thread(target=self._wake_on, args=(stop,), name="controller-loop-stop", daemon=True)
        waker.start()
        last_resync = time.monotonic()
        while not stop.is_set():
            self._wake.clear()
            if time.monotonic() - last_resync >= self.resync:
                for c in self.controllers:
                    c.enqueue_all()
                last_resync = time.monotonic()
            self.run_once()
            if on_round is not None:
                on_round()
            retries = [t for t in (c.next_retry() for c in self.controllers) if t is not None]
            timeout = self.resync - (time.monotonic() - last_resync)
            if retries:
                timeout = min(timeout, min(retries) - time.monotonic())
            if not stop.is_set():  # set after this check: the waker's set comes after the clear above
                self._wake.wait(max(timeout, 0.001))

    def _wake_on(self, stop: threading.Event) -> None:
        stop.wait()
        self._wake.set()
