"""The write fence of leader-elected components (issue 22, defect 1): a replica writes only while it holds
the Lease; a drain that overruns its grace is fenced before the Lease is handed over; a renewal that fails
fences at once; the scheduler abandons its queued bindings on stop."""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from koord_framework.cluster.clock import WallClock
from koord_framework.cluster.fence import FencedCluster, FencedError, WriteFence
from koord_framework.cluster.kube.leader import LeaderElectionConfig
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import EventRecord
from koord_framework.component import EXIT_FAILED, EXIT_OK, ComponentRunner
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.probes import wait_for


def test_a_closed_fence_refuses_every_write_and_lets_reads_through() -> None:
    cluster = MemoryCluster(WallClock())
    cluster.create(make_node("n1"))
    cluster.create(make_pod("p", "default", cpu="1"))
    fence = WriteFence("koord-test")
    fenced = FencedCluster(cluster, fence)
    assert fenced.get("Node", "n1")["metadata"]["name"] == "n1"  # reads: always
    with pytest.raises(FencedError, match=r"koord-test: bind pod default/p to n1 refused: not started"):
        fenced.bind("default", "p", "n1")
    fence.open()
    fenced.bind("default", "p", "n1")
    assert cluster.get("Pod", "p", "default")["spec"]["nodeName"] == "n1"
    fence.close("the term is over")
    for write in (
        lambda: fenced.patch("Pod", "p", "default", {"metadata": {"labels": {"a": "b"}}}),
        lambda: fenced.delete("Pod", "p", "default"),
        lambda: fenced.create(make_pod("q", "default")),
        lambda: fenced.update(cluster.get("Pod", "p", "default")),
        lambda: fenced.evict("default", "p", reason="test", requested_by="me"),
    ):
        with pytest.raises(FencedError, match="refused: the term is over"):
            write()
    assert fence.refused == 6
    assert "a" not in (cluster.get("Pod", "p", "default")["metadata"].get("labels") or {})
    # A dry-run eviction writes nothing: allowed. Events are best effort: dropped, not raised.
    fenced.evict("default", "p", reason="test", requested_by="me", dry_run=True)
    fenced.record_event(EventRecord(kind="Pod", namespace="default", name="p", reason="R", message="m"))


def test_the_holding_predicate_is_asked_on_every_write() -> None:
    cluster = MemoryCluster(WallClock())
    holding = threading.Event()
    holding.set()
    fence = WriteFence()
    fence.open(holding=holding.is_set)
    fenced = FencedCluster(cluster, fence)
    fenced.create(make_node("n1"))
    holding.clear()  # the renewal failed: no one told the fence, it still refuses
    with pytest.raises(FencedError):
        fenced.create(make_node("n2"))
    assert not fence.is_open


class Writer:
    """A component that writes (a label patch) in a loop, and whose close takes ``drain`` seconds while its
    writes go on (a binding backlog behind a rate limit)."""

    def __init__(self, cluster: FencedCluster, drain: float) -> None:
        self.cluster, self.drain = cluster, drain
        self.writes: list[tuple[float, str]] = []  # (time, "ok" | "refused")
        self.started = threading.Event()
        self._n = 0

    def _write(self) -> None:
        self._n += 1
        try:
            self.cluster.patch("Node", "n1", "", {"metadata": {"labels": {"n": str(self._n)}}})
            self.writes.append((WallClock().now(), "ok"))
        except FencedError:
            self.writes.append((WallClock().now(), "refused"))

    def run(self, stop: threading.Event) -> None:
        self.started.set()
        while not stop.wait(0.02):
            self._write()

    def ready(self) -> bool:
        return self.started.is_set()

    def close(self) -> None:
        end = WallClock().now() + self.drain
        while WallClock().now() < end:
            self._write()
            threading.Event().wait(0.02)


class LeaseWatch:
    """Records when the Lease stops naming ``me``."""

    def __init__(self, cluster: MemoryCluster) -> None:
        self.released_at: float | None = None
        self._cluster = cluster

        def on_event(ev: Any) -> None:
            spec = (ev.obj or {}).get("spec") or {}
            if self.released_at is None and spec.get("holderIdentity") == "":
                self.released_at = WallClock().now()

        cluster.subscribe(["Lease"], on_event)


@contextlib.contextmanager
def running(runner: ComponentRunner) -> Iterator[tuple[threading.Event, list[int]]]:
    stop = threading.Event()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(runner.run(stop)), daemon=True)
    thread.start()
    try:
        yield stop, result
    finally:
        stop.set()
        thread.join(20)
        assert not thread.is_alive(), "the runner did not return"


