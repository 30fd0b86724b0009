"""A small read-only API server on loopback for tests of what reads a real cluster (``koord snapshot``).

It answers what a client of the kube adapter's transport asks while reading: ``/version``, discovery
(``/api/v1``, ``/apis/<group>/<version>``), paged lists (``limit``/``continue``, as the real server pages:
a continue token per page, ``metadata.resourceVersion`` on the list) over all namespaces or one, and gets by
name, all as JSON. Objects come from ``objects(kind)`` (an embedded cluster's, or generated on the fly),
served sorted by namespace and name without ``apiVersion``/``kind`` on list items. Tests can forbid kinds
(403, as RBAC would), hide them (not served: no CRD), expire continue tokens (410) or stop answering.

    with FakeApiServer.from_cluster(cluster) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from koord_framework.cluster.kinds import KindInfo
from koord_framework.cluster.port import ClusterPort

__all__ = ["FakeApiServer"]

Obj = dict[str, Any]
ObjectsOf = Callable[[str], Sequence[Obj]]


def _sort_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class FakeApiServer:
    """Serves ``objects(kind)`` for every kind of ``kinds`` on ``http://127.0.0.1:<port>``."""

    def __init__(
        self,
        kinds: Mapping[str, KindInfo],
        objects: ObjectsOf,
        *,
        forbidden: Iterable[str] = (),
        not_served: Iterable[str] = (),
        resource_version: int = 1,
    ) -> None:
        self.kinds = dict(kinds)
        self.objects = objects
        self.forbidden = set(forbidden)
        """Kinds whose list/get answers 403 (discovery still shows them, as with RBAC)."""
        self.not_served = set(not_served)
        """Kinds absent from discovery and answering 404 (their CRD is not installed)."""
        self.expire_continue_once: set[str] = set()
        """Kinds whose first continue token answers 410 Gone (once each)."""
        self.resource_version = resource_version
        self.requests: list[str] = []
        """Paths and queries asked, in order."""
        self.down = False
        """When true, connections are closed without an answer."""
        self._by_plural = {(k.api_version, k.plural): k for k in self.kinds.values()}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                if server.down:
                    self.close_connection = True
                    return
                status, body = server.answer(self.path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    @classmethod
    def from_cluster(cls, cluster: ClusterPort, **options: Any) -> FakeApiServer:
        """Serve what ``cluster`` holds now (each kind listed once, when first asked)."""
        cache: dict[str, list[Obj]] = {}

        def objects(kind: str) -> list[Obj]:
            if kind not in cache:
                objs, _ = cluster.list(kind)
                cache[kind] = sorted(objs, key=_sort_key)
            return cache[kind]

        return cls(cluster.kinds, objects, **options)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeApiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write_kubeconfig(self, path: str | Path, token: str = "test-token") -> Path:
        """A kubeconfig for this server (a bearer token it does not check)."""
        path = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    # --- answers ------------------------------------------------------------------------------------
    def answer(self, raw_path: str) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(raw_path)
        url = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        if parts == ["version"]:
            return 200, {"major": "1", "minor": "20", "gitVersion": "v1.20.2-fake"}
        if parts[:1] == ["api"] and len(parts) >= 2:
            api_version, rest = parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return _status(404, "NotFound", f"the server could not find the requested resource ({raw_path})")
        if not rest:
            return self._discovery(api_version)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        info = self._by_plural.get((api_version, rest[0]))
        if info is None or info.kind in self.not_served:
            return _status(404, "NotFound", "the server could not find the requested resource")
        if info.kind in self.forbidden:
            return _status(
                403,
                "Forbidden",
                f'{info.plural}.{info.group or "core"} is forbidden: User "tester" cannot list resource '
                f'"{info.plural}" in API group "{info.group}" at the cluster scope',
            )
        if len(rest) == 2:
            return self._get(info, namespace, rest[1])
        return self._list(info, namespace, query)

    def _discovery(self, api_version: str) -> tuple[int, Any]:
        resources = []
        for info in self.kinds.values():
            if info.api_version != api_version or info.kind in self.not_served:
                continue
            resources.append({"name": info.plural, "namespaced": info.namespaced, "kind": info.kind})
            resources.append(
                {"name": f"{info.plural}/status", "namespaced": info.namespaced, "kind": info.kind}
            )
        if not resources:
            return _status(404, "NotFound", "the server could not find the requested resource")
        return 200, {"kind": "APIResourceList", "groupVersion": api_version, "resources": resources}

    def _get(self, info: KindInfo, namespace: str | None, name: str) -> tuple[int, Any]:
        for obj in self.objects(info.kind):
            if _sort_key(obj) == ((namespace or "") if info.namespaced else "", name):
                return 200, obj
        return _status(404, "NotFound", f'{info.plural} "{name}" not found')

    def _list(self, info: KindInfo, namespace: str | None, query: Mapping[str, str]) -> tuple[int, Any]:
        objs: Sequence[Obj] = self.objects(info.kind)
        if namespace is not None:
            objs = [o for o in objs if _sort_key(o)[0] == namespace]
        start = 0
        token = query.get("continue")
        if token:
            if info.kind in self.expire_continue_once:
                self.expire_continue_once.discard(info.kind)
                return _status(410, "Expired", "The provided continue parameter is too old")
            start = int(token.split(":", 1)[1])
        limit = int(query.get("limit") or 0)
        end = len(objs) if limit <= 0 else min(len(objs), start + limit)
        items = []
        for obj in objs[start:end]:
            item = dict(obj)
            item.pop("apiVersion", None)
            item.pop("kind", None)
            items.append(item)
        meta: dict[str, Any] = {"resourceVersion": str(self.resource_version)}
        if end < len(objs):
            meta["continue"] = f"{info.kind}:{end}"
        return 200, {
            "kind": f"{info.kind}List",
            "apiVersion": info.api_version,
            "metadata": meta,
            "items": items,
        }


def _status(code: int, reason: str, message: str) -> tuple[int, Any]:
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
