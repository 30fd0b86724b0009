"""ReservationFirst: the Reservation a job creates, each step on the job's status, failures and clean-up.

The descheduler never schedules a Reservation; here the test plays the scheduler by writing the status the
Reservation plugin would (Koordinator's controller tests do the same with a fake interpreter). The
end-to-end run with the real scheduler is ``tests/descheduler/test_reservation_first_cli.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_migration import MigrationController, jobs, reservations
from koord_plugin_migration.reservations import reservation_options, reserve_owners

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.descheduler.interface import EvictOptions
from koord_framework.testing.builders import make_node, make_pod
from koord_framework.testing.descheduler import DeschedulerHarness

NOW = 1_704_067_200.0
NO_WORKLOAD_GATES = ["ExpectedReplicas", "MaxMigratingPerWorkload", "MaxUnavailablePerWorkload"]
STS_UID = "2f96233d-a6b9-4981-b594-7c90c987aed9"


def _pod(name: str = "test-pod", node: str = "n0", **kw: Any) -> dict[str, Any]:
    pod = make_pod(name, node=node, cpu="1", scheduler_name="koord-scheduler", owner_kind="StatefulSet", **kw)
    ref = pod["metadata"]["ownerReferences"][0]
    ref.update(apiVersion="apps/v1", name="test", uid=STS_UID, controller=True)
    return pod


def _started(args: dict[str, Any] | None = None, *extra: dict[str, Any]) -> tuple[DeschedulerHarness, str]:
    """A ReservationFirst job for test-pod on n0, past its first passes: its Reservation exists."""
    merged = {"skipEvictionGates": NO_WORKLOAD_GATES, **(args or {})}
    harness = DeschedulerHarness([], evictor=(MigrationController, merged), now=NOW)
    harness.add(make_node("n0"), make_node("n1"), _pod(), *extra)
    plugin = harness.plugin("MigrationController")
    assert isinstance(plugin, MigrationController)
    pod = harness.descheduler.services.cache.pod("default", "test-pod")
    assert pod is not None
    assert plugin.evict(pod, EvictOptions("LowNodeLoad", "node is overutilized"))
    _advance(harness, 1.0)
    (job,) = harness.cluster.list(jobs.KIND)[0]
    return harness, job["metadata"]["name"]


def _advance(harness: DeschedulerHarness, seconds: float) -> None:
    harness.descheduler.settle(harness.clock.now() + seconds)


def _job(harness: DeschedulerHarness, name: str) -> dict[str, Any]:
    return harness.cluster.get(jobs.KIND, name)


def _reservation_name(job: dict[str, Any]) -> str:
    ref = jobs.reservation_ref(job)
    assert ref is not None
    return str(ref["name"])


def _play_scheduler(
    harness: DeschedulerHarness, name: str, *, node: str = "n1", phase: str = "Available", **status: Any
) -> None:
    """Write what the scheduler's Reservation plugin (and its controller) would."""
    cond = {"type": "Scheduled", "status": "True", "reason": "Scheduled"}
    body = {"nodeName": node, "phase": phase, "conditions": [cond], **status}
    harness.cluster.patch(reservations.KIND, name, "", {"status": body}, status=True)


