"""A lean HTTP/1.1 keep-alive client for the API server's short requests (docs/adr/0006).

The ``kubernetes`` client's ``RESTClientObject`` sends each request through urllib3's ``PoolManager``: per
request it parses the URL, looks the pool up by a normalised key, builds header dicts twice, checks the
proxy environment, wraps the response and parses its headers with the ``email`` package. Measured on a
real API server that is about 1 ms of CPU per bind, more than the scheduling cycle itself. This module
keeps a small stack of kept-alive connections (sockets, TLS from ``ssl``) to the one API server and does
only what a request needs: one ``send`` of request line, headers and body; read the status line, the
three headers that delimit the answer (``Content-Length``, ``Transfer-Encoding: chunked``, ``Connection``)
and the whole body. ``http.client`` would parse every header with the ``email`` package, a quarter of
what is left of a bind's CPU in Python after urllib3 is gone.

What it honours from the client's ``Configuration``, as urllib3 would: the server's certificate is verified
against ``ssl_ca_cert`` / ``ca_cert_data`` (or the system's CAs) unless ``verify_ssl`` is false; the host
name is checked unless ``assert_hostname`` is false; ``tls_server_name`` is the SNI and checked name; a
client certificate (``cert_file`` / ``key_file``) is presented. ``LeanHttp.usable`` says when a
configuration needs what this client does not do (a proxy, socket options, a custom retry policy): the
transport then keeps urllib3.

A request that fails on a connection taken from the pool before any byte of the answer arrived (the server
closed the idle connection: keep-alive timeout, restart) is sent once more on a fresh connection, as
urllib3 does; any other failure is the caller's.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ConnectionClosedError", "HttpProtocolError", "LeanHttp", "StreamedResponse"]

Timeout = float | tuple[float, float] | None

_MAX_LINE = 65536
_MAX_HEADERS = 200


class ConnectionClosedError(ConnectionError):
    """The server closed the connection before answering (an idle kept-alive connection it dropped)."""


class HttpProtocolError(ConnectionError):
    """An answer that is not HTTP/1.x as this client reads it."""


# Failures that mean "the server had closed this idle connection", when nothing of the answer arrived yet.
_STALE = (
    ConnectionClosedError,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


class _Connection:
    """One socket with a buffered reader over it."""

    __slots__ = ("reader", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()


def _ascii(name: str) -> str | bytes:
    return name.encode("ascii") if name.isascii() else name


class LeanHttp:
    """Thread-safe; keeps up to ``max_idle`` idle connections (more are opened when needed, then closed)."""

    def __init__(self, configuration: Any, *, max_idle: int = 64) -> None:
        url = urlsplit(str(configuration.host))
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")
        """A path the server URL carries (``https://host/k8s``): requests go below it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = 443 if self.https else 80
        self._host_header = host if self.port == default_port else f"{host}:{self.port}"
        self.max_idle = max_idle
        self._context = _ssl_context(configuration) if self.https else None
        self._server_hostname = str(configuration.tls_server_name or "") or self.host
        # An ASCII name goes to getaddrinfo and the TLS layer as bytes: given a str, both encode it with the
        # "idna" codec, whose first use imports stringprep and unicodedata (~20 ms of start-up, issue 22).
        # Both take bytes as they are; a non-ASCII name still needs the codec, so it stays a str.
        self._address: str | bytes = _ascii(self.host)
        self._sni: str | bytes = _ascii(self._server_hostname)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self.opened = 0
        """Connections opened so far (tests read it to see that connections are reused)."""

    @staticmethod
    def usable(configuration: Any) -> bool:
        """Whether this client can stand in for urllib3 with ``configuration`` (else keep urllib3)."""
        scheme = urlsplit(str(configuration.host)).scheme
        return (
            scheme in ("http", "https")
            and not configuration.proxy
            and configuration.socket_options is None
            and not getattr(configuration, "keep_alive", False)
            and configuration.retries is None
        )

    # --- connections ---------------------------------------------------------------------------------
    def _connect(self, timeout: float | None) -> _Connection:
        # typeshed says str; getaddrinfo takes bytes as well (see __init__)
        sock = socket.create_connection((self._address, self.port), timeout)  # type: ignore[arg-type]
        try:
            # One send per request, but the answer to a small one must not wait for a delayed ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=self._sni)
        except BaseException:
            sock.close()
            raise
        with self._lock:
            self.opened += 1
        return _Connection(sock)

    def _take(self) -> _Connection | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # --- requests ------------------------------------------------------------------------------------
    def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None, timeout: Timeout
    ) -> tuple[int, bytes]:
        """Send one request and read its whole answer; ``(status, body)``. Failures raise ``OSError``
        (``ConnectionError`` for a closed connection or an unreadable answer, ``TimeoutError``)."""
        connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        payload = self._payload(method, path, headers, body)
        conn = self._take()
        reused = conn is not None
        while True:
            if conn is None:
                conn = self._connect(connect_timeout)
            answered = False
            try:
                conn.sock.settimeout(read_timeout)
                conn.sock.sendall(payload)
                status, fields = self._read_head(conn, method)
                answered = True
                data, keep = self._read_body(conn, method, status, fields)
            except _STALE:
                conn.close()
                if answered or not reused:
                    raise
                conn, reused = None, False  # the server closed it while idle: once more, fresh
                continue
            except BaseException:
                conn.close()
                raise
            if keep:
                self._give_back(conn)
            else:
                conn.close()
            return status, data

    def _payload(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> bytes:
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self._host_header}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    def stream(
        self, method: str, path: str, headers: dict[str, str], timeout: Timeout
    ) -> tuple[int, StreamedResponse]:
        """Send a request whose answer is read as it arrives (a watch), on a connection of its own."""
        connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        conn = self._connect(connect_timeout)
        try:
            conn.sock.settimeout(read_timeout)
            conn.sock.sendall(self._payload(method, path, headers, None))
            status, fields = self._read_head(conn, method)
        except BaseException:
            conn.close()
            raise
        return status, StreamedResponse(self, conn, fields)

    @staticmethod
    def _read_line(conn: _Connection) -> bytes:
        line = conn.reader.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise HttpProtocolError("header line too long")
        return line

    def _read_head(self, conn: _Connection, method: str) -> tuple[int, dict[str, str]]:
        """The status and the headers this client acts on (lower-case names)."""
        while True:
            line = self._read_line(conn)
            if not line:
                raise ConnectionClosedError("the server closed the connection without an answer")
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
                raise HttpProtocolError(f"bad status line {line[:80]!r}")
            try:
                status = int(parts[1])
            except ValueError as err:
                raise HttpProtocolError(f"bad status line {line[:80]!r}") from err
            fields: dict[str, str] = {"version": parts[0].decode("latin-1")}
            for _ in range(_MAX_HEADERS):
                line = self._read_line(conn)
                if line in (b"\r\n", b"\n", b""):
                    break
                name, sep, value = line.partition(b":")
                if not sep:
                    continue
                key = name.strip().lower().decode("latin-1")
                if key in ("content-length", "transfer-encoding", "connection"):
                    fields[key] = value.strip().decode("latin-1")
            else:
                raise HttpProtocolError("too many headers")
            if 100 <= status < 200 and status != 101:
                continue  # an interim answer (100 Continue): the real one follows
            return status, fields

    def _read_body(
        self, conn: _Connection, method: str, status: int, fields: dict[str, str]
    ) -> tuple[bytes, bool]:
        """The body, and whether the connection may be used again."""
        connection = fields.get("connection", "").lower()
        keep = "close" not in connection and (fields["version"] != "HTTP/1.0" or "keep-alive" in connection)
        if method == "HEAD" or status in (204, 304):
            return b"", keep
        if "chunked" in fields.get("transfer-encoding", "").lower():
            return self._read_chunked(conn), keep
        length = fields.get("content-length")
        if length is None:
            return conn.reader.read(), False  # delimited by the end of the connection
        try:
            size = int(length)
        except ValueError as err:
            raise HttpProtocolError(f"bad Content-Length {length!r}") from err
        data = conn.reader.read(size)
        if len(data) != size:
            raise ConnectionClosedError(f"answer cut short: {len(data)} of {size} bytes")
        return data, keep

    def _read_chunked(self, conn: _Connection) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self._read_line(conn)
            if not line:
                raise ConnectionClosedError("answer cut short inside a chunk header")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as err:
                raise HttpProtocolError(f"bad chunk size {line[:40]!r}") from err
            if size == 0:
                while self._read_line(conn) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            chunk = conn.reader.read(size)
            if len(chunk) != size:
                raise ConnectionClosedError("answer cut short inside a chunk")
            parts.append(chunk)
            conn.reader.readline(_MAX_LINE)  # the CRLF after the chunk


