"""koord-manager's webhook: admission latency over TLS on loopback under 200 concurrent requests.

``python -m bench.manager_webhook [CONCURRENCY] [SECONDS]`` (default 200 clients for 10 s). The server (the
real ``WebhookServer`` with the shipped ``/mutate-pod`` handlers, ten ClusterColocationProfiles, a generated
certificate) runs in its own process; the clients, in four other processes, each keep one TLS connection
alive (as the API server does) and send AdmissionReviews of a BE pod back to back. Reported: the latency
p50/p99 of every request under that load, the requests per second, and the latency of one client alone.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PATH = "/mutate-pod"
CLIENT_PROCESSES = 4


def _profiles() -> dict[str, list[dict[str, Any]]]:
    profiles = [
        {
            "metadata": {"name": f"profile-{i}", "resourceVersion": "1"},
            "spec": {
                "selector": {"matchLabels": {"app": f"app-{i}"}},
                "qosClass": "BE",
                "priorityClassName": "koord-batch",
                "koordinatorPriority": 1000 + i,
                "labels": {"colocated": "true"},
                "schedulerName": "koord-scheduler",
            },
        }
        for i in range(10)
    ]
    return {
        "ClusterColocationProfile": profiles,
        "Namespace": [{"metadata": {"name": "default", "labels": {}}}],
        "PriorityClass": [{"metadata": {"name": "koord-batch"}, "value": 5000}],
    }


class _Lister:
    def __init__(self, objs: dict[str, list[dict[str, Any]]]) -> None:
        self.objs = objs

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return next((o for o in self.objs.get(kind, []) if o["metadata"]["name"] == name), None)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.objs.get(kind, [])


def _serve(cert_dir: str, ready: Any, port: Any, stop: Any) -> None:
    from koord_plugin_colocationprofile import ClusterColocationProfile, ExtendedResourceSpec

    from koord_framework.manager.webhook.dispatch import Dispatcher
    from koord_framework.manager.webhook.server import WebhookServer

    handlers = [ClusterColocationProfile(), ExtendedResourceSpec()]
    lister = _Lister(_profiles())
    for h in handlers:
        h.bind(lister)
    server = WebhookServer(Dispatcher(handlers), host="127.0.0.1", port=0, cert_dir=Path(cert_dir))
    server.reload()
    server.start()
    port.value = server.port
    ready.set()
    stop.wait()
    server.close()


def _review(i: int) -> bytes:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": "default", "labels": {"app": f"app-{i % 10}"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1Gi"},
                        "limits": {"cpu": "1", "memory": "2Gi"},
                    },
                }
            ]
        },
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{i}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "object": pod,
        },
    }
    return json.dumps(review).encode()


def _client(port: int, ca: str, threads: int, seconds: float, start_at: float, out: Any) -> None:
    ctx = ssl.create_default_context(cadata=ca)
    latencies: list[float] = []
    lock = threading.Lock()
    bodies = [_review(i) for i in range(64)]

    def run() -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        conn.connect()
        mine: list[float] = []
        while time.time() < start_at:
            time.sleep(0.001)
        end = start_at + seconds
        i = 0
        while time.time() < end:
            t0 = time.perf_counter()
            conn.request("POST", PATH, bodies[i % len(bodies)], {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            mine.append(time.perf_counter() - t0)
            if resp.status != 200 or b'"allowed":true' not in data:
                raise RuntimeError(f"unexpected answer {resp.status}: {data[:200]!r}")
            i += 1
        conn.close()
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put(latencies)


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def measure(concurrency: int, seconds: float, port: int, ca: str) -> dict[str, float]:
    out: Any = mp.Queue()
    start_at = time.time() + 2.0  # every connection is up (and its handshake done) before the clock starts
    per = [
        concurrency // CLIENT_PROCESSES + (1 if i < concurrency % CLIENT_PROCESSES else 0)
        for i in range(CLIENT_PROCESSES)
    ]
    procs = [mp.Process(target=_client, args=(port, ca, n, seconds, start_at, out)) for n in per if n > 0]
    for p in procs:
        p.start()
    latencies: list[float] = []
    for _ in procs:
        latencies += out.get()
    for p in procs:
        p.join()
    return {
        "requests": len(latencies),
        "rps": len(latencies) / seconds,
        "p50_ms": _pct(latencies, 0.50),
        "p99_ms": _pct(latencies, 0.99),
    }


def main(argv: list[str]) -> None:
    from koord_framework.manager.webhook import certs

    concurrency = int(argv[0]) if argv else 200
    seconds = float(argv[1]) if len(argv) > 1 else 10.0
    with tempfile.TemporaryDirectory() as tmp:
        artifacts = certs.generate("127.0.0.1")
        certs.write_dir(Path(tmp), artifacts)
        ready, stop, port = mp.Event(), mp.Event(), mp.Value("i", 0)
        server = mp.Process(target=_serve, args=(tmp, ready, port, stop))
        server.start()
        try:
            if not ready.wait(30):
                raise SystemExit("webhook server did not start")
            ca = artifacts.ca_cert.decode()
            alone = measure(1, min(seconds, 3.0), port.value, ca)
            loaded = measure(concurrency, seconds, port.value, ca)
        finally:
            stop.set()
            server.join(10)
    print(
        f"manager webhook /mutate-pod over TLS, {concurrency} concurrent clients for {seconds:.0f} s: "
        f"p50 {loaded['p50_ms']:.1f} ms, p99 {loaded['p99_ms']:.1f} ms, {loaded['rps']:.0f} req/s "
        f"({loaded['requests']:.0f} requests); one client alone: p50 {alone['p50_ms']:.2f} ms, "
        f"p99 {alone['p99_ms']:.2f} ms (target p99 <= 10 ms)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
