"""MigrationController: vectors, filters, the job life cycle, failures that leave pods in place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_migration import MigrationController, jobs, max_unavailable

from koord_framework.api.objects import PodInfo
from koord_framework.descheduler.interface import EvictionFailed, EvictOptions
from koord_framework.testing.builders import make_node, make_pdb, make_pod
from koord_framework.testing.conformance import PluginConformance
from koord_framework.testing.descheduler import DeschedulerHarness

DATA = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())
MAX_UNAVAILABLE = [v for v in DATA["vectors"] if v["function"].startswith("GetMaxUnavailable")]
NOW = 1_704_067_200.0
NO_WORKLOAD_GATES = ["ExpectedReplicas", "MaxMigratingPerWorkload", "MaxUnavailablePerWorkload"]
"""Pods of these tests name owners the cluster does not hold; like Koordinator, the workload checks refuse
such pods (0 expected replicas), so tests about other things skip them."""


class TestConformance(PluginConformance):
    plugin_class = MigrationController
    group = "descheduler"
    valid_args = [
        {"evictQPS": "10", "evictBurst": 1, "namespaces": {"exclude": ["kube-system"]}},
        {"maxMigratingPerWorkload": "20%", "maxUnavailablePerWorkload": 2, "defaultJobMode": "EvictDirectly"},
        {"skipEvictionGates": ["MaxMigratingPerNode", "ExpectedReplicas"], "evictionPolicy": "Delete"},
    ]
    invalid_args = [
        {"evictQPS": 0},
        {"evictQPS": "fast"},
        {"evictBurst": 0},
        {"maxMigratingPerNode": -1},
        {"maxMigratingPerWorkload": "abc"},
        {"defaultJobMode": "Sometimes"},
        {"namespaces": {"include": ["a"], "exclude": ["b"]}},
        {"skipEvictionGates": ["NoSuchGate"]},
        {"maxConcurrentReconciles": 0},
        {"defaultJobTTL": "-1s"},
    ]


# --- vectors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("vector", MAX_UNAVAILABLE, ids=[v["id"] for v in MAX_UNAVAILABLE])
def test_get_max_unavailable_vectors(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    assert max_unavailable(inputs["replicas"], inputs["intOrPercent"]) == vector["expected"]["maxUnavailable"]


def _workload(harness: DeschedulerHarness, replicas: int, unavailable: int) -> list[dict[str, Any]]:
    """A ReplicaSet of ``replicas`` pods spread over two nodes, ``unavailable`` of them not Ready."""
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "rs-web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}},
    }
    harness.add(rs)
    pods = []
    for i in range(replicas):
        ready = "False" if i < unavailable else "True"
        pod = make_pod(
            f"web-{i}",
            node=f"n{i % 2}",
            labels={"app": "web"},
            owner_kind="ReplicaSet",
            owner_name="web",
            scheduler_name="koord-scheduler",
            status={"conditions": [{"type": "Ready", "status": ready}]},
        )
        pod["metadata"]["ownerReferences"][0]["uid"] = "rs-web"
        pods.append(pod)
    harness.add(*pods)
    return pods


@pytest.mark.parametrize("vector", MAX_UNAVAILABLE, ids=[v["id"] for v in MAX_UNAVAILABLE])
def test_max_unavailable_vectors_through_filter(vector: dict[str, Any]) -> None:
    """The vector's limit, seen through Filter: one unavailable pod fewer passes, as many is refused."""
    replicas = vector["inputs"]["replicas"]
    limit = vector["expected"]["maxUnavailable"]
    args = {
        "maxUnavailablePerWorkload": vector["inputs"]["intOrPercent"],
        "skipCheckExpectedReplicas": True,
        "maxMigratingPerNode": 0,
    }
    if vector["inputs"]["intOrPercent"] is None:
        del args["maxUnavailablePerWorkload"]
    for unavailable, admitted in ((limit - 1, True), (limit, False)):
        harness = DeschedulerHarness([], evictor=(MigrationController, args), now=NOW)
        harness.add(make_node("n0"), make_node("n1"))
        _workload(harness, replicas, unavailable)
        plugin = harness.plugin("MigrationController")
        assert isinstance(plugin, MigrationController)
        candidate = harness.descheduler.services.cache.pod("default", f"web-{replicas - 1}")
        assert candidate is not None
        assert plugin.filter(candidate) is admitted, (unavailable, limit)


