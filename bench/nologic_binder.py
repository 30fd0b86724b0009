"""The ceiling: a binder with no scheduling logic, for ``bench/kube_e2e.py`` to compare schedulers against.

    python bench/nologic_binder.py --kubeconfig FILE [--scheduler-name NAME] [--connections 16]

It lists the nodes once, then lists and watches the pending pods of ``--scheduler-name`` (field selector
``spec.nodeName=``, so the API server sends nothing about bound pods) and binds each to the next node
round-robin, over ``--connections`` persistent HTTP/1.1 connections (one thread each). No cache, no
filters, no scores, no rate limit: what is left is the cost of learning about a pod and posting its
binding, so its pods/s is what the API server on this machine allows a client that does nothing else.

Standard library only (``http.client``, ``json``, ``ssl``), with the credentials of the kubeconfig
(bearer token or client certificate; CA or insecure-skip-tls-verify) read by the ``kubernetes`` client's
loader. It runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import queue
import signal
import ssl
import sys
import threading
import time
from typing import Any
from urllib.parse import quote, urlencode, urlsplit


class Api:
    """Where the API server is and how to authenticate; opens keep-alive connections to it."""

    def __init__(self, kubeconfig: str) -> None:
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        cfg = k8s_client.Configuration()
        k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg, persist_config=False)  # type: ignore[no-untyped-call]
        url = urlsplit(str(cfg.host))
        self.https = url.scheme == "https"
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if self.https else 80)
        self.headers = {"Accept": "application/json", "Content-Type": "application/json"}
        token = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
        if token:
            self.headers["Authorization"] = token if token.startswith("Bearer ") else f"Bearer {token}"
        self.context: ssl.SSLContext | None = None
        if self.https:
            ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
            if not cfg.verify_ssl:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if cfg.cert_file:
                ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
            self.context = ctx

    def connect(self, timeout: float | None = 30.0) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get(self, conn: http.client.HTTPConnection, path: str, query: dict[str, Any]) -> Any:
        conn.request("GET", f"{path}?{urlencode(query)}", headers=self.headers)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status}: {body[:300]!r}")
        return json.loads(body)


class Binder:
    def __init__(self, api: Api, scheduler_name: str, connections: int) -> None:
        self.api = api
        self.selector = f"spec.schedulerName={scheduler_name},spec.nodeName="
        self.connections = connections
        self.pending: queue.SimpleQueue[tuple[str, str, str] | None] = queue.SimpleQueue()
        self.taken: set[str] = set()
        self.nodes: list[str] = []
        self.stop = threading.Event()
        self.bound = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._rr = itertools.count()

    def offer(self, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if (pod.get("spec") or {}).get("nodeName") or uid in self.taken:
            return
        self.taken.add(uid)
        self.pending.put((str(meta.get("namespace")), str(meta.get("name")), uid))

    def start(self) -> None:
        conn = self.api.connect()
        nodes = self.api.get(conn, "/api/v1/nodes", {})
        self.nodes = [str(n["metadata"]["name"]) for n in nodes.get("items") or ()]
        if not self.nodes:
            raise RuntimeError("no nodes to bind to")
        pods = self.api.get(conn, "/api/v1/pods", {"fieldSelector": self.selector})
        for pod in pods.get("items") or ():
            self.offer(pod)
        conn.close()
        rv = str((pods.get("metadata") or {}).get("resourceVersion") or "")
        for i in range(self.connections):
            threading.Thread(target=self._bind_loop, name=f"bind-{i}", daemon=True).start()
        threading.Thread(target=self._watch, args=(rv,), name="watch", daemon=True).start()

    def _watch(self, rv: str) -> None:
        while not self.stop.is_set():
            query = {"watch": "true", "fieldSelector": self.selector, "resourceVersion": rv}
            conn = self.api.connect(timeout=None)
            try:
                conn.request("GET", f"/api/v1/pods?{urlencode(query)}", headers=self.api.headers)
                response = conn.getresponse()
                if response.status != 200:
                    raise RuntimeError(f"watch: HTTP {response.status}")
                while not self.stop.is_set():
                    line = response.readline()
                    if not line:
                        break
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.offer(obj)
            except (OSError, http.client.HTTPException, RuntimeError, ValueError) as err:
                print(f"watch: {err}; again in 1 s", file=sys.stderr, flush=True)
                self.stop.wait(1.0)
            finally:
                conn.close()

    def _bind_loop(self) -> None:
        conn = self.api.connect()
        while not self.stop.is_set():
            item = self.pending.get()
            if item is None:
                return
            namespace, name, uid = item
            node = self.nodes[next(self._rr) % len(self.nodes)]
            body = json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "namespace": namespace, "uid": uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                }
            ).encode()
            path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/binding"
            for attempt in range(2):
                try:
                    conn.request("POST", path, body=body, headers=self.api.headers)
                    response = conn.getresponse()
                    response.read()
                    ok = 200 <= response.status < 300
                    with self._lock:
                        if ok:
                            self.bound += 1
                        else:
                            self.failed += 1
                    break
                except (OSError, http.client.HTTPException):
                    conn.close()  # reconnects on the next request
                    if attempt:
                        with self._lock:
                            self.failed += 1

    def close(self) -> None:
        self.stop.set()
        for _ in range(self.connections):
            self.pending.put(None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", default="no-logic-binder")
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    binder = Binder(Api(args.kubeconfig), args.scheduler_name, args.connections)
    started = time.monotonic()
    binder.start()
    done.wait()
    binder.close()
    print(
        f"bound {binder.bound}, failed {binder.failed} in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
