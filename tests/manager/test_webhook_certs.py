"""Webhook certificates: generation, the checks that replace them, the Secret / fs / external writers and
the configurations' caBundle (on the embedded cluster)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.manager.webhook import certs
from koord_framework.manager.webhook.configuration import ConfigurationError
from koord_framework.manager.webhook.controller import CertificateProblem, WebhookController, WebhookSettings

DNS = "koordinator-webhook-service.koordinator-system.svc"


def test_generated_certificates_serve_their_name() -> None:
    a = certs.generate(DNS)
    assert certs.problem(a, DNS) is None
    assert certs.problem(a, "other.svc") == "serving certificate is not valid for other.svc"
    ip = certs.generate("127.0.0.1")
    assert certs.problem(ip, "127.0.0.1") is None
    assert certs.problem(ip, "localhost") is None  # Koordinator always adds localhost


def test_expired_or_expiring_certificates_are_reported() -> None:
    old = certs.generate(DNS, now=dt.datetime.now(dt.UTC) - dt.timedelta(days=3700))
    assert "expired at" in (certs.problem(old, DNS) or "")
    soon = dt.datetime.now(dt.UTC) + certs.CERT_VALIDITY - dt.timedelta(days=30)
    assert "within 6 months" in (certs.problem(certs.generate(DNS), DNS, now=soon) or "")


@pytest.mark.parametrize(
    ("mangle", "why"),
    [
        (
            lambda a: certs.Artifacts(a.ca_key, a.ca_cert, a.key, b"garbage"),
            "serving certificate does not parse",
        ),
        (lambda a: certs.Artifacts(a.ca_key, b"garbage", a.key, a.cert), "CA certificate does not parse"),
        (lambda a: certs.Artifacts(a.ca_key, a.ca_cert, certs.generate(DNS).key, a.cert), "does not match"),
        (
            lambda a: certs.Artifacts(a.ca_key, certs.generate(DNS).ca_cert, a.key, a.cert),
            "not signed by the CA",
        ),
        (lambda a: certs.Artifacts(), "missing"),
    ],
)
def test_invalid_sets_are_reported(mangle: Any, why: str) -> None:
    assert why in (certs.problem(mangle(certs.generate(DNS)), DNS) or "")


def test_renewal_keeps_a_good_ca() -> None:
    first = certs.generate(DNS)
    second = certs.generate(DNS, first)
    assert second.ca_cert == first.ca_cert and second.cert != first.cert
    assert certs.problem(second, DNS) is None


def test_dir_round_trip(tmp_path: Path) -> None:
    a = certs.generate(DNS)
    assert certs.write_dir(tmp_path, a) is True
    assert certs.write_dir(tmp_path, a) is False
    assert certs.read_dir(tmp_path) == a
    assert (tmp_path / "tls.crt").read_bytes() == (tmp_path / "cert.pem").read_bytes() == a.cert
    assert certs.read_dir(tmp_path / "none") is None


# --- the controller on the embedded cluster -----------------------------------------------------------------


def _configs(cluster: MemoryCluster) -> None:
    for kind, name, path in (
        ("MutatingWebhookConfiguration", "koordinator-mutating-webhook-configuration", "/mutate-pod"),
        ("ValidatingWebhookConfiguration", "koordinator-validating-webhook-configuration", "/validate-pod"),
    ):
        cluster.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": f"{path[1:]}.koordinator.sh",
                        "clientConfig": {"service": {"name": "x", "namespace": "y", "path": path}},
                    },
                    {
                        "name": "gone.koordinator.sh",
                        "clientConfig": {"service": {"name": "x", "namespace": "y", "path": "/not-served"}},
                    },
                ],
            }
        )


def _controller(cluster: MemoryCluster, tmp_path: Path, **kw: Any) -> tuple[WebhookController, list[int]]:
    reloads: list[int] = []
    settings = WebhookSettings(cert_dir=tmp_path / "certs", **kw)
    c = WebhookController(cluster, settings, ["/mutate-pod"], ["/validate-pod"], lambda: reloads.append(1))
    return c, reloads


@pytest.fixture
def cluster() -> MemoryCluster:
    c = MemoryCluster(VirtualClock(0.0), seed=0)
    _configs(c)
    return c


def _secret(cluster: MemoryCluster) -> certs.Artifacts:
    s = cluster.get("Secret", "koordinator-webhook-certs", "koordinator-system")
    return certs.Artifacts.from_files({k: base64.b64decode(v) for k, v in s["data"].items()})


def test_secret_writer_creates_writes_and_patches(cluster: MemoryCluster, tmp_path: Path) -> None:
    c, reloads = _controller(cluster, tmp_path)
    c.sync()
    stored = _secret(cluster)
    assert certs.problem(stored, DNS) is None
    assert certs.read_dir(tmp_path / "certs") == stored
    assert reloads == [1] and c.initialized.is_set()
    m = cluster.get("MutatingWebhookConfiguration", "koordinator-mutating-webhook-configuration")
    assert [w["name"] for w in m["webhooks"]] == ["mutate-pod.koordinator.sh"]  # unserved path left out
    client = m["webhooks"][0]["clientConfig"]
    assert base64.b64decode(client["caBundle"]) == stored.ca_cert
    assert client["service"] == {
        "name": "koordinator-webhook-service",
        "namespace": "koordinator-system",
        "path": "/mutate-pod",
    }
    assert len(json.loads(m["metadata"]["annotations"]["template"])) == 2
    c.sync()  # nothing to do the second time
    assert reloads == [1]


def test_an_invalid_secret_is_replaced(cluster: MemoryCluster, tmp_path: Path) -> None:
    c, reloads = _controller(cluster, tmp_path)
    c.sync()
    before = _secret(cluster)
    s = cluster.get("Secret", "koordinator-webhook-certs", "koordinator-system")
    s["data"]["cert.pem"] = base64.b64encode(b"garbage").decode()
    s["data"]["tls.crt"] = "%%% not base64"
    cluster.update(s)
    c.sync()
    after = _secret(cluster)
    assert certs.problem(after, DNS) is None and after.cert != before.cert
    assert after.ca_cert == before.ca_cert  # the CA is kept: the caBundle stays valid
    assert reloads == [1, 1]


def test_host_turns_the_service_into_a_url_and_uses_the_fs_writer(
    cluster: MemoryCluster, tmp_path: Path
) -> None:
    c, _ = _controller(cluster, tmp_path, host="127.0.0.1", port=9443)
    c.sync()
    assert cluster.try_get("Secret", "koordinator-webhook-certs", "koordinator-system") is None
    assert certs.problem(certs.read_dir(tmp_path / "certs"), "127.0.0.1") is None
    client = cluster.get("ValidatingWebhookConfiguration", "koordinator-validating-webhook-configuration")[
        "webhooks"
    ][0]["clientConfig"]
    assert client["url"] == "https://127.0.0.1:9443/validate-pod" and "service" not in client


def test_external_certificates_are_checked_not_replaced(cluster: MemoryCluster, tmp_path: Path) -> None:
    expired = certs.generate(DNS, now=dt.datetime.now(dt.UTC) - dt.timedelta(days=3700))
    certs.write_dir(tmp_path / "certs", expired)
    c, _ = _controller(cluster, tmp_path, cert_writer="external")
    with pytest.raises(CertificateProblem, match=r"externally managed.*expired at"):
        c.sync()
    assert certs.read_dir(tmp_path / "certs") == expired
    assert not c.initialized.is_set()


def test_a_missing_configuration_is_named(tmp_path: Path) -> None:
    c, _ = _controller(MemoryCluster(VirtualClock(0.0), seed=0), tmp_path)
    with pytest.raises(ConfigurationError, match="not found MutatingWebhookConfiguration"):
        c.sync()