# --- filters ----------------------------------------------------------------------------------------------
def _pod(name: str, node: str = "n0", **kw: Any) -> dict[str, Any]:
    kw.setdefault("owner_kind", "ReplicaSet")
    kw.setdefault("scheduler_name", "koord-scheduler")
    return make_pod(name, node=node, **kw)


def _info(harness: DeschedulerHarness, name: str, namespace: str = "default") -> PodInfo:
    pod = harness.descheduler.services.cache.pod(namespace, name)
    assert pod is not None
    return pod


def _controller(
    args: dict[str, Any] | None, *objects: dict[str, Any]
) -> tuple[DeschedulerHarness, MigrationController]:
    """A harness evicting through MigrationController with ``args``, holding ``objects``, and the plugin."""
    harness = DeschedulerHarness([], evictor=(MigrationController, args), now=NOW)
    harness.add(*objects)
    plugin = harness.plugin("MigrationController")
    assert isinstance(plugin, MigrationController)
    return harness, plugin


def test_reservation_first_migrates_only_pods_of_its_schedulers() -> None:
    args = {"skipEvictionGates": NO_WORKLOAD_GATES}
    harness, plugin = _controller(
        args, make_node("n0"), _pod("koord"), _pod("other", scheduler_name="default-scheduler")
    )
    assert plugin.filter(_info(harness, "koord"))
    assert not plugin.filter(_info(harness, "other"))


def test_never_evicted_pods_are_refused() -> None:
    args = {"skipEvictionGates": NO_WORKLOAD_GATES, "namespaces": {"exclude": ["kube-system"]}}
    harness, plugin = _controller(
        args,
        make_node("n0"),
        _pod("ds", owner_kind="DaemonSet"),
        _pod("bare", owner_kind=None),
        _pod("critical", priority=2_000_000_000),
        _pod("local", spec={"volumes": [{"name": "tmp", "emptyDir": {}}]}),
        _pod("costly", annotations={"scheduling.koordinator.sh/eviction-cost": str(2**31 - 1)}),
        _pod("system", namespace="kube-system"),
        _pod("mirror", annotations={"kubernetes.io/config.mirror": "x"}),
        _pod("ok"),
        _pod("forced", owner_kind="DaemonSet", annotations={"descheduler.alpha.kubernetes.io/evict": "true"}),
    )
    admitted = {
        p: plugin.filter(_info(harness, p, "kube-system" if p == "system" else "default"))
        for p in ("ds", "bare", "critical", "local", "costly", "system", "mirror", "ok", "forced")
    }
    assert admitted == {
        "ds": False,
        "bare": False,
        "critical": False,
        "local": False,
        "costly": False,
        "system": False,
        "mirror": False,
        "ok": True,
        "forced": True,
    }


def test_expected_replicas_check_refuses_single_replica_and_missing_workloads() -> None:
    harness, plugin = _controller(None, make_node("n0"))
    single = _workload(harness, 1, 0)  # replicas 1
    assert not plugin.filter(_info(harness, single[0]["metadata"]["name"]))
    harness.add(_pod("orphan", owner_name="gone"))
    assert not plugin.filter(_info(harness, "orphan"))


def test_max_migrating_per_node_counts_active_jobs() -> None:
    args = {"skipEvictionGates": NO_WORKLOAD_GATES, "defaultJobMode": "EvictDirectly"}
    harness, plugin = _controller(
        args, make_node("n0"), *[_pod(f"p{i}", owner_name=f"rs{i}") for i in range(4)]
    )
    opts = EvictOptions("LowNodeLoad", "node is overutilized")
    assert plugin.evict(_info(harness, "p0"), opts)
    assert plugin.evict(_info(harness, "p1"), opts)
    # Two other pods of n0 have an active job: a third migration on the node is refused, for now.
    assert not plugin.filter(_info(harness, "p2"))
    # A pod with an active job is refused too.
    assert not plugin.filter(_info(harness, "p0"))
    job_pods = sorted(jobs.pod_ref(j)["name"] for j in harness.cluster.list("PodMigrationJob")[0])
    assert job_pods == ["p0", "p1"]


