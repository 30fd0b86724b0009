"""A lean HTTP/1.1 keep-alive client for the API server's short requests (docs/adr/0006).

The ``kubernetes`` client's ``RESTClientObject`` sends each request through urllib3's ``PoolManager``: per
request it parses the URL, looks the pool up by a normalised key, builds header dicts twice, checks the
proxy environment, wraps the response and parses its headers with the ``email`` package. Measured on a
real API server that is about 1 ms of CPU per bind, more than the scheduling cycle itself. This module
keeps a small stack of ``http.client`` connections to the one API server and does only what a request
needs: one ``send`` of headers and body, read the status, headers and the whole body.

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

import http.client
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LeanHttp"]

Timeout = float | tuple[float, float] | None

# Raised by a send or by reading the status line when the server had closed an idle kept-alive connection.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Connection(http.client.HTTPSConnection):
    """HTTPS with the SNI / checked host name of ``tls_server_name`` when the kubeconfig sets one."""

    def __init__(self, host: str, port: int, *, context: ssl.SSLContext, server_hostname: str | None) -> None:
        super().__init__(host, port, context=context)
        self._ctx = context
        self._server_hostname = server_hostname or host

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._ctx.wrap_socket(self.sock, server_hostname=self._server_hostname)


class LeanHttp:
    """Thread-safe; keeps up to ``max_idle`` idle connections (more are opened when needed, then closed)."""

    def __init__(self, configuration: Any, *, max_idle: int = 64) -> None:
        url = urlsplit(str(configuration.host))
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")
        """A path the server URL carries (``https://host/k8s``): requests go below it."""
        self.max_idle = max_idle
        self._context = _ssl_context(configuration) if self.https else None
        self._server_hostname = str(configuration.tls_server_name or "") or None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.opened = 0
        """Connections opened so far (a test reads it to see that connections are reused)."""

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

    def _new(self) -> http.client.HTTPConnection:
        self.opened += 1
        if self._context is not None:
            return _Connection(
                self.host, self.port, context=self._context, server_hostname=self._server_hostname
            )
        return http.client.HTTPConnection(self.host, self.port)

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(), False

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None, timeout: Timeout
    ) -> tuple[int, bytes]:
        """Send one request and read its whole answer; ``(status, body)``. Connection failures raise
        ``OSError`` or ``http.client.HTTPException``."""
        connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        conn, reused = self._take()
        while True:
            try:
                if conn.sock is None:
                    conn.timeout = connect_timeout
                    conn.connect()
                assert conn.sock is not None
                conn.sock.settimeout(read_timeout)
                conn.request(method, self.prefix + path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except _STALE:
                conn.close()
                if not reused:
                    raise
                conn, reused = self._new(), False  # the server closed it while idle: once more, fresh
                continue
            except BaseException:
                conn.close()
                raise
            if response.will_close:
                conn.close()
            else:
                self._give_back(conn)
            return response.status, data

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


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
