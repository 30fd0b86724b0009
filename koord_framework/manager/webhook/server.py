"""The HTTPS server of koord-manager's webhooks (controller-runtime's webhook server).

A thread per connection (the API server keeps connections alive and sends requests on many at once); the TLS
handshake happens in that thread, not in the accepting one, so a slow client never holds up the others. The
serving certificate is read from ``cert_dir`` (``tls.crt`` / ``tls.key``) into a fresh ``SSLContext`` by
``reload()``: connections accepted afterwards use the new certificate (rotation without a restart).
"""

from __future__ import annotations

import email.utils
import logging
import socket
import socketserver
import ssl
import threading
import time
from http import HTTPStatus
from pathlib import Path
from typing import Any

from koord_framework.manager.webhook.dispatch import Dispatcher, UnknownPath

__all__ = ["DEFAULT_CERT_DIR", "DEFAULT_PORT", "MAX_BODY", "WebhookServer", "listen"]

log = logging.getLogger("koord.manager.webhook")

DEFAULT_PORT = 9876
"""Koordinator's ``WEBHOOK_PORT`` default (the chart's ``manager.webhook.port``)."""
DEFAULT_CERT_DIR = "/tmp/koordinator-webhook-certs"
"""Koordinator's ``WEBHOOK_CERT_DIR`` default."""
MAX_BODY = 3 * 1024 * 1024 + 4096
"""An object is at most ~3 MiB (etcd's request limit); a bigger body is refused before it is read."""


_PHRASES = {s.value: s.phrase for s in HTTPStatus}
_MAX_LINE = 65536
_MAX_HEADERS = 100


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Handler(socketserver.StreamRequestHandler):
    """HTTP/1.1 with keep-alive, just what an admission webhook needs: ``GET`` probes, ``POST`` reviews with
    a ``Content-Length`` or chunked body. Not ``http.server``'s handler: its header parsing (the ``email``
    package) and per-request bookkeeping cost as much CPU as the admission itself."""

    server: _Server
    timeout = 60  # an idle kept-alive connection is closed after this long
    disable_nagle_algorithm = True  # answers are small and latency-bound

    def _send(self, status: int, body: bytes, ctype: str = "application/json", close: bool = False) -> None:
        # Status line, headers and body in one write (one TLS record): in two, Nagle's algorithm and the
        # client's delayed ACK hold the body back ~40 ms.
        head = (
            f"HTTP/1.1 {status} {_PHRASES.get(status, '')}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\nDate: {_http_date()}\r\n"
            f"{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
        )
        self.wfile.write(head.encode("latin-1") + body)

    def _text(self, status: int, message: str, close: bool = False) -> None:
        self._send(status, (message + "\n").encode(), "text/plain; charset=utf-8", close)

    def _line(self) -> bytes:
        line = self.rfile.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise _BadRequest(431, "request line or header longer than 65536 bytes")
        return line

    def _body(self, headers: dict[bytes, bytes]) -> bytes:
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            chunks: list[bytes] = []
            size = 0
            while True:
                try:
                    n = int(self._line().split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise _BadRequest(400, "malformed chunk size") from None
                if n == 0:
                    while self._line() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return b"".join(chunks)
                size += n
                if size > MAX_BODY:
                    raise _BadRequest(413, f"request body larger than {MAX_BODY} bytes")
                chunks.append(self.rfile.read(n))
                self._line()
        raw = headers.get(b"content-length", b"0")
        try:
            length = int(raw)
        except ValueError:
            raise _BadRequest(400, "Content-Length is not an integer") from None
        if length > MAX_BODY:
            raise _BadRequest(413, f"request body of {length} bytes is larger than {MAX_BODY}")
        return self.rfile.read(length) if length > 0 else b""

    def handle(self) -> None:
        try:
            while self._one():
                pass
        except (OSError, ssl.SSLError) as exc:  # the client went away, or an idle timeout
            log.debug("webhook connection from %s ended: %s", self.client_address[0], exc)

    def _one(self) -> bool:
        """Serve one request; whether the connection stays open."""
        try:
            line = self._line()
            while line in (b"\r\n", b"\n"):  # RFC 9112 2.2: ignore empty lines before a request
                line = self._line()
            if not line:
                return False
            parts = line.split()
            if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
                raise _BadRequest(400, f"malformed request line {line[:80]!r}")
            method, target, version = parts
            headers: dict[bytes, bytes] = {}
            while True:
                h = self._line()
                if h in (b"\r\n", b"\n", b""):
                    break
                if len(headers) >= _MAX_HEADERS:
                    raise _BadRequest(431, f"more than {_MAX_HEADERS} headers")
                name, sep, value = h.partition(b":")
                if not sep:
                    raise _BadRequest(400, f"malformed header {h[:80]!r}")
                headers[name.strip().lower()] = value.strip()
            connection = headers.get(b"connection", b"").lower()
            keep = connection != b"close" if version == b"HTTP/1.1" else connection == b"keep-alive"
            if headers.get(b"expect", b"").lower() == b"100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            path = target.decode("latin-1").split("?", 1)[0]
            if method == b"GET":
                self._get(path, keep)
                return keep
            if method != b"POST":
                raise _BadRequest(405, f"method {method.decode('latin-1')} is not allowed: GET or POST")
            body = self._body(headers)
            ctype = headers.get(b"content-type", b"application/json").decode("latin-1")
            self._post(path, body, ctype.split(";")[0].strip(), keep)
            return keep
        except _BadRequest as exc:
            # The rest of the stream cannot be trusted: answer and close.
            self._text(exc.status, str(exc), close=True)
            return False

    def _get(self, path: str, keep: bool) -> None:
        if path in ("/healthz", "/readyz"):
            self._text(200, "ok", not keep)
        else:
            self._text(
                404,
                f"no webhook at {path}; POST an AdmissionReview to one of "
                f"{', '.join(sorted(self.server.dispatcher.paths))}",
                not keep,
            )

    def _post(self, path: str, body: bytes, ctype: str, keep: bool) -> None:
        try:
            answer = self.server.dispatcher.answer(path, body, ctype)
        except UnknownPath:
            self._text(
                404,
                f"no webhook at {path}; served: {', '.join(sorted(self.server.dispatcher.paths))}",
                not keep,
            )
            return
        except Exception as exc:  # never a bare 500: say what failed
            log.exception("webhook %s failed", path)
            self._text(500, f"webhook {path} failed: {type(exc).__name__}: {exc}", not keep)
            return
        self._send(200, answer, close=not keep)


_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The ``Date`` header, formatted once a second (not once a request)."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
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


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``OSError`` naming both when it cannot be had)."""
    try:
        return socket.create_server((host, port), backlog=_Server.request_queue_size)
    except OSError as exc:
        raise OSError(exc.errno, f"webhook server cannot listen on {host}:{port}: {exc.strerror}") from exc


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
        sock: socket.socket | None = None,
    ) -> None:
        """``sock``: an already listening socket to accept on (a webhook worker's share of the port)."""
        self.cert_dir = cert_dir
        self._server = _Server((host, port), _Handler, bind_and_activate=False)
        self._server.dispatcher = dispatcher
        self._server.context = None
        self._server.tls = cert_dir is not None
        self._thread: threading.Thread | None = None
        self._server.socket.close()
        self._server.socket = sock if sock is not None else listen(host, port)
        self._server.server_address = self._server.socket.getsockname()

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
