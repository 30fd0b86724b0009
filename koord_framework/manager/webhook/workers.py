"""Several worker processes serving the webhook port (``--webhook-workers``).

One Python process answers admissions on one core at a time (the GIL), and under load the API server's calls
queue behind each other. The manager therefore binds the port once and starts ``count`` worker processes
that all accept on that one listening socket (a pre-forked accept loop: the kernel hands each connection to
one worker). Each worker builds the same handlers (by their entry-point names, with the same feature gates)
and serves with its own ``WebhookServer``; the manager process keeps everything that must exist once:

* the informer: every worker's handlers read a copy of the watched kinds, fed over the worker's pipe by an
  informer handler registered for it (the cached objects first, then every change in order), so a
  ClusterColocationProfile created or changed reaches every worker;
* the webhook controller: when it writes new certificates it tells every worker to reload them from the cert
  dir (rotation without a restart, in every worker);
* readiness: ready once every worker has its copy of the cache and a serving certificate;
* writes: a handler declaring ``writes`` (the quota evaluator) writes through the manager, which does the
  write on the cluster and sends back the stored object or the error (workers hold no cluster client);
* supervision: a worker that dies is logged and started again (not ready until it serves again);
  ``close()`` stops every worker and waits for it.
* metrics: a worker sends a snapshot of its webhook metrics when they changed (at most once a
  ``metrics.PUSH_INTERVAL``); the manager keeps each worker's last one and, when a worker dies, adds it to
  a retired total, so the sums on its ``/metrics`` never go back (``metric_snapshots``).

Workers are started with ``spawn`` (not ``fork``): the manager has threads (informer, controllers, HTTP
clients) whose locks a forked child would inherit held.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing as mp
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

from koord_framework import errors
from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.port import Obj
from koord_framework.errors import KoordError
from koord_framework.manager.webhook import metrics
from koord_framework.manager.webhook.admission import GROUP, AdmissionHandler
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.manager.webhook.server import WebhookServer, listen

__all__ = ["WorkerPool", "default_workers"]

log = logging.getLogger("koord.manager.webhook")

_RESTART_BACKOFF = (1.0, 30.0)


def default_workers() -> int:
    """The CPUs this process may run on (a container's cpuset, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class _Gates:
    def __init__(self, on: frozenset[str]) -> None:
        self.on = on

    def enabled(self, name: str) -> bool:
        return name in self.on


class _Store:
    """A worker's copy of the watched kinds (the handlers' ``Lister``)."""

    def __init__(self, namespaced: dict[str, bool]) -> None:
        self.namespaced = namespaced
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in namespaced}
        self.lock = threading.Lock()

    @staticmethod
    def key(obj: dict[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def _kind(self, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
        objs = self.objects.get(kind)
        if objs is None:
            raise KeyError(
                f"kind {kind} is not cached in webhook workers: add it to the handler's `watches` "
                f"(cached: {', '.join(sorted(self.objects)) or 'none'})"
            )
        return objs

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        objs = self._kind(kind)
        if self.namespaced[kind]:
            namespace = namespace or "default"
        with self.lock:
            return objs.get((namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        objs = self._kind(kind)
        with self.lock:
            if namespace is None:
                return list(objs.values())
            return [o for (ns, _), o in objs.items() if ns == namespace]


_WRITE_TIMEOUT = 10.0
"""How long a worker's handler waits for the manager to do a write (Koordinator's evaluation timeout)."""


class _RemoteWriter:
    """A worker's ``Writer``: each call goes to the manager over the worker's pipe and waits for the answer
    (read by the worker's message loop, which calls ``resolve``)."""

    def __init__(self, send: Callable[[tuple[Any, ...]], None]) -> None:
        self._send = send
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[threading.Event, list[tuple[bool, Any]]]] = {}

    def _call(self, op: str, *args: Any) -> Any:
        seq = next(self._seq)
        done, slot = threading.Event(), cast("list[tuple[bool, Any]]", [])
        with self._lock:
            self._pending[seq] = (done, slot)
        try:
            self._send(("write", seq, op, *args))
            if not done.wait(_WRITE_TIMEOUT):
                raise errors.ClusterError(
                    f"webhook worker: the manager did not answer {op} in {_WRITE_TIMEOUT}s"
                )
        finally:
            with self._lock:
                self._pending.pop(seq, None)
        ok, value = slot[0]
        if not ok:
            cls = getattr(errors, value[0], None)
            if not (isinstance(cls, type) and issubclass(cls, errors.ClusterError)):
                cls = errors.ClusterError
            raise cls(value[1])
        return value

    def resolve(self, seq: int, ok: bool, value: Any) -> None:
        with self._lock:
            pending = self._pending.get(seq)
        if pending is not None:
            pending[1].append((ok, value))
            pending[0].set()

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", self._call("get", kind, name, namespace))

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        return cast("dict[str, Any]", self._call("update", obj))


def _worker_main(
    conn: Connection,
    listener: socket.socket,
    cert_dir: str | None,
    names: Sequence[str],
    gates_on: frozenset[str],
    namespaced: dict[str, bool],
    handler_args: dict[str, dict[str, Any]] | None = None,
) -> None:
    """A worker: build the handlers, serve ``listener``, follow the manager's messages until told to stop
    (or until the manager's end of the pipe closes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the manager stops us
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s[worker]: %(message)s")
    from koord_framework.registry import PluginRegistry

    classes = PluginRegistry.discover(GROUP).load_all()
    store = _Store(namespaced)
    gates = _Gates(gates_on)
    # Every worker wakes for a new connection, one accepts it: the others must get EAGAIN, not block in
    # accept() (where a shutdown would wait for the next connection).
    listener.setblocking(False)
    handlers: list[AdmissionHandler[Any]] = [
        cast("type[AdmissionHandler[Any]]", classes[n])((handler_args or {}).get(n)) for n in names
    ]
    send_lock = threading.Lock()

    def send(msg: tuple[Any, ...]) -> None:
        with send_lock:  # the message loop and handler threads (writes) share the pipe
            conn.send(msg)

    writer = _RemoteWriter(send)
    for h in handlers:
        h.bind(store, gates, writer if h.writes else None)
    server = WebhookServer(
        Dispatcher(handlers), cert_dir=Path(cert_dir) if cert_dir is not None else None, sock=listener
    )
    server.start()
    synced = certified = reported = False
    pushing = threading.Event()

    def push_metrics() -> None:
        last: metrics.Snapshot | None = None
        while not pushing.wait(metrics.PUSH_INTERVAL):
            current = metrics.snapshot(metrics.PROCESS.registry)
            if current != last:
                try:
                    send(("metrics", current))
                except (OSError, ValueError):
                    return  # the manager is gone
                last = current

    threading.Thread(target=push_metrics, name="webhook-metrics", daemon=True).start()

    def certify() -> bool:
        try:
            server.reload()
            return True
        except ValueError as exc:  # not written yet by the manager's controller: it says when
            log.info("webhook worker %d: %s", os.getpid(), exc)
            return False

    try:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break  # the manager is gone
            op = msg[0]
            if op == "put":
                with store.lock:
                    store.objects[msg[1]][_Store.key(msg[2])] = msg[2]
            elif op == "del":
                with store.lock:
                    store.objects[msg[1]].pop(_Store.key(msg[2]), None)
            elif op == "synced":
                synced = True
                certified = certified or certify()
            elif op == "reload":
                loaded = certify()
                certified = loaded or certified
                send(("reloaded", msg[1], loaded))
            elif op == "written":
                writer.resolve(msg[1], msg[2], msg[3])
            elif op == "stop":
                break
            if synced and certified and not reported:
                send(("ready", os.getpid()))
                reported = True
    finally:
        pushing.set()
        server.close()
        for h in handlers:
            h.close()


class _Worker:
    def __init__(self, process: Any, conn: Connection, unsubscribe: list[Callable[[], None]]) -> None:
        self.process = process
        self.conn = conn
        self.unsubscribe = unsubscribe
        self.ready = False
        self.reloaded = 0
        """The last certificate reload this worker has done (``WorkerPool.reload``'s sequence number)."""
        self.send_lock = threading.Lock()
        self.metrics: metrics.Snapshot = ()
        """The worker's last metrics snapshot."""

    def send(self, msg: tuple[Any, ...]) -> None:
        # A dead worker's pipe fails: the supervisor restarts it.
        with self.send_lock, contextlib.suppress(OSError, ValueError):
            self.conn.send(msg)


class WorkerPool:
    """``count`` worker processes serving ``host:port`` with the handlers named ``names``."""

    def __init__(
        self,
        informer: SharedInformer,
        *,
        names: Sequence[str],
        gates_on: frozenset[str],
        watches: Sequence[str],
        host: str,
        writes: Sequence[str] = (),
        handler_args: dict[str, dict[str, Any]] | None = None,
        port: int,
        cert_dir: Path | None,
        count: int,
    ) -> None:
        if count < 2:
            raise ValueError(f"a worker pool needs 2 or more workers, got {count}")
        self.informer = informer
        self.names = list(names)
        self.gates_on = gates_on
        self.watches = sorted(set(watches))
        self.writes = frozenset(writes)
        self.handler_args = dict(handler_args or {})
        """Each handler's args (by name), as the manager built it: workers build theirs alike."""
        self._writes_pool: ThreadPoolExecutor | None = None
        self.cert_dir = cert_dir
        self.count = count
        kinds = informer.cluster.kinds
        self.namespaced = {k: kinds[k].namespaced for k in self.watches}
        self.listener = listen(host, port)
        self._ctx = mp.get_context("spawn")
        self._workers: list[_Worker | None] = [None] * count
        self._lock = threading.Lock()
        self._acked = threading.Condition(self._lock)
        self._reload_seq = 0
        self._closing = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._retired: metrics.Snapshot = ()
        """The metrics of workers that died or were stopped (their last snapshots, summed)."""

    def metric_snapshots(self) -> list[metrics.Snapshot]:
        """The retired workers' metrics and each live worker's last snapshot (``metrics.merge`` sums them)."""
        with self._lock:
            return [self._retired, *(w.metrics for w in self._workers if w is not None)]

    def _retire(self, worker: _Worker) -> None:
        with self._lock:
            self._retired = metrics.merge([self._retired, worker.metrics])
            worker.metrics = ()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def _spawn(self, slot: int) -> None:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(
            target=_worker_main,
            args=(
                child,
                self.listener,
                _str(self.cert_dir),
                self.names,
                self.gates_on,
                self.namespaced,
                self.handler_args,
            ),
            name=f"koord-manager-webhook-{slot}",
            daemon=True,
        )
        process.start()
        child.close()
        worker = _Worker(process, parent, [])
        for kind in self.watches:
            worker.unsubscribe.append(self.informer.add_handler(kind, *_forward(worker, kind)))
        worker.send(("synced",))
        with self._lock:
            self._workers[slot] = worker
        log.info("webhook worker %d started (pid %s)", slot, process.pid)

    def start(self) -> None:
        for slot in range(self.count):
            self._spawn(slot)
        self._supervisor = threading.Thread(target=self._supervise, name="webhook-workers", daemon=True)
        self._supervisor.start()

    def reload(self, timeout: float = 15.0) -> None:
        """Tell every worker to load the certificates in the cert dir again, and wait until each has (the
        controller writes the new CA into the webhook configurations only after this returns, so the API
        server never trusts a CA a worker does not serve yet). A worker that does not answer in ``timeout``
        is logged; one started later loads the certificates as it starts."""
        with self._lock:
            self._reload_seq += 1
            seq = self._reload_seq
        workers = self._current()
        for worker in workers:
            worker.send(("reload", seq))
        deadline = time.monotonic() + timeout
        with self._acked:
            while True:
                late = [w for w in workers if w.reloaded < seq and w.process.is_alive()]
                left = deadline - time.monotonic()
                if not late or left <= 0:
                    break
                self._acked.wait(left)
        for w in late:
            log.warning("webhook worker pid %s did not confirm the certificate reload in time", w.process.pid)

    def ready(self) -> bool:
        workers = self._current()
        return len(workers) == self.count and all(w.ready and w.process.is_alive() for w in workers)

    def _current(self) -> list[_Worker]:
        with self._lock:
            return [w for w in self._workers if w is not None]

    def _supervise(self) -> None:
        restarts: dict[int, float] = {}
        while not self._closing.is_set():
            with self._lock:
                slots = {id(w.conn): (i, w) for i, w in enumerate(self._workers) if w is not None}
            waitables: list[Any] = []
            for _, w in slots.values():
                waitables += [w.conn, w.process.sentinel]
            for ready in wait(waitables, timeout=0.5):
                if self._closing.is_set():
                    return
                for slot, w in slots.values():
                    if ready is w.conn:
                        try:
                            msg = w.conn.recv()
                        except (EOFError, OSError):
                            continue  # its sentinel says the rest
                        if msg[0] == "ready":
                            w.ready = True
                            log.info("webhook worker %d (pid %s) serving", slot, msg[1])
                        elif msg[0] == "metrics":
                            with self._lock:
                                w.metrics = msg[1]
                        elif msg[0] == "write":
                            self._write(w, msg)
                        elif msg[0] == "reloaded":
                            with self._acked:
                                w.reloaded = max(w.reloaded, int(msg[1]))
                                self._acked.notify_all()
                            if not msg[2]:
                                log.error("webhook worker %d could not load the new certificate", slot)
                    elif ready == w.process.sentinel and not w.process.is_alive():
                        self._restart(slot, w, restarts)

    def _write(self, worker: _Worker, msg: tuple[Any, ...]) -> None:
        """Do a worker's handler's write on the cluster (off the supervisor thread) and send the answer."""
        if self._writes_pool is None:
            self._writes_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="webhook-writes")
        cluster = self.informer.cluster
        seq, op, args = msg[1], msg[2], msg[3:]

        def run() -> None:
            try:
                kind = str(args[0] if op == "get" else (args[0].get("kind") or ""))
                if kind not in self.writes:
                    raise errors.ClusterError(f"webhook worker may not write kind {kind!r}")
                value: Any = cluster.try_get(*args) if op == "get" else cluster.update(args[0])
                worker.send(("written", seq, True, value))
            except Exception as exc:  # the handler gets the error, by class, in the worker
                worker.send(("written", seq, False, (type(exc).__name__, str(exc))))

        self._writes_pool.submit(run)

    def _restart(self, slot: int, worker: _Worker, restarts: dict[int, float]) -> None:
        for remove in worker.unsubscribe:
            remove()
        worker.conn.close()
        self._retire(worker)
        with self._lock:
            self._workers[slot] = None
        backoff = restarts.get(slot, 0.0)
        backoff = min(_RESTART_BACKOFF[1], max(_RESTART_BACKOFF[0], backoff * 2))
        restarts[slot] = backoff
        log.error(
            "webhook worker %d (pid %s) exited with code %s; starting it again in %.0fs",
            slot,
            worker.process.pid,
            worker.process.exitcode,
            backoff,
        )
        if self._closing.wait(backoff):
            return
        try:
            self._spawn(slot)
        except Exception:  # retried on the next death check
            log.exception("webhook worker %d could not be started", slot)

    def close(self) -> None:
        self._closing.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=5)
            self._supervisor = None
        workers = self._current()
        for w in workers:
            for remove in w.unsubscribe:
                remove()
            w.send(("stop",))
        deadline = time.monotonic() + 5
        for w in workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                log.warning("webhook worker pid %s did not stop in time; terminating it", w.process.pid)
                w.process.terminate()
                w.process.join(2)
            w.conn.close()
        with self._lock:
            self._workers = [None] * self.count
        if self._writes_pool is not None:
            self._writes_pool.shutdown(wait=False, cancel_futures=True)
        self.listener.close()


def _forward(
    worker: _Worker, kind: str
) -> tuple[Callable[[Obj], None], Callable[[Obj, Obj], None], Callable[[Obj], None]]:
    """Informer handlers sending ``kind``'s changes to ``worker`` (in the informer's order)."""

    def on_add(obj: Obj) -> None:
        worker.send(("put", kind, obj))

    def on_update(_old: Obj, obj: Obj) -> None:
        worker.send(("put", kind, obj))

    def on_delete(obj: Obj) -> None:
        worker.send(("del", kind, obj))

    return on_add, on_update, on_delete


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)


def check_names(handlers: Sequence[AdmissionHandler[Any]]) -> list[str]:
    """The entry-point names workers rebuild ``handlers`` by (each must be installed under its name)."""
    from koord_framework.registry import PluginRegistry

    installed = PluginRegistry.discover(GROUP).load_all()
    names = []
    for h in handlers:
        if installed.get(h.name) is not type(h):
            raise KoordError(
                f"admission handler {h.name!r} is not installed in {GROUP} under its name: "
                "webhook workers can only rebuild installed handlers (use --webhook-workers=1)"
            )
        names.append(h.name)
    return names
