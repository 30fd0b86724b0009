"""The testing kit's builders: the objects they build, and that the manifest validator accepts them."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.qos import QoSClass
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.manifests import validate_object
from koord_framework.testing import (
    DEFAULT_START,
    FakeClock,
    MemoryCluster,
    format_duration,
    make_node,
    make_node_metric,
    make_pdb,
    make_pod,
    random_cluster,
)


def test_importable_without_pytest() -> None:
    code = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name == 'pytest' or name.startswith('_pytest'):\n"
        "        raise ImportError('pytest must not be imported')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "import koord_framework.testing as t\n"
        "print(t.make_pod('p')['metadata']['name'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "p"


def test_fake_clock_starts_at_a_fixed_instant() -> None:
    clock = FakeClock()
    assert isinstance(clock, VirtualClock)
    assert clock.now() == DEFAULT_START == datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    clock.advance(5)
    assert clock.now() == DEFAULT_START + 5
    assert FakeClock(100.0).now() == 100.0


def test_make_node() -> None:
    node = make_node(
        "n1",
        cpu="8",
        memory="16Gi",
        labels={"zone": "a"},
        taints=["dedicated=batch:NoSchedule", "gpu:NoExecute"],
        allocatable={"cpu": "7500m"},
    )
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "n1", "zone": "a"}
    assert node["status"]["capacity"] == {"cpu": "8", "memory": "16Gi", "pods": 110}
    assert node["status"]["allocatable"] == {"cpu": "7500m", "memory": "16Gi", "pods": 110}
    assert node["spec"]["taints"] == [
        {"key": "dedicated", "value": "batch", "effect": "NoSchedule"},
        {"key": "gpu", "effect": "NoExecute"},
    ]
    record = NodeRecord.from_manifest(node)
    assert record.allocatable == {"cpu": 7500, "memory": 16 * 2**30, "pods": 110}
    assert record.ready and not record.unschedulable
    validate_object(node)


def test_make_node_extra_merges_deeply() -> None:
    node = make_node("n1", metadata={"annotations": {"a": "1"}}, status={"conditions": []})
    assert node["metadata"]["name"] == "n1" and node["metadata"]["annotations"] == {"a": "1"}
    assert node["status"]["conditions"] == [] and node["status"]["capacity"]["cpu"] == "4"
    with pytest.raises(ValueError, match="taint"):
        make_node("n1", taints=["nonsense"])


def test_make_pod() -> None:
    pod = make_pod(
        "web-0",
        namespace="prod",
        cpu="500m",
        memory="1Gi",
        limits={"cpu": "1", "memory": "1Gi"},
        node="n1",
        priority=9000,
        labels={"app": "web"},
        annotations={"note": "x"},
        qos="LS",
        scheduler_name="koord-scheduler",
        owner_kind="ReplicaSet",
        creation_time=DEFAULT_START,
    )
    info = PodInfo.from_manifest(pod)
    assert (info.namespace, info.name, info.node_name, info.phase) == ("prod", "web-0", "n1", "Running")
    assert info.requests == {"cpu": 500, "memory": 2**30}
    assert info.limits == {"cpu": 1000, "memory": 2**30}
    assert info.priority == 9000 and info.scheduler_name == "koord-scheduler"
    assert info.qos_class is QoSClass.LS
    assert info.labels == {"app": "web", "koordinator.sh/qosClass": "LS"}
    assert info.creation_time == DEFAULT_START
    ref = info.controller_ref()
    assert ref is not None and (ref.kind, ref.name) == ("ReplicaSet", "web-0-owner")
    assert pod["metadata"]["ownerReferences"][0]["apiVersion"] == "apps/v1"
    validate_object(pod)


def test_make_pod_defaults_and_stable_uids() -> None:
    pod = make_pod("p")
    assert pod["status"] == {"phase": "Pending"}
    assert "resources" not in pod["spec"]["containers"][0]
    assert make_pod("p")["metadata"]["uid"] == pod["metadata"]["uid"]
    assert make_pod("p", namespace="other")["metadata"]["uid"] != pod["metadata"]["uid"]
    assert make_pod("p", phase="Succeeded", node="n")["status"]["phase"] == "Succeeded"
    tolerations = [{"key": "k", "operator": "Exists"}]
    assert make_pod("p", spec={"tolerations": tolerations})["spec"]["tolerations"] == tolerations


def test_make_node_metric_matches_the_crd_shape() -> None:
    metric = make_node_metric(
        "n1",
        cpu="2",
        memory="4Gi",
        pods=[
            {"name": "web-0", "cpu": "500m", "memory": "1Gi", "priority": "koord-prod"},
            {"name": "x", "namespace": "b", "resources": {"kubernetes.io/batch-cpu": "1000"}},
        ],
        aggregated={
            300: {"p50": {"cpu": "1"}, "p90": {"cpu": "1500m"}},
            "1h0m0s": {"avg": {"memory": "1Gi"}},
        },
        system={"cpu": "100m"},
        report_interval=60,
    )
    assert metric["apiVersion"] == "slo.koordinator.sh/v1alpha1" and metric["kind"] == "NodeMetric"
    status = metric["status"]
    assert status["updateTime"] == "2024-01-01T00:00:00Z"
    assert status["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "2", "memory": "4Gi"}}
    assert status["nodeMetric"]["systemUsage"] == {"resources": {"cpu": "100m"}}
    assert status["nodeMetric"]["aggregatedNodeUsages"] == [
        {
            "usage": {"p50": {"resources": {"cpu": "1"}}, "p90": {"resources": {"cpu": "1500m"}}},
            "duration": "5m0s",
        },
        {"usage": {"avg": {"resources": {"memory": "1Gi"}}}, "duration": "1h0m0s"},
    ]
    assert status["podsMetric"] == [
        {
            "namespace": "default",
            "name": "web-0",
            "podUsage": {"resources": {"cpu": "500m", "memory": "1Gi"}},
            "priority": "koord-prod",
        },
        {"namespace": "b", "name": "x", "podUsage": {"resources": {"kubernetes.io/batch-cpu": "1000"}}},
    ]
    assert metric["spec"] == {"metricCollectPolicy": {"reportIntervalSeconds": 60}}
    validate_object(metric)
    assert "updateTime" not in make_node_metric("n1", update_time=None)["status"]
    assert (
        make_node_metric("n1", update_time=DEFAULT_START + 61)["status"]["updateTime"]
        == "2024-01-01T00:01:01Z"
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (45, "45s"), (300, "5m0s"), (3600, "1h0m0s"), (5430, "1h30m30s")]
)
def test_format_duration_as_go(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text


def test_make_pdb() -> None:
    pdb = make_pdb(
        "web", match_labels={"app": "web"}, max_unavailable="25%", unhealthy_pod_eviction_policy="AlwaysAllow"
    )
    assert pdb["spec"] == {
        "selector": {"matchLabels": {"app": "web"}},
        "maxUnavailable": "25%",
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    validate_object(pdb)


def test_builders_feed_the_memory_cluster() -> None:
    cluster = MemoryCluster(FakeClock())
    cluster.create(make_node("n1"))
    cluster.create(make_pod("p", cpu="1"))
    cluster.create(make_node_metric("n1"))
    cluster.create(make_pdb("b", match_labels={"a": "b"}, min_available=1))
    assert cluster.resource_version == 4


def test_random_cluster_is_reproducible_and_valid() -> None:
    first = random_cluster(random.Random(7))
    assert first == random_cluster(random.Random(7))
    assert first != random_cluster(random.Random(8))
    objects, pending = first
    kinds = {o["kind"] for o in objects}
    assert {"Node", "Pod"} <= kinds
    assert len(pending) == 6 and all("nodeName" not in p["spec"] for p in pending)
    for obj in [*objects, *pending]:
        validate_object(obj)
    cluster = MemoryCluster(FakeClock())
    for obj in [*objects, *pending]:
        cluster.create(obj)
    nodes = {o["metadata"]["name"] for o in objects if o["kind"] == "Node"}
    assert all(o["spec"]["nodeName"] in nodes for o in objects if o["kind"] == "Pod")
