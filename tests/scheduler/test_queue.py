"""The scheduling queue: ordering, backoff, parking and moving on events, gating, nominations."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.scheduler.interface import ClusterEvent, QueuedPodInfo
from koord_framework.scheduler.queue import SchedulingQueue
from koord_framework.scheduler.status import Code, Status
from koord_framework.testing import make_pod


def by_priority(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    pa, pb = a.pod.priority_value, b.pod.priority_value
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def pod(name: str, priority: int = 0, **kw: object) -> PodInfo:
    return PodInfo.from_manifest(make_pod(name, priority=priority, **kw))  # type: ignore[arg-type]


def interested_in(mapping: dict[str, set[str]]) -> Callable[[ClusterEvent], frozenset[str]]:
    """Interest function: event kind → plugins it may help."""

    def interest(event: ClusterEvent) -> frozenset[str]:
        return frozenset(mapping.get(event.kind, set()))

    return interest


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(1000.0)


def test_active_queue_follows_queue_sort_and_then_arrival(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock)
    for name, prio in [("low", 1), ("high", 10), ("mid", 5), ("mid2", 5)]:
        q.add(pod(name, prio))
    order = []
    while (info := q.pop()) is not None:
        order.append(info.pod.name)
    assert order == ["high", "mid", "mid2", "low"]


def test_backoff_doubles_from_initial_up_to_max(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock, initial_backoff=1, max_backoff=10)
    assert [q.backoff_duration(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


def test_a_failed_pod_waits_out_its_backoff(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock)
    q.add(pod("p"))
    for attempt, wait in [(1, 1.0), (2, 2.0), (3, 4.0)]:
        info = q.pop()
        assert info is not None and info.attempts == attempt
        assert q.requeue_failed(info) == "backoff"  # no rejecting plugin: an error → backoffQ
        assert q.pop() is None
        assert q.next_backoff_expiry() == pytest.approx(clock.now() + wait)
        clock.advance(wait)
    assert q.pop() is not None


def test_unschedulable_pods_move_only_on_events_their_rejectors_registered(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock, interest=interested_in({"Node": {"Fit"}, "NodeMetric": {"Load"}}))
    q.add(pod("a"))
    q.add(pod("b"))
    a, b = q.pop(), q.pop()
    assert a is not None and b is not None
    assert q.requeue_failed(a, unschedulable_plugins={"Fit"}) == "unschedulable"
    assert q.requeue_failed(b, unschedulable_plugins={"Load"}) == "unschedulable"
    assert q.move_all_on_event(ClusterEvent("Pod", "Delete")) == 0
    assert q.move_all_on_event(ClusterEvent("Node", "Add")) == 1
    assert q.where(a.pod.uid) == "backoff"  # still backing off: to backoffQ first
    clock.advance(1)
    assert q.pop() is a
    assert q.where(b.pod.uid) == "unschedulable"


def test_an_event_during_the_cycle_sends_the_failed_pod_to_backoff(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock, interest=interested_in({"Node": {"Fit"}}))
    q.add(pod("a"))
    a = q.pop()
    assert a is not None
    q.move_all_on_event(ClusterEvent("Node", "Add"))  # arrives while "a" is being scheduled
    assert q.requeue_failed(a, unschedulable_plugins={"Fit"}) == "backoff"


def test_pods_parked_too_long_are_flushed(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock, max_unschedulable_seconds=300)
    q.add(pod("a"))
    a = q.pop()
    assert a is not None
    q.requeue_failed(a, unschedulable_plugins={"Fit"})
    clock.advance(300)
    assert q.flush_unschedulable_leftover() == 0
    clock.advance(1)
    assert q.flush_unschedulable_leftover() == 1
    assert q.pop() is a


def test_pre_enqueue_gates_and_events_regate(clock: VirtualClock) -> None:
    ready: set[str] = set()

    def gate(p: PodInfo) -> Status:
        return Status() if p.name in ready else Status(Code.PENDING, ("wait",), "Gang")

    q = SchedulingQueue(by_priority, clock, pre_enqueue=gate, interest=interested_in({"Pod": {"Gang"}}))
    q.add(pod("a"))
    assert q.pop() is None and q.gate_of(pod("a").uid) == "Gang"
    assert q.lengths()["gated"] == 1
    q.move_all_on_event(ClusterEvent("Pod", "Add"))
    assert q.pop() is None  # the gate still says no
    ready.add("a")
    q.move_all_on_event(ClusterEvent("Pod", "Add"))
    info = q.pop()
    assert info is not None and info.pod.name == "a"


def test_activate_skips_the_backoff(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock)
    q.add(pod("a"))
    a = q.pop()
    assert a is not None
    q.requeue_failed(a, unschedulable_plugins={"X"})
    assert q.activate([a.pod]) == 1
    assert q.pop() is a


def test_deleted_pods_leave_every_queue_and_their_nomination(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock)
    p = pod("a")
    q.add(p)
    q.add_nominated(p, "n1")
    assert q.nominated_pods_for_node("n1") == [p]
    q.delete(p.uid)
    assert q.pop() is None and q.nominated_pods_for_node("n1") == [] and not q.nominated_node_names()


def test_update_gives_a_parked_pod_another_chance(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock)
    q.add(pod("a"))
    a = q.pop()
    assert a is not None
    q.requeue_failed(a, unschedulable_plugins={"X"})
    clock.advance(5)
    q.update(pod("a", labels={"changed": "yes"}))
    info = q.pop()
    assert info is not None and info.pod.labels == {"changed": "yes"}


def test_blocking_pop_returns_none_after_its_timeout(clock: VirtualClock) -> None:
    q = SchedulingQueue(by_priority, clock)
    assert q.pop(block=True, timeout=0.01) is None
