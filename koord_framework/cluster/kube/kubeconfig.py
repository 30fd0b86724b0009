"""A reader for plain kubeconfig files, so that start-up need not import the ``kubernetes`` client.

Importing the client costs about 0.3 CPU s (its ``__init__`` imports every API class and model, and its
config loader pulls in ``requests``, oauthlib and google-auth), although the transport uses it only to read
the kubeconfig when the lean HTTP client serves the requests (issue 22, gap 4). This module reads the common
case itself: one file, a context naming a cluster (``server``, ``certificate-authority[-data]``,
``insecure-skip-tls-verify``, ``tls-server-name``) and a user with a static ``token``,
``username``/``password``, or a client certificate (``client-certificate[-data]`` / ``client-key[-data]``).

It also reads in-cluster credentials (``read_in_cluster``: the service account's token and CA, the API
server from ``KUBERNETES_SERVICE_HOST`` / ``_PORT``), the way koord runs in a pod. The token is read again
when its file changes (the kubelet rotates bound service-account tokens), as the client re-reads it.

Anything else returns None and the caller uses the client's loader exactly as before: exec plugins and
auth providers (tokens that refresh), ``tokenFile``, proxies, several files in ``$KUBECONFIG``, and any
file or service-account directory this reader finds incomplete, so every error message about bad
credentials is still the client's.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["SERVICE_ACCOUNT_DIR", "PlainConfig", "read_in_cluster", "read_plain"]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where a pod finds its service account's ``token`` and ``ca.crt`` (client-go's, the client's)."""

# The keys this reader understands; a cluster or user entry with any other key is left to the client.
_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "extensions",
    }
)
_USER_KEYS = frozenset(
    {
        "token",
        "username",
        "password",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "extensions",
    }
)


@dataclass
class PlainConfig:
    """The attributes of the client's ``Configuration`` that the transport and ``LeanHttp`` read."""

    host: str
    verify_ssl: bool = True
    ssl_ca_cert: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    tls_server_name: str | None = None
    assert_hostname: bool | None = None
    connection_pool_maxsize: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """Authentication headers (``Authorization``), constant for a plain kubeconfig."""
    token_file: str | None = None
    """A bearer token read from this file, again whenever the file changes (in-cluster credentials)."""
    _token_stamp: tuple[int, int] | None = field(default=None, repr=False)
    proxy: None = None
    socket_options: None = None
    retries: None = None
    keep_alive: bool = False

    def auth_settings(self) -> dict[str, dict[str, str]]:
        """In the shape of the client's ``Configuration.auth_settings()`` (the transport asks at most once
        a second: a token file is looked at as often)."""
        if self.token_file is not None:
            self._reread_token()
        return {name: {"in": "header", "key": name, "value": value} for name, value in self.headers.items()}

    def _reread_token(self) -> None:
        assert self.token_file is not None
        try:
            st = os.stat(self.token_file)
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp == self._token_stamp:
                return
            with open(self.token_file, encoding="utf-8") as source:
                token = source.read().strip()
        except OSError:
            return  # keep the last token: the next request's 401 says more than a missing file here
        if token:
            self.headers["authorization"] = f"Bearer {token}"
            self._token_stamp = stamp


def _default_path() -> str | None:
    env = os.environ.get("KUBECONFIG")
    if env:
        # Several files are merged by the client's rules: left to it.
        return env if os.pathsep not in env else None
    return os.path.expanduser("~/.kube/config")


def _named(entries: Any, name: Any, key: str) -> dict[str, Any] | None:
    if not isinstance(entries, list) or not isinstance(name, str):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(key)
            return value if isinstance(value, dict) else None
    return None


class _Unsupported(Exception):
    """Something this reader leaves to the client's loader."""


