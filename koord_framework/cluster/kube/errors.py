"""HTTP statuses and client exceptions from the API server, as the cluster port's errors.

Callers above the port never see ``kubernetes.client.ApiException``: a 404 is ``NotFoundError``, a 409
(already exists, stale resourceVersion, pod already bound, uid precondition) is ``ConflictError``, a 429
(eviction refused by a PodDisruptionBudget, or API priority-and-fairness throttling) is
``TooManyRequestsError``. Everything else is ``KubeApiError``, which keeps the status and the server's
``reason`` so that logs say what the API server said.
"""

from __future__ import annotations

import json
from typing import Any

from koord_framework.errors import ClusterError, ConflictError, NotFoundError, TooManyRequestsError

__all__ = [
    "ExpiredError",
    "KubeApiError",
    "error_for_status",
    "from_api_exception",
    "status_message",
]


class KubeApiError(ClusterError):
    """An API error the port has no dedicated class for (400, 403, 422, 500, ...)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status, self.reason = status, reason
        super().__init__(message)


class ExpiredError(ClusterError):
    """HTTP 410 Gone: the resourceVersion (or continue token) is older than etcd keeps; list again.

    Only the watch machinery sees it: it relists and carries on, so it never leaves the adapter.
    """


def status_message(body: bytes | str | dict[str, Any] | None) -> tuple[str, str]:
    """(reason, message) of a ``metav1.Status`` body; plain text bodies become the message."""
    if body is None:
        return "", ""
    data: Any = body
    if isinstance(body, bytes | str):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            data = json.loads(text)
        except ValueError:
            return "", text.strip()[:500]
    if isinstance(data, dict):
        return str(data.get("reason") or ""), str(data.get("message") or "")
    return "", str(data)[:500]


def error_for_status(status: int, body: bytes | str | dict[str, Any] | None, what: str) -> ClusterError:
    """The port error for an HTTP ``status`` answering the request described by ``what``."""
    reason, message = status_message(body)
    text = f"{what}: {message or reason or f'HTTP {status}'}"
    if status == 404:
        return NotFoundError(text)
    if status == 409:
        return ConflictError(text)
    if status == 410:
        return ExpiredError(text)
    if status == 429:
        return TooManyRequestsError(text)
    return KubeApiError(status, reason, f"{text} (HTTP {status})")


def from_api_exception(exc: Any, what: str) -> ClusterError:
    """Translate a ``kubernetes.client.ApiException`` (duck-typed: ``status`` and ``body``)."""
    status = int(getattr(exc, "status", 0) or 0)
    body = getattr(exc, "body", None) or getattr(exc, "reason", None)
    if status == 0:
        return KubeApiError(0, "", f"{what}: {getattr(exc, 'reason', None) or exc}")
    return error_for_status(status, body, what)
