"""The event recorder: client-go's aggregation, deduplication and spam filter, and never blocking."""

from __future__ import annotations

import random
import threading

import pytest

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.events import (
    COMBINED_PREFIX,
    EventCorrelator,
    EventRecorder,
    MemoryEventWriter,
)
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import EventRecord, Obj
from koord_framework.errors import ClusterError, NotFoundError


def _pod_event(message: str, reason: str = "FailedScheduling", name: str = "p") -> EventRecord:
    return EventRecord(
        kind="Pod",
        namespace="ns",
        name=name,
        reason=reason,
        message=message,
        type="Warning",
        component="koord-scheduler",
        extra={"uid": f"uid-{name}"},
        action="Scheduling",
    )


def _recorder(clock: VirtualClock) -> tuple[EventRecorder, MemoryEventWriter]:
    store = MemoryEventWriter()
    return EventRecorder(store, component="koord-scheduler", clock=clock), store


def test_a_repeated_event_bumps_count_and_last_timestamp_of_the_same_event() -> None:
    clock = VirtualClock(1_000_000)
    recorder, store = _recorder(clock)
    recorder.record(_pod_event("0/3 nodes are available: 3 Insufficient cpu."))
    clock.advance(30)
    recorder.record(_pod_event("0/3 nodes are available: 3 Insufficient cpu."))
    clock.advance(30)
    recorder.record(_pod_event("0/3 nodes are available: 3 Insufficient cpu."))
    [event] = store.list("ns")
    assert event["count"] == 3
    assert event["firstTimestamp"] == "1970-01-12T13:46:40Z"
    assert event["lastTimestamp"] == "1970-01-12T13:47:40Z"
    assert event["metadata"]["resourceVersion"] == "3"
    assert recorder.stats.created == 1 and recorder.stats.patched == 2


def test_the_event_carries_object_source_action_and_reporting_controller() -> None:
    clock = VirtualClock(1_000_000)
    recorder, store = _recorder(clock)
    recorder.record(_pod_event("no fit"))
    [event] = store.list("ns")
    assert event["involvedObject"] == {
        "kind": "Pod",
        "name": "p",
        "namespace": "ns",
        "apiVersion": "v1",
        "uid": "uid-p",
    }
    assert event["metadata"]["name"].startswith("p.")
    assert event["type"] == "Warning" and event["reason"] == "FailedScheduling"
    assert event["source"] == {"component": "koord-scheduler"}
    assert event["reportingComponent"] == "koord-scheduler"
    assert event["reportingInstance"].startswith("koord-scheduler-")
    assert event["action"] == "Scheduling"


def test_events_of_cluster_scoped_objects_go_to_namespace_default() -> None:
    clock = VirtualClock(1_000_000)
    recorder, store = _recorder(clock)
    recorder.record(EventRecord(kind="Node", namespace="", name="n1", reason="Overloaded", message="cpu"))
    [event] = store.list("default")
    assert "namespace" not in event["involvedObject"]


def test_ten_distinct_messages_in_ten_minutes_are_combined() -> None:
    clock = VirtualClock(1_000_000)
    recorder, store = _recorder(clock)
    for i in range(9):
        recorder.record(_pod_event(f"message {i}"))
        clock.advance(1)
    assert len(store.list("ns")) == 9
    recorder.record(_pod_event("message 9"))
    clock.advance(1)
    recorder.record(_pod_event("message 10"))
    events = store.list("ns")
    assert len(events) == 10
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert len(combined) == 1
    # The second combined event is a repeat of the first: its count goes up, its message is the latest.
    assert combined[0]["count"] == 2
    assert combined[0]["message"] == COMBINED_PREFIX + "message 10"
    assert recorder.stats.aggregated == 2


def test_aggregation_starts_afresh_after_ten_quiet_minutes() -> None:
    clock = VirtualClock(1_000_000)
    recorder, store = _recorder(clock)
    for i in range(9):
        recorder.record(_pod_event(f"message {i}"))
    clock.advance(601)
    recorder.record(_pod_event("message 9"))
    assert not any(e["message"].startswith(COMBINED_PREFIX) for e in store.list("ns"))


def test_different_reasons_are_not_aggregated_together() -> None:
    clock = VirtualClock(1_000_000)
    recorder, store = _recorder(clock)
    for i in range(12):
        recorder.record(_pod_event(f"message {i}", reason=f"Reason{i}"))
    assert not any(e["message"].startswith(COMBINED_PREFIX) for e in store.list("ns"))


