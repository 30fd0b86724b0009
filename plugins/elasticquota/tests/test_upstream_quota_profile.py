"""Koordinator's unit cases of the quota-profile controller (pkg/quota-controller/profile/
profile_controller_test.go at a7a1b76b: ``TestQuotaProfileReconciler_Reconciler_CreateQuota`` and
``TestMultiplyQuantity``), run through koord-manager's controller seam on the embedded cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_elasticquota.profile_controller import QuotaProfileController
from koord_plugin_elasticquota.quota_profile import multiply_quantity, tree_id_of
from prometheus_client import CollectorRegistry

from koord_framework.api.quantity import Quantity
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.manager.component import ManagerComponent

PROFILE_LABEL = "quota.scheduling.koordinator.sh/profile"
TREE = "quota.scheduling.koordinator.sh/tree-id"
IS_ROOT = "quota.scheduling.koordinator.sh/is-root"
TOTAL = "quota.scheduling.koordinator.sh/total-resource"
UNSCHEDULABLE = "quota.scheduling.koordinator.sh/unschedulable-resource"
RESOURCE_KEYS = "quota.scheduling.koordinator.sh/resource-keys"
ZONE = "topology.kubernetes.io/zone"


def resources(cpu: int, mem: int, storage: int | None = None) -> dict[str, str]:
    out = {"cpu": str(cpu), "memory": str(mem)}
    if storage is not None:
        out["storage"] = str(storage)
    return out


def node(name: str, zone: str, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {ZONE: zone}},
        "status": {
            "allocatable": resources(10, 1000, 1000),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def profile(
    name: str,
    quota: str,
    zone: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    quota_labels: dict[str, str] | None = None,
    ratio: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"quotaName": quota, "nodeSelector": {"matchLabels": {ZONE: zone}}}
    if quota_labels is not None:
        spec["quotaLabels"] = quota_labels
    if ratio is not None:
        spec["resourceRatio"] = ratio
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "quota.koordinator.sh/v1alpha1",
        "kind": "ElasticQuotaProfile",
        "metadata": meta,
        "spec": spec,
    }


def reconcile_all(cluster: MemoryCluster) -> ManagerComponent:
    m = ManagerComponent(
        cluster,
        CollectorRegistry(),
        config_namespace="koordinator-system",
        plugins=[],
        controllers=(),
        controller_plugins=[QuotaProfileController()],
    )
    try:
        m.sync_once()
    finally:
        m.close()
    return m


def same(expected: dict[str, str], got: dict[str, Any]) -> bool:
    """``quotav1.Equals``: the same names, equal quantities."""
    return set(expected) == set(got) and all(
        Quantity.parse(v) == Quantity.parse(got[k]) for k, v in expected.items()
    )


TREE1 = tree_id_of("default", "profile1")
TREE2 = tree_id_of("default", "profile2")

CASES: list[
    tuple[
        str,
        dict[str, Any],
        dict[str, Any] | None,
        dict[str, str],
        dict[str, str],
        dict[str, str],
        dict[str, str],
    ]
] = [
    (
        "cn-hangzhou-a profile",
        profile("profile1", "profile1-root", "cn-hangzhou-a"),
        None,
        resources(20, 2000),
        resources(20, 2000, 2000),
        resources(10, 1000, 1000),
        {PROFILE_LABEL: "profile1", TREE: TREE1, IS_ROOT: "true"},
    ),
    (
        "cn-hangzhou-b profile",
        profile("profile2", "profile2-root", "cn-hangzhou-b"),
        None,
        resources(10, 1000),
        resources(10, 1000, 1000),
        {},
        {PROFILE_LABEL: "profile2", TREE: TREE2, IS_ROOT: "true"},
    ),
    (
        "more quota labels",
        profile("profile1", "profile1-root", "cn-hangzhou-a", quota_labels={ZONE: "cn-hangzhou-a"}),
        None,
        resources(20, 2000),
        resources(20, 2000, 2000),
        resources(10, 1000, 1000),
        {PROFILE_LABEL: "profile1", TREE: TREE1, ZONE: "cn-hangzhou-a", IS_ROOT: "true"},
    ),
    (
        "exist quota",
        profile("profile1", "profile1-root", "cn-hangzhou-a", quota_labels={ZONE: "cn-hangzhou-a"}),
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "profile1-root", "labels": {"a": "a"}},
            "spec": {"min": resources(5, 50)},
        },
        resources(20, 2000),
        resources(20, 2000, 2000),
        resources(10, 1000, 1000),
        {PROFILE_LABEL: "profile1", TREE: TREE1, ZONE: "cn-hangzhou-a", "a": "a", IS_ROOT: "true"},
    ),
    (
        "has ratio",
        profile("profile1", "profile1-root", "cn-hangzhou-a", ratio="0.9"),
        None,
        resources(18, 1800),
        resources(18, 1800, 1800),
        resources(9, 900, 900),
        {PROFILE_LABEL: "profile1", TREE: TREE1, IS_ROOT: "true"},
    ),
    (
        "with tree id",
        profile("profile1", "profile1-root", "cn-hangzhou-a", labels={TREE: "tree1"}, ratio="0.9"),
        None,
        resources(18, 1800),
        resources(18, 1800, 1800),
        resources(9, 900, 900),
        {PROFILE_LABEL: "profile1", TREE: "tree1", IS_ROOT: "true"},
    ),
    (
        "with resource key",
        profile(
            "profile1",
            "profile1-root",
            "cn-hangzhou-a",
            labels={TREE: "tree1"},
            annotations={RESOURCE_KEYS: '["cpu"]'},
            ratio="0.9",
        ),
        None,
        {"cpu": "18"},
        resources(18, 1800, 1800),
        resources(9, 900, 900),
        {PROFILE_LABEL: "profile1", TREE: "tree1", IS_ROOT: "true"},
    ),
]


@pytest.mark.parametrize(
    ("prof", "original", "want_min", "want_total", "want_unschedulable", "want_labels"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_reconcile_creates_or_updates_the_root_quota(
    prof: dict[str, Any],
    original: dict[str, Any] | None,
    want_min: dict[str, str],
    want_total: dict[str, str],
    want_unschedulable: dict[str, str],
    want_labels: dict[str, str],
) -> None:
    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    for n in (
        node("node1", "cn-hangzhou-a"),
        node("node2", "cn-hangzhou-a", ready=False),
        node("node3", "cn-hangzhou-b"),
    ):
        cluster.create(n)
    cluster.create(prof)
    if original is not None:
        cluster.create(original)
    reconcile_all(cluster)
    quota = cluster.get("ElasticQuota", prof["spec"]["quotaName"], "default")
    annotations = quota["metadata"]["annotations"]
    assert same(want_min, quota["spec"]["min"])
    assert same(want_total, json.loads(annotations[TOTAL]))
    assert same(want_unschedulable, json.loads(annotations[UNSCHEDULABLE]))
    assert quota["metadata"]["labels"] == want_labels
    # Koordinator's max: MaxInt64/2000 for each resource key.
    assert quota["spec"]["max"] == dict.fromkeys(want_min, str((2**63 - 1) // 2000))
    # The profile carries its tree id afterwards.
    stored = cluster.get("ElasticQuotaProfile", prof["metadata"]["name"], "default")
    assert stored["metadata"]["labels"][TREE] == want_labels[TREE]


@pytest.mark.parametrize(
    ("resource", "value", "ratio", "expect"),
    [
        ("cpu", "1", 0.9, "0.9"),
        ("cpu", "100m", 0.5, "50m"),
        # Koordinator's "basic memory" cases pass ResourceCPU as the name: the cpu (milli) path.
        ("cpu", "1Gi", 0.9, "0.9Gi"),
        ("cpu", "1Gi", 0.5, "512Mi"),
    ],
    ids=["basic cpu 1", "basic cpu 2", "basic memory 1", "basic memory 2"],
)
def test_multiply_quantity(resource: str, value: str, ratio: float, expect: str) -> None:
    got = multiply_quantity(Quantity.parse(value), resource, ratio)
    assert got.milli_value() == Quantity.parse(expect).milli_value()