def test_filters_read_jobs_from_the_informer_not_the_api() -> None:
    # Koordinator's arbitrator reads PodMigrationJobs through a lister; one LIST call per candidate pod
    # would be thousands of API calls per round on a real cluster.
    args = {"skipEvictionGates": NO_WORKLOAD_GATES, "defaultJobMode": "EvictDirectly"}
    harness, plugin = _controller(
        args, make_node("n0"), make_node("n1"), *[_pod(f"p{i}", node=f"n{i % 2}") for i in range(40)]
    )
    cluster = harness.cluster
    lists: list[str] = []
    real_list = cluster.list

    def counting_list(kind: str, namespace: str | None = None) -> Any:
        lists.append(kind)
        return real_list(kind, namespace)

    cluster.list = counting_list  # type: ignore[method-assign]
    opts = EvictOptions("LowNodeLoad", "node is overutilized")
    assert plugin.evict(_info(harness, "p0"), opts)
    verdicts = [plugin.filter(_info(harness, f"p{i}")) for i in range(40)]
    assert lists.count("PodMigrationJob") <= 1  # at most the informer's initial list
    # The job created by evict is seen at once: p0 has an active job, p2 (n0) is still under the limit.
    assert verdicts[0] is False and verdicts[2] is True


# --- the job life cycle --------------------------------------------------------------------------------
def test_job_records_reason_and_trigger_then_evicts_through_the_eviction_api() -> None:
    args = {"skipEvictionGates": NO_WORKLOAD_GATES, "defaultJobMode": "EvictDirectly"}
    harness, plugin = _controller(args, make_node("n0"), make_node("n1"), _pod("p0"))
    assert plugin.evict(
        _info(harness, "p0"), EvictOptions("LowNodeLoad", "node is overutilized, node cpu ...")
    )
    (job,) = harness.cluster.list("PodMigrationJob")[0]
    ann = job["metadata"]["annotations"]
    assert ann["koordinator.sh/evict-reason"] == "node is overutilized, node cpu ..."
    assert ann["koordinator.sh/evict-trigger"] == "LowNodeLoad"
    assert job["status"]["phase"] == "Pending"
    assert job["spec"]["podRef"]["name"] == "p0" and job["spec"]["mode"] == "EvictDirectly"
    # The pod is still there until the controller runs.
    assert harness.cluster.try_get("Pod", "p0", "default") is not None

    harness.descheduler.drain()

    job = harness.cluster.get("PodMigrationJob", job["metadata"]["name"])
    assert job["status"]["phase"] == "Succeeded"
    assert job["status"]["message"] == 'Pod "default/p0" has been evicted'
    assert job["metadata"]["annotations"]["descheduler.koordinator.sh/passed-arbitration"] == "true"
    assert harness.cluster.try_get("Pod", "p0", "default") is None
    (eviction,) = harness.cluster.evictions
    assert (eviction.name, eviction.reason, eviction.requested_by) == (
        "p0",
        "node is overutilized, node cpu ...",
        "LowNodeLoad",
    )
    job_events = [(e.type, e.reason) for e in harness.cluster.events if e.kind == "PodMigrationJob"]
    assert ("Normal", "Evicting") in job_events and ("Normal", "Complete") in job_events


def _evicting_p0_under_a_strict_pdb(ttl: str) -> DeschedulerHarness:
    """p0's migration job (EvictDirectly, ``defaultJobTTL: ttl``) is created, and a PodDisruptionBudget
    allows no eviction of p0."""
    args = {"skipEvictionGates": NO_WORKLOAD_GATES, "defaultJobMode": "EvictDirectly", "defaultJobTTL": ttl}
    harness, plugin = _controller(
        args,
        make_node("n0"),
        _pod("p0", labels={"app": "db"}),
        make_pdb("db", match_labels={"app": "db"}, min_available=1),
    )
    assert plugin.evict(_info(harness, "p0"), EvictOptions("LowNodeLoad", "overloaded"))
    return harness


