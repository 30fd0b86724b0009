"""koord-manager's webhook server: AdmissionReview parsing, failure semantics, JSONPatch, TLS, concurrency."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from koord_framework.manager.webhook import certs
from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.manager.webhook.jsonpatch import create_patch
from koord_framework.manager.webhook.server import WebhookServer
from koord_framework.plugin import NoArgs


class AddLabel(AdmissionHandler[NoArgs]):
    name = "AddLabel"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-pod"
    mutating: ClassVar[bool] = True
    resources: ClassVar[tuple[str, ...]] = ("pods",)

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        obj.setdefault("metadata", {}).setdefault("labels", {})["added"] = "yes"


class Boom(AdmissionHandler[NoArgs]):
    name = "Boom"
    Args = NoArgs
    path: ClassVar[str] = "/validate-pod"
    resources: ClassVar[tuple[str, ...]] = ("pods",)

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if obj.get("metadata", {}).get("name") == "boom":
            raise KeyError("lost")
        if obj.get("metadata", {}).get("name") == "deny":
            raise Denied("pods named deny are refused")


class BoomIgnored(Boom):
    name = "BoomIgnored"
    path: ClassVar[str] = "/validate-ignored"
    failure_policy = "Ignore"


def review(obj: dict[str, Any] | None, op: str = "CREATE", resource: str = "pods", **extra: Any) -> bytes:
    request: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": resource},
        "namespace": "ns",
        "operation": op,
        **extra,
    }
    if obj is not None:
        request["object"] = obj
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def answer(d: Dispatcher, path: str, body: bytes) -> dict[str, Any]:
    out = json.loads(d.answer(path, body))
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    return dict(out["response"])


@pytest.fixture
def dispatcher() -> Dispatcher:
    return Dispatcher([AddLabel(), Boom(), BoomIgnored()])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "request body is empty"),
        (b"{not json", "request body is not JSON"),
        (b"[]", "AdmissionReview: expected an object"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "has no request",
        ),
        (
            json.dumps({"kind": "AdmissionReview", "request": {"uid": "x", "operation": "EAT"}}).encode(),
            "EAT",
        ),
        (json.dumps({"kind": "AdmissionReview", "request": {"operation": "CREATE"}}).encode(), "uid"),
        (json.dumps({"apiVersion": "v9", "request": {}}).encode(), "apiVersion"),
    ],
)
def test_bad_reviews_are_denied_with_a_message(dispatcher: Dispatcher, body: bytes, message: str) -> None:
    response = answer(dispatcher, "/mutate-pod", body)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert message in response["status"]["message"]


def test_a_non_json_content_type_is_refused(dispatcher: Dispatcher) -> None:
    response = json.loads(dispatcher.answer("/mutate-pod", review({}), "text/plain"))["response"]
    assert response["status"]["code"] == 400 and "expected application/json" in response["status"]["message"]


def test_mutation_answers_a_json_patch(dispatcher: Dispatcher) -> None:
    response = answer(dispatcher, "/mutate-pod", review({"metadata": {"name": "p", "namespace": "ns"}}))
    assert response["allowed"] is True and response["uid"] == "u-1"
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch == [{"op": "add", "path": "/metadata/labels", "value": {"added": "yes"}}]


def test_the_request_namespace_is_seen_but_not_patched(dispatcher: Dispatcher) -> None:
    response = answer(dispatcher, "/mutate-pod", review({"metadata": {"name": "p"}}))
    patch = json.loads(base64.b64decode(response["patch"]))
    assert all("namespace" not in op["path"] for op in patch)


def test_other_resources_and_subresources_are_allowed_untouched(dispatcher: Dispatcher) -> None:
    assert answer(dispatcher, "/mutate-pod", review({}, resource="nodes")) == {"uid": "u-1", "allowed": True}
    response = answer(dispatcher, "/mutate-pod", review({}, subResource="status"))
    assert response == {"uid": "u-1", "allowed": True}


def test_a_request_without_object_is_a_bad_request(dispatcher: Dispatcher) -> None:
    response = answer(dispatcher, "/mutate-pod", review(None))
    assert response["allowed"] is False and response["status"]["code"] == 400


def test_a_denial_carries_its_reason(dispatcher: Dispatcher) -> None:
    response = answer(dispatcher, "/validate-pod", review({"metadata": {"name": "deny"}}))
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 403,
        "message": "pods named deny are refused",
        "reason": "Forbidden",
    }


def test_a_raising_handler_fails_closed_with_the_reason(dispatcher: Dispatcher) -> None:
    response = answer(dispatcher, "/validate-pod", review({"metadata": {"name": "boom"}}))
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert "Boom" in response["status"]["message"] and "KeyError" in response["status"]["message"]


def test_a_raising_ignore_handler_allows_with_a_warning(dispatcher: Dispatcher) -> None:
    response = answer(dispatcher, "/validate-ignored", review({"metadata": {"name": "boom"}}))
    assert response["allowed"] is True
    assert "KeyError" in response["warnings"][0]


def test_handlers_of_one_path_must_agree_on_mutating() -> None:
    class Validating(Boom):
        name = "V"
        path: ClassVar[str] = "/mutate-pod"

    with pytest.raises(ValueError, match="share /mutate-pod"):
        Dispatcher([AddLabel(), Validating()])


@pytest.mark.parametrize(
    ("a", "b", "ops"),
    [
        ({"a": 1}, {"a": 1}, []),
        ({"a": 1}, {"a": 2}, [{"op": "replace", "path": "/a", "value": 2}]),
        ({"a": 1}, {}, [{"op": "remove", "path": "/a"}]),
        ({"x/y": {"~": 1}}, {"x/y": {"~": 2}}, [{"op": "replace", "path": "/x~1y/~0", "value": 2}]),
        ({"l": [1, 2]}, {"l": [1, 3]}, [{"op": "replace", "path": "/l/1", "value": 3}]),
        ({"l": [1]}, {"l": [1, 2]}, [{"op": "replace", "path": "/l", "value": [1, 2]}]),
        ({"a": 1}, {"a": True}, [{"op": "replace", "path": "/a", "value": True}]),
    ],
)
def test_json_patch(a: Any, b: Any, ops: list[dict[str, Any]]) -> None:
    assert create_patch(a, b) == ops


def _apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A minimal RFC 6902 applier (add/remove/replace) to check the patches round-trip."""
    doc = json.loads(json.dumps(doc))
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if not parts:
            doc = op["value"]
            continue
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last: Any = int(parts[-1]) if isinstance(parent, list) else parts[-1]
        if op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
    return doc


