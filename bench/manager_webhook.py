"""koord-manager's webhook: admission latency over TLS on loopback, closed and open loop.

``python -m bench.manager_webhook [CONCURRENCY] [SECONDS] [--workers N] [--rate R]`` (defaults: 200
callers, 10 s per run, ``--workers`` as ``koord manager`` defaults it, 200 admissions per second offered).

The server is the manager's real webhook runtime (``WebhookRuntime``: the certificate controller, the informer
on an embedded cluster holding ten ClusterColocationProfiles, the installed ``/mutate-pod`` handlers, served
by ``--workers`` processes sharing the port). Callers run in four other processes, each on one kept-alive TLS
connection as the API server does, and send AdmissionReviews of a pod that a profile turns into a BE pod.
Four runs:

* **one caller alone**: the latency of one admission, nothing queued;
* **closed loop**: CONCURRENCY callers back to back. A request waits for the CONCURRENCY - 1 ahead of it,
  so latency ~ CONCURRENCY / throughput: this measures throughput, not what the API server sees;
* **open loop**: what kube-apiserver does: CONCURRENCY callers (up to that many requests in flight), the
  requests arriving at a fixed offered rate R whatever the answers take. Latency is counted from the moment a
  request was due (a late send counts as waiting), so a server that falls behind shows it;
  The callers' own lateness (a caller starved of CPU sends late) is printed beside it;
* **requests per CPU-second**: the server's processes' CPU time over the closed-loop run.

The load average is printed: on a shared machine the figures move with it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PATH = "/mutate-pod"
CLIENT_PROCESSES = 4
TARGET_P99_MS = 10.0


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


def _cluster() -> Any:
    from koord_framework.cluster.memory import MemoryCluster

    cluster = MemoryCluster(seed=0)
    for kind, name in (
        ("MutatingWebhookConfiguration", "koordinator-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "koordinator-validating-webhook-configuration"),
    ):
        cluster.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": name},
                "webhooks": [],
            }
        )
    for kind, objs in _profiles().items():
        api = {
            "ClusterColocationProfile": "config.koordinator.sh/v1alpha1",
            "PriorityClass": "scheduling.k8s.io/v1",
        }
        for obj in objs:
            cluster.create({"apiVersion": api.get(kind, "v1"), "kind": kind, **obj})
    return cluster


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _connect(port: int, ctx: ssl.SSLContext) -> http.client.HTTPSConnection:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
    conn.connect()
    return conn


def _post(conn: http.client.HTTPSConnection, body: bytes) -> None:
    conn.request("POST", PATH, body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200 or b'"allowed":true' not in data:
        raise RuntimeError(f"unexpected answer {resp.status}: {data[:200]!r}")


def _client(
    port: int, ca: str, ids: list[int], total: int, seconds: float, start_at: float, rate: float, out: Any
) -> None:
    """Callers ``ids`` of ``total``: back to back (``rate`` 0), or caller i sending the requests due at
    ``start_at + k / rate`` for k = i, i + total, ..."""
    ctx = ssl.create_default_context(cadata=ca)
    latencies: list[float] = []
    lags: list[float] = []
    done: list[float] = []
    lock = threading.Lock()
    bodies = [_review(i) for i in range(64)]

    def run(caller: int) -> None:
        conn = _connect(port, ctx)
        mine: list[float] = []
        lag: list[float] = []
        last = 0.0
        end = start_at + seconds
        time.sleep(max(0.0, start_at - time.time()))
        k = caller
        while True:
            if rate > 0:
                due = start_at + k / rate
                if due >= end:
                    break
                time.sleep(max(0.0, due - time.time()))
            else:
                due = time.time()
                if due >= end:
                    break
            lag.append(time.time() - due)
            _post(conn, bodies[k % len(bodies)])
            last = time.time()
            mine.append(last - due)
            k += total if rate > 0 else 1
        conn.close()
        with lock:
            latencies.extend(mine)
            lags.extend(lag)
            done.append(last)

    workers = [threading.Thread(target=run, args=(i,)) for i in ids]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((latencies, lags, max(done, default=0.0)))


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


def measure(concurrency: int, seconds: float, port: int, ca: str, rate: float = 0.0) -> dict[str, float]:
    """``concurrency`` callers for ``seconds``: closed loop (``rate`` 0) or open loop at ``rate`` req/s."""
    out: Any = mp.Queue()
    start_at = time.time() + 3.0  # every connection is up (and its handshake done) before the clock starts
    ids = [list(range(i, concurrency, CLIENT_PROCESSES)) for i in range(CLIENT_PROCESSES)]
    procs = [
        mp.Process(target=_client, args=(port, ca, mine, concurrency, seconds, start_at, rate, out))
        for mine in ids
        if mine
    ]
    for p in procs:
        p.start()
    latencies: list[float] = []
    lags: list[float] = []
    last = 0.0
    for _ in procs:
        got, lag, end = out.get()
        latencies += got
        lags += lag
        last = max(last, end)
    for p in procs:
        p.join()
    return {
        "requests": len(latencies),
        "rps": len(latencies) / max(1e-9, last - start_at),
        "p50_ms": _pct(latencies, 0.50),
        "p99_ms": _pct(latencies, 0.99),
        "lag_p99_ms": _pct(lags, 0.99),
    }


def _verdict(p99: float) -> str:
    return "met" if p99 <= TARGET_P99_MS else "NOT met"


def main(argv: list[str]) -> None:
    from koord_framework.featuregates import gates_for
    from koord_framework.manager.webhook import certs
    from koord_framework.manager.webhook.controller import WebhookSettings
    from koord_framework.manager.webhook.runtime import WebhookRuntime, load_handlers
    from koord_framework.manager.webhook.workers import default_workers

    parser = argparse.ArgumentParser(prog="python -m bench.manager_webhook")
    parser.add_argument("concurrency", nargs="?", type=int, default=200)
    parser.add_argument("seconds", nargs="?", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--rate", type=float, default=200.0, help="open loop: admissions offered per second")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        gates = gates_for("manager").parse("")
        settings = WebhookSettings(
            cert_dir=Path(tmp), port=0, host="127.0.0.1", bind_host="127.0.0.1", workers=args.workers
        )
        runtime = WebhookRuntime(_cluster(), settings, load_handlers(gates), gates=gates)
        runtime.start()
        try:
            deadline = time.monotonic() + 120
            while not runtime.ready():
                if time.monotonic() > deadline:
                    raise SystemExit("webhook server did not become ready in 120 s")
                time.sleep(0.1)
            artifacts = certs.read_dir(Path(tmp))
            assert artifacts is not None
            ca = artifacts.ca_cert.decode()
            pids = [os.getpid()] + (
                [w.process.pid for w in runtime.pool._current()] if runtime.pool is not None else []
            )
            alone = measure(1, min(args.seconds, 3.0), runtime.port, ca)
            cpu0 = sum(_cpu_seconds(p) for p in pids)
            closed = measure(args.concurrency, args.seconds, runtime.port, ca)
            cpu = sum(_cpu_seconds(p) for p in pids) - cpu0
            opened = measure(args.concurrency, args.seconds, runtime.port, ca, rate=args.rate)
        finally:
            runtime.close()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"manager webhook {PATH} over TLS on loopback, {args.workers} worker process(es), "
        f"{os.cpu_count()} CPUs, load average {load}; target p99 <= {TARGET_P99_MS:.0f} ms\n"
        f"  one caller alone:              p50 {alone['p50_ms']:7.2f} ms  p99 {alone['p99_ms']:7.2f} ms  "
        f"{alone['rps']:6.0f} req/s\n"
        f"  closed loop, {args.concurrency} back to back:   p50 {closed['p50_ms']:7.1f} ms  "
        f"p99 {closed['p99_ms']:7.1f} ms  {closed['rps']:6.0f} req/s  ({_verdict(closed['p99_ms'])}; "
        f"latency ~ {args.concurrency} / throughput)\n"
        f"  open loop, {args.concurrency} in flight at {args.rate:.0f}/s: p50 {opened['p50_ms']:7.1f} ms  "
        f"p99 {opened['p99_ms']:7.1f} ms  {opened['rps']:6.0f} req/s achieved  "
        f"({_verdict(opened['p99_ms'])}; of which the callers' own lateness p99 "
        f"{opened['lag_p99_ms']:.1f} ms)\n"
        f"  server CPU: {closed['requests'] / max(cpu, 1e-9):.0f} requests per CPU-second "
        f"({cpu:.1f} CPU-s for {closed['requests']:.0f} closed-loop requests)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
