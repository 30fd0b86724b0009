"""koord manager's quota evaluation against a real kube-apiserver: with ``EnableQuotaAdmission`` the API
server calls ``/validate-pod`` over loopback TLS, pods are admitted into an ElasticQuota until its max, the
admitted sum lands in the quota's ``child-request`` annotation, and the next pod is refused with
Koordinator's message and code 400."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_pod

pytestmark = pytest.mark.e2e

VALIDATING = "koordinator-validating-webhook-configuration"
MUTATING = "koordinator-mutating-webhook-configuration"
NS_LABEL = "koord-e2e-webhook-quota"
CHILD = "quota.scheduling.koordinator.sh/child-request"


def _wait(predicate: Any, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n{log.read_text()[-4000:]}")


@pytest.fixture
def validating(kube_apiserver: Any, namespace: str) -> Iterator[None]:
    status, body = kube_apiserver.request(
        "PATCH", f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": {NS_LABEL: namespace}}}
    )
    assert status == 200, body
    base = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": VALIDATING},
        "webhooks": [
            {
                "name": "vpod.koordinator.sh",
                "clientConfig": {
                    "service": {
                        "name": "koordinator-webhook-service",
                        "namespace": "koordinator-system",
                        "path": "/validate-pod",
                    }
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {NS_LABEL: namespace}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }
        ],
    }
    status, body = kube_apiserver.request("POST", base, config)
    assert status == 201, body
    # The manager keeps both of Koordinator's configurations: the mutating one, with no webhook, too.
    mutating_base = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": MUTATING},
        "webhooks": [],
    }
    status, body = kube_apiserver.request("POST", mutating_base, mutating)
    assert status == 201, body
    try:
        yield
    finally:
        kube_apiserver.request("DELETE", f"{base}/{VALIDATING}")
        kube_apiserver.request("DELETE", f"{mutating_base}/{MUTATING}")


@pytest.fixture
def manager(
    kube_apiserver: Any, koordinator_system: str, koord_crds: list[str], tmp_path: Path, e2e_harness: Any
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    log = tmp_path / "manager.log"
    flags = (
        f"--webhook-port={e2e_harness.free_port()}",
        "--webhook-host=127.0.0.1",
        "--webhook-bind-address=127.0.0.1",
        f"--webhook-cert-dir={tmp_path / 'certs'}",
        "--webhook-cert-writer=fs",
        "--webhook-workers=2",  # the quota write goes from a worker process through the manager
        "--feature-gates=EnableQuotaAdmission=true",
    )
    with e2e_harness.koord_manager(kube_apiserver.kubeconfig, log, *flags) as proc:
        yield proc, log


def test_pods_are_admitted_into_their_elastic_quota_until_its_max(
    kube: KubeCluster,
    kube_apiserver: Any,
    namespace: str,
    validating: None,
    manager: tuple[subprocess.Popen[bytes], Path],
) -> None:
    proc, log = manager
    quota = f"{namespace}-team"
    kube.create(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": quota, "namespace": namespace},
            "spec": {"max": {"cpu": "2", "memory": "8Gi"}, "min": {"cpu": "1", "memory": "1Gi"}},
        }
    )

    def ca_set() -> bool:
        hooks = kube.get("ValidatingWebhookConfiguration", VALIDATING)["webhooks"]
        return bool(hooks[0]["clientConfig"].get("caBundle"))

    _wait(ca_set, 60, "the manager's CA in the validating configuration", log)

    def pod(i: int) -> dict[str, Any]:
        obj = make_pod(f"q-{i}", namespace, cpu="1", memory="1Gi")
        obj["metadata"].setdefault("labels", {})["quota.scheduling.koordinator.sh/name"] = quota
        return obj

    def post(i: int) -> tuple[int, Any]:
        status, body = kube_apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod(i))
        return int(status), body

    # The quota reaches the manager's informer (and its workers) a moment after it was created.
    first: list[tuple[int, Any]] = []
    _wait(lambda: first.append(post(0)) or first[-1][0] == 201, 30, "the first pod admitted", log)
    status, body = post(1)
    assert status == 201, body
    child = kube.get("ElasticQuota", quota, namespace)["metadata"]["annotations"][CHILD]
    assert json.loads(child) == {"cpu": "2", "memory": "2Gi"}
    status, body = post(2)
    assert status == 400, body
    assert body["message"] == (
        f'admission webhook "vpod.koordinator.sh" denied the request: exceeded quota: {namespace}/{quota}, '
        "requested: cpu=1, used: cpu=2, limited: cpu=2"
    )
    assert proc.poll() is None
