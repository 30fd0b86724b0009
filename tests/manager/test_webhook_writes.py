"""Writes by admission handlers (``AdmissionHandler.writes``): in the manager's process through the cluster,
and from ``--webhook-workers`` processes through the manager over the worker's pipe."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import ClusterError, ConflictError, NotFoundError
from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook import certs
from koord_framework.manager.webhook.controller import WebhookSettings
from koord_framework.manager.webhook.runtime import ClusterWriter, WebhookRuntime, load_handlers
from koord_framework.manager.webhook.workers import WorkerPool, _RemoteWriter
from koord_framework.testing.probes import wait_for

QUOTA = {
    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
    "kind": "ElasticQuota",
    "metadata": {"name": "team-a", "namespace": "default"},
    "spec": {"max": {"cpu": "3"}},
}


def test_the_cluster_writer_writes_only_its_kinds() -> None:
    cluster = MemoryCluster()
    writer = ClusterWriter(cluster, ["ConfigMap"])
    cm = cluster.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}}
    )
    cm["data"] = {"k": "v"}
    assert writer.update(cm)["data"] == {"k": "v"}
    assert writer.get("ConfigMap", "c", "d") is not None and writer.get("ConfigMap", "x", "d") is None
    with pytest.raises(PermissionError, match="'Pod'"):
        writer.update({"kind": "Pod", "metadata": {"name": "p"}})


def test_the_remote_writer_returns_the_answer_and_raises_the_error_by_class() -> None:
    answers: list[tuple[bool, Any]] = [(True, {"kind": "ElasticQuota"}), (False, ("ConflictError", "stale"))]
    writer: _RemoteWriter

    def send(msg: tuple[Any, ...]) -> None:
        assert msg[0] == "write"
        ok, value = answers.pop(0)
        threading.Thread(target=writer.resolve, args=(msg[1], ok, value)).start()

    writer = _RemoteWriter(send)
    assert writer.update({"kind": "ElasticQuota"}) == {"kind": "ElasticQuota"}
    with pytest.raises(ConflictError, match="stale"):
        writer.update({"kind": "ElasticQuota"})


def test_the_remote_writer_gives_up_when_the_manager_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    import koord_framework.manager.webhook.workers as workers

    monkeypatch.setattr(workers, "_WRITE_TIMEOUT", 0.05)
    writer = _RemoteWriter(lambda msg: None)
    with pytest.raises(ClusterError, match="did not answer get"):
        writer.get("ElasticQuota", "q", "default")


class _FakeWorker:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.done = threading.Event()

    def send(self, msg: tuple[Any, ...]) -> None:
        self.sent.append(msg)
        self.done.set()


def _pool_write(pool: Any, msg: tuple[Any, ...]) -> tuple[Any, ...]:
    worker = _FakeWorker()
    WorkerPool._write(pool, worker, msg)  # type: ignore[arg-type]
    assert worker.done.wait(5)
    return worker.sent[0]


def test_the_manager_does_a_workers_write_and_refuses_other_kinds() -> None:
    cluster = MemoryCluster()
    stored = cluster.create(dict(QUOTA))

    class Pool:
        informer = type("I", (), {"cluster": cluster})()
        writes = frozenset({"ElasticQuota"})
        _writes_pool = None

    pool = Pool()
    assert _pool_write(pool, ("write", 1, "get", "ElasticQuota", "team-a", "default"))[2:] == (True, stored)
    stale = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "0"}}
    updated = {**stored, "metadata": {**stored["metadata"], "labels": {"x": "y"}}}
    assert _pool_write(pool, ("write", 2, "update", updated))[2] is True
    answer = _pool_write(pool, ("write", 3, "update", stale))
    assert answer[2] is False and answer[3][0] == "ConflictError"
    answer = _pool_write(pool, ("write", 4, "get", "Pod", "p", "default"))
    assert answer[2] is False and "may not write kind 'Pod'" in answer[3][1]
    assert issubclass(NotFoundError, ClusterError)
    pool._writes_pool.shutdown()  # type: ignore[attr-defined]


def _configurations(cluster: MemoryCluster) -> None:
    """The two webhook configurations the manager's certificate controller keeps the caBundle of."""
    for kind, name, path in (
        ("MutatingWebhookConfiguration", "koordinator-mutating-webhook-configuration", "/mutate-pod"),
        ("ValidatingWebhookConfiguration", "koordinator-validating-webhook-configuration", "/validate-pod"),
    ):
        cluster.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": name},
                "webhooks": [{"name": "w.koordinator.sh", "clientConfig": {"service": {"path": path}}}],
            }
        )


def _review(i: int) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{i}",
            "namespace": "default",
            "labels": {"quota.scheduling.koordinator.sh/name": "team-a"},
        },
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
    }
    return {
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


def test_worker_processes_evaluate_quota_through_the_managers_writes(tmp_path: Path) -> None:
    pytest.importorskip("koord_plugin_elasticquota")
    cluster = MemoryCluster(seed=0)
    _configurations(cluster)
    cluster.create(dict(QUOTA))
    gates = gates_for("manager").parse("EnableQuotaAdmission=true")
    settings = WebhookSettings(
        cert_dir=tmp_path / "certs", port=0, host="127.0.0.1", bind_host="127.0.0.1", workers=2
    )
    runtime = WebhookRuntime(cluster, settings, load_handlers(gates), gates=gates)
    runtime.start()
    try:
        wait_for(runtime.ready, 90, "the worker pool to be ready")
        artifacts = certs.read_dir(settings.cert_dir)
        assert artifacts is not None
        ctx = ssl.create_default_context(cadata=artifacts.ca_cert.decode())
        answers = []
        for i in range(4):
            conn = http.client.HTTPSConnection("127.0.0.1", runtime.port, context=ctx, timeout=30)
            conn.request(
                "POST", "/validate-pod", json.dumps(_review(i)), {"Content-Type": "application/json"}
            )
            answers.append(json.loads(conn.getresponse().read())["response"])
            conn.close()
            if i < 2:
                # The next admission may land on the other worker: let the informer carry the write there.
                want = json.dumps({"cpu": str(i + 1)}, separators=(",", ":"))
                wait_for(
                    lambda want=want: (
                        (
                            cluster.get("ElasticQuota", "team-a", "default")["metadata"].get("annotations")
                            or {}
                        ).get("quota.scheduling.koordinator.sh/child-request")
                        == want
                    ),
                    90,
                    "the quota's child-request written through the manager",
                )
    finally:
        runtime.close()
    assert [a["allowed"] for a in answers] == [True, True, True, False]
    assert answers[3]["status"]["code"] == 400
    assert answers[3]["status"]["message"] == (
        "exceeded quota: default/team-a, requested: cpu=1, used: cpu=3, limited: cpu=3"
    )
    annotations = cluster.get("ElasticQuota", "team-a", "default")["metadata"]["annotations"]
    assert annotations["quota.scheduling.koordinator.sh/child-request"] == '{"cpu":"3"}'
