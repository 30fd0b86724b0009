"""LowNodeLoad with Koordinator's default evictor, the MigrationController: jobs, limits, completion."""

from __future__ import annotations

from typing import Any

from koord_plugin_lownodeload import LowNodeLoad
from koord_plugin_migration import MigrationController

from koord_framework.testing.builders import make_node, make_node_metric, make_pod
from koord_framework.testing.descheduler import DeschedulerHarness

T0 = 1_704_067_200.0
LNL = {
    "lowThresholds": {"cpu": 30, "memory": 100},
    "highThresholds": {"cpu": 50, "memory": 100},
    "anomalyCondition": {"consecutiveAbnormalities": 1},
}


def _rs(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
    }


def _pod(name: str, rs: str, node: str) -> dict[str, Any]:
    pod = make_pod(
        name,
        node=node,
        owner_kind="ReplicaSet",
        owner_name=rs,
        labels={"app": rs},
        scheduler_name="koord-scheduler",
        status={"conditions": [{"type": "Ready", "status": "True"}]},
    )
    pod["metadata"]["ownerReferences"][0]["uid"] = f"uid-{rs}"
    return pod


def test_lownodeload_through_migration_jobs() -> None:
    harness = DeschedulerHarness(
        [(LowNodeLoad, LNL)],
        evictor=(MigrationController, {"defaultJobMode": "EvictDirectly"}),
        now=T0,
    )
    # Five workloads of 10 pods; node "hot" runs one pod of each at 1 core, plus 4 cores of system usage.
    objs: list[dict[str, Any]] = [
        make_node("hot", cpu="10", memory="64Gi"),
        make_node("cold", cpu="10", memory="64Gi"),
    ]
    metric_pods = []
    for w in range(5):
        objs.append(_rs(f"w{w}", 10))
        objs.append(_pod(f"w{w}-hot", f"w{w}", "hot"))
        metric_pods.append({"name": f"w{w}-hot", "cpu": "1"})
        objs += [_pod(f"w{w}-{i}", f"w{w}", "cold") for i in range(9)]
    objs.append(make_node_metric("hot", update_time=T0, system={"cpu": "4"}, pods=metric_pods))
    objs.append(make_node_metric("cold", update_time=T0))
    harness.add(*objs)

    report = harness.run_once()
    # 9 of 10 cores used, 5 allowed: four pods would do, but maxMigratingPerNode (2) stops at two jobs.
    assert len(report.evictions) == 2
    assert all(e.plugin == "LowNodeLoad" for e in report.evictions)
    jobs, _ = harness.cluster.list("PodMigrationJob")
    assert sorted(j["spec"]["podRef"]["name"] for j in jobs) == sorted(
        e.pod.split("/")[1] for e in report.evictions
    )
    assert {j["metadata"]["annotations"]["koordinator.sh/evict-trigger"] for j in jobs} == {"LowNodeLoad"}
    # The other candidates never reach Evict: the MigrationController's Filter (part of LowNodeLoad's pod
    # filter) refuses them once two pods of the node have active jobs.
    assert report.failures == []

    harness.descheduler.drain()
    jobs, _ = harness.cluster.list("PodMigrationJob")
    assert {j["status"]["phase"] for j in jobs} == {"Succeeded"}
    evicted = {r.name for r in harness.cluster.evictions}
    assert evicted == {j["spec"]["podRef"]["name"] for j in jobs}
    for name in evicted:
        assert harness.cluster.try_get("Pod", name, "default") is None
