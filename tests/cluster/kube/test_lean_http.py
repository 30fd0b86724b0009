"""The lean HTTP/1.1 client of the kube transport, against small local servers that answer as told."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from koord_framework.cluster.kube.errors import KubeApiError
from koord_framework.cluster.kube.http import ConnectionClosedError, LeanHttp
from koord_framework.cluster.kube.transport import Transport, iter_lines

Answer = Callable[[bytes, int], bytes | None]
"""(request head + body, index of the request on its connection) -> raw answer; None closes at once."""


class RawServer:
    """Accepts connections and answers each request with what ``answer`` returns."""

    def __init__(self, answer: Answer, context: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.context = context
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            if self.context is not None:
                try:
                    sock = self.context.wrap_socket(sock, server_side=True)
                except (ssl.SSLError, OSError):
                    sock.close()
                    continue
            self.connections += 1
            self._conns.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        index = 0
        try:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + (reader.read(length) if length else b"")
                self.requests.append(request)
                out = self.answer(request, index)
                index += 1
                if out is None:
                    return
                sock.sendall(out)
        except OSError:
            return
        finally:
            sock.close()

    def close_idle(self) -> None:
        """Close every connection from the server's side (what a keep-alive timeout does)."""
        for sock in self._conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._conns.clear()

    def stop(self) -> None:
        self.listener.close()
        self.close_idle()


def config(url: str, **extra: Any) -> SimpleNamespace:
    fields: dict[str, Any] = {
        "host": url,
        "proxy": None,
        "socket_options": None,
        "retries": None,
        "verify_ssl": False,
        "assert_hostname": None,
        "ssl_ca_cert": None,
        "ca_cert_data": None,
        "cert_file": None,
        "key_file": None,
        "tls_server_name": None,
    }
    fields.update(extra)
    return SimpleNamespace(**fields)


def ok(body: bytes, *headers: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@pytest.fixture
def server() -> Iterator[Callable[..., RawServer]]:
    made: list[RawServer] = []

    def make(answer: Answer, context: ssl.SSLContext | None = None) -> RawServer:
        made.append(RawServer(answer, context))
        return made[-1]

    yield make
    for s in made:
        s.stop()


def test_keeps_the_connection_and_sends_headers_and_body(server: Callable[..., RawServer]) -> None:
    srv = server(lambda req, i: ok(b'{"n":%d}' % i))
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}/prefix"))
    for i in range(3):
        status, data = http.request("POST", "/api/v1/x", {"Accept": "application/json"}, b'{"a":1}', 5.0)
        assert (status, json.loads(data)) == (200, {"n": i})
    assert srv.connections == 1 and http.opened == 1
    first = srv.requests[0]
    assert first.startswith(b"POST /prefix/api/v1/x HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{srv.port}\r\n".encode() in first
    assert b"Content-Length: 7\r\n" in first and first.endswith(b'\r\n\r\n{"a":1}')


def test_reads_chunked_answers_and_skips_interim_ones(server: Callable[..., RawServer]) -> None:
    def answer(req: bytes, i: int) -> bytes:
        return (
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'4;ext=1\r\n{"a"\r\n3\r\n:12\r\n1\r\n}\r\n0\r\nTrailer: x\r\n\r\n'
        )

    srv = server(answer)
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}"))
    assert http.request("GET", "/a", {}, None, 5.0) == (201, b'{"a":12}')
    assert http.request("GET", "/b", {}, None, 5.0) == (201, b'{"a":12}')
    assert srv.connections == 1
    assert b"Content-Length" not in srv.requests[0]  # a GET without a body says nothing of one


def test_connection_close_and_http10_are_not_reused(server: Callable[..., RawServer]) -> None:
    srv = server(lambda req, i: ok(b"{}", "Connection: close"))
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}"))
    http.request("GET", "/", {}, None, 5.0)
    http.request("GET", "/", {}, None, 5.0)
    assert http.opened == 2


def test_an_idle_connection_the_server_closed_is_replaced_once(server: Callable[..., RawServer]) -> None:
    srv = server(lambda req, i: ok(b"{}"))
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}"))
    http.request("GET", "/", {}, None, 5.0)
    srv.close_idle()
    assert http.request("POST", "/again", {}, b"{}", 5.0) == (200, b"{}")
    assert http.opened == 2
    assert [r.split(b" ")[1] for r in srv.requests] == [b"/", b"/again"]  # sent once on the new one


def test_a_fresh_connection_closed_without_answer_fails(server: Callable[..., RawServer]) -> None:
    srv = server(lambda req, i: None)
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}"))
    with pytest.raises(ConnectionClosedError):
        http.request("POST", "/", {}, b"{}", 5.0)
    assert len(srv.requests) == 1  # not sent twice: only a reused idle connection is retried


def test_a_short_answer_is_an_error(server: Callable[..., RawServer]) -> None:
    srv = server(lambda req, i: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}"))
    threading.Timer(0.2, srv.close_idle).start()
    with pytest.raises(ConnectionError):
        http.request("GET", "/", {}, None, 5.0)


