"""Lease-based leader election of two replicas against a real API server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from koord_framework.cluster.kube import KubeCluster, LeaderElectionConfig, LeaderElector

pytestmark = pytest.mark.e2e

TIMING = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.25}


class Replica:
    """One replica: its own connection, elector and "work" that counts while it leads."""

    def __init__(self, server: Any, namespace: str, identity: str, *, release: bool = True) -> None:
        self.cluster = KubeCluster.from_kubeconfig(str(server.kubeconfig_for("peer")), component=identity)
        self.acting = threading.Event()
        config = LeaderElectionConfig(
            name="koord-scheduler",
            namespace=namespace,
            identity=identity,
            release_on_cancel=release,
            **TIMING,
        )
        self.elector = LeaderElector(self.cluster, config, on_started_leading=self._work)

    def _work(self, stop: threading.Event) -> None:
        self.acting.set()
        stop.wait()
        self.acting.clear()

    def close(self) -> None:
        self.elector.stop()
        self.cluster.close()


@pytest.fixture
def replicas(kube_apiserver: Any, namespace: str) -> Iterator[list[Replica]]:
    made = [Replica(kube_apiserver, namespace, "a"), Replica(kube_apiserver, namespace, "b", release=False)]
    yield made
    for r in made:
        r.close()


def one_acting(replicas: list[Replica], seconds: float) -> list[str]:
    """Sample for ``seconds``: who acts; fails if two ever act at once."""
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        acting = [r.elector.config.identity for r in replicas if r.acting.is_set()]
        assert len(acting) <= 1, f"two replicas acting at once: {acting}"
        seen += acting
        time.sleep(0.02)
    return seen


def test_exactly_one_acts_then_the_other_takes_over(
    replicas: list[Replica], kube: KubeCluster, namespace: str
) -> None:
    a, b = replicas
    a.elector.start()
    assert a.acting.wait(5)
    b.elector.start()
    assert set(one_acting(replicas, 2.0)) == {"a"}
    lease = kube.get("Lease", "koord-scheduler", namespace)
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["spec"]["leaseDurationSeconds"] == 3

    # a stops cleanly and releases: b takes over within about one retry period.
    begin = time.monotonic()
    a.elector.stop()
    assert b.acting.wait(3)
    assert time.monotonic() - begin < 2.0
    assert kube.get("Lease", "koord-scheduler", namespace)["spec"]["holderIdentity"] == "b"
    assert kube.get("Lease", "koord-scheduler", namespace)["spec"]["leaseTransitions"] == 1


def test_takeover_within_the_lease_duration_when_the_leader_dies(
    kube_apiserver: Any, namespace: str, kube: KubeCluster
) -> None:
    """The leader stops renewing without releasing (a crash): the standby waits out the lease, no longer."""
    dead = Replica(kube_apiserver, namespace, "crashing", release=False)
    standby = Replica(kube_apiserver, namespace, "standby")
    try:
        dead.elector.start()
        assert dead.acting.wait(5)
        standby.elector.start()
        time.sleep(1.0)
        assert not standby.acting.is_set()
        crashed_at = time.monotonic()
        dead.elector.stop()  # no release: the Lease still names "crashing"
        assert kube.get("Lease", "koord-scheduler", namespace)["spec"]["holderIdentity"] == "crashing"
        assert standby.acting.wait(TIMING["lease_duration"] + 3)
        took = time.monotonic() - crashed_at
        assert took <= TIMING["lease_duration"] + 2 * TIMING["retry_period"] * 2.2 + 0.5, f"took {took:.2f} s"
        assert kube.get("Lease", "koord-scheduler", namespace)["spec"]["holderIdentity"] == "standby"
    finally:
        dead.close()
        standby.close()


def test_concurrent_acquisition_has_one_winner(kube_apiserver: Any, namespace: str) -> None:
    """Five replicas start at once against a missing Lease: creation and updates are conditional, one wins."""
    crowd = [Replica(kube_apiserver, namespace, f"r{i}") for i in range(5)]
    try:
        for r in crowd:
            r.elector.start()
        time.sleep(1.0)
        acting = one_acting(crowd, 2.0)
        assert len(set(acting)) == 1
    finally:
        for r in crowd:
            r.close()
