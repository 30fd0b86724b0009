"""``--webhook-workers``: several processes serving the webhook port, each with the manager's cache and
certificates (the pool in ``koord_framework.manager.webhook.workers``)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.memory import MemoryCluster
from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook import certs
from koord_framework.manager.webhook.controller import WebhookSettings
from koord_framework.manager.webhook.runtime import WebhookRuntime, load_handlers

from .test_webhook_writes import _configurations

pytest.importorskip("koord_plugin_colocationprofile")  # the handlers workers rebuild are installed ones


def _wait(what: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[tuple[WebhookRuntime, MemoryCluster]]:
    cluster = MemoryCluster(seed=0)
    _configurations(cluster)
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    gates = gates_for("manager").parse("")
    settings = WebhookSettings(
        cert_dir=tmp_path / "certs", port=0, host="127.0.0.1", bind_host="127.0.0.1", workers=2
    )
    runtime = WebhookRuntime(cluster, settings, load_handlers(gates), gates=gates)
    runtime.start()
    try:
        _wait(runtime.ready)
        yield runtime, cluster
    finally:
        runtime.close()


def _admit(runtime: WebhookRuntime, ca: bytes, i: int) -> dict[str, Any]:
    """One review on a fresh connection (so that connections spread over the workers)."""
    ctx = ssl.create_default_context(cadata=ca.decode())
    conn = http.client.HTTPSConnection("127.0.0.1", runtime.port, context=ctx, timeout=30)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"u{i}",
            "kind": {"version": "v1", "kind": "Pod"},
            "resource": {"version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "object": pod,
        },
    }
    conn.request("POST", "/mutate-pod", json.dumps(review), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    out: dict[str, Any] = json.loads(resp.read())["response"]
    conn.close()
    return out


def _labelled(response: dict[str, Any]) -> bool:
    patch = json.loads(base64.b64decode(response.get("patch") or "W10="))
    return any(op["path"] == "/metadata/labels/colocated" for op in patch)


def _ca(runtime: WebhookRuntime) -> bytes:
    artifacts = certs.read_dir(runtime.settings.cert_dir)
    assert artifacts is not None
    return artifacts.ca_cert


def test_every_worker_follows_the_profiles(pool: tuple[WebhookRuntime, MemoryCluster]) -> None:
    runtime, cluster = pool
    assert runtime.pool is not None and len(runtime.pool._current()) == 2
    ca = _ca(runtime)
    assert not any(_labelled(_admit(runtime, ca, i)) for i in range(4))
    cluster.create(
        {
            "apiVersion": "config.koordinator.sh/v1alpha1",
            "kind": "ClusterColocationProfile",
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "labels": {"colocated": "yes"}},
        }
    )
    # A connection lands on either worker: after the profile reached both, 30 in a row are all mutated.
    _wait(lambda: all(_labelled(_admit(runtime, ca, i)) for i in range(30)), timeout=30)


def test_rotation_reaches_every_worker(pool: tuple[WebhookRuntime, MemoryCluster]) -> None:
    runtime, _ = pool
    old = _ca(runtime)
    fresh = certs.generate("127.0.0.1")  # a new CA: a client trusting only the old one is refused
    certs.write_dir(runtime.settings.cert_dir, fresh)
    runtime._reload()

    def rotated() -> bool:
        try:
            for i in range(20):
                _admit(runtime, fresh.ca_cert, i)
            return True
        except ssl.SSLError:
            return False

    _wait(rotated, timeout=30)
    with pytest.raises(ssl.SSLError):
        _admit(runtime, old, 0)


def test_a_dead_worker_is_replaced_and_readiness_waits_for_it(
    pool: tuple[WebhookRuntime, MemoryCluster],
) -> None:
    runtime, _ = pool
    assert runtime.pool is not None
    victim = runtime.pool._current()[0].process
    os.kill(victim.pid, signal.SIGKILL)
    _wait(lambda: not runtime.ready(), timeout=30)
    _wait(runtime.ready)
    pids = {w.process.pid for w in runtime.pool._current()}
    assert victim.pid not in pids and len(pids) == 2
    assert "allowed" in _admit(runtime, _ca(runtime), 0)


def test_close_stops_every_worker(tmp_path: Path) -> None:
    cluster = MemoryCluster(seed=0)
    _configurations(cluster)
    gates = gates_for("manager").parse("")
    settings = WebhookSettings(
        cert_dir=tmp_path / "certs", port=0, host="127.0.0.1", bind_host="127.0.0.1", workers=2
    )
    runtime = WebhookRuntime(cluster, settings, load_handlers(gates), gates=gates)
    runtime.start()
    assert runtime.pool is not None
    processes = [w.process for w in runtime.pool._current()]
    _wait(runtime.ready)
    runtime.close()
    assert all(not p.is_alive() for p in processes)