def test_timeout_raises(server: Callable[..., RawServer]) -> None:
    srv = server(lambda req, i: b"")  # never answers
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}"))
    with pytest.raises(TimeoutError):
        http.request("GET", "/", {}, None, (1.0, 0.2))


def test_usable_only_without_proxy_socket_options_or_retries() -> None:
    assert LeanHttp.usable(config("https://h:6443"))
    assert not LeanHttp.usable(config("https://h:6443", proxy="http://proxy:3128"))
    assert not LeanHttp.usable(config("https://h:6443", socket_options=[]))
    assert not LeanHttp.usable(config("https://h:6443", retries=3))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    d = tmp_path_factory.mktemp("certs")
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem"),
            "-subj", "/CN=kube-apiserver", "-addext", "subjectAltName=DNS:kube-apiserver",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return d


def test_tls_verifies_the_server_against_the_ca_and_server_name(
    server: Callable[..., RawServer], certs: Path
) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs / "cert.pem", certs / "key.pem")
    srv = server(lambda req, i: ok(b"{}"), ctx)
    url = f"https://127.0.0.1:{srv.port}"
    ca = str(certs / "cert.pem")
    good = LeanHttp(config(url, verify_ssl=True, ssl_ca_cert=ca, tls_server_name="kube-apiserver"))
    assert good.request("GET", "/", {}, None, 5.0) == (200, b"{}")
    # The certificate does not name 127.0.0.1: without tls_server_name the check fails, as urllib3's does.
    with pytest.raises(ssl.SSLCertVerificationError):
        LeanHttp(config(url, verify_ssl=True, ssl_ca_cert=ca)).request("GET", "/", {}, None, 5.0)
    unchecked = LeanHttp(config(url, verify_ssl=True, ssl_ca_cert=ca, assert_hostname=False))
    assert unchecked.request("GET", "/", {}, None, 5.0) == (200, b"{}")
    insecure = LeanHttp(config(url, verify_ssl=False))
    assert insecure.request("GET", "/", {}, None, 5.0) == (200, b"{}")


def test_transport_sends_json_with_auth_and_maps_connection_errors(server: Callable[..., RawServer]) -> None:
    srv = server(lambda req, i: ok(b'{"kind":"Status"}'))
    cfg = config(f"http://127.0.0.1:{srv.port}")
    cfg.connection_pool_maxsize = 4
    calls = []

    def auth_settings() -> dict[str, Any]:
        calls.append(1)
        return {"BearerToken": {"in": "header", "key": "authorization", "value": "Bearer t0k"}}

    cfg.auth_settings = auth_settings
    transport = Transport(SimpleNamespace(configuration=cfg, rest_client=SimpleNamespace(close=lambda: None)))
    assert transport.lean is not None
    for _ in range(3):
        doc = transport.request("POST", "/api/v1/namespaces/d/pods/p/binding", "bind", body={"a": [1]})
        assert doc == {"kind": "Status"}
    request = srv.requests[0]
    assert b"Authorization: Bearer t0k\r\n" in request and b"Content-Type: application/json\r\n" in request
    assert request.endswith(b'{"a":[1]}')
    assert len(calls) == 1  # auth settings read once a second, not per request
    with socket.create_server(("127.0.0.1", 0)) as probe:
        free = probe.getsockname()[1]  # nothing listens there once closed
    transport.lean.close()
    transport.lean.port = free
    with pytest.raises(KubeApiError) as err:
        transport.request("GET", "/api/v1/pods", "list pods")
    assert err.value.status == 0 and err.value.reason == "ConnectionError"


def test_a_watch_stream_yields_chunks_as_they_come_and_stops_on_shutdown(
    server: Callable[..., RawServer],
) -> None:

    def answer(req: bytes, i: int) -> bytes | None:
        return (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'f\r\n{"type":"ADDED"\r\n'
            b"2\r\n}\n\r\n"
            b'12\r\n{"type":"DELETED"}\r\n'
            b"1\r\n\n\r\n"
        )

    srv = server(answer)
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}"))
    status, response = http.stream("GET", "/api/v1/pods?watch=true", {}, (5.0, 30.0))
    assert status == 200
    lines = iter_lines(response)
    assert json.loads(next(lines)) == {"type": "ADDED"}
    assert json.loads(next(lines)) == {"type": "DELETED"}
    # Nothing more arrives: another thread's shutdown ends the blocked read.
    threading.Timer(0.2, response.shutdown).start()
    with pytest.raises((OSError, StopIteration)):
        next(lines)
    response.close()


def test_a_stream_with_a_length_reads_to_its_end(server: Callable[..., RawServer]) -> None:
    srv = server(lambda req, i: b'HTTP/1.1 410 Gone\r\nContent-Length: 17\r\n\r\n{"reason":"Gone"}')
    http = LeanHttp(config(f"http://127.0.0.1:{srv.port}"))
    status, response = http.stream("GET", "/w", {}, 5.0)
    assert (status, response.read()) == (410, b'{"reason":"Gone"}')
    response.release_conn()