def _cond(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return jobs.condition(job.get("status") or {}, kind)


# --- the Reservation a job creates ----------------------------------------------------------------------
def test_job_creates_a_reservation_from_its_pod_and_waits_for_it() -> None:
    harness, name = _started({"defaultJobTTL": "10m"})
    job = _job(harness, name)
    options = job["spec"]["reservationOptions"]
    ref = options["reservationRef"]
    assert ref["kind"] == "Reservation" and ref["name"] == job["metadata"]["uid"]
    obj = harness.cluster.get(reservations.KIND, ref["name"])
    assert ref["uid"] == obj["metadata"]["uid"]
    spec = obj["spec"]
    assert spec["allocateOnce"] is True
    assert spec["ttl"] == "10m0s"
    assert spec["owners"] == [
        {
            "controller": {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": "test",
                "uid": STS_UID,
                "controller": True,
                "namespace": "default",
            }
        }
    ]
    template = spec["template"]
    assert template["metadata"]["name"] == "test-pod"
    assert "nodeName" not in template["spec"]
    assert template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n0"]}]}
        ]
    }
    labels = obj["metadata"]["labels"]
    assert labels["app.kubernetes.io/created-by"] == "koord-descheduler"
    assert labels["scheduling.koordinator.sh/reservation-order"].isdigit()
    # Still Pending: the job waits, the pod stays.
    _advance(harness, 10.0)
    job = _job(harness, name)
    assert job["status"]["phase"] == "Running"
    assert _cond(job, "ReservationCreated") == {**(_cond(job, "ReservationCreated") or {}), "status": "True"}
    assert harness.cluster.try_get("Pod", "test-pod", "default") is not None
    events = [e.reason for e in harness.cluster.events if e.kind == jobs.KIND]
    assert "ReservationCreated" in events


def test_available_reservation_then_eviction_then_replacement_bound_and_ready() -> None:
    """Koordinator's TestMigrate / TestMigrateWithSamePodName, step by step."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    _play_scheduler(harness, rname)
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert job["status"]["nodeName"] == "n1"
    assert (_cond(job, "ReservationScheduled") or {}).get("status") == "True"
    # Evicted once the reservation is held.
    assert harness.cluster.try_get("Pod", "test-pod", "default") is None
    assert (_cond(job, "Eviction") or {}).get("reason") == "EvictComplete"
    assert (_cond(job, "PodBoundReservation") or {}).get("reason") == "WaitForPodBindReservation"
    assert job["status"]["phase"] == "Running"
    # The controller's replacement (same name, new uid) consumes the reservation, not Ready yet.
    new = _pod(node="n1")
    new["metadata"]["uid"] = "replacement"
    new["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    harness.add(new)
    owner = {"namespace": "default", "name": "test-pod", "uid": "replacement"}
    _play_scheduler(harness, rname, phase="Succeeded", currentOwners=[owner])
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert job["status"]["podRef"] == owner
    assert (_cond(job, "ReservationBound") or {}).get("status") == "True"
    assert job["status"]["reason"] == "WaitForBoundPodReady" and job["status"]["phase"] == "Running"
    harness.cluster.patch(
        "Pod",
        "test-pod",
        "default",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        status=True,
    )
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert job["status"]["phase"] == "Succeeded"
    assert job["status"]["status"] == "Complete"
    message = f'Bind Pod "default/test-pod" in Reservation "{rname}"'
    assert job["status"]["message"] == message
    assert _cond(job, "PodBoundReservation") == {
        **(_cond(job, "PodBoundReservation") or {}),
        "status": "True",
        "message": message,
    }
    assert (_cond(job, "BoundPodReady") or {}).get("status") == "True"
    events = [e.reason for e in harness.cluster.events if e.kind == jobs.KIND]
    for reason in ("ReservationCreated", "ReservationScheduled", "Evicting", "EvictComplete", "Complete"):
        assert reason in events


def test_reservation_consumed_by_another_pod_before_eviction_fails_the_job() -> None:
    """TestMigrateWhenEvictingWithSucceededReservation / TestMigrateWithReservationSucceeded."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    other = {"namespace": "test", "name": "other-pod", "uid": "u-other"}
    _play_scheduler(harness, rname, phase="Succeeded", currentOwners=[other])
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert job["status"]["phase"] == "Failed"
    assert job["status"]["reason"] == "ForbiddenMigratePod"
    assert job["status"]["message"] == "Reservation is already bound by another Pod"
    assert job["status"]["status"] == "ReservationScheduled"
    assert _cond(job, "Eviction") is None
    assert harness.cluster.try_get("Pod", "test-pod", "default") is not None


