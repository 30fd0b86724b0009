"""The webhook side of ``koord manager``: handlers, their informer, the HTTPS server and the controller.

Koordinator runs its webhook server on every replica, leader or not (the Service spreads the API server's
calls over all of them), so this runs beside the leader-elected controllers, not inside them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import KoordError
from koord_framework.manager.webhook.admission import GROUP, AdmissionHandler, Gates
from koord_framework.manager.webhook.controller import WebhookController, WebhookSettings
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.manager.webhook.server import WebhookServer

__all__ = ["WebhookRuntime", "load_handlers"]

log = logging.getLogger("koord.manager.webhook")


def load_handlers(gates: Gates | None = None) -> list[AdmissionHandler[Any]]:
    """Every installed admission handler (entry-point group ``koord.manager.webhooks``) whose feature gate
    is on, built with default args (Koordinator's ``addHandlersWithGate`` / ``filterActiveHandlers``)."""
    from koord_framework.registry import PluginRegistry

    handlers: list[AdmissionHandler[Any]] = []
    for name, cls in sorted(PluginRegistry.discover(GROUP).load_all().items()):
        if not issubclass(cls, AdmissionHandler):
            raise KoordError(f"plugin {name!r} in {GROUP} is not an AdmissionHandler")
        if cls.gate and gates is not None and not gates.enabled(cls.gate):
            log.info("admission handler %s disabled by feature gate %s", name, cls.gate)
            continue
        handlers.append(cls())
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
        self.dispatcher = Dispatcher(self.handlers, registry)
        self.informer = SharedInformer(cluster)
        self.server: WebhookServer | None = None
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

    def start(self) -> None:
        try:
            for kind in sorted({k for h in self.handlers for k in h.watches}):
                self.informer.ensure(kind)
            for handler in self.handlers:
                handler.bind(_Lister(self.informer), self.gates)
            self.server = WebhookServer(
                self.dispatcher,
                host=self.settings.bind_host,
                port=self.settings.port,
                cert_dir=self.settings.cert_dir,
            )
        except BaseException:
            self.close()
            raise
        self.server.start()
        self._thread = threading.Thread(
            target=self.controller.run, args=(self._stop,), name="webhook-controller", daemon=True
        )
        self._thread.start()
        log.info(
            "webhook server on %s:%d serving %s",
            self.settings.bind_host,
            self.server.port,
            ", ".join(sorted(self.dispatcher.paths)),
        )

    def ready(self) -> bool:
        return self.controller.initialized.is_set()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.server is not None:
            self.server.close()
            self.server = None
        self.informer.stop()
        for handler in self.handlers:
            handler.close()


class _Lister:
    def __init__(self, informer: SharedInformer) -> None:
        self.informer = informer

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.informer.get(kind, name, namespace)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.informer.list(kind, namespace)