def test_spam_filter_allows_a_burst_of_25_per_object_then_one_per_five_minutes() -> None:
    clock = VirtualClock(1_000_000)
    recorder, store = _recorder(clock)
    # Distinct reasons: neither deduplicated nor aggregated, so only the spam filter limits them.
    for i in range(30):
        recorder.record(_pod_event("m", reason=f"R{i}"))
    assert recorder.stats.spam_filtered == 5
    assert len(store.list("ns")) == 25
    # Another object has its own budget.
    recorder.record(_pod_event("m", reason="R0", name="other"))
    assert recorder.stats.spam_filtered == 5
    clock.advance(299)
    recorder.record(_pod_event("m", reason="late"))
    assert recorder.stats.spam_filtered == 6
    clock.advance(1)
    recorder.record(_pod_event("m", reason="later"))
    assert recorder.stats.spam_filtered == 6
    recorder.record(_pod_event("m", reason="too soon"))
    assert recorder.stats.spam_filtered == 7


def test_a_repeat_of_an_event_deleted_on_the_server_creates_it_again() -> None:
    clock = VirtualClock(1_000_000)

    class Forgetful(MemoryEventWriter):
        def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
            raise NotFoundError(f"events {namespace}/{name}")

    store = Forgetful()
    recorder = EventRecorder(store, component="koord-scheduler", clock=clock)
    recorder.record(_pod_event("m"))
    recorder.record(_pod_event("m"))
    [event] = store.list("ns")
    assert event["count"] == 2
    assert recorder.stats.created == 2


