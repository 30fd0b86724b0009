"""``/healthz``, ``/readyz`` and ``/metrics`` over HTTP, shared by every long-running command.

``koord scheduler``, ``koord descheduler`` and ``koord koordlet`` each answer the kubelet's probes and
Prometheus' scrapes from one small server in a daemon thread, so the probes keep answering while the
component's own loop is busy. ``/metrics`` renders the registry the component was built with, never
``prometheus_client``'s global one: several components (or tests) in one process must not see each
other's series.
"""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from koord_framework.errors import KoordError

__all__ = ["HealthServer", "parse_address"]


def parse_address(address: str, flag: str = "--address") -> tuple[str, int]:
    """``HOST:PORT`` (or Go's ``:PORT``, meaning every interface) as a bindable pair; ``flag`` names the
    option in the error."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise KoordError(f"{flag} {address!r}: expected HOST:PORT")
    return host or "0.0.0.0", int(port)


class _Server(ThreadingHTTPServer):
    def server_bind(self) -> None:
        # http.server's also resolves the address back to a name (socket.getfqdn: a reverse DNS query,
        # which can take seconds where DNS does not answer, and imports the idna codec at start-up). Only
        # CGI and WSGI servers read that name; this one never does.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class HealthServer:
    """``/healthz`` (also ``/livez``), ``/readyz`` and ``/metrics`` over HTTP in a daemon thread.

    ``healthy`` and ``ready`` are called per request, so they see the component's state of the moment;
    a failing probe's body is ``unhealthy`` / ``not ready``, followed by ``reason()`` when that says why.
    ``/metrics`` renders ``registry``. Port 0 picks a free port (``port`` tells which). ``flag`` names the
    command-line option the address came from, for the error when it is malformed or cannot be bound.
    """

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        *,
        healthy: Callable[[], bool] = lambda: True,
        ready: Callable[[], bool] = lambda: True,
        flag: str = "--address",
        reason: Callable[[], str] = lambda: "",
    ) -> None:
        host, port = parse_address(address, flag)
        self.registry = registry
        self.healthy = healthy
        self.ready = ready
        self.reason = reason
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, generate_latest(server.registry), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez"):
                    ok = server.healthy()
                    self._answer(200 if ok else 500, b"ok" if ok else self._why(b"unhealthy"), "text/plain")
                elif path == "/readyz":
                    ok = server.ready()
                    self._answer(200 if ok else 503, b"ok" if ok else self._why(b"not ready"), "text/plain")
                else:
                    self._answer(404, b"not found", "text/plain")

            def _why(self, what: bytes) -> bytes:
                detail = server.reason()
                return what + b": " + detail.encode() if detail else what

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: no access log
                pass

        try:
            self._server = _Server((host, port), Handler)
        except OSError as err:
            raise KoordError(f"{flag} {address}: {err.strerror or err}") from err
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port. Safe whether or not ``start`` was called."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
