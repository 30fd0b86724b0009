"""The webhook's metrics on the manager's ``/metrics`` (scraped over HTTP, as Prometheus does): Koordinator's
binding-admission counter and per-plugin duration histogram and the project's per-request histogram, from
the manager process itself and summed over ``--webhook-workers`` processes (a restarted worker's counts
kept)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from koord_framework.cluster.memory import MemoryCluster
from koord_framework.featuregates import gates_for
from koord_framework.health import HealthServer
from koord_framework.manager.webhook import certs
from koord_framework.manager.webhook.controller import WebhookSettings
from koord_framework.manager.webhook.runtime import WebhookRuntime, load_handlers

from .test_webhook_writes import _configurations

BINDING = "koord_manager_webhook_binding_admission_decisions_total"
PLUGIN_DURATION = "koord_manager_webhook_webhook_duration_milliseconds_count"
REQUEST_DURATION = "koord_manager_webhook_duration_seconds_count"
BINDING_ARGS = {"BindingAdmission": {"user_name": "koord-scheduler", "namespaces": "*"}}


def _wait(what: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Manager:
    """The webhook runtime with the manager's registry served on ``/metrics`` by a ``HealthServer`` (what
    ``koord manager``'s ComponentRunner serves)."""

    def __init__(self, runtime: WebhookRuntime, health: HealthServer) -> None:
        self.runtime = runtime
        self.health = health

    def scrape(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        url = f"http://127.0.0.1:{self.health.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def value(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.scrape().items() if n == name and want <= ls)

    def bind(self, i: int, user: str) -> dict[str, Any]:
        """One ``pods/binding`` review on a fresh connection (connections spread over the workers)."""
        artifacts = certs.read_dir(self.runtime.settings.cert_dir)
        assert artifacts is not None
        ctx = ssl.create_default_context(cadata=artifacts.ca_cert.decode())
        conn = http.client.HTTPSConnection("127.0.0.1", self.runtime.port, context=ctx, timeout=30)
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"u{i}",
                "kind": {"group": "", "version": "v1", "kind": "Binding"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": "binding",
                "name": "p0",
                "namespace": "default",
                "operation": "CREATE",
                "userInfo": {"username": user},
                "object": {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": "p0", "namespace": "default"},
                    "target": {"kind": "Node", "name": "n1"},
                },
            },
        }
        conn.request(
            "POST", "/validate-pod-binding", json.dumps(review), {"Content-Type": "application/json"}
        )
        resp = conn.getresponse()
        assert resp.status == 200
        out: dict[str, Any] = json.loads(resp.read())["response"]
        conn.close()
        return out


def _start(tmp_path: Path, workers: int) -> Iterator[Manager]:
    cluster = MemoryCluster(seed=0)
    _configurations(cluster)
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p0", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    cluster.create(pod)
    gates = gates_for("manager").parse("BindingAdmissionWebhook=true")
    settings = WebhookSettings(
        cert_dir=tmp_path / "certs", port=0, host="127.0.0.1", bind_host="127.0.0.1", workers=workers
    )
    registry = CollectorRegistry()
    runtime = WebhookRuntime(
        cluster, settings, load_handlers(gates, BINDING_ARGS), registry=registry, gates=gates
    )
    health = HealthServer("127.0.0.1:0", registry).start()
    runtime.start()
    try:
        _wait(runtime.ready)
        # The pod must be in the handlers' cache (a binding of an unknown pod is let through uncounted).
        manager = Manager(runtime, health)
        _wait(lambda: not manager.bind(-1, "someone")["allowed"], timeout=30)
        yield manager
    finally:
        runtime.close()
        health.close()


def _worker_sum(m: Manager, name: str, worker: Any = None) -> float:
    """``name`` summed over the last snapshot of ``worker`` (default: of every live worker)."""
    assert m.runtime.pool is not None
    workers = [worker] if worker is not None else m.runtime.pool._current()
    return sum(v for w in workers for family in w.metrics for s, _labels, v in family[3] if s == name)


@pytest.fixture
def in_process(tmp_path: Path) -> Iterator[Manager]:
    yield from _start(tmp_path, 1)


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Manager]:
    yield from _start(tmp_path, 2)


def test_in_process_webhook_metrics_are_on_metrics(in_process: Manager) -> None:
    m = in_process
    # This test process's counters are shared by every in-process runtime: compare with before.
    denied = m.value(BINDING, decision="denied")
    allowed = m.value(BINDING, decision="allowed_username")
    plugin = m.value(PLUGIN_DURATION, plugin_name="BindingAdmission", status="rejected")
    request = m.value(REQUEST_DURATION, path="/validate-pod-binding", allowed="false")
    assert not m.bind(1, "default-scheduler")["allowed"]
    assert m.bind(2, "system:serviceaccount:koordinator-system:koord-scheduler")["allowed"]
    assert m.value(BINDING, decision="denied") == denied + 1
    assert m.value(BINDING, decision="allowed_username") == allowed + 1
    # Koordinator's labels: the handler is validating, the request's kind lower-cased, its operation.
    assert (
        m.value(
            PLUGIN_DURATION,
            webhook_type="validate",
            object_type="binding",
            operation="CREATE",
            plugin_name="BindingAdmission",
            status="rejected",
        )
        == plugin + 1
    )
    assert m.value(REQUEST_DURATION, path="/validate-pod-binding", allowed="false") == request + 1


def test_worker_metrics_are_summed_on_metrics(pool: Manager) -> None:
    m = pool
    assert m.runtime.pool is not None
    # The fixture's first denial reaches the manager with the worker's next snapshot; from then on the sum is
    # steady (the manager process itself answers none of these requests).
    _wait(lambda: _worker_sum(m, BINDING) >= 1, timeout=30)

    def now() -> tuple[float, float, float]:
        return (
            m.value(BINDING, decision="denied"),
            m.value(REQUEST_DURATION, path="/validate-pod-binding", allowed="false"),
            m.value(PLUGIN_DURATION, plugin_name="BindingAdmission", status="rejected"),
        )

    # Settled: two scrapes more than a push interval apart agree (no warm-up count still on its way).
    previous, current = now(), None
    for _ in range(20):
        time.sleep(1.5)
        current = now()
        if current == previous:
            break
        previous = current
    assert current == previous, "the worker metrics did not settle"
    base, requests, plugin = current
    n = 12
    for i in range(n):
        assert not m.bind(i, "default-scheduler")["allowed"]
    _wait(lambda: m.value(BINDING, decision="denied") == base + n, timeout=30)
    # Each worker answered some (connections spread); the scrape sums them.
    per_worker = [_worker_sum(m, BINDING, w) for w in m.runtime.pool._current()]
    assert sum(per_worker) >= n
    # The histograms count the same requests (a snapshot may fall between a request's counter and its
    # histograms: waited for, not assumed).
    _wait(lambda: m.value(REQUEST_DURATION, path="/validate-pod-binding", allowed="false") == requests + n)
    _wait(lambda: m.value(PLUGIN_DURATION, plugin_name="BindingAdmission", status="rejected") == plugin + n)

    # A worker killed and restarted: what it had counted stays in the sums (counters never go back).
    pool = m.runtime.pool
    assert pool is not None
    victim = pool._current()[0]
    assert victim.process.pid is not None
    os.kill(victim.process.pid, signal.SIGKILL)
    _wait(lambda: victim not in pool._current() and m.runtime.ready(), timeout=90)
    assert m.value(BINDING, decision="denied") == base + n
    assert not m.bind(99, "default-scheduler")["allowed"]
    _wait(lambda: m.value(BINDING, decision="denied") == base + n + 1, timeout=30)