def test_pdb_refusal_leaves_pod_in_place_is_retried_and_reported() -> None:
    harness = _evicting_p0_under_a_strict_pdb("2m")
    harness.descheduler.settle(NOW + 30)

    (job,) = harness.cluster.list("PodMigrationJob")[0]
    assert harness.cluster.try_get("Pod", "p0", "default") is not None
    # As in Koordinator, a refusal is reported by a Warning Event only: the job stays Running, untouched.
    assert job["status"]["phase"] == "Running"
    assert not job["status"].get("reason") and not job["status"].get("status")
    assert jobs.condition(job["status"], jobs.COND_EVICTION) is None
    warnings = [e for e in harness.cluster.events if e.kind == "PodMigrationJob" and e.type == "Warning"]
    assert warnings and all(e.reason == "Evicting" for e in warnings)
    assert len(warnings) > 3  # retried with backoff, not once
    # Attempts are refused by the budget, or by the eviction rate limit that retries also draw from.
    assert any(
        "Cannot evict pod as it would violate the pod's disruption budget" in e.message for e in warnings
    )
    assert all("disruption budget" in e.message or "TooManyEvictions" in e.message for e in warnings)
    assert harness.cluster.evictions == []

    # The budget is relaxed: the next retry succeeds and the job completes.
    harness.cluster.delete("PodDisruptionBudget", "db", "default")
    harness.descheduler.drain()
    job = harness.cluster.get("PodMigrationJob", job["metadata"]["name"])
    assert job["status"]["phase"] == "Succeeded"
    assert harness.cluster.try_get("Pod", "p0", "default") is None


def test_pod_gone_after_refused_evictions_fails_the_job_missing_pod() -> None:
    # The eviction never went through, so the pod's disappearance is not the job's doing: Koordinator's
    # evictPod aborts with MissingPod unless the job's status is already "Eviction" (an eviction accepted).
    harness = _evicting_p0_under_a_strict_pdb("2m")
    harness.descheduler.settle(NOW + 30)
    harness.cluster.delete("Pod", "p0", "default")
    harness.descheduler.drain()
    (job,) = harness.cluster.list("PodMigrationJob")[0]
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "MissingPod")
    assert job["status"]["message"] == 'Abort job caused by missing Pod "default/p0"'


def test_job_times_out_when_eviction_keeps_failing() -> None:
    harness = _evicting_p0_under_a_strict_pdb("1m")
    # Retries back off exponentially (as controller-runtime does); the attempt after the TTL fails the job.
    harness.descheduler.drain()
    (job,) = harness.cluster.list("PodMigrationJob")[0]
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Timeout")
    assert harness.cluster.try_get("Pod", "p0", "default") is not None


def test_hand_written_job_with_a_negative_ttl_times_out_at_once() -> None:
    # Upstream's abortJobIfTimeout skips only a nil or zero TTL: creation + (-1s) is already past.
    harness, _ = _controller({"skipEvictionGates": NO_WORKLOAD_GATES}, make_node("n0"), _pod("p0"))
    harness.cluster.create(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {"name": "by-hand"},
            "spec": {"podRef": {"namespace": "default", "name": "p0"}, "mode": "EvictDirectly", "ttl": "-1s"},
        }
    )
    harness.descheduler.drain()
    job = harness.cluster.get("PodMigrationJob", "by-hand")
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Timeout")
    assert harness.cluster.try_get("Pod", "p0", "default") is not None


def test_delete_policy_deletes_and_qps_limits_evictions() -> None:
    args = {
        "skipEvictionGates": [*NO_WORKLOAD_GATES, "MaxMigratingPerNode"],
        "defaultJobMode": "EvictDirectly",
        "evictionPolicy": "Delete",
        "evictQPS": 1,
        "evictBurst": 1,
        "objectLimiters": {"workload": {"duration": "0s"}},
    }
    harness, plugin = _controller(
        args, make_node("n0"), *[_pod(f"p{i}", owner_name=f"rs{i}") for i in range(3)]
    )
    for i in range(3):
        assert plugin.evict(_info(harness, f"p{i}"), EvictOptions("LowNodeLoad", "overloaded"))
    harness.descheduler.settle(NOW + 0.6)
    # One token at once: a single pod is gone after 0.6s, the others wait for the bucket to refill.
    gone = [i for i in range(3) if harness.cluster.try_get("Pod", f"p{i}", "default") is None]
    assert len(gone) == 1
    harness.descheduler.drain()
    assert all(harness.cluster.try_get("Pod", f"p{i}", "default") is None for i in range(3))
    assert harness.cluster.evictions == []  # deleted, not evicted


def test_dry_run_creates_no_job() -> None:
    harness, plugin = _controller({"dryRun": True}, make_node("n0"), _pod("p0"))
    assert plugin.evict(_info(harness, "p0"), EvictOptions("LowNodeLoad", "overloaded"))
    assert harness.cluster.list("PodMigrationJob")[0] == []


