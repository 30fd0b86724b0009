"""Answering one AdmissionReview: the handlers of a path in order, the patch, the failure semantics."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.manager.webhook.jsonpatch import create_patch
from koord_framework.manager.webhook.metrics import PROCESS
from koord_framework.manager.webhook.review import (
    API_VERSION,
    BadReview,
    allowed,
    denied,
    parse_review,
    patched,
    review_body,
)

__all__ = ["Dispatcher", "UnknownPath", "object_shape_problem"]

log = logging.getLogger("koord.manager.webhook")


class UnknownPath(LookupError):
    """No handler is served at the path."""


def _sorted(handlers: Iterable[AdmissionHandler[Any]]) -> list[AdmissionHandler[Any]]:
    return sorted(handlers, key=lambda h: (h.order, h.name))


class Dispatcher:
    """The handlers by path; ``answer(path, body)`` is the whole admission of one request."""

    def __init__(self, handlers: Sequence[AdmissionHandler[Any]]) -> None:
        by_path: dict[str, list[AdmissionHandler[Any]]] = {}
        for h in handlers:
            if not h.path.startswith("/"):
                raise ValueError(f"admission handler {h.name!r}: path {h.path!r} must start with '/'")
            by_path.setdefault(h.path, []).append(h)
        for path, hs in by_path.items():
            kinds = {h.mutating for h in hs}
            if len(kinds) > 1:
                names = ", ".join(h.name for h in hs)
                raise ValueError(f"admission handlers {names} share {path} but not mutating/validating")
        self.paths: Mapping[str, list[AdmissionHandler[Any]]] = {p: _sorted(hs) for p, hs in by_path.items()}
        # This process's webhook metrics (``koord_framework.manager.webhook.metrics``): the manager exports
        # them, summed with its worker processes' ones.
        self.duration = PROCESS.request_duration

    def answer(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        """The AdmissionReview answering ``body`` posted at ``path`` (``UnknownPath`` when none served)."""
        handlers = self.paths.get(path)
        if handlers is None:
            raise UnknownPath(path)
        start = time.perf_counter()
        api_version = API_VERSION
        try:
            if content_type != "application/json":
                raise BadReview(f"contentType={content_type}, expected application/json")
            request, api_version = parse_review(body)
        except BadReview as exc:
            log.warning("webhook %s: bad AdmissionReview: %s", path, exc)
            response = denied(exc.uid, str(exc), 400)
            api_version = exc.api_version
        else:
            response = self.admit(handlers, request)
        self.duration.labels(path, "true" if response["allowed"] else "false").observe(
            time.perf_counter() - start
        )
        return review_body(response, api_version)

    @staticmethod
    def admit(handlers: Sequence[AdmissionHandler[Any]], request: AdmissionRequest) -> dict[str, Any]:
        """Run ``handlers`` on ``request``; the response (allowed/denied/patched)."""
        active = [h for h in handlers if h.handles(request)]
        if not active:
            return allowed(request.uid)
        source = request.object if request.operation != "DELETE" else request.old_object
        if source is None:
            return denied(
                request.uid, f"{request.operation} {_describe(request)}: request has no object", 400
            )
        shape = object_shape_problem(source)
        if shape:
            return denied(request.uid, f"{_describe(request)}: {shape}", 400)
        mutating = active[0].mutating
        # A JSON round trip copies a decoded object several times faster than copy.deepcopy.
        obj: dict[str, Any] = json.loads(json.dumps(source)) if mutating else dict(source)
        if mutating and not (obj.get("metadata") or {}).get("namespace") and request.namespace:
            # Handlers see the request's namespace (Koordinator fills it in and keeps it out of the patch).
            obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": request.namespace}}
            filled = True
        else:
            filled = False
        warnings: list[str] = []
        for handler in active:
            start = time.perf_counter()
            try:
                handler.admit(request, obj)
            except Denied as exc:
                _record(handler, request, False, start)
                return denied(request.uid, exc.reason, exc.code)
            except ValueError as exc:
                _record(handler, request, False, start)
                # The object cannot be read: a bad request, whatever the failure policy.
                msg = f"{handler.name}: {_describe(request)}: {exc}"
                log.warning("webhook %s", msg)
                return denied(request.uid, msg, 400)
            except Exception as exc:  # a handler's failure answers by its failure policy
                _record(handler, request, False, start)
                msg = f"{handler.name}: {_describe(request)}: {type(exc).__name__}: {exc}"
                log.exception("webhook handler failed: %s", msg)
                if handler.failure_policy == "Ignore":
                    warnings.append(f"ignored failure of {msg}")
                    continue
                return denied(request.uid, msg, 500)
            else:
                _record(handler, request, True, start)
        if not mutating:
            return allowed(request.uid, warnings=warnings)
        if filled:
            obj["metadata"].pop("namespace", None)
        return patched(request.uid, create_patch(source, obj), warnings)


def _record(handler: AdmissionHandler[Any], request: AdmissionRequest, ok: bool, start: float) -> None:
    """Koordinator's per-plugin ``webhook_duration_milliseconds`` (an error is ``rejected``, as there)."""
    # Hand-built requests (tests, the conformance kit) may leave out the kind: then the resource names it.
    kind = getattr(request.kind, "kind", "") or getattr(request.resource, "resource", "") or ""
    PROCESS.record_plugin(
        handler.mutating,
        str(kind),
        request.operation,
        handler.name,
        ok,
        time.perf_counter() - start,
    )


def _string_map_problem(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, dict):
        return f"{where}: must be an object, got {type(value).__name__}"
    for k, v in value.items():
        if not isinstance(v, str):
            return f"{where}[{k}]: must be a string, got {type(v).__name__}"
    return ""


def object_shape_problem(obj: Mapping[str, Any]) -> str:
    """What makes ``obj`` not a Kubernetes object every handler can read (``""``: nothing): metadata an
    object with string-to-string labels and annotations, spec an object. The API server checks this before
    calling a webhook; a hand-made review may not."""
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        return f"metadata: must be an object, got {type(meta).__name__}"
    meta = meta or {}
    for key in ("labels", "annotations"):
        problem = _string_map_problem(meta.get(key), f"metadata.{key}")
        if problem:
            return problem
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, dict):
        return f"spec: must be an object, got {type(spec).__name__}"
    return ""


def _describe(request: AdmissionRequest) -> str:
    name = request.name or str(((request.object or {}).get("metadata") or {}).get("generateName") or "")
    where = f"{request.namespace}/{name}" if request.namespace else name
    return f"{request.resource.resource or request.kind.kind} {where}".strip()
