"""koord-scheduler's quota gates: ``ElasticQuotaIgnorePodOverhead`` (Koordinator's ``core.PodRequests``: a
pod's RuntimeClass overhead is charged to its quota unless the gate is on) and ``DisableDefaultQuota`` (a
pod's quota is its label only; without one it is in no quota, neither the namespace's nor the default)."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_elasticquota.controllers import revoke_list
from koord_plugin_elasticquota.manager import quota_pod_requests
from koord_plugin_elasticquota.plugin import ElasticQuota

from koord_framework.api.objects import PodInfo
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

LABEL = "quota.scheduling.koordinator.sh/name"


def quota(name: str, max_cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "default", "labels": {}},
        "spec": {"max": {"cpu": max_cpu, "memory": "1Ti"}, "min": {"cpu": max_cpu, "memory": "0"}},
    }


def pod_with_overhead(name: str, cpu: str, overhead_cpu: str) -> dict[str, Any]:
    pod = make_pod(name, cpu=cpu, memory="1Gi", labels={LABEL: "q"})
    pod["spec"]["overhead"] = {"cpu": overhead_cpu, "ephemeral-storage": "1Gi"}
    return pod


def test_quota_pod_requests() -> None:
    pod = PodInfo.from_manifest(pod_with_overhead("p", "2", "500m"))
    assert quota_pod_requests(pod)["cpu"] == 2500
    without = quota_pod_requests(pod, ignore_overhead=True)
    assert without["cpu"] == 2000 and without["memory"] == 1024**3
    assert "ephemeral-storage" not in without  # only the overhead asked for it


@pytest.mark.parametrize(("gates", "admitted"), [("", False), ("ElasticQuotaIgnorePodOverhead=true", True)])
def test_overhead_counts_against_the_quota_unless_the_gate_is_on(gates: str, admitted: bool) -> None:
    h = SchedulerHarness([(ElasticQuota, {})], feature_gates=gates)
    h.add(make_node("n1", cpu="16", memory="64Gi"), quota("q", "4"))
    assert h.schedule_one(pod_with_overhead("a", "2", "500m")).scheduled
    second = h.schedule_one(pod_with_overhead("b", "2", "500m"))
    assert second.scheduled is admitted
    if not admitted:
        assert "Insufficient quotas, quotaName: q" in second.message
    plugin = h.plugin("ElasticQuota")
    assert isinstance(plugin, ElasticQuota)
    used = plugin.quotas.manager_for_quota("q").get_quota_info("q")
    assert used is not None
    assert used.calc.used["cpu"] == (4000 if admitted else 2500)


def test_revoke_follows_the_gate() -> None:
    """5 cores used, runtime 2: one pod of 2 cores + 1 overhead frees enough; two are needed when only the
    2 cores of each count."""
    pods = [PodInfo.from_manifest(pod_with_overhead(f"p{i}", "2", "1")) for i in range(2)]
    assert len(revoke_list({"cpu": 2000}, {"cpu": 5000}, pods)) == 1
    assert len(revoke_list({"cpu": 2000}, {"cpu": 5000}, pods, ignore_overhead=True)) == 2


def test_disable_default_quota() -> None:
    def run(gates: str) -> tuple[ElasticQuota, SchedulerHarness]:
        h = SchedulerHarness([(ElasticQuota, {})], feature_gates=gates)
        ns_quota = quota("default", "1")  # named like the pods' namespace
        h.add(make_node("n1", cpu="16", memory="64Gi"), ns_quota)
        plugin = h.plugin("ElasticQuota")
        assert isinstance(plugin, ElasticQuota)
        return plugin, h

    plugin, h = run("")
    unlabelled = make_pod("u", cpu="2", memory="1Gi")
    assert plugin.quota_of(PodInfo.from_manifest(unlabelled)) == ("default", "")
    assert not h.schedule_one(unlabelled).scheduled  # the namespace's quota holds 1 core

    plugin, h = run("DisableDefaultQuota=true")
    assert plugin.quota_of(PodInfo.from_manifest(unlabelled)) == ("", "")
    assert h.schedule_one(unlabelled).scheduled  # in no quota: no quota check
    unknown = make_pod("x", cpu="1", memory="1Gi", labels={LABEL: "no-such-quota"})
    assert plugin.quota_of(PodInfo.from_manifest(unknown)) == ("", "")
    labelled = make_pod("l", cpu="2", memory="1Gi", labels={LABEL: "default"})
    assert not h.schedule_one(labelled).scheduled  # the label still names a quota
