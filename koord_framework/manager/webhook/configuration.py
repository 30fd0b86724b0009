"""Keeping the webhook configurations pointed at this server (Koordinator's ``util/configuration``).

The chart installs ``koordinator-mutating-webhook-configuration`` and
``koordinator-validating-webhook-configuration``; the manager keeps their webhooks as a template (annotation
``template``, written the first time), and on every sync rewrites each webhook from it: ``caBundle`` = the
CA, the service's namespace/name = the manager's, a service turned into ``https://<host>:<port><path>`` when
a webhook host is set, and webhooks whose path no installed handler serves left out.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from koord_framework.cluster.port import ClusterPort

__all__ = ["ConfigurationError", "Target", "ensure_configuration"]

log = logging.getLogger("koord.manager.webhook")

TEMPLATE_ANNOTATION = "template"


class ConfigurationError(RuntimeError):
    """A webhook configuration is missing or cannot be read."""


@dataclass(frozen=True)
class Target:
    """Where the webhooks must point: the manager's service, or ``host:port`` when ``host`` is set."""

    namespace: str
    service: str
    host: str
    port: int


def _path(webhook: dict[str, Any], where: str) -> str:
    client = webhook.get("clientConfig") or {}
    if isinstance(client.get("service"), dict):
        return str(client["service"].get("path") or "/")
    if isinstance(client.get("url"), str):
        return str(urlparse(client["url"]).path)
    raise ConfigurationError(
        f"{where}: webhook {webhook.get('name')!r} has neither clientConfig.service nor url"
    )


def ensure_configuration(
    cluster: ClusterPort, kind: str, name: str, paths: Collection[str], ca_bundle: bytes, target: Target
) -> bool:
    """Rewrite the configuration ``kind/name`` for ``paths`` and ``ca_bundle``; whether it was updated."""
    config = cluster.try_get(kind, name)
    if config is None:
        raise ConfigurationError(f"not found {kind} {name}")
    where = f"{kind} {name}"
    before = copy.deepcopy(config)
    meta = config.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    raw = annotations.get(TEMPLATE_ANNOTATION)
    if raw:
        try:
            template = json.loads(raw)
        except ValueError as exc:
            raise ConfigurationError(f"{where}: annotation {TEMPLATE_ANNOTATION} is not JSON: {exc}") from exc
        if not isinstance(template, list):
            raise ConfigurationError(f"{where}: annotation {TEMPLATE_ANNOTATION} is not a list of webhooks")
    else:
        template = copy.deepcopy(config.get("webhooks") or [])
        meta["annotations"] = {
            **annotations,
            TEMPLATE_ANNOTATION: json.dumps(template, separators=(",", ":")),
        }
    bundle = base64.b64encode(ca_bundle).decode()
    webhooks = []
    for wh in template:
        if not isinstance(wh, dict):
            raise ConfigurationError(f"{where}: a webhook of the template is not an object")
        path = _path(wh, where)
        if path not in paths:
            log.warning(
                "%s: ignoring webhook %s for %s: no installed handler serves it", where, wh.get("name"), path
            )
            continue
        client = wh.setdefault("clientConfig", {})
        client["caBundle"] = bundle
        service = client.get("service")
        if isinstance(service, dict):
            service["namespace"] = target.namespace
            service["name"] = target.service
            if target.host:
                client["url"] = f"https://{target.host}:{target.port}{path}"
                del client["service"]
        webhooks.append(wh)
    config["webhooks"] = webhooks
    if config == before:
        return False
    cluster.update(config)
    log.info("updated %s: caBundle and %d webhook(s)", where, len(webhooks))
    return True
