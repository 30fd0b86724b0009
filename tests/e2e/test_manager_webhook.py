"""koord manager against a real kube-apiserver: its webhooks called by the API server over loopback TLS, its
NodeSLOs and its batch resources.

The manager runs as a process with ``--kubeconfig``; the test installs Koordinator's two webhook
configurations (as the chart does, with a Service client config), and the manager's webhook controller
generates the certificates into the Secret ``koordinator-system/koordinator-webhook-certs``, points the
configurations at ``https://127.0.0.1:<port>`` (``--webhook-host``) and sets their caBundle. The
configurations select only the test's namespace, so that no other test's pods go through them.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.kube import KubeCluster
from koord_framework.errors import KoordError
from koord_framework.testing import make_node, make_pod

pytestmark = pytest.mark.e2e

MUTATING = "koordinator-mutating-webhook-configuration"
VALIDATING = "koordinator-validating-webhook-configuration"
SECRET = "koordinator-webhook-certs"
NS_LABEL = "koord-e2e-webhook"


def wait_for(
    predicate: Any,
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-4000:] if log is not None else ""
            raise AssertionError(f"koord manager exited {proc.returncode} while waiting for {what}:\n{tail}")
        try:
            if predicate():
                return
        except KoordError:
            pass
        time.sleep(0.2)
    tail = log.read_text()[-4000:] if log is not None else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def webhook(name: str, path: str, namespace: str, operations: list[str]) -> dict[str, Any]:
    # As Koordinator's chart: a Service client config the manager rewrites.
    return {
        "name": name,
        "clientConfig": {
            "service": {
                "name": "koordinator-webhook-service",
                "namespace": "koordinator-system",
                "path": path,
            }
        },
        "rules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": ["pods"]}
        ],
        "namespaceSelector": {"matchLabels": {NS_LABEL: namespace}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1", "v1beta1"],
        "timeoutSeconds": 10,
    }


@pytest.fixture
def configurations(kube_apiserver: Any, namespace: str) -> Iterator[None]:
    base = "/apis/admissionregistration.k8s.io/v1"
    status, body = kube_apiserver.request(
        "PATCH", f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": {NS_LABEL: namespace}}}
    )
    assert status == 200, body
    configs = [
        (
            "mutatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": MUTATING},
                "webhooks": [webhook("mpod.koordinator.sh", "/mutate-pod", namespace, ["CREATE"])],
            },
        ),
        (
            "validatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": VALIDATING},
                "webhooks": [
                    webhook("vpod.koordinator.sh", "/validate-pod", namespace, ["CREATE", "UPDATE"])
                ],
            },
        ),
    ]
    for plural, obj in configs:
        status, body = kube_apiserver.request("POST", f"{base}/{plural}", obj)
        assert status == 201, body
    try:
        yield
    finally:
        # Removed even when the test fails: a Fail webhook left behind would refuse every later pod.
        for plural, obj in configs:
            kube_apiserver.request("DELETE", f"{base}/{plural}/{obj['metadata']['name']}")


@pytest.fixture
def manager(
    kube_apiserver: Any, koordinator_system: str, koord_crds: list[str], tmp_path: Path, e2e_harness: Any
) -> Iterator[tuple[subprocess.Popen[bytes], Path, int]]:
    port = e2e_harness.free_port()
    log = tmp_path / "manager.log"
    flags = (
        "--resync=2",
        f"--webhook-port={port}",
        "--webhook-host=127.0.0.1",
        "--webhook-bind-address=127.0.0.1",
        f"--webhook-cert-dir={tmp_path / 'certs'}",
        "--webhook-cert-writer=secret",
    )
    with e2e_harness.koord_manager(kube_apiserver.kubeconfig, log, *flags) as proc:
        yield proc, log, port


def _ca_bundle(kube: KubeCluster) -> str:
    config = kube.get("MutatingWebhookConfiguration", MUTATING)
    return str(config["webhooks"][0]["clientConfig"].get("caBundle") or "")


def test_manager_webhooks_slos_and_batch_resources(
    kube: KubeCluster,
    kube_apiserver: Any,
    namespace: str,
    configurations: None,
    manager: tuple[subprocess.Popen[bytes], Path, int],
) -> None:
    proc, log, port = manager
    # Colocation on (slo-controller-config), a node and its NodeMetric.
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": {
            "colocation-config": json.dumps(
                {
                    "enable": True,
                    "cpuReclaimThresholdPercent": 60,
                    "memoryReclaimThresholdPercent": 65,
                    "updateTimeThresholdSeconds": 1,
                    "resourceDiffThreshold": 0.01,
                }
            )
        },
    }
    if kube.try_get("ConfigMap", "slo-controller-config", "koordinator-system") is None:
        kube.create(config)
    node = f"{namespace}-node"
    kube.create(make_node(node, cpu="8", memory="16Gi"))

    def node_metric(cpu: str) -> dict[str, Any]:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        # Koordinator's batch formula reads the system's usage (node usage less the pods', as the koordlet
        # reports it); no pods run here, so both are the same.
        usage = {"resources": {"cpu": cpu, "memory": "2Gi"}}
        return {"updateTime": now, "nodeMetric": {"nodeUsage": usage, "systemUsage": usage}}

    metric = kube.create(
        {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}}
    )
    kube.patch("NodeMetric", node, "", {"status": node_metric("1")}, status=True)

    # 1. The webhook controller: certificates in the Secret, configurations pointed at us with the CA.
    wait_for(lambda: _ca_bundle(kube) != "", 60, "caBundle on the mutating configuration", proc, log)
    secret = kube.get("Secret", SECRET, "koordinator-system")
    ca = base64.b64decode(secret["data"]["ca-cert.pem"])
    assert base64.b64decode(_ca_bundle(kube)) == ca
    mutating = kube.get("MutatingWebhookConfiguration", MUTATING)["webhooks"][0]["clientConfig"]
    assert mutating["url"] == f"https://127.0.0.1:{port}/mutate-pod"
    validating = kube.get("ValidatingWebhookConfiguration", VALIDATING)["webhooks"][0]["clientConfig"]
    assert base64.b64decode(validating["caBundle"]) == ca

    # 2. A profile and a PriorityClass; a pod created through the API comes back mutated.
    kube_apiserver.request(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "koord-batch"},
            "value": 5000,
            "preemptionPolicy": "PreemptLowerPriority",
        },
    )
    profile = f"{namespace}-colocation"
    kube.create(
        {
            "apiVersion": "config.koordinator.sh/v1alpha1",
            "kind": "ClusterColocationProfile",
            "metadata": {"name": profile},
            "spec": {
                "namespaceSelector": {"matchLabels": {NS_LABEL: namespace}},
                "selector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
                "qosClass": "BE",
                "priorityClassName": "koord-batch",
                "koordinatorPriority": 1111,
                "schedulerName": "koord-scheduler",
                "labels": {"koordinator.sh/mutated": "true"},
            },
        }
    )
    pod = make_pod("be-pod", namespace, cpu="1", memory="1Gi")
    pod["metadata"].setdefault("labels", {})["koordinator.sh/enable-colocation"] = "true"

    def created() -> dict[str, Any] | None:
        # The profile reaches the manager's informer a moment after it was created: retry until it applied.
        kube.create(pod)
        got = kube.get("Pod", "be-pod", namespace)
        if got["metadata"].get("labels", {}).get("koordinator.sh/qosClass") == "BE":
            return got
        kube.delete("Pod", "be-pod", namespace)
        wait_for(lambda: kube.try_get("Pod", "be-pod", namespace) is None, 10, "pod deleted")
        return None

    got: dict[str, Any] | None = None
    deadline = time.monotonic() + 30
    while got is None and time.monotonic() < deadline:
        got = created()
        if got is None:
            time.sleep(0.5)
    assert got is not None, f"the pod was never mutated:\n{log.read_text()[-3000:]}"
    labels = got["metadata"]["labels"]
    assert labels["koordinator.sh/priority"] == "1111"
    assert labels["koordinator.sh/mutated"] == "true"
    assert got["spec"]["priorityClassName"] == "koord-batch"
    assert got["spec"]["priority"] == 5000
    assert got["spec"]["schedulerName"] == "koord-scheduler"
    resources = got["spec"]["containers"][0]["resources"]
    assert "cpu" not in resources["requests"] and "memory" not in resources["requests"]
    assert resources["requests"]["kubernetes.io/batch-cpu"] == "1k"
    assert resources["requests"]["kubernetes.io/batch-memory"] == "1Gi"
    spec_annotation = json.loads(got["metadata"]["annotations"]["node.koordinator.sh/extended-resource-spec"])
    assert spec_annotation["containers"][got["spec"]["containers"][0]["name"]]["requests"] == {
        "kubernetes.io/batch-cpu": "1k",
        "kubernetes.io/batch-memory": "1Gi",
    }

    # 3. The validating webhook refuses what Koordinator refuses: batch resources without QoS BE.
    bad = make_pod("bad-pod", namespace)
    bad["spec"]["containers"][0]["resources"] = {
        "requests": {"kubernetes.io/batch-cpu": "1000"},
        "limits": {"kubernetes.io/batch-cpu": "1000"},
    }
    status, body = kube_apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods", bad)
    assert status == 400, body  # Koordinator's PodValidatingHandler: admission.Errored(400, err)
    assert "must specify koordinator QoS BE with koordinator colocation resources" in str(body.get("message"))

    # 4. NodeSLOs for every node; the node's batch allocatable follows its NodeMetric.
    def slos_for_all() -> bool:
        nodes = {n["metadata"]["name"] for n in kube.list("Node")[0]}
        slos = {s["metadata"]["name"] for s in kube.list("NodeSLO")[0]}
        return nodes <= slos

    wait_for(slos_for_all, 60, "a NodeSLO for every node", proc, log)

    def batch_cpu() -> str | None:
        alloc = kube.get("Node", node).get("status", {}).get("allocatable", {})
        value = alloc.get("kubernetes.io/batch-cpu")
        return str(value) if value is not None else None

    wait_for(lambda: batch_cpu() is not None, 60, "batch-cpu on the node", proc, log)
    first = int(batch_cpu() or 0)
    assert first > 0
    kube.patch("NodeMetric", node, "", {"status": node_metric("3")}, status=True)
    wait_for(lambda: int(batch_cpu() or 0) < first, 60, "batch-cpu following the higher usage", proc, log)
    assert first - int(batch_cpu() or 0) == 2000, (first, batch_cpu())
    assert metric["metadata"]["name"] == node
    assert proc.poll() is None
