"""HTTP to the API server with raw JSON: the only place that touches the ``kubernetes`` client.

A plain kubeconfig is read by kubeconfig.py instead and the client is then not imported at all (start-up).

The generated API methods of the client validate every argument with pydantic and build model objects
(a ``V1Pod`` costs tens of KiB and a millisecond); the platform speaks JSON dicts (docs/adr/0001). So this
module uses the client only for what it is good at, loading kubeconfig / in-cluster credentials (tokens,
client certificates, exec plugins with refresh) and its urllib3 connection pool, and sends requests to
resource paths it builds itself from the kinds table, reading every response body in full. A body left
unread keeps its connection out of the pool, so each later request would open a new TLS connection
(about 41 ms instead of 2-3 ms for a bind).

Resource coordinates are discovered lazily: a kind whose canonical version is not served (PodDisruptionBudget
is ``policy/v1beta1`` only on Kubernetes 1.20) falls back to an alternative version, and whether a kind has
a ``status`` subresource is read from discovery rather than assumed.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from koord_framework.cluster.kinds import KINDS, KindInfo, unknown_kind
from koord_framework.cluster.kube.connectivity import Connectivity, install_filter
from koord_framework.cluster.kube.errors import KubeApiError, error_for_status
from koord_framework.cluster.kube.http import LeanHttp
from koord_framework.cluster.kube.kubeconfig import read_in_cluster, read_plain
from koord_framework.cluster.kube.ratelimit import TokenBucket
from koord_framework.errors import ClusterError, KubeClientMissingError, NotFoundError

try:
    import yaml
except ImportError as _missing:  # the optional extra koord-framework[kube] (docs/adr/0006)
    raise KubeClientMissingError() from _missing
if importlib.util.find_spec("urllib3") is None:  # the same extra; imported only by the client's path
    raise KubeClientMissingError()

__all__ = ["DEFAULT_BURST", "DEFAULT_QPS", "Resource", "Transport"]

log = logging.getLogger(__name__)

DEFAULT_QPS = 5000.0
"""Client rate limit. kube-scheduler's default of 50 caps binding at about 50 pods/s."""
DEFAULT_BURST = 10000
DEFAULT_MAX_CONNECTIONS = 64
"""Connections kept per API server: binders and evictors run in parallel threads."""
AUTH_REFRESH_SECONDS = 1.0
"""How often the client's auth settings are read again (an exec plugin's token refreshes through them);
reading them runs the kubeconfig loader's hook, which costs more than a bind."""

# Versions to try, in order, when the canonical version of a kind is not served.
_FALLBACK_VERSIONS: dict[str, tuple[str, ...]] = {
    "PodDisruptionBudget": ("policy/v1beta1",),
    "NodeResourceTopology": ("topology.node.k8s.io/v1alpha2",),
    "PriorityClass": ("scheduling.k8s.io/v1beta1",),
    "Lease": ("coordination.k8s.io/v1beta1",),
}


@dataclass(frozen=True)
class Resource:
    """Where a kind is served: the coordinates of its REST paths."""

    kind: str
    api_version: str
    plural: str
    namespaced: bool
    has_status: bool

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        root = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        parts = [root]
        if self.namespaced and namespace:
            parts.append(f"/namespaces/{quote(namespace, safe='')}")
        parts.append(f"/{self.plural}")
        if name is not None:
            parts.append(f"/{quote(name, safe='')}")
            if sub:
                parts.append(f"/{sub}")
        return "".join(parts)