def test_unschedulable_reservation_fails_the_job_unschedulable() -> None:
    """TestMigrateWithReservationScheduleFailed: the scheduler's message reaches the job."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    cond = {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes"}
    harness.cluster.patch(
        reservations.KIND, rname, "", {"status": {"phase": "Failed", "conditions": [cond]}}, status=True
    )
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert job["status"]["phase"] == "Failed"
    assert job["status"]["reason"] == "Unschedulable"
    assert job["status"]["message"] == "0/2 nodes"
    assert (_cond(job, "ReservationScheduled") or {}).get("message") == "0/2 nodes"
    assert harness.cluster.try_get("Pod", "test-pod", "default") is not None
    # Its reservation goes with the failed migration.
    assert harness.cluster.try_get(reservations.KIND, rname) is None


def test_pending_reservation_reports_unschedulable_and_keeps_waiting() -> None:
    """TestHandleScheduleFailed: a Pending reservation the scheduler could not place yet."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    cond = {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "no fit"}
    harness.cluster.patch(
        reservations.KIND, rname, "", {"status": {"phase": "Pending", "conditions": [cond]}}, status=True
    )
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert job["status"]["phase"] == "Running"
    assert (job["status"]["status"], job["status"]["reason"]) == ("ReservationScheduled", "Unschedulable")
    # Placed later: the condition turns True and the migration goes on.
    _play_scheduler(harness, rname)
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert (_cond(job, "ReservationScheduled") or {}).get("status") == "True"
    assert harness.cluster.try_get("Pod", "test-pod", "default") is None


def test_expired_reservation_fails_the_job() -> None:
    """TestMigrateWithReservationExpired."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    cond = {"type": "Ready", "status": "False", "reason": "Expired"}
    harness.cluster.patch(
        reservations.KIND,
        rname,
        "",
        {"status": {"nodeName": "n1", "phase": "Failed", "conditions": [cond]}},
        status=True,
    )
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "ReservationExpired")
    assert job["status"]["message"] == "Reservation expired"


def test_missing_reservation_fails_the_job() -> None:
    """TestAbortJobByMissingReservation."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    harness.cluster.delete(reservations.KIND, rname)
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "MissingReservation")
    assert job["status"]["message"] == f'Abort job caused by missing Reservation "/{rname}"'


def test_reservation_on_the_pods_own_node_fails_the_job() -> None:
    """TestAbortJobIfReserveOnSameNode."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    _play_scheduler(harness, rname, node="n0")
    _advance(harness, 4.0)
    job = _job(harness, name)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert job["status"]["message"] == (
        f'Scheduler assignes the Reservation "{rname}" on the same node as the Pod'
    )
    assert harness.cluster.try_get("Pod", "test-pod", "default") is not None


def test_timeout_deletes_the_reservation() -> None:
    """TestAbortJobIfTimeout: the job fails Timeout and its reservation is deleted."""
    harness, name = _started({"defaultJobTTL": "30s"})
    rname = _reservation_name(_job(harness, name))
    _advance(harness, 40.0)
    job = _job(harness, name)
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Timeout")
    assert harness.cluster.try_get(reservations.KIND, rname) is None


def test_deleting_the_job_deletes_its_reservation_and_scavenger_removes_both() -> None:
    """TestDeleteReservation / TestDoScavenge."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    harness.cluster.delete(jobs.KIND, name)
    assert harness.cluster.try_get(reservations.KIND, rname) is None

    harness, name = _started({"defaultJobTTL": "1m"})
    rname = _reservation_name(_job(harness, name))
    _play_scheduler(harness, rname, phase="Succeeded", currentOwners=[{"name": "x", "namespace": "default"}])
    _advance(harness, 7 * 60.0)
    assert harness.cluster.try_get(jobs.KIND, name) is None
    assert harness.cluster.try_get(reservations.KIND, rname) is None


