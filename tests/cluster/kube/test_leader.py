"""Lease-based leader election, step by step on the embedded cluster with fake clocks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from koord_framework.cluster.kube.leader import LeaderElectionConfig, LeaderElector
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.testing import FakeClock


class Ticker:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(cluster: MemoryCluster, identity: str, ticker: Ticker) -> LeaderElector:
    config = LeaderElectionConfig(name="koord-scheduler", namespace="koordinator-system", identity=identity)
    return LeaderElector(cluster, config, monotonic=ticker, wall=lambda: 1_704_067_200.0 + ticker.now)


@pytest.fixture
def cluster() -> MemoryCluster:
    return MemoryCluster(FakeClock())


def test_first_replica_creates_the_lease(cluster: MemoryCluster) -> None:
    ticker = Ticker()
    a = elector(cluster, "a", ticker)
    assert a.try_acquire_or_renew()
    lease = cluster.get("Lease", "koord-scheduler", "koordinator-system")
    spec = lease["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["renewTime"] == "2024-01-01T00:01:40.000000Z"
    assert a.is_leader and a.leader == "a"


def test_second_replica_waits_for_the_lease_to_run_out_by_its_own_clock(cluster: MemoryCluster) -> None:
    ticker = Ticker()
    a, b = elector(cluster, "a", ticker), elector(cluster, "b", ticker)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert b.leader == "a" and not b.is_leader
    ticker.now += 14.0
    assert not b.try_acquire_or_renew(), "the record b observed is 14 s old: still within the lease"
    ticker.now += 1.5
    assert b.try_acquire_or_renew(), "a stopped renewing: after 15 s b takes over"
    spec = cluster.get("Lease", "koord-scheduler", "koordinator-system")["spec"]
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew(), "a sees b's fresh record and does not take it back"
    assert a.leader == "b"


def test_renewals_keep_acquire_time_and_reset_the_others_wait(cluster: MemoryCluster) -> None:
    ticker = Ticker()
    a, b = elector(cluster, "a", ticker), elector(cluster, "b", ticker)
    assert a.try_acquire_or_renew()
    acquired = cluster.get("Lease", "koord-scheduler", "koordinator-system")["spec"]["acquireTime"]
    assert not b.try_acquire_or_renew()
    for _ in range(10):
        ticker.now += 10.0
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew(), "every renewal changes the record, so b's wait starts over"
    spec = cluster.get("Lease", "koord-scheduler", "koordinator-system")["spec"]
    assert spec["acquireTime"] == acquired
    assert spec["renewTime"] != acquired
    assert spec["leaseTransitions"] == 0


def test_stale_write_loses(cluster: MemoryCluster) -> None:
    """Optimistic concurrency: two replicas that read the same version cannot both win."""
    ticker = Ticker()
    a, b = elector(cluster, "a", ticker), elector(cluster, "b", ticker)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    ticker.now += 20.0
    lease = cluster.get("Lease", "koord-scheduler", "koordinator-system")
    assert b.try_acquire_or_renew()
    # a writes with the version it read before b's takeover: refused
    assert not a._write(lease, dict(lease["spec"], holderIdentity="a"))
    assert cluster.get("Lease", "koord-scheduler", "koordinator-system")["spec"]["holderIdentity"] == "b"


def test_release_hands_over_at_once(cluster: MemoryCluster) -> None:
    ticker = Ticker()
    a, b = elector(cluster, "a", ticker), elector(cluster, "b", ticker)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    spec = cluster.get("Lease", "koord-scheduler", "koordinator-system")["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    assert b.try_acquire_or_renew(), "an empty holder is free to take without waiting"
    assert not a.release(), "only the holder releases"


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="leaseDuration: must be greater than renewDeadline"):
        LeaderElectionConfig(name="l", namespace="ns", identity="a", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renewDeadline: must be greater than retryPeriod"):
        LeaderElectionConfig(name="l", namespace="ns", identity="a", renew_deadline=2, retry_period=2)
    with pytest.raises(ValueError, match="identity"):
        LeaderElectionConfig(name="l", namespace="ns", identity="")


def test_run_leads_then_hands_over_on_stop(cluster: MemoryCluster) -> None:
    """The loops in real time, with short timings: a leads, stops cleanly, b takes over."""

    def config(identity: str) -> LeaderElectionConfig:
        return LeaderElectionConfig(
            "l", "ns", identity, lease_duration=1.0, renew_deadline=0.6, retry_period=0.1
        )

    started: list[str] = []
    done = threading.Event()

    def lead(name: str) -> Callable[[threading.Event], None]:
        def run(stop: threading.Event) -> None:
            started.append(name)
            stop.wait()

        return run

    a = LeaderElector(
        cluster,
        config("a"),
        on_started_leading=lead("a"),
    )
    b = LeaderElector(
        cluster,
        config("b"),
        on_started_leading=lead("b"),
        on_stopped_leading=done.set,
    )
    a.start()
    assert a.leading.wait(2)
    b.start()
    time.sleep(0.5)
    assert started == ["a"] and not b.leading.is_set()
    begin = time.monotonic()
    a.stop()
    assert a.lost.is_set()
    assert b.leading.wait(2)
    assert time.monotonic() - begin < 0.8, "a released the lease: no need to wait out its duration"
    deadline = time.monotonic() + 2
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started == ["a", "b"]
    b.stop()
    assert done.is_set()
