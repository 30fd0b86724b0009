"""What the scheduler records for users: Scheduled / FailedScheduling Events and the PodScheduled condition,
as kube-scheduler v1.20 does."""

from __future__ import annotations

from typing import Any

from koord_framework.scheduler.reporting import condition_update
from koord_framework.scheduler.status import Status
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness


def _events(h: SchedulerHarness, reason: str) -> list[dict[str, Any]]:
    return [e for e in h.cluster.event_store.list() if e["reason"] == reason]


def _condition(h: SchedulerHarness, name: str) -> dict[str, Any] | None:
    pod = h.cluster.get("Pod", name, "default")
    for cond in pod.get("status", {}).get("conditions") or ():
        if cond["type"] == "PodScheduled":
            return dict(cond)
    return None


def _no_cpu(p: Any, state: Any, pod: Any, node: Any) -> Status:
    return Status.unschedulable("Insufficient cpu")


def test_a_bound_pod_gets_a_scheduled_event(fake_plugin: Any) -> None:
    h = SchedulerHarness([fake_plugin("Fits", [], filter=Status())])
    h.add(make_node("n1"), make_pod("p"))
    h.run_until_idle()
    [event] = _events(h, "Scheduled")
    assert event["message"] == "Successfully assigned default/p to n1"
    assert event["type"] == "Normal" and event["action"] == "Binding"
    assert event["source"]["component"] == "default-scheduler"
    assert event["involvedObject"]["uid"] == h.cluster.get("Pod", "p", "default")["metadata"]["uid"]


def test_an_unschedulable_pod_gets_the_fit_error_as_event_and_condition(fake_plugin: Any) -> None:
    h = SchedulerHarness([fake_plugin("NoCPU", [], filter=_no_cpu)])
    h.add(make_node("n1"), make_node("n2"), make_node("n3"), make_pod("p"))
    h.schedule_one(make_pod("p"))
    message = "0/3 nodes are available: 3 Insufficient cpu."
    [event] = _events(h, "FailedScheduling")
    assert event["message"] == message
    assert event["type"] == "Warning" and event["action"] == "Scheduling"
    assert event["reportingComponent"] == "default-scheduler"
    cond = _condition(h, "p")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", message)
    assert cond["lastTransitionTime"]


def test_the_condition_is_written_only_when_it_changes_and_repeats_bump_the_event(fake_plugin: Any) -> None:
    h = SchedulerHarness([fake_plugin("NoCPU", [], filter=_no_cpu)])
    h.add(make_node("n1"), make_pod("p"))
    h.schedule_one(make_pod("p"))
    version = h.cluster.get("Pod", "p", "default")["metadata"]["resourceVersion"]
    for _ in range(3):
        h.cluster.clock.advance(301)  # type: ignore[attr-defined]
        h.scheduler.queue.flush_unschedulable_leftover()
        h.scheduler.schedule_one()
    attempts = sum(1 for r in h.cluster.events if r.reason == "FailedScheduling")
    assert attempts >= 2
    assert h.cluster.get("Pod", "p", "default")["metadata"]["resourceVersion"] == version
    [event] = _events(h, "FailedScheduling")
    assert event["count"] == attempts


def test_a_status_only_update_leaves_a_parked_pod_parked(fake_plugin: Any) -> None:
    log: list[str] = []
    h = SchedulerHarness([fake_plugin("NoCPU", log, filter=_no_cpu)])
    h.add(make_node("n1"), make_pod("p"))
    h.schedule_one(make_pod("p"))
    tried = len(log)
    # Writing the condition was an update event of the pod; it must not have retried it at once.
    assert h.scheduler.schedule_one() is False
    assert len(log) == tried


def test_a_binding_error_is_a_scheduler_error(fake_plugin: Any) -> None:
    h = SchedulerHarness([fake_plugin("Binder", [], bind=Status.as_error("connection reset"))])
    h.add(make_node("n1"), make_pod("p"))
    h.schedule_one(make_pod("p"))
    cond = _condition(h, "p")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "SchedulerError")
    assert "connection reset" in cond["message"]
    [event] = _events(h, "FailedScheduling")
    assert "connection reset" in event["message"]


def test_a_permit_rejection_is_unschedulable(fake_plugin: Any) -> None:
    h = SchedulerHarness([fake_plugin("Gate", [], permit=Status.unschedulable("gang not ready"))])
    h.add(make_node("n1"), make_pod("p"))
    h.schedule_one(make_pod("p"))
    cond = _condition(h, "p")
    assert cond is not None and (cond["reason"], cond["message"]) == ("Unschedulable", "gang not ready")


def test_condition_update_keeps_transition_time_while_status_stays() -> None:
    first = condition_update(None, "PodScheduled", "False", "Unschedulable", "a", 100.0)
    assert first == [
        {
            "type": "PodScheduled",
            "status": "False",
            "lastTransitionTime": "1970-01-01T00:01:40Z",
            "reason": "Unschedulable",
            "message": "a",
        }
    ]
    assert condition_update(first, "PodScheduled", "False", "Unschedulable", "a", 200.0) is None
    second = condition_update(first, "PodScheduled", "False", "Unschedulable", "b", 200.0)
    assert second is not None and second[0]["lastTransitionTime"] == "1970-01-01T00:01:40Z"
    assert second[0]["message"] == "b"
    other = [{"type": "Ready", "status": "False"}]
    added = condition_update(other, "PodScheduled", "False", "Unschedulable", "a", 100.0)
    assert added is not None and added[0] == other[0] and len(added) == 2


def test_a_reservation_scheduled_true_is_left_alone_and_a_bound_pod_gets_no_condition() -> None:
    from koord_framework.cluster.clock import VirtualClock
    from koord_framework.cluster.informer import SharedInformer
    from koord_framework.cluster.memory import MemoryCluster
    from koord_framework.scheduler.reporting import FailureReporter

    cluster = MemoryCluster(VirtualClock(1_000_000))
    cluster.create(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": "r"},
            "spec": {"template": {"spec": {"containers": []}}, "owners": [{"object": {"name": "x"}}]},
        }
    )
    cluster.patch(
        "Reservation",
        "r",
        "",
        {"status": {"conditions": [{"type": "Scheduled", "status": "True"}]}},
        status=True,
    )
    cluster.create(make_pod("p"))
    cluster.bind("default", "p", "n1")
    informer = SharedInformer(cluster)
    reporter = FailureReporter(cluster, informer.get)
    reporter.reservation_failed("koord-scheduler", "r", "", "0/1 nodes are available: 1 Insufficient cpu.")
    assert cluster.get("Reservation", "r")["status"]["conditions"] == [
        {"type": "Scheduled", "status": "True"}
    ]
    bound = cluster.get("Pod", "p", "default")["status"]["conditions"]
    reporter.pod_failed("koord-scheduler", "default", "p", "", "SchedulerError", "conflict")
    assert cluster.get("Pod", "p", "default")["status"]["conditions"] == bound  # PodScheduled=True stays
    # Both failures are still told as events.
    assert [e.reason for e in cluster.events] == ["FailedScheduling", "FailedScheduling"]
