"""Running a long-lived component: its work loop in a thread, its probes, its Lease, and a loud end.

Every long-running command (``koord scheduler``, ``descheduler``, ``koordlet``, and the manager, runtime
proxy and device daemon) is a ``Component`` -- ``run(stop)`` is its work loop, ``ready()`` says whether it is
doing its job, ``close()`` releases what it holds -- handed to a ``ComponentRunner``, which

* serves ``/healthz``, ``/readyz`` and ``/metrics`` (``koord_framework.health``);
* optionally takes part in leader election and runs the work only while it holds the Lease;
* builds the component and runs its loop in a thread; when the cluster does not serve a kind the component
  needs (a CRD not installed) it waits -- unready, retrying with backoff, saying so once with the way to
  install it -- or gives up, as ``MissingKindPolicy`` says for that kind;
* turns any other exception out of the build or the loop, and a loop that returns without being asked to,
  into the process's end: ``/healthz`` fails at once (so a probe restarts a process that lingers), the
  component is closed, the Lease released, the port closed, the reason printed as one line
  ``koord <name>: fatal: <cause>`` on stderr, and ``run`` returns ``EXIT_FAILED``.

``/readyz`` is 200 only while the component does its job: connected, and either a standby by design
(waiting for the Lease) or leading with ``component.ready()`` true. It is 503 while the component is being
built, while it waits for a kind, and from the moment it failed or lost the Lease.

Exit status of ``run``: ``EXIT_OK`` after a requested stop (SIGTERM, SIGINT, ``stop``, ``duration``),
``EXIT_FAILED`` when the work died or the Lease was lost.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol, TextIO

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.metrics_core import Metric

from koord_framework.cluster.served import install_hint, is_builtin
from koord_framework.errors import KindNotServedError
from koord_framework.health import HealthServer

if TYPE_CHECKING:
    from koord_framework.cluster.fence import WriteFence
    from koord_framework.cluster.kube.leader import LeaderElectionConfig, LeaderElector
    from koord_framework.cluster.port import ClusterPort

__all__ = [
    "CONTROLLER_CACHE_SYNC_TIMEOUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "Component",
    "ComponentRunner",
    "MissingKindPolicy",
    "missing_kind",
    "one_line",
]

log = logging.getLogger("koord")

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1

CONTROLLER_CACHE_SYNC_TIMEOUT: Final = 120.0
"""controller-runtime's default ``CacheSyncTimeout`` (2 minutes): how long Koordinator's controllers
(koord-manager, the descheduler's migration controller) wait for a kind before the manager exits."""


class Component(Protocol):
    """What a runner runs while it leads (or always, without leader election)."""

    def run(self, stop: threading.Event) -> None:
        """The work loop: return when ``stop`` is set; raise when the work cannot go on."""

    def ready(self) -> bool:
        """Whether the component is doing its job (caches filled, first round done, ...)."""

    def close(self) -> None:
        """Release what the component holds (threads, sockets, files). Called once, after ``run``."""


@dataclass(frozen=True)
class MissingKindPolicy:
    """How long a component waits for a kind the cluster does not serve, per kind, in seconds.

    ``None`` waits for ever (an informer factory's ``WaitForCacheSync``); a number gives up after that long
    (a controller-runtime controller's ``CacheSyncTimeout``); 0 fails at once. Kinds not in ``timeouts``
    take ``default`` when they come from a CRD and ``builtin`` when Kubernetes serves them itself (a cluster
    without Pods or Leases is not one a component can work on).
    """

    timeouts: Mapping[str, float | None] = field(default_factory=dict)
    default: float | None = None
    builtin: float | None = 0.0

    def timeout(self, kind: str) -> float | None:
        if kind in self.timeouts:
            return self.timeouts[kind]
        return self.builtin if is_builtin(kind) else self.default


def missing_kind(exc: BaseException) -> KindNotServedError | None:
    """The ``KindNotServedError`` behind ``exc`` (itself, its cause or context chain, or the ``exc`` a
    ``PluginLoadError`` wraps), if any."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, KindNotServedError):
            return e
        wrapped = getattr(e, "exc", None)  # PluginLoadError keeps the plugin's exception here
        for nxt in (e.__cause__, e.__context__, wrapped):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return None


def one_line(exc: BaseException) -> str:
    """An exception as one line: a ``KoordError`` is its message, anything else ``Type: message``."""
    from koord_framework.errors import KoordError

    text = str(exc) if isinstance(exc, KoordError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split()) or type(exc).__name__


class ComponentRunner:
    """Runs one component until asked to stop or until its work dies; see the module docstring.

    ``build(registry)`` makes the component; it is called in the work thread (again after waiting for a
    missing kind), and whatever it starts must be stopped by ``close`` -- or by ``build`` itself when it
    raises half-way. Each call gets a fresh registry for the component's metrics (a rebuilt component
    registers its series again); ``/metrics`` shows ``registry`` (the runner's own series) and the current
    component's. ``cluster`` is needed for leader election and lets the runner ask the
    API server whether a missing kind is served yet (without it, ``build`` is retried). ``preflight`` runs
    once before anything else (a discovery call that fails fast on bad credentials).
    """

    def __init__(
        self,
        name: str,
        build: Callable[[CollectorRegistry], Component],
        *,
        address: str,
        registry: CollectorRegistry | None = None,
        flag: str = "--address",
        cluster: ClusterPort | None = None,
        leader_election: LeaderElectionConfig | None = None,
        missing_kinds: MissingKindPolicy | None = None,
        preflight: Callable[[], None] | None = None,
        fence: WriteFence | None = None,
        backoff: tuple[float, float] = (1.0, 30.0),
        grace: float = 30.0,
        err: TextIO | None = None,
        also_ready: Callable[[], bool] | None = None,
    ) -> None:
        """``also_ready``: what must be ready besides the work on every replica, leader or standby (the
        manager's webhook server: every replica serves admissions)."""
        self.name = name
        self.also_ready = also_ready
        self.build = build
        self.registry = registry if registry is not None else CollectorRegistry()
        self.cluster = cluster
        self.leader_election = leader_election
        self.missing_kinds = missing_kinds or MissingKindPolicy()
        self.preflight = preflight
        self.fence = fence
        self.backoff = backoff
        self.grace = grace
        self._err = err
        self._leading_gauge = (
            Gauge("koord_leader_is_leader", "1 while this replica holds the lease", registry=self.registry)
            if leader_election is not None
            else None
        )
        self._lock = threading.Lock()
        self._component: Component | None = None
        self._connected = threading.Event()
        self._leading = threading.Event()
        self._dead = threading.Event()
        self._lost = threading.Event()
        self._work_done = threading.Event()
        self._stop = threading.Event()
        self._current = _CurrentRegistry()
        self.registry.register(self._current)
        self._elector: LeaderElector | None = None
        self._reason = ""
        self._waiting_for = ""
        self._waiting_since: dict[str, float] = {}
        # Bound before anything else, so a taken port fails before the cluster is touched.
        self.health = HealthServer(
            address,
            self.registry,
            healthy=self.healthy,
            ready=self.ready,
            reason=self.why,
            flag=flag,
        )

    # --- probes ----------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self.health.port

    @property
    def reason(self) -> str:
        """Why the work ended (empty while it goes on or after a requested stop)."""
        return self._reason

    def healthy(self) -> bool:
        return not (self._dead.is_set() or self._lost.is_set())

    def ready(self) -> bool:
        if not self.healthy() or not self._connected.is_set():
            return False
        if self.also_ready is not None and not self.also_ready():
            return False
        if self.leader_election is not None and not self._leading.is_set():
            return True  # a standby serves health and metrics, by design
        with self._lock:
            component, waiting = self._component, self._waiting_for
        return component is not None and not waiting and component.ready()

    def why(self) -> str:
        if self._reason:
            return self._reason
        waiting = self._waiting_for
        return f"waiting for {waiting} (not served by the API server)" if waiting else ""

    # --- the run -----------------------------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None, *, duration: float | None = None) -> int:
        """Serve and work until ``stop`` (or SIGTERM/SIGINT, or ``duration`` seconds), or until the work
        dies; returns the exit status. Always releases the port, the Lease and the component."""
        stop = stop or threading.Event()
        self._stop = stop
        deadline = time.monotonic() + duration if duration is not None else None
        self.health.start()
        log.info("koord %s: serving /healthz, /readyz and /metrics on port %d", self.name, self.port)
        elector: LeaderElector | None = None
        elector_thread: threading.Thread | None = None
        try:
            with _stop_on_signals(stop):
                if self.preflight is not None:
                    try:
                        self.preflight()
                    except Exception as exc:
                        self._fail(one_line(exc), exc)
                        return self._finish(EXIT_FAILED)
                self._connected.set()
                if self.leader_election is None:
                    if self.fence is not None:
                        self.fence.open()
                    threading.Thread(target=self._work, args=(stop,), name=self.name, daemon=True).start()
                else:
                    elector, elector_thread = self._elect()
                while not (stop.is_set() or self._dead.is_set()):
                    if elector_thread is not None and not elector_thread.is_alive():
                        self._lost.set()
                        assert self.leader_election is not None
                        lease = self.leader_election
                        self._reason = f"lost the Lease {lease.namespace}/{lease.name}"
                        break
                    if deadline is not None and time.monotonic() >= deadline:
                        stop.set()
                        break
                    stop.wait(0.2)
                stop.set()  # ends the work (and, through it, the term as leader)
                # Finish in-flight work before handing the Lease over, so two replicas never act at once:
                # the elector keeps renewing meanwhile, and whatever the work still tries after the grace
                # is refused by the fence, which closes before the Lease is released.
                working = self._leading.is_set() or self.leader_election is None
                if working and not self._work_done.wait(self.grace):
                    log.warning(
                        "koord %s: the work did not stop within %.0f s; refusing its writes from now",
                        self.name,
                        self.grace,
                    )
                self._close_fence("stopped")
                if elector is not None:
                    elector.stop()
            failed = self._dead.is_set() or self._lost.is_set()
            return self._finish(EXIT_FAILED if failed else EXIT_OK)
        finally:
            self._close_fence("stopped")
            if elector is not None:
                elector.stop()
            self.health.close()

    def _finish(self, code: int) -> int:
        if code != EXIT_OK:
            out = self._err if self._err is not None else sys.stderr
            print(f"koord {self.name}: fatal: {self._reason}", file=out, flush=True)
        return code

    def _elect(self) -> tuple[LeaderElector, threading.Thread]:
        from koord_framework.cluster.kube.leader import LeaderElector

        assert self.cluster is not None, "leader election needs a cluster"
        assert self.leader_election is not None
        elector = LeaderElector(self.cluster, self.leader_election, on_started_leading=self._lead)
        self._elector = elector
        log.info("koord %s: %s waiting for the lease", self.name, self.leader_election.identity)
        return elector, elector.start()

    def _lead(self, term_over: threading.Event) -> None:
        assert self._leading_gauge is not None
        self._leading_gauge.set(1)
        self._leading.set()
        if self.fence is not None:
            elector = self._elector
            # Asked on every write: a renewal that fails closes the fence at once.
            self.fence.open(holding=elector.leading.is_set if elector is not None else None)
        try:
            self._work(term_over)
        finally:
            self._close_fence("the term as leader is over")
            self._leading_gauge.set(0)

    def _close_fence(self, why: str) -> None:
        if self.fence is not None:
            self.fence.close(why)

    def _fail(self, reason: str, exc: BaseException | None = None) -> None:
        """Record the end first -- /healthz fails from here on -- then let the caller release."""
        if self._dead.is_set():
            return
        self._reason = reason
        self._dead.set()
        if exc is not None and not _is_expected(exc):
            log.error("koord %s: the work died", self.name, exc_info=exc)

    # --- the work thread -------------------------------------------------------------------------------
    def _work(self, over: threading.Event) -> None:
        """Build and run the component until ``over`` is set; any failure ends the process."""
        stop = threading.Event()
        watched = (over, self._stop, self._dead)
        threading.Thread(target=_stop_when_any, args=(stop, *watched), daemon=True).start()
        try:
            while not stop.is_set():
                component: Component | None = None
                try:
                    registry = CollectorRegistry()
                    component = self.build(registry)
                    self._current.registry = registry
                    with self._lock:
                        self._component = component
                    component.run(stop)
                    if not stop.is_set():
                        self._fail("the work loop ended without being asked to stop")
                    return
                except Exception as exc:
                    missing = missing_kind(exc)
                    if missing is None:
                        self._fail(one_line(exc), exc)
                        return
                    self._release(component)
                    component = None
                    if not self._await_kind(missing, stop):
                        return
                finally:
                    self._release(component)
        except BaseException as exc:  # whatever it was (SystemExit too), the work is over: say so
            self._fail(one_line(exc), exc)
        finally:
            stop.set()
            self._work_done.set()

    def _release(self, component: Component | None) -> None:
        with self._lock:
            if self._component is component:
                self._component = None
        if component is None:
            return
        try:
            component.close()
        except Exception as exc:
            log.warning("koord %s: closing: %s", self.name, one_line(exc))

    def _served(self, kind: str) -> bool:
        """Whether ``kind`` is served now; without a cluster to ask, the next build finds out. A discovery
        call that fails (the API server restarting) counts as "not yet": the wait goes on."""
        if self.cluster is None:
            return True
        try:
            return self.cluster.serves(kind)
        except Exception as exc:
            log.debug("koord %s: asking whether %s is served: %s", self.name, kind, one_line(exc))
            return False

    def _await_kind(self, err: KindNotServedError, stop: threading.Event) -> bool:
        """Wait, unready, until the cluster serves ``err.kind``; False when the wait ended otherwise (a
        stop, or the kind's time limit: then the work is dead)."""
        kind = err.kind
        limit = self.missing_kinds.timeout(kind)
        if limit is not None and limit <= 0:
            self._fail(f"{self.name} needs {kind}, which the API server does not serve; {install_hint(kind)}")
            return False
        with self._lock:
            self._waiting_for = kind  # before the log line: whoever reads it finds /readyz saying so
        now = time.monotonic()
        if kind not in self._waiting_since:
            self._waiting_since[kind] = now
            how_long = "until it is" if limit is None else f"for up to {limit:.0f} s"
            log.warning(
                "koord %s: waiting for %s: the API server does not serve it; %s; not ready %s",
                self.name,
                kind,
                install_hint(kind),
                how_long,
            )
        try:
            delay = self.backoff[0]
            while not stop.is_set():
                waited = time.monotonic() - self._waiting_since[kind]
                if limit is not None and waited >= limit:
                    self._fail(
                        f"gave up after {waited:.0f} s waiting for {kind}, which the API server does not "
                        f"serve; {install_hint(kind)}"
                    )
                    return False
                pause = delay if limit is None else min(delay, limit - waited)
                if stop.wait(max(pause, 0.0)):
                    return False
                delay = min(delay * 2, self.backoff[1])
                if self._served(kind):
                    log.info("koord %s: %s is served now; starting", self.name, kind)
                    return True
            return False
        finally:
            with self._lock:
                self._waiting_for = ""


class _CurrentRegistry:
    """A collector showing the series of the component built last (none before the first build)."""

    def __init__(self) -> None:
        self.registry: CollectorRegistry | None = None

    def describe(self) -> list[Metric]:
        return []  # its names change with each build: no duplicate check against them

    def collect(self) -> Iterable[Metric]:
        registry = self.registry
        return registry.collect() if registry is not None else ()


def _is_expected(exc: BaseException) -> bool:
    """A ``KoordError`` already says what went wrong; anything else also gets its traceback logged."""
    from koord_framework.errors import KoordError

    return isinstance(exc, KoordError)


def _stop_when_any(stop: threading.Event, *events: threading.Event) -> None:
    while not stop.is_set() and not any(e.wait(0.2) for e in events):
        pass
    stop.set()


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM (the kubelet stopping the pod) and SIGINT set ``stop`` for the duration. Python accepts
    handlers only in the main thread; elsewhere (embedded, a test) the caller's ``stop`` ends the run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