def _runner(
    cluster: MemoryCluster,
    drain: float,
    grace: float,
    *,
    lease_duration: float = 15.0,
    renew_deadline: float = 10.0,
    retry_period: float = 2.0,
) -> tuple[ComponentRunner, Any]:
    fence = WriteFence("thing")
    fenced = FencedCluster(cluster, fence)
    made: list[Writer] = []

    def build(_: Any) -> Writer:
        made.append(Writer(fenced, drain))
        return made[-1]

    lease = LeaderElectionConfig(
        name="thing",
        namespace="ns",
        identity="me",
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
    )
    runner = ComponentRunner(
        "thing",
        build,
        address="127.0.0.1:0",
        cluster=cluster,
        leader_election=lease,
        fence=fence,
        grace=grace,
        err=io.StringIO(),
    )
    return runner, made


def test_a_drain_longer_than_the_grace_is_fenced_before_the_lease_is_released() -> None:
    cluster = MemoryCluster(WallClock())
    cluster.create(make_node("n1"))
    watch = LeaseWatch(cluster)
    runner, made = _runner(cluster, drain=1.5, grace=0.5)
    with running(runner) as (stop, result):
        wait_for(lambda: bool(made) and made[0].started.is_set(), 10, "leading and writing")
        stop.set()
        wait_for(lambda: result != [], 15, "the exit")
    assert result == [EXIT_OK]
    writes = made[0].writes
    assert watch.released_at is not None
    last_ok = max(t for t, what in writes if what == "ok")
    assert last_ok < watch.released_at, "a write landed after the Lease was handed over"
    assert any(what == "refused" for _, what in writes), "the overrunning drain was not fenced"


def test_a_drain_within_the_grace_finishes_its_writes_then_releases() -> None:
    cluster = MemoryCluster(WallClock())
    cluster.create(make_node("n1"))
    watch = LeaseWatch(cluster)
    runner, made = _runner(cluster, drain=0.4, grace=5.0)
    with running(runner) as (stop, result):
        wait_for(lambda: bool(made) and made[0].started.is_set(), 10, "leading and writing")
        stop.set()
        wait_for(lambda: result != [], 15, "the exit")
    assert result == [EXIT_OK]
    writes = made[0].writes
    assert all(what == "ok" for _, what in writes)
    assert watch.released_at is not None and max(t for t, _ in writes) < watch.released_at


def test_a_failed_renewal_fences_the_writes_at_once() -> None:
    cluster = MemoryCluster(WallClock())
    cluster.create(make_node("n1"))
    runner, made = _runner(
        cluster, drain=3.0, grace=10.0, lease_duration=2.0, renew_deadline=1.0, retry_period=0.2
    )
    with running(runner) as (_, result):
        # Not /readyz: a standby is ready by design, before the Lease exists.
        wait_for(lambda: bool(made) and made[0].started.is_set(), 10, "leading and writing")
        lease = cluster.get("Lease", "thing", "ns")
        lease["spec"]["holderIdentity"] = "thief"
        cluster.update(lease)
        wait_for(lambda: any(w == "refused" for _, w in made[0].writes), 10, "writes refused")
        wait_for(lambda: result != [], 20, "the exit")
    assert result == [EXIT_FAILED]
    writes = made[0].writes
    first_refused = min(t for t, w in writes if w == "refused")
    assert all(w == "refused" for t, w in writes if t > first_refused), "a write after the fence closed"


class SlowBinds(MemoryCluster):
    """A cluster whose bind takes ``delay`` (a binding waiting for its turn behind a rate limit)."""

    delay = 0.2

    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        threading.Event().wait(self.delay)
        super().bind(namespace, name, node, uid)


def test_the_scheduler_abandons_queued_bindings_on_close() -> None:
    from koord_framework.scheduler.framework import PluginLayout
    from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler
    from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort

    cluster = SlowBinds(WallClock(), seed=0)
    cluster.create(make_node("n1", cpu="64", pods=1000))
    for i in range(40):
        cluster.create(make_pod(f"p{i}", cpu="100m"))
    layout = PluginLayout.every_point([HarnessQueueSort, HarnessBinder])
    s = Scheduler(cluster, [ProfileSpec("default-scheduler", layout)], async_binding=True, binding_workers=2)
    stop = threading.Event()
    loop = threading.Thread(target=s.run, args=(stop,), kwargs={"poll": 0.05})
    loop.start()
    try:
        wait_for(lambda: s.scheduled_count >= 2, 10, "bindings under way")
    finally:
        stop.set()
        loop.join(5)
        s.close()
    bound = [i for i in range(40) if cluster.get("Pod", f"p{i}", "default")["spec"].get("nodeName")]
    # At most the bindings on the wire (two workers) finish; the rest is abandoned, not sent.
    assert s.abandoned_bindings > 0
    assert s.abandoned_bindings + s.scheduled_count <= 40
    assert len(bound) == s.scheduled_count
    assert all(
        s.cache.get_pod(cluster.get("Pod", f"p{i}", "default")["metadata"]["uid"]) is None
        for i in range(40)
        if i not in bound
    ), "an abandoned pod is still assumed"
