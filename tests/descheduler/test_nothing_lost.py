"""Nothing is lost: a refused eviction leaves the pod in place, is reported, and is tried again in a later
cycle; a dry run never changes the cluster."""

from __future__ import annotations

from typing import Any

from koord_plugin_defaultevictor import DefaultEvictor
from koord_plugin_lownodeload import LowNodeLoad

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import ClusterError
from koord_framework.testing.builders import make_node, make_node_metric, make_pdb, make_pod
from koord_framework.testing.descheduler import DeschedulerHarness

T0 = 1_704_067_200.0
ARGS = {
    "lowThresholds": {"cpu": 30, "memory": 100},
    "highThresholds": {"cpu": 60, "memory": 100},
    "anomalyCondition": {"consecutiveAbnormalities": 1, "consecutiveNormalities": 1},
}


def _metric(cluster: MemoryCluster, pods: list[tuple[str, str]]) -> dict[str, Any]:
    return make_node_metric(
        "a",
        update_time=cluster.clock.now(),
        system={"cpu": "3", "memory": "1Gi"},
        pods=[{"name": n, "cpu": c, "memory": "100Mi"} for n, c in pods],
    )


def _scenario(cluster: MemoryCluster | None = None, **harness_kw: Any) -> DeschedulerHarness:
    """Node ``a`` is overloaded (6.5 of 8 cores; high threshold 60% = 4.8), node ``b`` idle. ``p1`` (batch)
    sorts first; ``p2`` (prod) next; ``ds`` is a DaemonSet pod and never moves. After ``p2`` leaves, ``a``
    is still overloaded, so ``p1`` is wanted again in the next cycle."""
    harness = DeschedulerHarness(
        [(LowNodeLoad, ARGS)], evictor=DefaultEvictor, now=T0, cluster=cluster, **harness_kw
    )
    harness.add(
        make_node("a", cpu="8", memory="32Gi"),
        make_node("b", cpu="8", memory="32Gi"),
        make_pod("p1", node="a", qos="BE", owner_kind="ReplicaSet", labels={"app": "db"}),
        make_pod("p2", node="a", qos="LS", owner_kind="ReplicaSet", cpu="100m"),
        make_pod("ds", node="a", owner_kind="DaemonSet", cpu="100m"),
        make_node_metric("b", update_time=T0),
    )
    harness.add(_metric(harness.cluster, [("p1", "1500m"), ("p2", "1000m"), ("ds", "1000m")]))
    return harness


def _koordlet_reports(harness: DeschedulerHarness) -> None:
    """What koordlet would do between cycles: report the metrics of the pods still there."""
    alive = [
        (n, c)
        for n, c in (("p1", "1500m"), ("p2", "1000m"), ("ds", "1000m"))
        if harness.cluster.try_get("Pod", n, "default") is not None
    ]
    fresh = _metric(harness.cluster, alive)
    harness.cluster.patch("NodeMetric", "a", "", {"status": fresh["status"]}, status=True)


def test_pdb_refusal_keeps_the_pod_reports_it_and_retries_next_cycle() -> None:
    harness = _scenario(descheduling_interval=10)
    harness.add(make_pdb("db", match_labels={"app": "db"}, min_available=1))

    first = harness.run_once()
    assert [e.pod for e in first.evictions] == ["default/p2"]
    (failure,) = first.failures
    assert failure.pod == "default/p1" and failure.result == "failed" and failure.plugin == "LowNodeLoad"
    assert "disruption budget" in failure.message
    assert failure.reason.startswith("node is overutilized, node cpu usage(81.25%)>threshold(60.00%)")
    assert harness.cluster.try_get("Pod", "p1", "default") is not None
    assert first.high == ["a"] and first.low == ["b"]

    harness.cluster.delete("PodDisruptionBudget", "db", "default")
    harness.clock.advance(10)
    _koordlet_reports(harness)
    second = harness.run_once()
    assert [e.pod for e in second.evictions] == ["default/p1"]
    assert second.failures == []
    assert harness.cluster.try_get("Pod", "p1", "default") is None
    assert {r.name for r in harness.cluster.evictions} == {"p1", "p2"}


class FlakyCluster(MemoryCluster):
    """Refuses the first eviction of each pod named in ``flaky`` as an unavailable API server would."""

    def __init__(self, flaky: set[str]) -> None:
        super().__init__(VirtualClock(T0))
        self.flaky = set(flaky)

    def evict(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        requested_by: str,
        dry_run: bool = False,
        uid: str | None = None,
    ) -> None:
        if name in self.flaky:
            self.flaky.discard(name)
            raise ClusterError("etcdserver: request timed out")
        super().evict(namespace, name, reason=reason, requested_by=requested_by, dry_run=dry_run, uid=uid)


def test_api_error_keeps_the_pod_and_it_is_retried() -> None:
    harness = _scenario(cluster=FlakyCluster({"p1"}))
    first = harness.run_once()
    (failure,) = first.failures
    assert failure.pod == "default/p1" and "etcdserver: request timed out" in failure.message
    assert harness.cluster.try_get("Pod", "p1", "default") is not None
    _koordlet_reports(harness)
    second = harness.run_once()
    assert [e.pod for e in second.evictions] == ["default/p1"]


def test_dry_run_never_changes_the_cluster() -> None:
    harness = _scenario(dry_run=True)
    cluster = harness.cluster
    _ = harness.descheduler  # built: the cache has listed everything
    before = cluster.resource_version
    pods_before = sorted(p["metadata"]["name"] for p in cluster.list("Pod")[0])
    reports = harness.run(3)
    assert all(r.errors == [] for r in reports)
    assert [e.pod for e in reports[0].evictions] == ["default/p1", "default/p2"]
    assert all(e.result == "dry-run" for r in reports for e in r.evictions)
    assert cluster.resource_version == before
    assert cluster.evictions == [] and cluster.events == []
    assert sorted(p["metadata"]["name"] for p in cluster.list("Pod")[0]) == pods_before


def test_plugin_dry_run_evicts_nothing_either() -> None:
    harness = DeschedulerHarness([(LowNodeLoad, {**ARGS, "dryRun": True})], evictor=DefaultEvictor, now=T0)
    harness.add(
        make_node("a", cpu="8", memory="32Gi"),
        make_node("b", cpu="8", memory="32Gi"),
        make_pod("p1", node="a", qos="BE", owner_kind="ReplicaSet"),
        make_node_metric("b", update_time=T0),
        make_node_metric("a", update_time=T0, system={"cpu": "6"}, pods=[{"name": "p1", "cpu": "1"}]),
    )
    before = harness.cluster.resource_version
    report = harness.run_once()
    assert report.evictions == [] and report.high == ["a"]
    assert harness.cluster.resource_version == before
