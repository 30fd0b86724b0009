"""The plain kubeconfig reader agrees with the client's loader, and leaves to it whatever it does not read."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from koord_framework.cluster.kube.kubeconfig import read_in_cluster, read_plain
from koord_framework.cluster.kube.transport import Transport, _LeanOnly
from koord_framework.errors import ClusterError

PEM_A = b"-----BEGIN CERTIFICATE-----\nQUFB\n-----END CERTIFICATE-----\n"
PEM_B = b"-----BEGIN PRIVATE KEY-----\nQkJC\n-----END PRIVATE KEY-----\n"


def _write(path: Path, cluster: dict[str, Any], user: dict[str, Any], **extra: Any) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": cluster},
            {"name": "other", "cluster": {"server": "https://x:1"}},
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u"}},
            {"name": "second", "context": {"cluster": "other", "user": "u"}},
        ],
        "current-context": "main",
        **extra,
    }
    path.write_text(json.dumps(doc))
    return path


def _client_view(path: Path, context: str | None = None) -> Any:
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(path), context=context, client_configuration=configuration, persist_config=False
    )
    return configuration


def _b64(data: bytes) -> str:
    return base64.standard_b64encode(data).decode()


PLAIN: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "token, insecure": (
        {"server": "https://10.0.0.1:6443/", "insecure-skip-tls-verify": True},
        {"token": "t0k"},
    ),
    "basic auth, http": ({"server": "http://127.0.0.1:8080"}, {"username": "admin", "password": "s3cret"}),
    "inline CA and client certificate": (
        {"server": "https://api:6443", "certificate-authority-data": _b64(PEM_A), "tls-server-name": "kube"},
        {"client-certificate-data": _b64(PEM_A), "client-key-data": _b64(PEM_B)},
    ),
    "files relative to the kubeconfig": (
        {"server": "https://api:6443", "certificate-authority": "ca.pem"},
        {"client-certificate": "cert.pem", "client-key": "key.pem", "token": "t"},
    ),
}


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_a_plain_kubeconfig_reads_as_the_client_reads_it(tmp_path: Path, name: str) -> None:
    for file, data in (("ca.pem", PEM_A), ("cert.pem", PEM_A), ("key.pem", PEM_B)):
        (tmp_path / file).write_bytes(data)
    cluster, user = PLAIN[name]
    path = _write(tmp_path / "kubeconfig", cluster, user)
    ours, theirs = read_plain(str(path)), _client_view(path)
    assert ours is not None
    assert ours.host == theirs.host.rstrip("/")
    assert ours.verify_ssl == theirs.verify_ssl
    assert (ours.tls_server_name or None) == (theirs.tls_server_name or None)
    for mine, client in (
        (ours.ssl_ca_cert, theirs.ssl_ca_cert),
        (ours.cert_file, theirs.cert_file),
        (ours.key_file, theirs.key_file),
    ):
        assert (mine is None) == (client is None)
        if mine is not None:
            assert Path(mine).read_bytes() == Path(client).read_bytes()

    def headers(settings: dict[str, dict[str, Any]]) -> dict[str, str]:
        return {str(s["key"]).title(): str(s["value"]) for s in settings.values() if s.get("value")}

    assert headers(ours.auth_settings()) == headers(theirs.auth_settings())


def test_a_named_context_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "kubeconfig", {"server": "https://a:1"}, {"token": "t"})
    plain = read_plain(str(path), "second")
    assert plain is not None and plain.host == "https://x:1"


NEEDS_CLIENT: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "exec plugin": ({"server": "https://a:1"}, {"exec": {"command": "get-token", "apiVersion": "x"}}),
    "auth provider": ({"server": "https://a:1"}, {"auth-provider": {"name": "oidc"}}),
    "token file": ({"server": "https://a:1"}, {"tokenFile": "/var/run/token"}),
    "proxy": ({"server": "https://a:1", "proxy-url": "http://proxy:3128"}, {"token": "t"}),
    "no server": ({}, {"token": "t"}),
    "certificate without key": ({"server": "https://a:1"}, {"client-certificate-data": _b64(PEM_A)}),
    "bad base64": ({"server": "https://a:1", "certificate-authority-data": "%%%"}, {"token": "t"}),
}


@pytest.mark.parametrize("name", sorted(NEEDS_CLIENT))
def test_what_the_reader_does_not_read_is_left_to_the_client(tmp_path: Path, name: str) -> None:
    cluster, user = NEEDS_CLIENT[name]
    assert read_plain(str(_write(tmp_path / "kubeconfig", cluster, user))) is None


def test_unreadable_files_and_merged_lists_are_left_to_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad"
    bad.write_text("clusters: [unclosed\n")
    assert read_plain(str(bad)) is None
    assert read_plain(str(tmp_path / "missing")) is None
    path = _write(tmp_path / "kubeconfig", {"server": "https://a:1"}, {"token": "t"})
    assert read_plain(str(path), "no-such-context") is None
    monkeypatch.setenv("KUBECONFIG", f"{path}:{path}")
    assert read_plain(None) is None
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert read_plain(None) is not None


def test_errors_about_a_bad_kubeconfig_are_still_the_clients(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("clusters: [unclosed\n")
    with pytest.raises(ClusterError, match=f"kubeconfig {bad}: "):
        Transport.from_kubeconfig(str(bad))
    path = _write(tmp_path / "kubeconfig", {"server": "https://a:1"}, {"token": "t"})
    with pytest.raises(ClusterError, match="no-such-context"):
        Transport.from_kubeconfig(str(path), context="no-such-context")


def test_the_client_still_serves_what_the_reader_leaves(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("from-file")
    path = _write(tmp_path / "kubeconfig", {"server": "http://127.0.0.1:1"}, {"tokenFile": str(token)})
    transport = Transport.from_kubeconfig(str(path))
    try:
        assert not isinstance(transport.api_client, _LeanOnly)
        assert transport._auth_headers() == {"Authorization": "Bearer from-file"}
    finally:
        transport.close()


def test_a_plain_kubeconfig_does_not_import_the_client(tmp_path: Path) -> None:
    path = _write(tmp_path / "kubeconfig", {"server": "http://127.0.0.1:1"}, {"token": "t0k"})
    code = (
        "import sys\n"
        "from koord_framework.cluster.kube import KubeCluster\n"
        f"cluster = KubeCluster.from_kubeconfig({str(path)!r})\n"
        "assert cluster.transport.lean is not None\n"
        "assert cluster.transport._auth_headers() == {'Authorization': 'Bearer t0k'}\n"
        "cluster.close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- in-cluster credentials ------------------------------------------------------------------------
def _service_account(tmp_path: Path, token: str = "t0k", ca: bytes = PEM_A) -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir(exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(ca)
    return directory


@pytest.mark.parametrize("host", ["10.96.0.1", "fd00::1"])
def test_in_cluster_credentials_read_as_the_client_reads_them(tmp_path: Path, host: str) -> None:
    from kubernetes.config.incluster_config import InClusterConfigLoader

    directory = _service_account(tmp_path)
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    ours = read_in_cluster(str(directory), environ)
    theirs = k8s_client.Configuration()
    InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(directory / "token"), cert_filename=str(directory / "ca.crt"), environ=environ
    ).load_and_set(theirs)
    assert ours is not None
    assert ours.host == theirs.host
    assert ours.ssl_ca_cert == theirs.ssl_ca_cert and ours.verify_ssl and theirs.verify_ssl
    settings = theirs.auth_settings()["BearerToken"]
    assert ours.auth_settings()["authorization"]["value"].lower() == str(settings["value"]).lower()


def test_a_rotated_service_account_token_is_read_again(tmp_path: Path) -> None:
    directory = _service_account(tmp_path, token="first")
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    ours = read_in_cluster(str(directory), environ)
    assert ours is not None
    assert ours.auth_settings()["authorization"]["value"] == "Bearer first"
    (directory / "token").write_text("second, rotated by the kubelet")
    assert ours.auth_settings()["authorization"]["value"] == "Bearer second, rotated by the kubelet"
    (directory / "token").unlink()  # a moment without the file: the last token is kept
    assert ours.auth_settings()["authorization"]["value"] == "Bearer second, rotated by the kubelet"


def test_incomplete_in_cluster_credentials_are_left_to_the_client(tmp_path: Path) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert read_in_cluster(str(tmp_path / "none"), environ) is None  # no service account mounted
    assert read_in_cluster(str(_service_account(tmp_path)), {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}) is None
    assert read_in_cluster(str(_service_account(tmp_path, token="")), environ) is None  # empty token
    assert read_in_cluster(str(_service_account(tmp_path, ca=b"")), environ) is None  # empty CA


def test_in_cluster_credentials_do_not_import_the_client(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a CA certificate")
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "ca.pem"), "-subj", "/CN=kube-ca",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    directory = _service_account(tmp_path, ca=(tmp_path / "ca.pem").read_bytes())
    probe = (
        "import sys\n"
        "from koord_framework.cluster.kube import kubeconfig\n"
        f"kubeconfig.SERVICE_ACCOUNT_DIR = {str(directory)!r}\n"
        "from koord_framework.cluster.kube.transport import Transport\n"
        "t = Transport.from_kubeconfig(None)\n"
        "print(t.configuration.host, 'kubernetes' in sys.modules)\n"
    )
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "6443", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["https://10.96.0.1:6443", "False"]
