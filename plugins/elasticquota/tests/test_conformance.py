"""Platform conformance, plus random quota trees scheduled to the end: no quota ever ends above its max, and
every quota's used equals the requests of its bound pods (nothing charged twice or lost)."""

from __future__ import annotations

import random
from typing import Any, ClassVar

import pytest
from koord_plugin_elasticquota import ElasticQuota

from koord_framework.testing import make_node, make_pod
from koord_framework.testing.conformance import SchedulerPluginConformance
from koord_framework.testing.scheduler import SchedulerHarness

LABEL = "quota.scheduling.koordinator.sh/name"


def quota_cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    objects: list[dict[str, Any]] = [make_node(f"n{i}", cpu=str(rng.choice([4, 8, 16]))) for i in range(4)]
    names: list[str] = []
    for p in range(2):
        parent = f"p{p}"
        objects.append(
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {"name": parent, "labels": {"quota.scheduling.koordinator.sh/is-parent": "true"}},
                "spec": {"max": {"cpu": str(rng.randint(8, 40))}, "min": {"cpu": str(rng.randint(2, 8))}},
            }
        )
        for c in range(rng.randint(1, 3)):
            name = f"p{p}-c{c}"
            cap = rng.randint(2, 20)
            names.append(name)
            labels = {"quota.scheduling.koordinator.sh/parent": parent}
            if rng.random() < 0.3:
                labels["quota.scheduling.koordinator.sh/allow-lent-resource"] = "false"
            objects.append(
                {
                    "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                    "kind": "ElasticQuota",
                    "metadata": {"name": name, "labels": labels},
                    # valid quotas only (min <= max): invalid ones are the webhook's to refuse
                    "spec": {"max": {"cpu": str(cap)}, "min": {"cpu": str(rng.randint(0, min(3, cap)))}},
                }
            )
    pending = []
    for i in range(25):
        labels = {LABEL: rng.choice([*names, "nope"])} if rng.random() < 0.9 else {}
        if rng.random() < 0.1:
            labels["quota.scheduling.koordinator.sh/preemptible"] = "false"
        pending.append(
            make_pod(f"w{i}", cpu=str(rng.randint(1, 3)), priority=rng.choice([0, 10, 100]), labels=labels)
        )
    return objects, pending, names


class TestConformance(SchedulerPluginConformance):
    plugin_class = ElasticQuota
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {},
        {"monitorAllQuotas": True, "delayEvictTime": "30s", "revokePodInterval": "5s"},
        {"enableRuntimeQuota": False, "enableCheckParentQuota": True, "enableMinQuotaScale": False},
        {"quotaGroupNamespace": "quotas", "defaultQuotaGroupMax": {"cpu": "100", "memory": "1Ti"}},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"delayEvictTime": "-1s"},
        {"revokePodInterval": "x"},
        {"systemQuotaGroupMax": {"cpu": "-5"}},
        {"hookPlugins": [{"key": "a", "factoryKey": "b"}]},
        {"monitorAllQuotas": "maybe"},
    ]


@pytest.mark.parametrize("seed", range(6))
def test_random_trees_never_exceed_max_and_used_matches_bound_pods(seed: int) -> None:
    rng = random.Random(seed)
    objects, pending, names = quota_cluster(rng)
    h = SchedulerHarness([(ElasticQuota, {"enableCheckParentQuota": seed % 2 == 0})])
    h.add(*objects, *pending)
    h.run_until_idle()
    plugin = h.plugin("ElasticQuota")
    assert isinstance(plugin, ElasticQuota)
    pods, _ = h.cluster.list("Pod")
    by_quota: dict[str, int] = {}
    for pod in pods:
        if pod["spec"].get("nodeName"):
            q = pod["metadata"].get("labels", {}).get(LABEL, "")
            q = q if q in names else "koordinator-default-quota"
            by_quota[q] = (
                by_quota.get(q, 0) + int(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]) * 1000
            )
    mgr = plugin.quotas.default
    for name in names:
        info = mgr.get_quota_info(name)
        assert info is not None
        assert info.calc.used.get("cpu", 0) == by_quota.get(name, 0)
        assert info.calc.used.get("cpu", 0) <= info.calc.max["cpu"]
    for parent in ("p0", "p1"):
        info = mgr.get_quota_info(parent)
        assert info is not None
        kids = [n for n in names if n.startswith(parent + "-")]
        assert info.calc.used.get("cpu", 0) == sum(by_quota.get(k, 0) for k in kids)