class StreamedResponse:
    """An answer read piece by piece: what the watch loop needs of urllib3's response, no more."""

    def __init__(self, client: LeanHttp, conn: _Connection, fields: dict[str, str]) -> None:
        self._client = client
        self._conn = conn
        self._chunked = "chunked" in fields.get("transfer-encoding", "").lower()
        length = fields.get("content-length")
        self._left = int(length) if length is not None and length.isdigit() else -1
        self._done = False

    def stream(self, amt: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        """The body's bytes as they arrive (each chunk of a chunked answer as one piece)."""
        reader = self._conn.reader
        while not self._done:
            if self._chunked:
                line = reader.readline(_MAX_LINE)
                if not line:
                    raise ConnectionClosedError("watch stream cut short inside a chunk header")
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError as err:
                    raise HttpProtocolError(f"bad chunk size {line[:40]!r}") from err
                if size == 0:
                    while reader.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                        pass
                    self._done = True
                    return
                data = reader.read(size)
                if len(data) != size:
                    raise ConnectionClosedError("watch stream cut short inside a chunk")
                reader.readline(_MAX_LINE)
                yield data
            else:
                want = amt if self._left < 0 else min(amt, self._left)
                data = reader.read1(want) if want else b""
                if not data:
                    if self._left > 0:
                        raise ConnectionClosedError("answer cut short")
                    self._done = True
                    return
                if self._left > 0:
                    self._left -= len(data)
                yield data

    def read(self) -> bytes:
        return b"".join(self.stream())

    def shutdown(self) -> None:
        """Unblock a thread reading the stream (the connection is not used again)."""
        with contextlib.suppress(OSError):
            self._conn.sock.shutdown(socket.SHUT_RDWR)

    def release_conn(self) -> None:
        self.close()

    def close(self) -> None:
        self._done = True
        self._conn.close()


def _ssl_context(configuration: Any) -> ssl.SSLContext:
    """The TLS settings urllib3 would apply for the client's ``Configuration``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if configuration.verify_ssl:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.check_hostname = configuration.assert_hostname is not False
        cafile = configuration.ssl_ca_cert or None
        cadata = getattr(configuration, "ca_cert_data", None) or None
        if cafile or cadata:
            ctx.load_verify_locations(cafile=cafile, cadata=cadata)
        else:
            ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        ctx.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    # Only HTTP/1.1 here: the API server would otherwise pick HTTP/2, which http.client does not speak.
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