# --- object limiters ---------------------------------------------------------------------------------------
def _evicted_one_of_ten() -> tuple[DeschedulerHarness, MigrationController]:
    """A ReplicaSet of 10 pods under the default workload limiter (maxMigratingPerWorkload of 10 = 2 per
    5 minutes, burst 1); web-9 has been migrated, which spent the workload's only token."""
    harness = DeschedulerHarness(
        [], evictor=(MigrationController, {"defaultJobMode": "EvictDirectly"}), now=NOW
    )
    harness.add(make_node("n0"), make_node("n1"))
    _workload(harness, 10, 0)
    plugin = harness.plugin("MigrationController")
    assert isinstance(plugin, MigrationController)
    assert plugin.evict(_info(harness, "web-9"), EvictOptions("LowNodeLoad", "hot"))
    harness.descheduler.drain()
    assert harness.cluster.try_get("Pod", "web-9", "default") is None
    return harness, plugin


def test_workload_object_limiter_refuses_the_next_eviction_until_a_token_returns() -> None:
    harness, plugin = _evicted_one_of_ten()
    with pytest.raises(EvictionFailed, match="exceeds object limiter"):
        plugin.evict(_info(harness, "web-8"), EvictOptions("LowNodeLoad", "hot"))
    # A token comes back after 300s / 2 = 150s.
    harness.descheduler.settle(NOW + 151)
    assert plugin.evict(_info(harness, "web-8"), EvictOptions("LowNodeLoad", "hot"))


def test_job_with_evict_annotation_of_any_value_skips_the_object_limiter() -> None:
    # ``HaveEvictAnnotation`` tests the key's presence: an empty value counts.
    harness, plugin = _evicted_one_of_ten()
    pod = harness.cluster.get("Pod", "web-8", "default")
    job = jobs.new_job(
        "manual",
        namespace="default",
        pod_name="web-8",
        pod_uid=pod["metadata"]["uid"],
        mode="EvictDirectly",
        ttl=300.0,
        reason="by hand",
        trigger="",
        created_by=plugin.reconciler.reconciler_uid,
        delete_options=None,
    )
    job["metadata"]["annotations"]["descheduler.alpha.kubernetes.io/evict"] = ""
    harness.cluster.create(job)
    harness.descheduler.settle(NOW + 20)
    assert harness.cluster.get("PodMigrationJob", "manual")["status"]["phase"] == "Succeeded"
    assert harness.cluster.try_get("Pod", "web-8", "default") is None


# --- a new leader resumes the jobs of the last one ----------------------------------------------------------
@pytest.mark.parametrize(("first", "second", "resumed"), [("ns/lease", "ns/lease", True), ("", "", False)])
def test_a_restarted_descheduler_resumes_the_jobs_of_its_instance(
    first: str, second: str, resumed: bool
) -> None:
    """A leader-elected descheduler names its reconciler by its Lease: its next leader (same Lease) evicts
    the pod of a Pending job the dead one created. Without a name each process is a new instance and, as
    in Koordinator, leaves another's jobs alone."""
    args = {"skipEvictionGates": NO_WORKLOAD_GATES, "defaultJobMode": "EvictDirectly"}
    dead = DeschedulerHarness([], evictor=(MigrationController, args), now=NOW, instance_name=first)
    dead.add(make_node("n0"), make_node("n1"), _pod("web"))
    plugin = dead.plugin("MigrationController")
    assert isinstance(plugin, MigrationController)
    assert plugin.evict(_info(dead, "web"), EvictOptions("LowNodeLoad", "node is overutilized"))
    (job,) = dead.cluster.list(jobs.KIND)[0]
    assert (job.get("status") or {}).get("phase") == jobs.PHASE_PENDING  # the process dies here

    heir = DeschedulerHarness(
        [], evictor=(MigrationController, args), cluster=dead.cluster, instance_name=second
    )
    for _ in range(20):
        heir.descheduler.tick()
        heir.clock.advance(1.0)
    phase = (heir.cluster.get(jobs.KIND, job["metadata"]["name"]).get("status") or {}).get("phase")
    pod = heir.cluster.try_get("Pod", "web", "default")
    gone = pod is None or bool(pod["metadata"].get("deletionTimestamp"))
    assert gone is resumed, phase
    assert (phase != jobs.PHASE_PENDING) is resumed, phase