def _data_file(encoded: Any, directory: list[str]) -> str:
    """Base64 ``*-data`` written to a private temporary file (``ssl`` loads certificates from files only,
    and the client does the same)."""
    if not isinstance(encoded, str):
        raise _Unsupported
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as err:
        raise _Unsupported from err
    if not directory:
        path = tempfile.mkdtemp(prefix="koord-kubeconfig-")
        atexit.register(shutil.rmtree, path, True)
        directory.append(path)
    fd, name = tempfile.mkstemp(dir=directory[0])
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return name


def _file(value: Any, base: Path) -> str:
    if not isinstance(value, str) or not value:
        raise _Unsupported
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def _pick(entry: dict[str, Any], key: str, base: Path, tmp: list[str]) -> str | None:
    """A file named by ``key`` or given inline by ``key-data`` (the inline data wins, as in client-go)."""
    if entry.get(f"{key}-data"):
        return _data_file(entry[f"{key}-data"], tmp)
    if entry.get(key):
        return _file(entry[key], base)
    return None


def read_plain(kubeconfig: str | None, context: str | None = None) -> PlainConfig | None:
    """``kubeconfig`` (None: ``$KUBECONFIG`` or ``~/.kube/config``) read without the client, or None when
    it needs the client's loader (see the module's docstring)."""
    path = kubeconfig or _default_path()
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as source:
            doc = yaml.safe_load(source)
        return _resolve(doc, context, Path(path).resolve().parent)
    except (_Unsupported, OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def read_in_cluster(
    directory: str | None = None, environ: Mapping[str, str] | None = None
) -> PlainConfig | None:
    """In-cluster credentials as the client's ``load_incluster_config`` reads them (the API server at
    ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``, the service account's token and CA), or
    None when something is missing or empty: the client's loader then says what."""
    env = os.environ if environ is None else environ
    directory = directory or SERVICE_ACCOUNT_DIR
    host, port = env.get("KUBERNETES_SERVICE_HOST") or "", env.get("KUBERNETES_SERVICE_PORT") or ""
    token_file, ca_file = os.path.join(directory, "token"), os.path.join(directory, "ca.crt")
    if not host or not port or not os.path.isfile(token_file) or not os.path.isfile(ca_file):
        return None
    try:
        if os.path.getsize(ca_file) == 0:
            return None
    except OSError:
        return None
    address = f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"  # net.JoinHostPort
    config = PlainConfig(host=f"https://{address}", ssl_ca_cert=ca_file, token_file=token_file)
    config._reread_token()
    return config if "authorization" in config.headers else None


def _resolve(doc: Any, context: str | None, base: Path) -> PlainConfig | None:
    if not isinstance(doc, dict):
        return None
    ctx = _named(doc.get("contexts"), context or doc.get("current-context"), "context")
    if ctx is None:
        return None
    cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster")
    user = _named(doc.get("users"), ctx.get("user"), "user") if ctx.get("user") else {}
    if cluster is None or user is None:
        return None
    if set(cluster) - _CLUSTER_KEYS or set(user) - _USER_KEYS:
        return None
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("http://", "https://")):
        return None
    tls_name = cluster.get("tls-server-name")
    if tls_name is not None and not isinstance(tls_name, str):
        return None
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        return None
    tmp: list[str] = []
    config = PlainConfig(host=server.rstrip("/"), verify_ssl=not insecure, tls_server_name=tls_name or None)
    config.ssl_ca_cert = _pick(cluster, "certificate-authority", base, tmp)
    config.cert_file = _pick(user, "client-certificate", base, tmp)
    config.key_file = _pick(user, "client-key", base, tmp)
    if (config.cert_file is None) != (config.key_file is None):
        return None
    token, username, password = user.get("token"), user.get("username"), user.get("password")
    if token:
        if not isinstance(token, str):
            return None
        config.headers["authorization"] = f"Bearer {token}"
    elif username or password:
        if not isinstance(username, str) or not isinstance(password, str):
            return None
        basic = base64.b64encode(f"{username}:{password}".encode()).decode()
        config.headers["authorization"] = f"Basic {basic}"
    return config
