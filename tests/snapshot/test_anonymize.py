"""``--anonymize``: stable hashes, every reference kept consistent, and the same scheduling modulo names."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cli.main import main
from koord_framework.cluster.manifests import validate_object
from koord_framework.snapshot import Anonymizer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SECRETS = ("prod-db-7", "payments", "checkout", "batch-job", "team-pay", "root-q", "resv-1", "payments-high")
"""Identifying strings of the objects below: none may survive anonymization."""


def _objects() -> list[dict[str, Any]]:
    node = "prod-db-7"
    pod_labels = {
        "app": "checkout",
        "pod-group.scheduling.sigs.k8s.io": "batch-job",
        "quota.scheduling.koordinator.sh/name": "team-pay",
        "koordinator.sh/qosClass": "LS",
        "koordinator.sh/priority-class": "koord-prod",
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node,
                "labels": {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux"},
            },
            "spec": {"taints": [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                "addresses": [{"type": "InternalIP", "address": "10.1.2.3"}],
                "images": [{"names": ["registry.corp/checkout:1.2"], "sizeBytes": 1000}],
            },
        },
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": node},
            "status": {
                "updateTime": "2024-01-01T00:00:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}},
                "podsMetric": [
                    {
                        "name": "checkout-abc-1",
                        "namespace": "payments",
                        "podUsage": {"resources": {"cpu": "1"}},
                    }
                ],
            },
        },
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": node},
            "spec": {},
        },
        {
            "apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology",
            "metadata": {"name": node},
            "topologyPolicies": ["None"],
            "zones": [{"name": "node-0", "type": "Node"}],
        },
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {"name": node},
            "spec": {
                "devices": [
                    {
                        "uuid": "GPU-1234",
                        "minor": 0,
                        "type": "gpu",
                        "health": True,
                        "resources": {"koordinator.sh/gpu-core": "100"},
                    }
                ]
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "checkout", "namespace": "payments", "uid": "d1"},
            "spec": {
                "selector": {"matchLabels": {"app": "checkout"}},
                "template": {
                    "metadata": {"labels": {"app": "checkout"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.corp/checkout:1.2"}]},
                },
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "checkout-abc",
                "namespace": "payments",
                "uid": "r1",
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "checkout", "uid": "d1"}
                ],
            },
            "spec": {
                "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["checkout"]}]},
                "template": {
                    "metadata": {"labels": {"app": "checkout"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.corp/checkout:1.2"}]},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "checkout-abc-1",
                "namespace": "payments",
                "labels": pod_labels,
                "annotations": {
                    "gang.scheduling.koordinator.sh/groups": '["payments/batch-job"]',
                    "scheduling.koordinator.sh/reservation-allocated": '{"name":"resv-1","uid":"u-r"}',
                    "team.corp/owner": "alice@payments",
                },
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "checkout-abc", "uid": "r1"}
                ],
            },
            "spec": {
                "nodeName": node,
                "priorityClassName": "payments-high",
                "schedulerName": "koord-scheduler",
                "nodeSelector": {"kubernetes.io/hostname": node},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "payments"}],
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.corp/checkout:1.2",
                        "env": [{"name": "DB_PASSWORD", "value": "hunter2"}],
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    }
                ],
            },
            "status": {"phase": "Running", "podIP": "10.0.0.9", "hostIP": "10.1.2.3"},
        },
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "batch-job", "namespace": "payments"},
            "spec": {"minMember": 1},
        },
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {
                "name": "team-pay",
                "namespace": "payments",
                "labels": {"quota.scheduling.koordinator.sh/parent": "root-q"},
            },
            "spec": {"min": {"cpu": "4"}, "max": {"cpu": "8"}},
        },
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {
                "name": "root-q",
                "namespace": "payments",
                "labels": {"quota.scheduling.koordinator.sh/is-parent": "true"},
            },
            "spec": {"min": {"cpu": "8"}, "max": {"cpu": "16"}},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "checkout", "namespace": "payments"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "checkout"}}},
        },
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": "resv-1"},
            "spec": {
                "template": {
                    "metadata": {"namespace": "payments"},
                    "spec": {"containers": [{"name": "r", "resources": {"requests": {"cpu": "1"}}}]},
                },
                "owners": [
                    {"object": {"name": "checkout-abc-1", "namespace": "payments"}},
                    {"controller": {"name": "checkout-abc", "namespace": "payments", "kind": "ReplicaSet"}},
                    {"labelSelector": {"matchLabels": {"app": "checkout"}}},
                ],
                "ttl": "1h",
            },
            "status": {"phase": "Available", "nodeName": node},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "payments-high"},
            "value": 9000,
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "koord-prod"},
            "value": 9000,
        },
    ]


def _anonymized(salt: str = "s") -> dict[str, dict[str, Any]]:
    anon = Anonymizer(salt)
    out = {}
    for obj in _objects():
        key = obj["kind"] + ("" if obj["kind"] != "ElasticQuota" else ":" + obj["metadata"]["name"])
        key += ":" + obj["metadata"]["name"] if obj["kind"] == "PriorityClass" else ""
        out[key] = anon.anonymize(copy.deepcopy(obj))
    return out


def test_no_identifying_string_survives_and_every_object_still_loads() -> None:
    objs = _anonymized()
    text = json.dumps(list(objs.values()))
    for secret in (
        *SECRETS,
        "alice",
        "hunter2",
        "DB_PASSWORD",
        "registry.corp",
        "10.1.2.3",
        "10.0.0.9",
        "GPU-1234",
    ):
        assert secret not in text, secret
    for obj in objs.values():
        validate_object(obj)
    pod = objs["Pod"]
    assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "LS"
    assert pod["metadata"]["labels"]["koordinator.sh/priority-class"] == "koord-prod"
    assert pod["spec"]["schedulerName"] == "koord-scheduler"
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert objs["PriorityClass:koord-prod"]["metadata"]["name"] == "koord-prod"
    assert objs["Node"]["metadata"]["labels"]["kubernetes.io/os"] == "linux"


def test_every_reference_stays_consistent() -> None:
    o = _anonymized()
    node, pod = o["Node"]["metadata"]["name"], o["Pod"]
    # Node-named kinds, the pod's node, the hostname label, node selectors, the Reservation's node.
    for kind in ("NodeMetric", "NodeSLO", "NodeResourceTopology", "Device"):
        assert o[kind]["metadata"]["name"] == node
    assert pod["spec"]["nodeName"] == node == o["Node"]["metadata"]["labels"]["kubernetes.io/hostname"]
    assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == node
    assert o["Reservation"]["status"]["nodeName"] == node
    # Owners: Pod -> ReplicaSet -> Deployment, by name.
    rs, deploy = o["ReplicaSet"]["metadata"], o["Deployment"]["metadata"]
    assert pod["metadata"]["ownerReferences"][0]["name"] == rs["name"]
    assert rs["ownerReferences"][0]["name"] == deploy["name"]
    assert pod["metadata"]["namespace"] == rs["namespace"] == deploy["namespace"]
    # Selectors still select: Deployment, ReplicaSet, PDB, Reservation owners.
    app = pod["metadata"]["labels"]["app"]
    assert o["Deployment"]["spec"]["selector"]["matchLabels"]["app"] == app
    assert o["Deployment"]["spec"]["template"]["metadata"]["labels"]["app"] == app
    assert o["ReplicaSet"]["spec"]["selector"]["matchExpressions"][0]["values"] == [app]
    assert o["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"]["app"] == app
    owners = o["Reservation"]["spec"]["owners"]
    assert owners[0]["object"] == {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"]}
    assert owners[1]["controller"]["name"] == rs["name"] and owners[1]["controller"]["kind"] == "ReplicaSet"
    assert owners[2]["labelSelector"]["matchLabels"]["app"] == app
    # Gang, quota, reservation, priority class names inside labels/annotations.
    group = o["PodGroup"]["metadata"]
    assert pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] == group["name"]
    assert json.loads(pod["metadata"]["annotations"]["gang.scheduling.koordinator.sh/groups"]) == [
        f"{group['namespace']}/{group['name']}"
    ]
    quota, parent = o["ElasticQuota:team-pay"]["metadata"], o["ElasticQuota:root-q"]["metadata"]
    assert pod["metadata"]["labels"]["quota.scheduling.koordinator.sh/name"] == quota["name"]
    assert quota["labels"]["quota.scheduling.koordinator.sh/parent"] == parent["name"]
    assert parent["labels"]["quota.scheduling.koordinator.sh/is-parent"] == "true"
    allocated = json.loads(pod["metadata"]["annotations"]["scheduling.koordinator.sh/reservation-allocated"])
    assert allocated == {"name": o["Reservation"]["metadata"]["name"], "uid": "u-r"}
    assert pod["spec"]["priorityClassName"] == o["PriorityClass:payments-high"]["metadata"]["name"]
    # NodeMetric's pods, tolerations of taints, images.
    assert o["NodeMetric"]["status"]["podsMetric"][0]["name"] == pod["metadata"]["name"]
    assert pod["spec"]["tolerations"][0]["value"] == o["Node"]["spec"]["taints"][0]["value"]
    image = pod["spec"]["containers"][0]["image"]
    assert image.startswith("image-") and o["Node"]["status"]["images"][0]["names"] == [image]


def test_same_input_and_salt_same_output_another_salt_other_names() -> None:
    assert _anonymized("a") == _anonymized("a")
    a, b = _anonymized("a"), _anonymized("b")
    assert a["Node"]["metadata"]["name"] != b["Node"]["metadata"]["name"]
    assert Anonymizer("a").word("web") == Anonymizer("a").word("web") != Anonymizer("a").word("web2")


def _simulate(directory: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    main(["simulate", "--cluster", str(directory), "-o", "json", "--seed", "7"])
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_simulate_places_the_anonymized_snapshot_the_same_modulo_names(
    kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain, anonymized = tmp_path / "plain", tmp_path / "anon"
    assert main(["snapshot", "--kubeconfig", str(kubeconfig), "-o", str(plain), "-q"]) == 0
    assert (
        main(
            [
                "snapshot",
                "--kubeconfig",
                str(kubeconfig),
                "-o",
                str(anonymized),
                "-q",
                "--anonymize",
                "--salt",
                "pepper",
            ]
        )
        == 0
    )
    anon = Anonymizer("pepper")

    def mapped(pod: dict[str, Any]) -> tuple[str, str, str]:
        ns, name = pod["pod"].split("/")
        return (f"{anon.word(ns)}/{anon.word(name)}", anon.word(pod["node"] or ""), pod["status"])

    expected = sorted(mapped(p) for p in _simulate(plain, capsys)["pods"])
    got = sorted((p["pod"], p["node"] or "", p["status"]) for p in _simulate(anonymized, capsys)["pods"])
    assert got == expected
    placed = [p for p in expected if p[2] == "Scheduled"]
    assert len(placed) >= 20 and any(p[2] != "Scheduled" for p in expected)  # both outcomes are compared
    assert "shop" not in (anonymized / "pods.yaml").read_text()


def test_pod_migration_job_references_follow_their_pods_and_reservation() -> None:
    anon = Anonymizer("s")
    job = anon.anonymize(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {"name": "migrate-web-0"},
            "spec": {
                "podRef": {"name": "web-0", "namespace": "shop"},
                "reservationOptions": {"reservationRef": {"name": "resv-1"}},
                "mode": "ReservationFirst",
            },
            "status": {
                "phase": "Running",
                "nodeName": "node-3",
                "podRef": {"name": "web-0-new", "namespace": "shop"},
            },
        }
    )
    validate_object(job)
    w = anon.word
    assert job["spec"]["podRef"] == {"name": w("web-0"), "namespace": w("shop")}
    assert job["spec"]["reservationOptions"]["reservationRef"] == {"name": w("resv-1")}
    assert job["spec"]["mode"] == "ReservationFirst" and job["status"]["phase"] == "Running"
    assert job["status"]["nodeName"] == w("node-3")
    assert job["status"]["podRef"] == {"name": w("web-0-new"), "namespace": w("shop")}