def test_restart_resumes_from_the_objects() -> None:
    """A new controller (a restarted descheduler) picks the job up where its objects say it is."""
    harness, name = _started()
    rname = _reservation_name(_job(harness, name))
    # A restarted descheduler adopts the jobs left to it (Koordinator ignores another instance's jobs by
    # their created-by annotation; a job without it is everyone's).
    harness.cluster.patch(
        jobs.KIND, name, "", {"metadata": {"annotations": {jobs.ANNOTATION_JOB_CREATED_BY: None}}}
    )
    harness.descheduler.close()
    restarted = DeschedulerHarness(
        [],
        evictor=(MigrationController, {"skipEvictionGates": NO_WORKLOAD_GATES}),
        cluster=harness.cluster,
    )
    _play_scheduler(harness, rname)
    restarted.descheduler.settle(restarted.clock.now() + 4.0)
    job = _job(harness, name)
    assert job["status"]["nodeName"] == "n1"
    assert harness.cluster.try_get("Pod", "test-pod", "default") is None
    assert len(harness.cluster.list(reservations.KIND)[0]) == 1  # not created a second time


def test_reservation_created_earlier_is_taken_over() -> None:
    """A pass that created the Reservation but could not record it: the next one adopts it by name."""
    harness, name = _started()
    job = _job(harness, name)
    rname = _reservation_name(job)
    harness.cluster.patch(jobs.KIND, name, "", {"spec": {"reservationOptions": None}})
    _advance(harness, 4.0)
    assert _reservation_name(_job(harness, name)) == rname
    assert len(harness.cluster.list(reservations.KIND)[0]) == 1


def test_cluster_without_reservations_evicts_directly() -> None:
    """Not in Koordinator: without the Reservation kind the job evicts directly, and says so."""

    class NoReservationCRD(MemoryCluster):
        def serves(self, kind: str) -> bool:
            return kind != reservations.KIND

    harness = DeschedulerHarness(
        [],
        evictor=(MigrationController, {"skipEvictionGates": NO_WORKLOAD_GATES}),
        cluster=NoReservationCRD(VirtualClock(NOW)),
    )
    harness.add(make_node("n0"), make_node("n1"), _pod())
    plugin = harness.plugin("MigrationController")
    assert isinstance(plugin, MigrationController)
    pod = harness.descheduler.services.cache.pod("default", "test-pod")
    assert pod is not None
    assert plugin.evict(pod, EvictOptions("LowNodeLoad", "overloaded"))
    harness.descheduler.drain()
    (job,) = harness.cluster.list(jobs.KIND)[0]
    assert job["status"]["phase"] == "Succeeded"
    cond = _cond(job, "ReservationCreated")
    assert cond is not None and cond["reason"] == "ReservationUnsupported"


