"""The webhook flags of ``koord manager`` and starting its webhook server (``manager.webhook``).

Each flag defaults to Koordinator's environment variable, then to Koordinator's default:

    --webhook-port        WEBHOOK_PORT        9876
    --webhook-host        WEBHOOK_HOST        "" (the configurations call the Service)
    --webhook-cert-dir    WEBHOOK_CERT_DIR    /tmp/koordinator-webhook-certs
    --webhook-cert-writer WEBHOOK_CERT_WRITER secret, or fs with a host; external: mounted, checked
    --webhook-workers     (koord's own)       the CPUs the manager may use

Koordinator's ``--binding-admission-*`` flags set the args of ``/validate-pod-binding``'s handler.

and ``POD_NAMESPACE`` (koordinator-system), ``SECRET_NAME`` (koordinator-webhook-certs), ``SERVICE_NAME``
(koordinator-webhook-service), ``MUTATING_WEBHOOK_NAME`` / ``VALIDATING_WEBHOOK_NAME``
(koordinator-{mutating,validating}-webhook-configuration) name what the controller keeps.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import KoordError
from koord_framework.featuregates import gates_for

__all__ = [
    "add_binding_admission_flags",
    "add_webhook_flags",
    "handler_args_from",
    "settings_from",
    "start_webhook",
]

log = logging.getLogger("koord.manager.webhook")

if TYPE_CHECKING:  # without importing cryptography for every CLI start
    from prometheus_client import CollectorRegistry

    from koord_framework.manager.webhook.controller import WebhookSettings
    from koord_framework.manager.webhook.runtime import WebhookRuntime


def _env_port(environ: Mapping[str, str]) -> int:
    raw = environ.get("WEBHOOK_PORT", "")
    if not raw:
        return 9876
    try:
        return int(raw)
    except ValueError:
        raise KoordError(f"WEBHOOK_PORT={raw!r} is not an integer") from None


def add_webhook_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("webhooks (feature gate WebhookFramework)")
    g.add_argument(
        "--webhook",
        choices=("auto", "true", "false"),
        default="auto",
        help="serve the admission webhooks (auto: with --kubeconfig, not on an embedded --cluster)",
    )
    g.add_argument(
        "--webhook-port", type=int, default=None, metavar="PORT", help="default $WEBHOOK_PORT or 9876"
    )
    g.add_argument("--webhook-host", default=None, metavar="HOST", help="default $WEBHOOK_HOST")
    g.add_argument(
        "--webhook-bind-address", default="0.0.0.0", metavar="ADDR", help="address the server listens on"
    )
    g.add_argument(
        "--webhook-cert-dir",
        default=None,
        metavar="DIR",
        help="default $WEBHOOK_CERT_DIR or /tmp/koordinator-webhook-certs",
    )
    g.add_argument(
        "--webhook-workers",
        type=int,
        default=None,
        metavar="N",
        help="processes serving the webhook port, sharing it (default: the CPUs the manager may use; "
        "1: in the manager's own process)",
    )
    g.add_argument(
        "--webhook-cert-writer",
        choices=("secret", "fs", "external"),
        default=None,
        help="default $WEBHOOK_CERT_WRITER; unset: fs with a host, else secret",
    )
    add_binding_admission_flags(parser)


_BINDING_FLAGS = (
    (
        "user_name",
        "--binding-admission-user-name",
        "comma-separated allowed user-name substrings; empty: off",
    ),
    ("namespaces", "--binding-admission-namespaces", "comma-separated namespaces enforced; '*': all"),
    ("exclude_namespaces", "--binding-admission-exclude-namespaces", "namespaces always allowed"),
    ("bypass_labels", "--binding-admission-bypass-labels", "pod label keys whose presence allows a binding"),
    ("bypass_annotations", "--binding-admission-bypass-annotations", "pod annotation keys alike"),
)


def add_binding_admission_flags(parser: argparse.ArgumentParser) -> None:
    """Koordinator's ``--binding-admission-*`` flags (``/validate-pod-binding``, gate
    ``BindingAdmissionWebhook``); unset ones keep the handler's defaults."""
    g = parser.add_argument_group("pod binding admission (feature gate BindingAdmissionWebhook)")
    for _, flag, text in _BINDING_FLAGS:
        g.add_argument(flag, default=None, metavar="LIST", help=text)
    g.add_argument(
        "--binding-admission-dry-run",
        action="store_true",
        default=None,
        help="allow every binding; log and count the would-be denials",
    )


def handler_args_from(args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """The handlers' args the manager's flags set, by handler name."""
    binding: dict[str, object] = {}
    for field, flag, _ in _BINDING_FLAGS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None:
            binding[field] = value
    if getattr(args, "binding_admission_dry_run", None):
        binding["dry_run"] = True
    return {"BindingAdmission": binding} if binding else {}


def settings_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> WebhookSettings:
    from koord_framework.manager.webhook.controller import CertWriter, WebhookSettings

    env = os.environ if environ is None else environ
    writer = args.webhook_cert_writer or env.get("WEBHOOK_CERT_WRITER") or None
    if writer not in (None, "secret", "fs", "external"):
        raise KoordError(f"WEBHOOK_CERT_WRITER={writer!r} is not one of secret, fs, external")
    port = args.webhook_port if args.webhook_port is not None else _env_port(env)
    if not 0 <= port <= 65535:
        raise KoordError(f"--webhook-port {port} is not a port")
    from koord_framework.manager.webhook.workers import default_workers

    workers = (
        args.webhook_workers if getattr(args, "webhook_workers", None) is not None else default_workers()
    )
    if workers < 1:
        raise KoordError(f"--webhook-workers {workers}: at least 1 process must serve the webhooks")
    return WebhookSettings(
        cert_dir=Path(
            args.webhook_cert_dir or env.get("WEBHOOK_CERT_DIR") or "/tmp/koordinator-webhook-certs"
        ),
        port=port,
        host=args.webhook_host if args.webhook_host is not None else env.get("WEBHOOK_HOST", ""),
        bind_host=args.webhook_bind_address,
        namespace=env.get("POD_NAMESPACE") or "koordinator-system",
        secret_name=env.get("SECRET_NAME") or "koordinator-webhook-certs",
        service_name=env.get("SERVICE_NAME") or "koordinator-webhook-service",
        mutating_configuration=env.get("MUTATING_WEBHOOK_NAME")
        or "koordinator-mutating-webhook-configuration",
        validating_configuration=env.get("VALIDATING_WEBHOOK_NAME")
        or "koordinator-validating-webhook-configuration",
        cert_writer=cast("CertWriter | None", writer),
        workers=workers,
    )


def start_webhook(
    cluster: ClusterPort, args: argparse.Namespace, registry: CollectorRegistry | None = None
) -> WebhookRuntime | None:
    """The started webhook runtime, or None when off (``--webhook``, gate ``WebhookFramework``); its metrics
    (the worker processes' summed in) on ``registry``, the manager's ``/metrics``."""
    on = args.webhook == "true" or (args.webhook == "auto" and args.kubeconfig is not None)
    gates = gates_for("manager").parse(args.feature_gates)
    if not on or not gates.enabled("WebhookFramework"):
        return None
    from koord_framework.manager.webhook.runtime import WebhookRuntime, load_handlers

    settings = settings_from(args)
    runtime = WebhookRuntime(
        cluster, settings, load_handlers(gates, handler_args_from(args)), registry=registry, gates=gates
    )
    try:
        runtime.start()
    except OSError as exc:
        raise KoordError(str(exc)) from exc
    return runtime
