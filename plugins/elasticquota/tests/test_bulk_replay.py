"""The initial replay of pods in bulk (``QuotaSet.pods_in_bulk``) leaves every quota exactly as adding the
pods one by one does: request and used sums, the self and non-preemptible parts, child requests, and the
runtimes computed from them (start-up, issue 22, gap 4)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from koord_plugin_elasticquota.quota_object import (
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_PREEMPTIBLE,
    LABEL_QUOTA_IS_PARENT,
    LABEL_QUOTA_NAME,
    LABEL_QUOTA_PARENT,
)
from koord_plugin_elasticquota.quota_set import QuotaSet

from koord_framework.testing import make_node, make_pod


def _quota(name: str, parent: str, is_parent: bool, rng: random.Random) -> dict[str, Any]:
    max_cpu = rng.randint(2, 64)
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {
                LABEL_QUOTA_PARENT: parent,
                LABEL_QUOTA_IS_PARENT: "true" if is_parent else "false",
                LABEL_ALLOW_LENT_RESOURCE: rng.choice(["true", "false"]),
            },
        },
        # Some quotas cap memory, some do not: a pod's memory then reaches only some of the sums.
        "spec": {
            "max": {
                "cpu": str(max_cpu),
                **({"memory": f"{rng.randint(4, 256)}Gi"} if rng.random() < 0.7 else {}),
            },
            "min": {"cpu": str(rng.randint(0, max_cpu)), "memory": f"{rng.randint(0, 4)}Gi"},
        },
    }


def _cluster(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    quotas: list[dict[str, Any]] = []
    parents = [f"org{i}" for i in range(rng.randint(1, 4))]
    leaves: list[str] = []
    for org in parents:
        quotas.append(_quota(org, "koordinator-root-quota", True, rng))
        for j in range(rng.randint(1, 4)):
            leaves.append(f"{org}-team{j}")
            quotas.append(_quota(leaves[-1], org, False, rng))
    nodes = [make_node(f"n{i}", cpu="32", memory="128Gi") for i in range(rng.randint(1, 6))]
    pods: list[dict[str, Any]] = []
    for i in range(rng.randint(0, 300)):
        labels = {}
        if rng.random() < 0.9:  # the rest go to the default quota
            labels[LABEL_QUOTA_NAME] = rng.choice(leaves)
        if rng.random() < 0.2:
            labels[LABEL_PREEMPTIBLE] = "false"
        pod = make_pod(
            f"p{i}",
            "default",
            cpu=f"{rng.randint(0, 4000)}m",
            memory=f"{rng.randint(0, 8)}Gi",
            node=rng.choice(nodes)["metadata"]["name"] if rng.random() < 0.4 else None,
            labels=labels,
            phase="Succeeded" if rng.random() < 0.05 else None,
        )
        pods.append(pod)
    return quotas, nodes, pods


def _state(quotas: QuotaSet) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mgr in quotas.managers():
        for name in mgr.quota_names():
            info = mgr.get_quota_info(name)
            assert info is not None
            out[f"{mgr.tree_id}/{name}"] = (
                dataclasses.asdict(info.calc),
                sorted(info.pods),
                mgr.refresh_runtime(name),
            )
    return out


def _replayed(seed: int, bulk: bool) -> dict[str, Any]:
    quota_objs, nodes, pods = _cluster(seed)
    quotas = QuotaSet()
    quotas.parsed_pod = lambda obj: None
    quotas.parsed_node = lambda obj: None
    quotas.replace_quotas(quota_objs)
    for node in nodes:
        quotas.on_node_add(node)
    if bulk:
        with quotas.pods_in_bulk():
            for pod in pods:
                quotas.on_pod_add(pod)
    else:
        for pod in pods:
            quotas.on_pod_add(pod)
    return _state(quotas)


@pytest.mark.parametrize("seed", range(40))
def test_bulk_replay_leaves_the_quotas_as_one_by_one(seed: int) -> None:
    assert _replayed(seed, bulk=True) == _replayed(seed, bulk=False)


def test_a_shrinking_change_in_bulk_is_applied_in_order() -> None:
    """A pod leaving a quota while requests are collected: what was collected goes up first, so the
    clamping at zero sees the same steps as without bulk."""
    quota_objs, nodes, _ = _cluster(7)
    leaf = next(q for q in quota_objs if q["metadata"]["labels"][LABEL_QUOTA_IS_PARENT] == "false")
    name = leaf["metadata"]["name"]
    pods = [
        make_pod(f"p{i}", "default", cpu="1", memory="1Gi", labels={LABEL_QUOTA_NAME: name}) for i in range(3)
    ]
    results = []
    for bulk in (False, True):
        quotas = QuotaSet()
        quotas.parsed_pod = lambda obj: None
        quotas.parsed_node = lambda obj: None
        quotas.replace_quotas(quota_objs)
        for node in nodes:
            quotas.on_node_add(node)
        if bulk:
            with quotas.pods_in_bulk():
                for pod in pods:
                    quotas.on_pod_add(pod)
                quotas.on_pod_delete(pods[0])
        else:
            for pod in pods:
                quotas.on_pod_add(pod)
            quotas.on_pod_delete(pods[0])
        results.append(_state(quotas))
    assert results[0] == results[1]
    info = results[0][f"/{name}"][0]
    assert info["self_request"]["cpu"] == 2000  # the two pods left
