"""``koord snapshot`` against the real kube-apiserver: the snapshot re-loads with the same objects and the
``--cluster`` commands run on it.

``snapshot_dir`` (a populated namespace and nodes, snapshotted) is the fixture further steps build on:
a test that needs a snapshot of a real cluster takes it and runs its command with ``--cluster``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cli.main import main
from koord_framework.cluster.kube import KubeCluster
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.snapshot import INDEX_FILE, Anonymizer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

NODES = 3
BOUND = 3
PENDING = 4


@dataclass
class Populated:
    """What the test put into the API server."""

    namespace: str
    nodes: list[str]
    pending: list[str]
    kinds: tuple[str, ...] = (
        "Node",
        "Pod",
        "NodeMetric",
        "ElasticQuota",
        "PodGroup",
        "Deployment",
        "ReplicaSet",
        "PodDisruptionBudget",
        "PriorityClass",
    )

    def mine(self, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        return (
            meta.get("namespace") == self.namespace
            or meta["name"] in self.nodes
            or meta["name"] == (f"{self.namespace}-high")
        )


def _pod(namespace: str, name: str, node: str | None, labels: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "priorityClassName": f"{namespace}-high",
        "containers": [
            {
                "name": "main",
                "image": "registry.example/app:1",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1Gi"},
                },
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


@pytest.fixture
def populated(kube: KubeCluster, koord_crds: list[str], koordinator_system: str, namespace: str) -> Populated:
    nodes = [f"{namespace}-node-{i}" for i in range(NODES)]
    for i, name in enumerate(nodes):
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            }
        )
        capacity = {"cpu": str(8 + 4 * i), "memory": "32Gi", "pods": "110"}
        kube.patch(
            "Node",
            name,
            "",
            {
                "status": {
                    "capacity": capacity,
                    "allocatable": capacity,
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                            "lastTransitionTime": "2024-01-01T00:00:00Z",
                        }
                    ],
                }
            },
            status=True,
        )
        kube.create(
            {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": name},
                "spec": {
                    "metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}
                },
            }
        )
        kube.patch(
            "NodeMetric",
            name,
            "",
            {
                "status": {
                    "updateTime": "2024-01-01T00:00:00Z",
                    "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{1 + i}", "memory": "4Gi"}}},
                }
            },
            status=True,
        )
    kube.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"{namespace}-high"},
            "value": 9000,
        }
    )
    deploy = kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {
                "replicas": BOUND,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}]},
                },
            },
        }
    )
    rs = kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-1",
                "namespace": namespace,
                "labels": {"app": "web"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "web",
                        "uid": deploy["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "replicas": BOUND,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}]},
                },
            },
        }
    )
    for i in range(BOUND):
        pod = _pod(namespace, f"web-1-{i}", nodes[i % NODES], {"app": "web"})
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-1",
                "uid": rs["metadata"]["uid"],
                "controller": True,
            }
        ]
        kube.create(pod)
    kube.create(
        {
            "apiVersion": "policy/v1beta1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    kube.create(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "team", "namespace": namespace},
            "spec": {"min": {"cpu": "4", "memory": "8Gi"}, "max": {"cpu": "100", "memory": "200Gi"}},
        }
    )
    kube.create(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "gang", "namespace": namespace},
            "spec": {"minMember": 2},
        }
    )
    pending = [f"batch-{i}" for i in range(PENDING)]
    for i, name in enumerate(pending):
        labels = {"quota.scheduling.koordinator.sh/name": "team"}
        if i < 2:
            labels["pod-group.scheduling.sigs.k8s.io"] = "gang"
        kube.create(_pod(namespace, name, None, labels))
    return Populated(namespace, nodes, pending)


def _snapshot(kube_apiserver: Any, out: Path, *extra: str) -> int:
    return main(["snapshot", "--kubeconfig", str(kube_apiserver.kubeconfig), "-o", str(out), *extra])


@pytest.fixture
def snapshot_dir(
    kube_apiserver: Any, populated: Populated, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Path:
    """A snapshot of the real API server holding ``populated``; the directory any ``--cluster`` reads."""
    out = tmp_path / "snapshot"
    code = _snapshot(kube_apiserver, out)
    err = capsys.readouterr().err
    sys.stderr.write(err)
    index = json.loads((out / INDEX_FILE).read_text())
    # Objects other tests of the session left may be refused (partial), never ours, and no kind fails.
    assert code in (0, 1) and not index["failed"], err
    assert not [p for p in index["invalid"] if populated.namespace in p], index["invalid"]
    return out


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {
        k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields", "selfLink")
    }
    return {**obj, "metadata": meta}


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in a.keys() | b.keys() for d in _diff(a.get(k), b.get(k), f"{path}.{k}")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_snapshot_reloads_with_the_same_objects(
    kube: KubeCluster, populated: Populated, snapshot_dir: Path
) -> None:
    loaded = MemoryCluster.from_paths([snapshot_dir])
    for kind in populated.kinds:
        live, _ = kube.list(kind)
        expected = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): _comparable(o)
            for o in live
            if populated.mine(o)
        }
        assert expected, kind
        got_objs, _ = loaded.list(kind)
        got = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): _comparable(o)
            for o in got_objs
            if populated.mine(o)
        }
        for key in expected:
            mine = got.get(key)
            if mine is not None and "generation" not in expected[key]["metadata"]:
                mine["metadata"].pop("generation", None)  # the embedded cluster's default on create
            assert mine == expected[key], (kind, key, _diff(mine, expected[key]))
        assert got.keys() == expected.keys(), kind
    index = json.loads((snapshot_dir / INDEX_FILE).read_text())
    assert index["server"] and index["anonymized"] is False
    assert index["counts"]["Pod"] >= BOUND + PENDING and index["counts"]["Node"] >= NODES


def test_simulate_runs_on_the_snapshot(
    populated: Populated, snapshot_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["simulate", "--cluster", str(snapshot_dir), "-o", "json"])
    result = json.loads(capsys.readouterr().out)
    ours = {p["pod"]: p for p in result["pods"] if p["pod"].startswith(populated.namespace + "/")}
    assert set(ours) == {f"{populated.namespace}/{name}" for name in populated.pending}
    # The gang of two, the quota's pods and the rest all fit on the three nodes.
    assert all(p["status"] == "Scheduled" and p["node"] for p in ours.values()), ours


def test_anonymized_snapshot_reloads_without_names(
    kube_apiserver: Any, populated: Populated, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "anon"
    assert _snapshot(kube_apiserver, out, "--anonymize", "--salt", "e2e", "-q") in (0, 1)
    capsys.readouterr()
    loaded = MemoryCluster.from_paths([out])
    text = "".join(p.read_text() for p in out.glob("*.yaml"))
    assert populated.namespace not in text
    anon = Anonymizer("e2e")
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in loaded.list("Pod")[0]}
    assert (anon.word(populated.namespace), anon.word("batch-0")) in pods
    node = loaded.get("Node", anon.word(populated.nodes[0]))
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]
    assert loaded.get("NodeMetric", anon.word(populated.nodes[0]))


def test_compare_two_profiles_on_the_snapshot(
    populated: Populated, snapshot_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21's loop on a real cluster: snapshot it, then compare Koordinator's shipped profile with a
    candidate on the copy, each run on its own copy of the snapshot."""
    repo = Path(__file__).resolve().parents[2]
    shipped = repo / "configs" / "scheduler" / "koord-scheduler.yaml"
    candidate = repo / "configs" / "examples" / "compare" / "candidate.yaml"
    code = main(
        [
            "compare",
            "--cluster",
            str(snapshot_dir),
            "--config",
            str(shipped),
            "--config",
            str(candidate),
            "-o",
            "json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code in (0, 1), code  # 1: some run left another test's leftover pods unplaced
    assert report["version"] == 1 and len(report["runs"]) == 2
    for run in report["runs"]:
        # Both profiles place at least every pending pod of ours (the gang, the quota's pods, the rest).
        assert run["pods"]["placed"] >= len(populated.pending), run["pods"]
