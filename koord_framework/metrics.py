"""Metrics: every component owns a prometheus ``CollectorRegistry`` (never the global one).

Owning the registry keeps two schedulers in one test process from colliding and lets a test assert on exactly
the series one component emitted.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import MetricsHandler


def new_registry() -> CollectorRegistry:
    return CollectorRegistry(auto_describe=True)


def render(registry: CollectorRegistry) -> str:
    """The registry in the Prometheus text format (what ``/metrics`` serves)."""
    return generate_latest(registry).decode()


class MetricsServer:
    """``/metrics`` over HTTP for one registry, on a daemon thread. ``address`` is ``host:port``."""

    def __init__(self, registry: CollectorRegistry, address: str) -> None:
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"metrics address {address!r} is not host:port")
        handler = MetricsHandler.factory(registry)
        self._server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
