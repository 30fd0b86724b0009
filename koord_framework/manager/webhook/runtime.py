"""The webhook side of ``koord manager``: handlers, their informer, the HTTPS server and the controller.

Koordinator runs its webhook server on every replica, leader or not (the Service spreads the API server's
calls over all of them), so this runs beside the leader-elected controllers, not inside them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import KoordError
from koord_framework.manager.webhook.admission import GROUP, AdmissionHandler, Gates, Writer
from koord_framework.manager.webhook.controller import WebhookController, WebhookSettings
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.manager.webhook.metrics import PROCESS, Snapshot, WebhookMetricsCollector
from koord_framework.manager.webhook.server import WebhookServer
from koord_framework.manager.webhook.workers import WorkerPool, check_names

__all__ = ["ClusterWriter", "WebhookRuntime", "load_handlers"]

log = logging.getLogger("koord.manager.webhook")


def load_handlers(
    gates: Gates | None = None, args: Mapping[str, Mapping[str, Any]] | None = None
) -> list[AdmissionHandler[Any]]:
    """Every installed admission handler (entry-point group ``koord.manager.webhooks``) whose feature gate
    is on (Koordinator's ``addHandlersWithGate`` / ``filterActiveHandlers``), built with its entry of
    ``args`` (by handler name; the manager's webhook flags) or default args."""
    from koord_framework.registry import PluginRegistry

    handlers: list[AdmissionHandler[Any]] = []
    for name, cls in sorted(PluginRegistry.discover(GROUP).load_all().items()):
        if not issubclass(cls, AdmissionHandler):
            raise KoordError(f"plugin {name!r} in {GROUP} is not an AdmissionHandler")
        if cls.gate and gates is not None and not gates.enabled(cls.gate):
            log.info("admission handler %s disabled by feature gate %s", name, cls.gate)
            continue
        handlers.append(cls((args or {}).get(name)))
    return handlers


class WebhookRuntime:
    """Started with ``start()`` (raises when the port is taken or a watched kind is not served)."""

    def __init__(
        self,
        cluster: ClusterPort,
        settings: WebhookSettings,
        handlers: Sequence[AdmissionHandler[Any]],
        registry: CollectorRegistry | None = None,
        gates: Gates | None = None,
    ) -> None:
        self.cluster = cluster
        self.gates = gates
        self.settings = settings
        self.handlers = list(handlers)
        self.dispatcher = Dispatcher(self.handlers)
        self.registry = registry
        self._collector: WebhookMetricsCollector | None = None
        if registry is not None:
            # The manager's /metrics: this process's webhook metrics plus the worker processes' sums.
            self._collector = WebhookMetricsCollector(PROCESS.registry, self._worker_metrics)
            registry.register(self._collector)
        self.informer = SharedInformer(cluster)
        self.server: WebhookServer | None = None
        self.pool: WorkerPool | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        paths = self.dispatcher.paths
        self.controller = WebhookController(
            cluster,
            settings,
            mutating_paths=[p for p, hs in paths.items() if hs[0].mutating],
            validating_paths=[p for p, hs in paths.items() if not hs[0].mutating],
            reload=self._reload,
        )

    def _reload(self) -> None:
        if self.server is not None:
            self.server.reload()
            log.info("webhook server: serving certificate (re)loaded from %s", self.settings.cert_dir)
        if self.pool is not None:
            self.pool.reload()
            log.info(
                "webhook workers: told to (re)load the serving certificate from %s", self.settings.cert_dir
            )

    def _worker_metrics(self) -> list[Snapshot]:
        pool = self.pool
        return pool.metric_snapshots() if pool is not None else []

    @property
    def port(self) -> int:
        """The port served (the bound one when the settings asked for 0)."""
        if self.pool is not None:
            return self.pool.port
        if self.server is not None:
            return self.server.port
        raise RuntimeError("webhook runtime not started")

    def start(self) -> None:
        try:
            watches = sorted({k for h in self.handlers for k in h.watches})
            for kind in watches:
                self.informer.ensure(kind)
            if self.settings.workers > 1:
                self.pool = WorkerPool(
                    self.informer,
                    names=check_names(self.handlers),
                    handler_args={h.name: h.args.model_dump() for h in self.handlers},
                    gates_on=_gates_on(self.gates),
                    watches=watches,
                    writes=sorted({k for h in self.handlers for k in h.writes}),
                    host=self.settings.bind_host,
                    port=self.settings.port,
                    cert_dir=self.settings.cert_dir,
                    count=self.settings.workers,
                )
            else:
                for handler in self.handlers:
                    writer = ClusterWriter(self.cluster, handler.writes) if handler.writes else None
                    handler.bind(_Lister(self.informer), self.gates, writer)
                self.server = WebhookServer(
                    self.dispatcher,
                    host=self.settings.bind_host,
                    port=self.settings.port,
                    cert_dir=self.settings.cert_dir,
                )
        except BaseException:
            self.close()
            raise
        if self.pool is not None:
            self.pool.start()
        if self.server is not None:
            self.server.start()
        self._thread = threading.Thread(
            target=self.controller.run, args=(self._stop,), name="webhook-controller", daemon=True
        )
        self._thread.start()
        log.info(
            "webhook server on %s:%d (%s) serving %s",
            self.settings.bind_host,
            self.port,
            f"{self.settings.workers} worker processes" if self.pool is not None else "in process",
            ", ".join(sorted(self.dispatcher.paths)),
        )

    def ready(self) -> bool:
        """Certificates and configurations synced once, and (with workers) every worker serving."""
        return self.controller.initialized.is_set() and (self.pool is None or self.pool.ready())

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.informer.stop()
        for handler in self.handlers:
            handler.close()
        if self.registry is not None and self._collector is not None:
            self.registry.unregister(self._collector)
            self._collector = None


def _gates_on(gates: Gates | None) -> frozenset[str]:
    """The gates ``gates`` has on, by name (what a worker process is given: the object may not pickle)."""
    if gates is None:
        return frozenset()
    names = getattr(gates, "specs", None) or getattr(gates, "values", None) or {}
    return frozenset(name for name in names if gates.enabled(name))


class _Lister:
    def __init__(self, informer: SharedInformer) -> None:
        self.informer = informer

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.informer.get(kind, name, namespace)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.informer.list(kind, namespace)


class ClusterWriter:
    """A handler's ``Writer``: the cluster itself, for the kinds the handler declared in ``writes`` only."""

    def __init__(self, cluster: ClusterPort, kinds: Sequence[str]) -> None:
        self.cluster = cluster
        self.kinds = frozenset(kinds)

    def _check(self, kind: str) -> None:
        if kind not in self.kinds:
            raise PermissionError(
                f"admission handler writes kind {kind!r}, "
                f"not one of its `writes` ({', '.join(sorted(self.kinds))})"
            )

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        self._check(kind)
        return self.cluster.try_get(kind, name, namespace)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._check(str(obj.get("kind") or ""))
        return self.cluster.update(obj)


_: type[Writer] = ClusterWriter
