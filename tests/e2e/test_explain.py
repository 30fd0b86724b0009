"""``koord explain --kubeconfig`` on a real kube-apiserver: it explains, and writes nothing.

A pending pod is explained (scheduled on the copy, bound there, its PreBind run there); the API server's
objects keep their resourceVersions: the pod stays unbound, no node or pod changed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from koord_framework.cli.main import main
from koord_framework.cluster.kube import KubeCluster

pytestmark = pytest.mark.e2e


def _node(name: str, cpu: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"e2e-explain": "yes", "kubernetes.io/hostname": name}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _versions(kube: KubeCluster, namespace: str) -> dict[str, str]:
    pods, _ = kube.list("Pod", namespace)
    nodes, _ = kube.list("Node")
    return {
        f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": str(o["metadata"]["resourceVersion"])
        for o in [*pods, *nodes]
    }


def test_explain_pod_reads_the_live_cluster_and_writes_nothing(
    kube: KubeCluster, kube_apiserver: Any, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, cpu in (("explain-small", "1"), ("explain-big", "8")):
        if kube.try_get("Node", name) is None:
            kube.create(_node(name, cpu))
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {
                "schedulerName": "koord-scheduler",
                "nodeSelector": {"e2e-explain": "yes"},
                "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": "2"}}}],
            },
        }
    )
    before = _versions(kube, namespace)
    kubeconfig = str(kube_apiserver.kubeconfig)
    code = main(["explain", "pod", f"{namespace}/web", "--kubeconfig", kubeconfig, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["result"]["status"] == "Scheduled" and data["result"]["node"] == "explain-big"
    rejected = {n for g in data["rejected"] for n in g["nodes"]}
    assert "explain-small" in rejected
    assert main(["explain", "node", "explain-big", "--kubeconfig", kubeconfig]) == 0
    assert "node explain-big" in capsys.readouterr().out
    assert _versions(kube, namespace) == before
    assert not kube.get("Pod", "web", namespace)["spec"].get("nodeName")
