"""``admission.k8s.io/v1`` ``AdmissionReview`` in and out: parsing a request body, shaping a response.

Bad input never ends in a bare HTTP 500: a body that is not JSON, a review without ``request`` or with a
request whose fields have the wrong types is answered (HTTP 200, as controller-runtime does) with a review
whose response is ``allowed: false``, ``status.code: 400`` and a message naming what is wrong.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, cast

from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    GroupVersionKind,
    GroupVersionResource,
    Operation,
)

__all__ = ["API_VERSION", "BadReview", "allowed", "denied", "parse_review", "patched", "review_body"]

API_VERSION = "admission.k8s.io/v1"
_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class BadReview(ValueError):
    """The body is not an AdmissionReview this server can answer; ``uid`` when one could be read."""

    def __init__(self, message: str, uid: str = "", api_version: str = API_VERSION) -> None:
        super().__init__(message)
        self.uid = uid
        self.api_version = api_version


def _mapping(value: Any, where: str, uid: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadReview(f"{where}: expected an object, got {type(value).__name__}", uid)
    return value


def _string(value: Any, where: str, uid: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadReview(f"{where}: expected a string, got {type(value).__name__}", uid)
    return value


def _object(value: Any, where: str, uid: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BadReview(f"{where}: expected an object, got {type(value).__name__}", uid)
    return value


def parse_review(body: bytes) -> tuple[AdmissionRequest, str]:
    """The request of an ``AdmissionReview`` body and the review's apiVersion; ``BadReview`` otherwise."""
    if not body:
        raise BadReview("request body is empty")
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadReview(f"request body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise BadReview(f"AdmissionReview: expected an object, got {type(review).__name__}")
    api_version = review.get("apiVersion") or API_VERSION
    if not isinstance(api_version, str) or api_version not in (API_VERSION, "admission.k8s.io/v1beta1"):
        raise BadReview(f"AdmissionReview apiVersion {api_version!r} is not {API_VERSION}")
    if review.get("kind", "AdmissionReview") != "AdmissionReview":
        raise BadReview(f"kind {review.get('kind')!r} is not AdmissionReview", api_version=api_version)
    raw = review.get("request")
    if raw is None:
        raise BadReview("AdmissionReview has no request", api_version=api_version)
    if not isinstance(raw, dict):
        raise BadReview("AdmissionReview.request: expected an object", api_version=api_version)
    uid = raw.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview.request.uid: required string is missing", api_version=api_version)
    op = raw.get("operation")
    if op not in _OPERATIONS:
        raise BadReview(f"request.operation: {op!r} is not one of {', '.join(_OPERATIONS)}", uid, api_version)
    kind = _mapping(raw.get("kind"), "request.kind", uid)
    resource = _mapping(raw.get("resource"), "request.resource", uid)
    request = AdmissionRequest(
        uid=uid,
        kind=GroupVersionKind(
            _string(kind.get("group"), "request.kind.group", uid),
            _string(kind.get("version"), "request.kind.version", uid),
            _string(kind.get("kind"), "request.kind.kind", uid),
        ),
        resource=GroupVersionResource(
            _string(resource.get("group"), "request.resource.group", uid),
            _string(resource.get("version"), "request.resource.version", uid),
            _string(resource.get("resource"), "request.resource.resource", uid),
        ),
        operation=cast(Operation, op),
        name=_string(raw.get("name"), "request.name", uid),
        namespace=_string(raw.get("namespace"), "request.namespace", uid),
        sub_resource=_string(raw.get("subResource"), "request.subResource", uid),
        object=_object(raw.get("object"), "request.object", uid),
        old_object=_object(raw.get("oldObject"), "request.oldObject", uid),
        dry_run=bool(raw.get("dryRun")),
        user_info=_mapping(raw.get("userInfo"), "request.userInfo", uid),
    )
    return request, api_version


def allowed(uid: str, message: str = "", warnings: list[str] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if message:
        response["status"] = {"code": 200, "message": message}
    if warnings:
        response["warnings"] = warnings
    return response


def denied(uid: str, message: str, code: int = 403) -> dict[str, Any]:
    reason = {400: "BadRequest", 403: "Forbidden", 500: "InternalError"}.get(code, "")
    status: dict[str, Any] = {"code": code, "message": message}
    if reason:
        status["reason"] = reason
    return {"uid": uid, "allowed": False, "status": status}


def patched(uid: str, patch: list[dict[str, Any]], warnings: list[str] | None = None) -> dict[str, Any]:
    if not patch:
        return allowed(uid, warnings=warnings)
    response = allowed(uid, warnings=warnings)
    response["patchType"] = "JSONPatch"
    response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return response


def review_body(response: Mapping[str, Any], api_version: str = API_VERSION) -> bytes:
    return json.dumps(
        {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}, separators=(",", ":")
    ).encode()
