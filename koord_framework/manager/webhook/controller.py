"""The webhook controller: certificates and configurations kept right (Koordinator's ``webhook_controller``).

Every ``RESYNC`` seconds (and at once on start) it

1. reads the certificates -- from the Secret ``<namespace>/koordinator-webhook-certs`` (``secret`` writer), or
   from the cert dir (``fs`` writer; Koordinator's default when a webhook host is set) -- and replaces them
   when missing, unparsable, not for the DNS name or expiring within six months (the CA is kept while it is
   good for a year); with the ``external`` writer the certificates belong to someone else (a mounted Secret
   managed by cert-manager, ...): they are only checked, and a bad set is reported (``CertificateProblem``),
   never replaced;
2. writes them into the cert dir and reloads the server when they changed;
3. rewrites the two webhook configurations (``configuration.ensure_configuration``).

``initialized`` is set after the first good sync (Koordinator's ``Inited()``): the webhook is ready then.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import ConflictError
from koord_framework.manager.webhook import certs
from koord_framework.manager.webhook.configuration import Target, ensure_configuration

__all__ = ["CertWriter", "CertificateProblem", "WebhookController", "WebhookSettings"]

log = logging.getLogger("koord.manager.webhook")

CertWriter = Literal["secret", "fs", "external"]
RESYNC = 60.0  # Koordinator's defaultResyncPeriod


class CertificateProblem(RuntimeError):
    """Externally managed certificates that cannot be served (expired, not for the name, ...)."""


@dataclass(frozen=True)
class WebhookSettings:
    """The webhook's flags (Koordinator's ``WEBHOOK_*`` environment variables and their defaults)."""

    cert_dir: Path = Path("/tmp/koordinator-webhook-certs")
    port: int = 9876
    host: str = ""
    """``WEBHOOK_HOST``: set, the configurations call ``https://<host>:<port><path>``, not the service."""
    bind_host: str = "0.0.0.0"
    namespace: str = "koordinator-system"
    secret_name: str = "koordinator-webhook-certs"
    service_name: str = "koordinator-webhook-service"
    mutating_configuration: str = "koordinator-mutating-webhook-configuration"
    validating_configuration: str = "koordinator-validating-webhook-configuration"
    workers: int = 1
    """Processes serving the port (``--webhook-workers``); 1 serves in the manager's own process."""
    cert_writer: CertWriter | None = None
    """``None``: ``fs`` when ``host`` is set, else ``secret`` (Koordinator's choice)."""

    @property
    def writer(self) -> CertWriter:
        if self.cert_writer is not None:
            return self.cert_writer
        return "fs" if self.host else "secret"

    @property
    def dns_name(self) -> str:
        return self.host or certs.service_dns_name(self.namespace, self.service_name)


@dataclass
class WebhookController:
    cluster: ClusterPort
    settings: WebhookSettings
    mutating_paths: Collection[str]
    validating_paths: Collection[str]
    reload: Callable[[], None]
    initialized: threading.Event = field(default_factory=threading.Event)
    last_error: str = ""

    # --- certificates --------------------------------------------------------------------------------------
    def _secret_certs(self) -> certs.Artifacts:
        s = self.settings
        secret = self.cluster.try_get("Secret", s.secret_name, s.namespace)
        if secret is None:
            fresh = certs.generate(s.dns_name)
            try:
                created = self.cluster.create(self._secret(fresh, None))
                log.info("created webhook certificates in Secret %s/%s", s.namespace, s.secret_name)
                return self._from_secret(created) or fresh
            except ConflictError:  # another replica created it first
                secret = self.cluster.get("Secret", s.secret_name, s.namespace)
        current = self._from_secret(secret)
        why = certs.problem(current, s.dns_name)
        if why is None and current is not None:
            return current
        log.warning("webhook certificates in Secret %s/%s: %s; regenerating", s.namespace, s.secret_name, why)
        fresh = certs.generate(s.dns_name, current)
        updated = self.cluster.update(self._secret(fresh, secret))
        return self._from_secret(updated) or fresh

    def _secret(self, artifacts: certs.Artifacts, old: dict[str, Any] | None) -> dict[str, Any]:
        s = self.settings
        meta: dict[str, Any] = {"name": s.secret_name, "namespace": s.namespace}
        if old is not None:
            meta = {**(old.get("metadata") or {}), **meta}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta,
            "type": "Opaque",
            "data": {k: base64.b64encode(v).decode() for k, v in artifacts.files().items()},
        }

    @staticmethod
    def _from_secret(secret: dict[str, Any]) -> certs.Artifacts | None:
        data = secret.get("data") or {}
        files: dict[str, bytes] = {}
        for name, value in data.items():
            try:
                files[name] = base64.b64decode(value, validate=True)
            except (ValueError, TypeError):
                files[name] = b""  # reported by certs.problem as not parsing
        rv = str((secret.get("metadata") or {}).get("resourceVersion") or "")
        return certs.Artifacts.from_files(files, rv)

    def _dir_certs(self) -> certs.Artifacts:
        s = self.settings
        current = certs.read_dir(s.cert_dir)
        why = certs.problem(current, s.dns_name)
        if why is None and current is not None:
            return current
        if s.writer == "external":
            raise CertificateProblem(
                f"webhook certificates in {s.cert_dir} (externally managed) cannot be served: {why}; "
                "renew them where they are managed, or drop --webhook-cert-writer=external to let the "
                "manager generate its own"
            )
        log.warning("webhook certificates in %s: %s; regenerating", s.cert_dir, why)
        fresh = certs.generate(s.dns_name, current)
        certs.write_dir(s.cert_dir, fresh)
        return fresh

    # --- one sync ------------------------------------------------------------------------------------------
    def sync(self) -> None:
        s = self.settings
        if s.writer == "secret":
            artifacts = self._secret_certs()
            changed = certs.write_dir(s.cert_dir, artifacts)
        else:
            before = certs.read_dir(s.cert_dir)
            artifacts = self._dir_certs()
            changed = before != artifacts
        if changed:
            self.reload()
        target = Target(s.namespace, s.service_name, s.host, s.port)
        ensure_configuration(
            self.cluster,
            "MutatingWebhookConfiguration",
            s.mutating_configuration,
            self.mutating_paths,
            artifacts.ca_cert,
            target,
        )
        ensure_configuration(
            self.cluster,
            "ValidatingWebhookConfiguration",
            s.validating_configuration,
            self.validating_paths,
            artifacts.ca_cert,
            target,
        )
        self.last_error = ""
        self.initialized.set()

    def run(self, stop: threading.Event, resync: float = RESYNC) -> None:
        """Sync now and every ``resync`` seconds until ``stop``; a failed sync is retried with backoff."""
        backoff = 1.0
        while not stop.is_set():
            try:
                self.sync()
            except Exception as exc:  # reported and retried; readiness stays false until a sync works
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.error("webhook controller: %s (retrying in %.0fs)", self.last_error, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, resync)
                continue
            backoff = 1.0
            stop.wait(resync)