# --- the interpreter's helpers (Koordinator's reservation/util_test.go) ------------------------------
def test_reserve_owners_of_a_pending_unschedulable_pod_is_the_pod() -> None:
    pod = _pod(node=None)
    pod["metadata"]["uid"] = "u1"
    pod["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    assert reserve_owners(pod) == [
        {"object": {"uid": "u1", "kind": "Pod", "name": "test-pod", "namespace": "default"}}
    ]
    pod["metadata"]["ownerReferences"] = []
    pod["status"] = {"phase": "Running"}
    assert reserve_owners(pod) == []


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (None, [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n0"]}]}]),
        (
            {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            },
            [
                {
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                    "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n0"]}],
                }
            ],
        ),
    ],
)
def test_reservation_options_exclude_the_pods_node(affinity: Any, expected: list[Any]) -> None:
    pod = _pod()
    if affinity is not None:
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
        }
    job = {"metadata": {"uid": "job-uid"}, "spec": {}}
    options = reservation_options(job, pod, 1234, "5m0s")
    template = options["template"]
    assert template["metadata"]["name"] == "job-uid"
    assert template["metadata"]["labels"]["scheduling.koordinator.sh/reservation-order"] == "1234"
    assert template["spec"]["ttl"] == "5m0s"
    terms = template["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == expected
    # The pod itself is unchanged.
    assert (pod["spec"].get("affinity") is None) == (affinity is None)


def test_reservation_options_keep_what_the_job_gave() -> None:
    pod = _pod()
    given = {"template": {"metadata": {"name": "mine"}, "spec": {"expires": "2030-01-01T00:00:00Z"}}}
    job = {"metadata": {"uid": "job-uid"}, "spec": {"reservationOptions": given}}
    options = reservation_options(job, pod, 1, "5m0s")
    spec = options["template"]["spec"]
    assert options["template"]["metadata"]["name"] == "mine"
    assert "ttl" not in spec and spec["expires"] == "2030-01-01T00:00:00Z"
    assert spec["allocateOnce"] is True
    assert spec["owners"][0]["controller"]["uid"] == STS_UID
    assert spec["template"]["metadata"]["name"] == "test-pod"


def test_info_helpers_read_reservation_state() -> None:
    obj: dict[str, Any] = {"status": {}}
    assert reservations.is_pending(obj) and not reservations.is_scheduled(obj)
    obj["status"] = {
        "phase": "Available",
        "nodeName": "n1",
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled"}],
    }
    assert reservations.is_available(obj) and reservations.is_scheduled(obj)
    assert reservations.bound_pod(obj) is None
    obj["spec"] = {"owners": [{"object": {"name": "p"}}]}
    assert reservations.migrates_pending_pod(obj)


def test_reservation_for_a_pending_pod_waits_for_the_pod_to_be_scheduled() -> None:
    """TestWaitForPendingPodScheduled: the reservation is owned by the pending pod itself."""
    pending = _pod("pending", node=None)
    pending["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/2 nodes are available"}],
    }
    args = {"skipEvictionGates": NO_WORKLOAD_GATES, "evictAllBarePods": True}
    harness = DeschedulerHarness([], evictor=(MigrationController, args), now=NOW)
    harness.add(make_node("n0"), make_node("n1"), pending)
    plugin = harness.plugin("MigrationController")
    assert isinstance(plugin, MigrationController)
    stored = harness.cluster.get("Pod", "pending", "default")
    job = jobs.new_job(
        "job-pending",
        namespace="default",
        pod_name="pending",
        pod_uid=stored["metadata"]["uid"],
        mode="ReservationFirst",
        ttl=300.0,
        reason="test",
        trigger="test",
        created_by=plugin.reconciler.reconciler_uid,
        delete_options=None,
    )
    job["metadata"]["annotations"][jobs.ANNOTATION_PASSED_ARBITRATION] = "true"
    harness.cluster.create(job)
    plugin.reconciler.waiting.clear()
    plugin.reconciler.enqueue("job-pending", harness.clock.now())
    _advance(harness, 1.0)
    rname = _reservation_name(_job(harness, "job-pending"))
    obj = harness.cluster.get(reservations.KIND, rname)
    assert obj["spec"]["owners"] == [
        {
            "object": {
                "uid": stored["metadata"]["uid"],
                "kind": "Pod",
                "name": "pending",
                "namespace": "default",
            }
        }
    ]
    _play_scheduler(harness, rname)
    _advance(harness, 4.0)
    status = _job(harness, "job-pending")["status"]
    assert (status["phase"], status["status"]) == ("Running", "PodScheduled")
    assert status["message"] == "0/2 nodes are available"
    harness.cluster.bind("default", "pending", "n1")
    _advance(harness, 4.0)
    status = _job(harness, "job-pending")["status"]
    assert (status["phase"], status["status"]) == ("Succeeded", "Complete")
    assert status["message"] == 'Assign Pod "default/pending" to node "n1"'
    assert harness.cluster.try_get("Pod", "pending", "default") is not None  # never evicted
