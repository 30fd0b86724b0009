"""API statuses become the port's errors."""

from __future__ import annotations

import json

from koord_framework.cluster.kube.errors import (
    ExpiredError,
    KubeApiError,
    error_for_status,
    from_api_exception,
)
from koord_framework.errors import ClusterError, ConflictError, NotFoundError, TooManyRequestsError


def status_body(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "code": code, "reason": reason, "message": message}).encode()


def test_mapping() -> None:
    err = error_for_status(404, status_body(404, "NotFound", 'pods "x" not found'), "get pods ns/x")
    assert isinstance(err, NotFoundError) and str(err) == 'get pods ns/x: pods "x" not found'
    assert isinstance(
        error_for_status(409, status_body(409, "Conflict", "already assigned"), "bind"), ConflictError
    )
    assert isinstance(error_for_status(410, status_body(410, "Expired", "too old"), "watch"), ExpiredError)
    refused = error_for_status(
        429, status_body(429, "TooManyRequests", "violate the pod's disruption budget"), "evict"
    )
    assert isinstance(refused, TooManyRequestsError) and "disruption budget" in str(refused)


def test_other_statuses_keep_code_and_reason() -> None:
    err = error_for_status(422, status_body(422, "Invalid", "spec.x: Invalid value"), "create pods ns/p")
    assert isinstance(err, KubeApiError) and isinstance(err, ClusterError)
    assert (err.status, err.reason) == (422, "Invalid")
    assert str(err) == "create pods ns/p: spec.x: Invalid value (HTTP 422)"
    plain = error_for_status(502, b"bad gateway", "get nodes")
    assert str(plain) == "get nodes: bad gateway (HTTP 502)"


def test_api_exception_duck_typed() -> None:
    class FakeApiException(Exception):
        def __init__(self, status: int, body: bytes | None, reason: str) -> None:
            self.status, self.body, self.reason = status, body, reason

    assert isinstance(
        from_api_exception(FakeApiException(404, status_body(404, "NotFound", "gone"), "Not Found"), "get"),
        NotFoundError,
    )
    conn = from_api_exception(FakeApiException(0, None, "Connection refused"), "get nodes")
    assert isinstance(conn, KubeApiError) and "Connection refused" in str(conn)
