"""The HTTPS server of koord-manager's webhooks (controller-runtime's webhook server).

A thread per connection (the API server keeps connections alive and sends requests on many at once); the TLS
handshake happens in that thread, not in the accepting one, so a slow client never holds up the others. The
serving certificate is read from ``cert_dir`` (``tls.crt`` / ``tls.key``) into a fresh ``SSLContext`` by
``reload()``: connections accepted afterwards use the new certificate (rotation without a restart).
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from koord_framework.manager.webhook.dispatch import Dispatcher, UnknownPath

__all__ = ["DEFAULT_CERT_DIR", "DEFAULT_PORT", "MAX_BODY", "WebhookServer"]

log = logging.getLogger("koord.manager.webhook")

DEFAULT_PORT = 9876
"""Koordinator's ``WEBHOOK_PORT`` default (the chart's ``manager.webhook.port``)."""
DEFAULT_CERT_DIR = "/tmp/koordinator-webhook-certs"
"""Koordinator's ``WEBHOOK_CERT_DIR`` default."""
MAX_BODY = 3 * 1024 * 1024 + 4096
"""An object is at most ~3 MiB (etcd's request limit); a bigger body is refused before it is read."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the API server reuses connections
    disable_nagle_algorithm = True  # answers are small and latency-bound
    server: _Server
    timeout = 60  # an idle kept-alive connection is closed after this long

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s: " + format, self.client_address[0], *args)

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.log_request(status)
        # Status line, headers and body in one write (one TLS record): in two, Nagle's algorithm and the
        # client's delayed ACK hold the body back ~40 ms.
        head = (
            f"{self.protocol_version} {status} {HTTPStatus(status).phrase}\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            f"Date: {self.date_time_string()}\r\n\r\n"
        )
        self.wfile.write(head.encode("latin-1") + body)

    def _text(self, status: int, message: str) -> None:
        self._send(status, (message + "\n").encode(), "text/plain; charset=utf-8")

    def do_GET(self) -> None:
        if self.path in ("/healthz", "/readyz"):
            self._text(200, "ok")
        else:
            self._text(
                404,
                f"no webhook at {self.path}; POST an AdmissionReview to one of "
                f"{', '.join(sorted(self.server.dispatcher.paths))}",
            )

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self._text(400, "Content-Length is not an integer")
            return
        if length > MAX_BODY:
            self.close_connection = True
            self._text(413, f"request body of {length} bytes is larger than {MAX_BODY}")
            return
        body = self.rfile.read(length) if length > 0 else b""
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        try:
            answer = self.server.dispatcher.answer(path, body, ctype)
        except UnknownPath:
            self._text(
                404, f"no webhook at {path}; served: {', '.join(sorted(self.server.dispatcher.paths))}"
            )
            return
        except Exception as exc:  # never a bare 500: say what failed
            log.exception("webhook %s failed", path)
            self._text(500, f"webhook {path} failed: {type(exc).__name__}: {exc}")
            return
        self._send(HTTPStatus.OK, answer)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # 200+ clients connecting at once must not be refused
    dispatcher: Dispatcher
    context: ssl.SSLContext | None

    tls: bool

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        context = self.context
        if self.tls and context is None:
            # No certificate loaded yet: never fall back to plain HTTP.
            log.debug("webhook: closing connection from %s: no serving certificate yet", client_address)
            self.shutdown_request(request)
            return
        try:
            if context is not None:
                request.settimeout(10.0)  # a client that never finishes its handshake
                request = context.wrap_socket(request, server_side=True)
                request.settimeout(None)
        except (OSError, ssl.SSLError) as exc:
            log.debug("webhook TLS handshake with %s failed: %s", client_address, exc)
            self.shutdown_request(request)
            return
        super().process_request_thread(request, client_address)


class WebhookServer:
    """Serves ``dispatcher`` over HTTPS on ``host:port`` with the certificate in ``cert_dir`` (loaded by
    ``reload()``; until then connections are closed). ``cert_dir=None`` serves plain HTTP (tests)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        cert_dir: Path | None,
    ) -> None:
        self.cert_dir = cert_dir
        self._server = _Server((host, port), _Handler, bind_and_activate=False)
        self._server.dispatcher = dispatcher
        self._server.context = None
        self._server.tls = cert_dir is not None
        self._thread: threading.Thread | None = None
        try:
            self._server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._server.server_bind()
            self._server.server_activate()
        except OSError as exc:
            self._server.server_close()
            raise OSError(
                exc.errno, f"webhook server cannot listen on {host}:{port}: {exc.strerror}"
            ) from exc

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def reload(self) -> None:
        """Load ``tls.crt`` / ``tls.key`` of ``cert_dir`` for the connections accepted from now on."""
        if self.cert_dir is None:
            return
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert_dir / "tls.crt", self.cert_dir / "tls.key")
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"webhook serving certificate in {self.cert_dir} cannot be loaded: {exc}"
            ) from exc
        self._server.context = context

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="webhook-server",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()