class Transport:
    """Rate-limited JSON requests over the client's connection pool. Thread-safe."""

    def __init__(
        self,
        api_client: Any,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        request_timeout: float = 30.0,
        user_agent: str = "koord",
    ) -> None:
        self.api_client = api_client
        self.kinds: Mapping[str, KindInfo] = KINDS
        """The kinds requests may name (the ``KubeCluster`` sets its registry here)."""
        self.configuration = api_client.configuration
        self.host = str(self.configuration.host).rstrip("/")
        self.limiter = TokenBucket(qps, burst)
        self.request_timeout = request_timeout
        self.user_agent = user_agent
        self._resources: dict[str, Resource] = {}
        self._discovery: dict[str, dict[str, dict[str, Any]] | None] = {}
        self._lock = threading.Lock()
        self.requests = 0
        self.connectivity = Connectivity(self.host)
        """Whether the server answers; an outage is logged in a few lines (connectivity.py)."""
        install_filter()
        self._auth: dict[str, str] = {}
        self._auth_read = -AUTH_REFRESH_SECONDS
        self.lean: LeanHttp | None = None
        """The lean client for short requests (docs/adr/0006); None keeps urllib3 for everything."""
        if LeanHttp.usable(self.configuration):
            maxsize = getattr(self.configuration, "connection_pool_maxsize", None)
            self.lean = LeanHttp(self.configuration, max_idle=int(maxsize or DEFAULT_MAX_CONNECTIONS))

    # --- construction --------------------------------------------------------------------------------
    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        request_timeout: float = 30.0,
        user_agent: str = "koord",
    ) -> Transport:
        """Credentials from ``kubeconfig``; without one, in-cluster (service account) credentials when
        running in a pod, else ``$KUBECONFIG`` or ``~/.kube/config``.

        A plain kubeconfig (static token or certificates, see kubeconfig.py) or in-cluster credentials
        served by the lean client are read without importing the ``kubernetes`` client (0.3 CPU s of
        start-up); anything else goes through the client's loader as before."""
        in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        plain = read_in_cluster() if in_cluster else read_plain(kubeconfig, context)
        if plain is not None and LeanHttp.usable(plain):
            plain.connection_pool_maxsize = max_connections
            _warn_unverified(plain, kubeconfig)
            return cls(
                _LeanOnly(plain),
                qps=qps,
                burst=burst,
                request_timeout=request_timeout,
                user_agent=user_agent,
            )
        k8s_client, k8s_config = _client()
        configuration = k8s_client.Configuration()
        if in_cluster:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            if kubeconfig and not os.path.isfile(kubeconfig):
                # The client would say "No configuration found", which reads as an empty file.
                raise ClusterError(f"kubeconfig {kubeconfig}: no such file")
            try:
                k8s_config.load_kube_config(
                    config_file=kubeconfig,
                    context=context,
                    client_configuration=configuration,
                    persist_config=False,
                )
            except (k8s_config.ConfigException, OSError, ValueError, yaml.YAMLError) as err:
                # A file that is not YAML (or not a kubeconfig's shape) is bad input, not a crash.
                raise ClusterError(f"kubeconfig {kubeconfig or '(default)'}: {err}") from err
        # Must be set before the pool is built: each binder thread needs its own connection.
        configuration.connection_pool_maxsize = max_connections
        _warn_unverified(configuration, kubeconfig)
        return cls(
            k8s_client.ApiClient(configuration),
            qps=qps,
            burst=burst,
            request_timeout=request_timeout,
            user_agent=user_agent,
        )

    def set_limits(self, qps: float, burst: int) -> None:
        """Replace the rate limit (a transport made before the profile naming its limits was read)."""
        self.limiter = TokenBucket(qps, burst)

    def close(self) -> None:
        if self.lean is not None:
            self.lean.close()
        self.api_client.rest_client.close()

    # --- requests ------------------------------------------------------------------------------------
    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        headers.update(self._auth_headers())
        return headers

    def _auth_headers(self) -> dict[str, str]:
        # The client's own auth settings: bearer token (refreshed by exec plugins through its hook) or basic
        # auth; client certificates are in the connection pool instead. Read again once a second.
        now = time.monotonic()
        if now - self._auth_read >= AUTH_REFRESH_SECONDS:
            auth: dict[str, str] = {}
            for setting in self.configuration.auth_settings().values():
                if setting.get("in") == "header" and setting.get("value"):
                    auth[str(setting["key"]).title()] = str(setting["value"])
            self._auth, self._auth_read = auth, now
        return self._auth

    def _url(self, path: str, query: Mapping[str, Any] | Sequence[tuple[str, Any]] | None) -> str:
        url = self.host + path
        if query:
            items = query.items() if isinstance(query, Mapping) else query
            clean = [(k, _query_value(v)) for k, v in items if v is not None]
            if clean:
                url += "?" + urlencode(clean)
        return url

    def raw(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
    ) -> tuple[int, Any]:
        """One request. Returns ``(status, body bytes)``, or ``(status, response)`` with ``stream`` (a
        ``StreamedResponse`` or urllib3's: ``stream()``, ``read()``, ``release_conn()``, ``close()``; the
        caller must read it to the end or close it)."""
        self.limiter.wait()
        self.requests += 1
        if body is not None and content_type is None:
            content_type = "application/json"
        request_timeout = timeout if timeout is not None else self.request_timeout
        # Built before the exchange: a failure here (credentials, a bad query) is no outage.
        url, headers = self._url(path, query), self._headers(content_type)
        with self._exchange(method, path):
            if self.lean is not None and stream and body is None:
                return self.lean.stream(method, url[len(self.host) :], headers, request_timeout)
            if self.lean is not None and not stream:
                relative = url[len(self.host) :]
                return self.lean.request(method, relative, headers, _encoded(body), request_timeout)
            response = self.api_client.rest_client.request(
                method,
                url,
                headers=headers,
                body=body,  # the client serialises JSON bodies itself
                _request_timeout=request_timeout,
            )
        if stream:
            return response.status, response.response
        try:
            data = response.read()
        except client_errors() as err:
            # the server answered: a body cut short is this request's failure, not an outage
            raise KubeApiError(0, "ConnectionError", f"{method} {path}: {err}") from err
        return response.status, data

    @contextmanager
    def _exchange(self, method: str, path: str) -> Iterator[None]:
        """Around sending a request and getting its answer's head, by either client: a connection failure
        is told to ``connectivity`` (which logs an outage once, not per request) and raised as
        ``KubeApiError(0, "ConnectionError")``; an answer ends an outage."""
        try:
            yield
        except connection_errors() as err:
            self.connectivity.failed(err)
            raise KubeApiError(0, "ConnectionError", f"{method} {path}: {err}") from err
        except Exception as err:
            if not _is_client_exception(err):
                raise
            # the client's wrapping of a failed connection
            reason = getattr(err, "reason", err)
            self.connectivity.failed(reason)
            raise KubeApiError(0, "ConnectionError", f"{method} {path}: {reason}") from err
        self.connectivity.ok()

    def request(
        self,
        method: str,
        path: str,
        what: str,
        *,
        query: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        """A request whose non-2xx answer raises the port error (``what`` names the request in it);
        returns the parsed JSON body (None when empty)."""
        status, data = self.raw(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        if not 200 <= status < 300:
            raise error_for_status(status, data, what)
        return json.loads(data) if data else None

    # --- discovery -----------------------------------------------------------------------------------
    def resource(self, kind: str) -> Resource:
        """Where ``kind`` is served. Unknown kinds raise ``NotFoundError``; a kind the server does not
        serve (CRD not installed) resolves to its canonical coordinates, so requests fail with 404."""
        found = self._resources.get(kind)
        if found is not None:
            return found
        info = self.kinds.get(kind)
        if info is None:
            raise NotFoundError(unknown_kind(kind, self.kinds))
        for api_version in (info.api_version, *_FALLBACK_VERSIONS.get(kind, ())):
            listing = self._group_version(api_version)
            if listing is not None and info.plural in listing:
                entry = listing[info.plural]
                resolved = Resource(
                    kind=kind,
                    api_version=api_version,
                    plural=info.plural,
                    namespaced=bool(entry.get("namespaced", info.namespaced)),
                    has_status=f"{info.plural}/status" in listing,
                )
                with self._lock:
                    self._resources[kind] = resolved
                return resolved
        # Not served (yet): do not cache, so a CRD installed later is found on the next call.
        return self._canonical(info)

    def serves(self, kind: str) -> bool:
        """Whether the server serves ``kind`` now. Discovery of its group versions is asked afresh, so a
        CRD installed since the last look is seen."""
        info = self.kinds.get(kind)
        if info is None:
            return False
        with self._lock:
            self._resources.pop(kind, None)
            for api_version in (info.api_version, *_FALLBACK_VERSIONS.get(kind, ())):
                self._discovery.pop(api_version, None)
        self.resource(kind)
        with self._lock:
            return kind in self._resources

    @staticmethod
    def _canonical(info: KindInfo) -> Resource:
        return Resource(info.kind, info.api_version, info.plural, info.namespaced, has_status=True)

    def _group_version(self, api_version: str) -> dict[str, dict[str, Any]] | None:
        with self._lock:
            if api_version in self._discovery and self._discovery[api_version] is not None:
                return self._discovery[api_version]
        path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        status, data = self.raw("GET", path)
        listing: dict[str, dict[str, Any]] | None = None
        if status == 200:
            doc = json.loads(data)
            listing = {str(r.get("name")): r for r in doc.get("resources") or () if isinstance(r, dict)}
        elif status != 404:
            raise error_for_status(status, data, f"discovery of {api_version}")
        with self._lock:
            self._discovery[api_version] = listing
        return listing

    def forget_discovery(self) -> None:
        """Drop cached discovery (after installing CRDs, say)."""
        with self._lock:
            self._resources.clear()
            self._discovery.clear()


def _client() -> tuple[Any, Any]:
    """The ``kubernetes`` client's ``client`` and ``config`` modules, imported when first needed."""
    try:
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config
    except ImportError as missing:  # the optional extra koord-framework[kube] (docs/adr/0006)
        raise KubeClientMissingError() from missing
    return k8s_client, k8s_config


def client_errors() -> tuple[type[BaseException], ...]:
    """urllib3's base error, once something imported urllib3, else nothing: the lean client
    (``http.py``) raises ``OSError`` only, and urllib3 is imported by the ``kubernetes`` client's path
    alone, so a process that never imported it has none of its errors to catch. Its import is about
    30 ms of ``koord scheduler``'s start-up (issue 22, gap 4)."""
    module = sys.modules.get("urllib3.exceptions")
    error = getattr(module, "HTTPError", None) if module is not None else None
    return (error,) if isinstance(error, type) else ()


def connection_errors() -> tuple[type[BaseException], ...]:
    """What a failed connection raises: ``OSError``, and urllib3's errors once urllib3 is imported."""
    return (OSError, *client_errors())


def _is_client_exception(err: Exception) -> bool:
    """Whether ``err`` is the client's ``ApiException`` (only raised when the client was imported)."""
    module = sys.modules.get("kubernetes.client")
    api_exception = getattr(module, "ApiException", None) if module is not None else None
    return api_exception is not None and isinstance(err, api_exception)


def _warn_unverified(configuration: Any, kubeconfig: str | None) -> None:
    if not configuration.verify_ssl:
        # Said once here rather than by urllib3 on every request.
        log.warning("kubeconfig %s: the server's certificate is not verified", kubeconfig or "(default)")
        # By message, not by urllib3's warning class: importing urllib3 for it alone costs more than the
        # whole kubeconfig (start-up, issue 22); the client imports it when it is used.
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")


class _LeanOnly:
    """Stands in for the client's ``ApiClient`` when the lean client serves every request: it has the
    configuration and nothing to close (``Transport.raw`` sends nothing through ``rest_client``)."""

    def __init__(self, configuration: Any) -> None:
        self.configuration = configuration
        self.rest_client = self

    def close(self) -> None:
        """Nothing is pooled here; the lean client's connections are closed by the transport."""

    def request(self, method: str, url: str, **_: Any) -> Any:
        # Only a streamed request with a body would come here; no caller sends one.
        raise ClusterError(f"{method} {url}: a streamed request with a body needs the kubernetes client")


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def iter_lines(response: Any, chunk_size: int = 65536) -> Iterator[bytes]:
    """The newline-delimited JSON documents of a watch stream, as they arrive."""
    pending = b""
    for chunk in response.stream(chunk_size, decode_content=True):
        if not chunk:
            continue
        pending += chunk
        while True:
            cut = pending.find(b"\n")
            if cut < 0:
                break
            line, pending = pending[:cut], pending[cut + 1 :]
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _encoded(body: Any) -> bytes | None:
    """A request body as the lean client sends it: JSON for objects, UTF-8 for text."""
    if body is None or isinstance(body, bytes):
        return body
    text = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))
    return text.encode()
