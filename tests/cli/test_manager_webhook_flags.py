"""``koord manager``'s webhook flags: Koordinator's environment variables and defaults, and when it serves."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from koord_framework.cli.manager_webhook import add_webhook_flags, settings_from, start_webhook
from koord_framework.errors import KoordError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_webhook_flags(parser)
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--feature-gates", default="")
    return parser.parse_args(list(argv))


def test_koordinator_defaults() -> None:
    s = settings_from(parse(), environ={})
    assert (s.port, s.host, s.cert_dir) == (9876, "", Path("/tmp/koordinator-webhook-certs"))
    assert (s.namespace, s.secret_name, s.service_name) == (
        "koordinator-system",
        "koordinator-webhook-certs",
        "koordinator-webhook-service",
    )
    assert s.mutating_configuration == "koordinator-mutating-webhook-configuration"
    assert s.writer == "secret" and s.dns_name == "koordinator-webhook-service.koordinator-system.svc"


def test_environment_then_flags() -> None:
    env = {"WEBHOOK_PORT": "9443", "WEBHOOK_HOST": "10.0.0.1", "POD_NAMESPACE": "koord", "SECRET_NAME": "s"}
    s = settings_from(parse(), environ=env)
    assert (s.port, s.host, s.namespace, s.secret_name, s.writer) == (9443, "10.0.0.1", "koord", "s", "fs")
    s = settings_from(parse("--webhook-port", "1", "--webhook-cert-writer", "external"), environ=env)
    assert (s.port, s.writer) == (1, "external")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ((), {"WEBHOOK_PORT": "x"}, "WEBHOOK_PORT='x' is not an integer"),
        ((), {"WEBHOOK_CERT_WRITER": "vault"}, "WEBHOOK_CERT_WRITER='vault'"),
        (("--webhook-port", "70000"), {}, "--webhook-port 70000 is not a port"),
    ],
)
def test_bad_settings_are_named(argv: tuple[str, ...], env: dict[str, str], message: str) -> None:
    with pytest.raises(KoordError, match=message.replace("'", ".").replace("-", ".")):
        settings_from(parse(*argv), environ=env)


def test_off_on_an_embedded_cluster_and_by_gate() -> None:
    from koord_framework.cluster.clock import VirtualClock
    from koord_framework.cluster.memory import MemoryCluster

    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    assert start_webhook(cluster, parse()) is None  # auto without --kubeconfig
    assert (
        start_webhook(cluster, parse("--webhook", "true", "--feature-gates", "WebhookFramework=false"))
        is None
    )
