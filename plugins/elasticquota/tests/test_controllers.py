"""The status writer and the over-use revoke controller, driven by the scheduler's controller seam."""

from __future__ import annotations

import json
from typing import Any

from koord_plugin_elasticquota.controllers import QuotaControllers, status_patch
from koord_plugin_elasticquota.plugin import ElasticQuota

from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

LABEL = "quota.scheduling.koordinator.sh/name"


def eq(name: str, max_cpu: str, min_cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"max": {"cpu": max_cpu}, "min": {"cpu": min_cpu}},
    }


def setup(args: dict[str, Any] | None = None) -> tuple[SchedulerHarness, ElasticQuota]:
    h = SchedulerHarness([(ElasticQuota, args or {})])
    h.add(make_node("n1", cpu="8", memory="64Gi"))
    p = h.plugin("ElasticQuota")
    assert isinstance(p, ElasticQuota)
    return h, p


def test_the_scheduler_finds_the_controllers() -> None:
    h, p = setup()
    assert [c for c in h.scheduler.controllers if isinstance(c, QuotaControllers)] == [p.controllers]
    assert h.scheduler.tick_controllers() is not None


def test_status_writer_writes_annotations_and_used_once() -> None:
    h, p = setup()
    h.add(eq("a", "8", "2"), make_pod("x", cpu="3", node="n1", labels={LABEL: "a"}))
    h.scheduler.tick_controllers()
    obj = h.cluster.get("ElasticQuota", "a", "default")
    ann = obj["metadata"]["annotations"]
    assert json.loads(ann["quota.scheduling.koordinator.sh/runtime"]) == {"cpu": "3"}
    assert json.loads(ann["quota.scheduling.koordinator.sh/request"]) == {"cpu": "3"}
    assert obj["status"]["used"] == {"cpu": "3"}
    writes = p.controllers.status.writes
    h.clock.advance(2)
    h.scheduler.tick_controllers()
    assert p.controllers.status.writes == writes  # nothing changed, nothing written


def test_status_patch_ignores_zeros() -> None:
    obj = {
        "metadata": {"annotations": {"quota.scheduling.koordinator.sh/runtime": '{"cpu":"0"}'}},
        "status": {},
    }
    summary = {
        "runtime": {},
        "request": {"cpu": 0},
        "childRequest": {},
        "guaranteed": {},
        "allocated": {},
        "nonPreemptibleRequest": {},
        "nonPreemptibleUsed": {},
        "used": {"cpu": 0},
    }
    assert status_patch(obj, summary) == ({}, None)


def over_used_cluster(args: dict[str, Any]) -> tuple[SchedulerHarness, ElasticQuota]:
    h, p = setup(args)
    # a borrowed b's min while b was idle; b now asks for its min, so a is over its runtime.
    h.add(eq("a", "8", "2"), eq("b", "8", "6"))
    for i, prio in enumerate((1, 5, 9)):
        h.add(make_pod(f"a{i}", cpu="2", node="n1", priority=prio, labels={LABEL: "a"}))
    h.add(
        make_pod(
            "a-np",
            cpu="1",
            node="n1",
            priority=0,
            labels={LABEL: "a", "quota.scheduling.koordinator.sh/preemptible": "false"},
        )
    )
    h.add(make_pod("b0", cpu="6", labels={LABEL: "b"}))
    p.quotas.default.refresh_runtime("a")
    return h, p


def test_revoke_waits_for_delay_then_evicts_least_important_with_a_reason() -> None:
    h, p = over_used_cluster({"monitorAllQuotas": True, "delayEvictTime": "60s", "revokePodInterval": "1s"})
    info = p.quotas.default.get_quota_info("a")
    assert info is not None and info.calc.runtime["cpu"] == 2000 and info.calc.used["cpu"] == 7000
    h.scheduler.tick_controllers()
    h.clock.advance(30)
    h.scheduler.tick_controllers()
    assert h.cluster.evictions == []
    h.clock.advance(31)
    h.scheduler.tick_controllers()
    evicted = [(e.name, e.requested_by) for e in h.cluster.evictions]
    # used 7 > runtime 2: take a0, a1, a2 (the non-preemptible pod stays, 1 <= 2); none fits back.
    assert sorted(name for name, _ in evicted) == ["a0", "a1", "a2"]
    assert all(by == "koord-scheduler/ElasticQuota" for _, by in evicted)
    assert all("quota a over-used" in e.reason for e in h.cluster.evictions)


def test_revoke_is_off_by_default() -> None:
    h, p = over_used_cluster({"delayEvictTime": "1s"})
    for _ in range(5):
        h.clock.advance(10)
        h.scheduler.tick_controllers()
    assert h.cluster.evictions == []
    assert not p.controllers.revoke.enabled


def test_quota_status_metric_is_computed_at_scrape() -> None:
    from prometheus_client import generate_latest

    h, p = setup()
    h.add(eq("a", "8", "2"), make_pod("x", cpu="3", node="n1", labels={LABEL: "a"}))
    p.quotas.default.refresh_runtime("a")
    text = generate_latest(h.handle.metrics).decode()
    line = (
        'koord_scheduler_elastic_quota_status{field="used",is_parent="false",name="a",'
        'parent="koordinator-root-quota",profile="default-scheduler",resource="cpu",tree=""} 3000.0'
    )
    assert line in text
    assert 'field="runtime",is_parent="false",name="a"' in text