def test_json_patch_round_trips_on_random_documents() -> None:
    import random

    rnd = random.Random(7)

    def value(depth: int) -> Any:
        kind = rnd.randrange(5 if depth < 3 else 3)
        if kind == 0:
            return rnd.randrange(3)
        if kind == 1:
            return rnd.choice(["a", "b", "c/d", "e~f"])
        if kind == 2:
            return rnd.choice([True, False, None])
        if kind == 3:
            return [value(depth + 1) for _ in range(rnd.randrange(3))]
        return {rnd.choice(["k", "l", "m/n", "o~"]): value(depth + 1) for _ in range(rnd.randrange(4))}

    for _ in range(300):
        a, b = {"root": value(0)}, {"root": value(0)}
        assert _apply(a, create_patch(a, b)) == b


# --- over TLS -----------------------------------------------------------------------------------------------


@pytest.fixture
def tls_server(tmp_path: Path, dispatcher: Dispatcher) -> Iterator[tuple[WebhookServer, bytes]]:
    artifacts = certs.generate("127.0.0.1")
    certs.write_dir(tmp_path, artifacts)
    server = WebhookServer(dispatcher, host="127.0.0.1", port=0, cert_dir=tmp_path)
    server.reload()
    server.start()
    try:
        yield server, artifacts.ca_cert
    finally:
        server.close()


def _connect(port: int, ca: bytes) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection(
        "127.0.0.1", port, context=ssl.create_default_context(cadata=ca.decode())
    )


def test_tls_round_trip_and_unknown_paths(tls_server: tuple[WebhookServer, bytes]) -> None:
    server, ca = tls_server
    conn = _connect(server.port, ca)
    conn.request(
        "POST", "/mutate-pod", review({"metadata": {"name": "p"}}), {"Content-Type": "application/json"}
    )
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["response"]["allowed"] is True
    conn.request("POST", "/nowhere", b"{}", {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 404 and b"/mutate-pod" in resp.read()
    conn.request("GET", "/healthz")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.read() == b"ok\n"


def test_a_client_not_trusting_the_ca_is_refused(tls_server: tuple[WebhookServer, bytes]) -> None:
    server, _ = tls_server
    other = certs.generate("127.0.0.1").ca_cert
    with pytest.raises(ssl.SSLError):
        _connect(server.port, other).request("GET", "/healthz")


def test_no_plain_http_before_a_certificate_is_loaded(tmp_path: Path, dispatcher: Dispatcher) -> None:
    server = WebhookServer(dispatcher, host="127.0.0.1", port=0, cert_dir=tmp_path)
    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            conn.request("GET", "/healthz")
            conn.getresponse()
    finally:
        server.close()


def test_200_concurrent_requests_are_all_answered(tls_server: tuple[WebhookServer, bytes]) -> None:
    server, ca = tls_server
    results: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(200)

    def one(i: int) -> None:
        conn = _connect(server.port, ca)
        conn.connect()
        barrier.wait(timeout=60)
        conn.request(
            "POST",
            "/mutate-pod",
            review({"metadata": {"name": f"p{i}"}}),
            {"Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        ok = resp.status == 200 and json.loads(resp.read())["response"]["allowed"] is True
        conn.close()
        with lock:
            results.append(ok)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 200 and all(results)


def test_the_port_in_use_is_named(dispatcher: Dispatcher, tmp_path: Path) -> None:
    first = WebhookServer(dispatcher, host="127.0.0.1", port=0, cert_dir=tmp_path)
    try:
        with pytest.raises(OSError, match=f"127.0.0.1:{first.port}"):
            WebhookServer(dispatcher, host="127.0.0.1", port=first.port, cert_dir=tmp_path)
    finally:
        first.close()