class _BlockedWriter(MemoryEventWriter):
    """A writer stuck on a server that does not answer until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def create_event(self, manifest: Obj) -> Obj:
        self.entered.set()
        self.release.wait(10)
        return super().create_event(manifest)


def test_recording_never_blocks_and_counts_what_a_full_queue_drops() -> None:
    writer = _BlockedWriter()
    recorder = EventRecorder(writer, component="koord-scheduler", asynchronous=True, capacity=5)
    recorder.record(_pod_event("first", name="p0"))
    assert writer.entered.wait(5)
    for i in range(1, 21):
        recorder.record(_pod_event("m", name=f"p{i}"))  # returns at once although the writer is stuck
    assert recorder.stats.dropped == 15
    writer.release.set()
    assert recorder.flush(10)
    assert len(writer.list("ns")) == 6
    recorder.close()


def test_unreachable_server_is_retried_other_errors_lose_the_event() -> None:
    class Flaky(MemoryEventWriter):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def create_event(self, manifest: Obj) -> Obj:
            self.calls += 1
            if manifest["reason"] == "Unreachable" and self.calls < 3:
                raise ClusterError("connection refused")
            if manifest["reason"] == "Invalid":
                raise ClusterError("422")
            return super().create_event(manifest)

    writer = Flaky()
    recorder = EventRecorder(
        writer,
        component="c",
        asynchronous=True,
        retryable=lambda err: "refused" in str(err),
        retry_sleep=0.01,
    )
    recorder.record(_pod_event("m", reason="Unreachable"))
    assert recorder.flush(5)
    assert writer.calls == 3 and recorder.stats.created == 1
    recorder.record(_pod_event("m", reason="Invalid"))
    assert recorder.flush(5)
    assert recorder.stats.failed == 1
    recorder.close()


def test_long_messages_are_cut_to_the_api_servers_limit() -> None:
    clock = VirtualClock(1_000_000)
    recorder, store = _recorder(clock)
    recorder.record(_pod_event("x" * 2000))
    [event] = store.list("ns")
    assert len(event["message"]) == 1024 and event["message"].endswith(" ...")


def test_the_embedded_cluster_correlates_what_components_record() -> None:
    cluster = MemoryCluster(VirtualClock(1_000_000))
    for _ in range(3):
        cluster.record_event(_pod_event("0/1 nodes are available: 1 Insufficient cpu."))
    assert len(cluster.events) == 3
    [event] = cluster.event_store.list("ns")
    assert event["count"] == 3


@pytest.mark.parametrize("count", [1, 2])
def test_close_stops_the_sender(count: int) -> None:
    recorder = EventRecorder(MemoryEventWriter(), component="c", asynchronous=True)
    for i in range(count):
        recorder.record(_pod_event("m", name=f"p{i}"))
    recorder.close()
    assert recorder.stats.created == count


def test_the_recorders_counters_are_exported_on_the_components_registry() -> None:
    from prometheus_client import CollectorRegistry

    from koord_framework.cluster.events import register_recorder_metrics
    from koord_framework.metrics import render

    cluster = MemoryCluster(VirtualClock(1_000_000))
    registry = CollectorRegistry()
    assert register_recorder_metrics(cluster, registry)
    assert register_recorder_metrics(cluster, registry)  # once per registry
    for _ in range(2):
        cluster.record_event(_pod_event("m"))
    text = render(registry)
    assert 'koord_events_total{result="created"} 1.0' in text
    assert 'koord_events_total{result="patched"} 1.0' in text
    assert 'koord_events_total{result="dropped"} 0.0' in text


def _stream(recorder: EventRecorder, clock: VirtualClock, seed: int) -> None:
    """Events on a few objects: new ones, repeats, aggregated ones, spam-filtered ones, old times."""
    rng = random.Random(seed)
    for _ in range(3000):
        obj = rng.randrange(5)
        kind = rng.choice(["Pod", "Pod", "Node", "Reservation"])
        recorder.record(
            EventRecord(
                kind=kind,
                namespace="ns" if kind == "Pod" else "",
                name=f"o{obj}",
                reason=rng.choice(["A", "B", "Scheduled"]),
                message=f"m{rng.randrange(14)}",
                type=rng.choice(["Normal", "Warning"]),
                component=rng.choice(["", "s1"]),
                extra={"uid": f"u{obj}"} if rng.random() < 0.8 else {},
                action=rng.choice(["", "X"]),
                time=clock.now() + 5 if rng.random() < 0.1 else 0.0,
            )
        )
        clock.advance(rng.choice([0, 0, 0, 1, 2, 30, 400]))
    for i in range(60):  # ten distinct messages in ten minutes and more: combined, then over budget
        recorder.record(_pod_event(f"message {i % 13}", name="o0"))
        clock.advance(rng.choice([0, 1]))


def _comparable(store: MemoryEventWriter) -> list[Obj]:
    """The stored events with their names (unique per process) numbered in order of first sight."""
    numbers: dict[str, int] = {}
    out = []
    for event in store.list():
        name = event["metadata"]["name"]
        number = numbers.setdefault(name, len(numbers))
        out.append({**event, "metadata": {**event["metadata"], "name": f"{name.rsplit('.', 1)[0]}#{number}"}})
    return out


@pytest.mark.parametrize(("seed", "cache"), [(0, 16), (1, 4096)])
def test_the_first_event_shortcut_stores_what_the_general_path_stores(
    seed: int, cache: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run() -> tuple[list[Obj], dict[str, int]]:
        clock = VirtualClock(1_000_000)
        store = MemoryEventWriter(limit=200)
        recorder = EventRecorder(
            store, component="c", clock=clock, correlator=EventCorrelator(clock, cache_size=cache)
        )
        _stream(recorder, clock, seed)
        return _comparable(store), recorder.stats.as_dict()

    fast = run()
    monkeypatch.setattr(EventRecorder, "_record_first", lambda self, record: False)
    general = run()
    assert fast == general
    assert fast[1]["aggregated"] and fast[1]["spam_filtered"] and fast[1]["patched"]


def test_a_first_event_whose_write_fails_is_retried_and_a_repeat_recreates_it() -> None:
    class Flaky(MemoryEventWriter):
        def __init__(self) -> None:
            super().__init__()
            self.failures = {"Unreachable": 2, "Invalid": 1}

        def create_event(self, manifest: Obj) -> Obj:
            left = self.failures.get(manifest["reason"], 0)
            if left:
                self.failures[manifest["reason"]] = left - 1
                raise ClusterError("connection refused" if manifest["reason"] == "Unreachable" else "422")
            return super().create_event(manifest)

    clock = VirtualClock(1_000_000)
    store = Flaky()
    recorder = EventRecorder(
        store, component="c", clock=clock, retryable=lambda err: "refused" in str(err), retry_sleep=0.0
    )
    recorder.record(_pod_event("m", reason="Unreachable"))
    assert recorder.stats.created == 1 and recorder.stats.failed == 0
    recorder.record(_pod_event("m", reason="Invalid"))
    assert recorder.stats.failed == 1
    # The correlator counted the lost event, as client-go's does: the repeat patches, finds nothing, creates.
    recorder.record(_pod_event("m", reason="Invalid"))
    [event] = [e for e in store.list("ns") if e["reason"] == "Invalid"]
    assert event["count"] == 2 and recorder.stats.created == 2
