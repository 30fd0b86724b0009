"""``koord_framework.component.ComponentRunner``: a component's death ends the run loudly (status, one-line
reason, /healthz failing while it releases), a missing kind is waited for or given up on per policy, a
requested stop is a clean exit, and a leader hands its Lease back when its work dies."""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from koord_framework.cluster.clock import WallClock
from koord_framework.cluster.kube.leader import LeaderElectionConfig, LeaderElector
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.component import (
    EXIT_FAILED,
    EXIT_OK,
    Component,
    ComponentRunner,
    MissingKindPolicy,
    missing_kind,
    one_line,
)
from koord_framework.errors import KindNotServedError, PluginLoadError
from koord_framework.testing.probes import get, wait_for


class Fake:
    """A component whose loop does what the test says; ``close`` can be held to look at the probes."""

    def __init__(
        self,
        *,
        fail_after: float | None = None,
        error: BaseException | None = None,
        returns: bool = False,
        hold_close: threading.Event | None = None,
    ) -> None:
        self.fail_after, self.error, self.returns = fail_after, error, returns
        self.hold_close = hold_close
        self.started = threading.Event()
        self.closed = threading.Event()
        self.closing = threading.Event()

    def run(self, stop: threading.Event) -> None:
        self.started.set()
        if self.returns:
            return
        if self.fail_after is not None and not stop.wait(self.fail_after):
            raise self.error or RuntimeError("boom")
        stop.wait()

    def ready(self) -> bool:
        return self.started.is_set()

    def close(self) -> None:
        self.closing.set()
        if self.hold_close is not None:
            self.hold_close.wait(10)
        self.closed.set()


@contextlib.contextmanager
def running(runner: ComponentRunner, **kwargs: Any) -> Iterator[tuple[threading.Event, list[int]]]:
    stop = threading.Event()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(runner.run(stop, **kwargs)), daemon=True)
    thread.start()
    try:
        yield stop, result
    finally:
        stop.set()
        thread.join(15)
        assert not thread.is_alive(), "the runner did not return"


def test_a_dying_work_loop_fails_healthz_releases_and_exits_non_zero_with_one_reason_line() -> None:
    hold = threading.Event()
    fake = Fake(fail_after=0.3, error=RuntimeError("injected:\nloop broke"), hold_close=hold)
    err = io.StringIO()
    runner = ComponentRunner("thing", lambda _: fake, address="127.0.0.1:0", err=err)
    with running(runner) as (_, result):
        port = runner.port
        wait_for(lambda: get(port, "/readyz") == (200, "ok"), 10, "ready")
        assert get(port, "/healthz") == (200, "ok")
        wait_for(fake.closing.is_set, 10, "close called after the death")
        # The process lingers (close is held): the probes already say it is broken.
        assert get(port, "/healthz") == (500, "unhealthy: RuntimeError: injected: loop broke")
        assert get(port, "/readyz")[0] == 503
        assert result == []
        hold.set()
        wait_for(lambda: result != [], 10, "the exit")
    assert result == [EXIT_FAILED]
    assert fake.closed.is_set()
    assert err.getvalue() == "koord thing: fatal: RuntimeError: injected: loop broke\n"
    with pytest.raises(OSError):
        get(port, "/healthz")  # the port is released


def test_a_loop_that_returns_unasked_is_a_failure() -> None:
    err = io.StringIO()
    runner = ComponentRunner("thing", lambda _: Fake(returns=True), address="127.0.0.1:0", err=err)
    with running(runner) as (_, result):
        wait_for(lambda: result != [], 10, "the exit")
    assert result == [EXIT_FAILED]
    assert "the work loop ended without being asked to stop" in err.getvalue()


def test_a_build_failure_is_fatal_and_names_the_cause() -> None:
    def build(_: Any) -> Component:
        raise PluginLoadError("koord.scheduler.plugins", "Broken", "koord-plugin-broken", ValueError("bad"))

    err = io.StringIO()
    runner = ComponentRunner("thing", build, address="127.0.0.1:0", err=err)
    with running(runner) as (_, result):
        wait_for(lambda: result != [], 10, "the exit")
    assert result == [EXIT_FAILED]
    line = err.getvalue()
    assert line.startswith("koord thing: fatal: plugin 'Broken'") and "ValueError: bad" in line
    assert line.count("\n") == 1


def test_a_requested_stop_closes_and_exits_zero() -> None:
    fake = Fake()
    err = io.StringIO()
    runner = ComponentRunner("thing", lambda _: fake, address="127.0.0.1:0", err=err)
    with running(runner) as (stop, result):
        wait_for(lambda: get(runner.port, "/readyz") == (200, "ok"), 10, "ready")
        stop.set()
        wait_for(lambda: result != [], 10, "the exit")
    assert result == [EXIT_OK] and fake.closed.is_set() and err.getvalue() == ""


def test_duration_ends_the_run_cleanly() -> None:
    runner = ComponentRunner("thing", lambda _: Fake(), address="127.0.0.1:0")
    with running(runner, duration=0.3) as (_, result):
        wait_for(lambda: result != [], 10, "the exit")
    assert result == [EXIT_OK]


class Cluster(MemoryCluster):
    """The embedded cluster, except that NodeMetric is not served until ``install`` is called."""

    def __init__(self) -> None:
        super().__init__(WallClock())
        self.installed = threading.Event()

    def serves(self, kind: str) -> bool:
        return kind != "NodeMetric" or self.installed.is_set()


def needs_node_metric(cluster: Cluster, built: list[Fake]) -> Callable[[Any], Component]:
    def build(_: Any) -> Component:
        if not cluster.serves("NodeMetric"):
            try:
                raise KindNotServedError("NodeMetric", "list nodemetrics: 404")
            except KindNotServedError as exc:  # wrapped, as the plugin loader does
                raise PluginLoadError("g", "LoadAware", "d", exc) from exc
        fake = Fake()
        built.append(fake)
        return fake

    return build


def test_a_missing_kind_keeps_it_unready_logged_once_until_served(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster()
    built: list[Fake] = []
    runner = ComponentRunner(
        "thing",
        needs_node_metric(cluster, built),
        address="127.0.0.1:0",
        cluster=cluster,
        backoff=(0.05, 0.1),
    )
    with caplog.at_level(logging.INFO, logger="koord"), running(runner) as (_, result):
        wait_for(lambda: "waiting for NodeMetric" in get(runner.port, "/readyz")[1], 10, "waiting")
        assert get(runner.port, "/readyz")[0] == 503
        assert get(runner.port, "/healthz") == (200, "ok")
        time.sleep(0.5)  # several retries
        cluster.installed.set()
        wait_for(lambda: get(runner.port, "/readyz") == (200, "ok"), 10, "ready once served")
        assert result == [] and len(built) == 1
    waiting = [r.getMessage() for r in caplog.records if "waiting for NodeMetric" in r.getMessage()]
    assert len(waiting) == 1, waiting
    assert "kubectl apply -f configs/crds/slo.koordinator.sh_nodemetrics.yaml" in waiting[0]
    assert "crds.nodemetrics=true" in waiting[0]


def test_a_missing_kind_with_a_time_limit_gives_up_naming_it_and_the_fix() -> None:
    cluster = Cluster()
    err = io.StringIO()
    runner = ComponentRunner(
        "thing",
        needs_node_metric(cluster, []),
        address="127.0.0.1:0",
        cluster=cluster,
        missing_kinds=MissingKindPolicy({"NodeMetric": 0.3}),
        backoff=(0.05, 0.1),
        err=err,
    )
    with running(runner) as (_, result):
        wait_for(lambda: result != [], 10, "the exit")
    assert result == [EXIT_FAILED]
    line = err.getvalue()
    assert "waiting for NodeMetric, which the API server does not serve" in line
    assert "kubectl apply -f configs/crds/slo.koordinator.sh_nodemetrics.yaml" in line


def test_a_missing_builtin_kind_fails_at_once() -> None:
    def build(_: Any) -> Component:
        raise KindNotServedError("PodDisruptionBudget", "list poddisruptionbudgets: 404")

    err = io.StringIO()
    runner = ComponentRunner("thing", build, address="127.0.0.1:0", err=err)
    with running(runner) as (_, result):
        wait_for(lambda: result != [], 10, "the exit")
    assert result == [EXIT_FAILED]
    assert "PodDisruptionBudget (policy/v1) is built into Kubernetes" in err.getvalue()


def test_a_leader_whose_work_dies_hands_the_lease_back() -> None:
    cluster = MemoryCluster(WallClock())
    lease = LeaderElectionConfig(name="thing", namespace="koordinator-system", identity="me")
    fake = Fake(fail_after=0.3)
    err = io.StringIO()
    runner = ComponentRunner(
        "thing", lambda _: fake, address="127.0.0.1:0", cluster=cluster, leader_election=lease, err=err
    )
    with running(runner) as (_, result):
        wait_for(lambda: result != [], 15, "the exit")
    assert result == [EXIT_FAILED]
    assert err.getvalue() == "koord thing: fatal: RuntimeError: boom\n"
    spec = cluster.get("Lease", "thing", "koordinator-system")["spec"]
    assert spec["holderIdentity"] == ""  # released, so a standby takes over at once


def test_a_standby_is_ready_and_exits_zero_on_stop() -> None:
    cluster = MemoryCluster(WallClock())
    other = LeaderElectionConfig(name="thing", namespace="ns", identity="other")
    assert LeaderElector(cluster, other).try_acquire_or_renew()
    mine = LeaderElectionConfig(name="thing", namespace="ns", identity="me")
    runner = ComponentRunner(
        "thing",
        lambda _: Fake(),
        address="127.0.0.1:0",
        cluster=cluster,
        leader_election=mine,
        err=io.StringIO(),
    )
    with running(runner) as (stop, result):
        wait_for(lambda: get(runner.port, "/readyz") == (200, "ok"), 10, "a ready standby")
        assert "koord_leader_is_leader 0.0" in get(runner.port, "/metrics")[1]
        stop.set()
        wait_for(lambda: result != [], 15, "the exit")
    assert result == [EXIT_OK]


def test_a_lost_lease_fails_healthz_and_exits_non_zero() -> None:
    cluster = MemoryCluster(WallClock())
    mine = LeaderElectionConfig(
        name="thing", namespace="ns", identity="me", lease_duration=2, renew_deadline=1, retry_period=0.2
    )
    hold = threading.Event()
    fake = Fake(hold_close=hold)
    err = io.StringIO()
    runner = ComponentRunner(
        "thing", lambda _: fake, address="127.0.0.1:0", cluster=cluster, leader_election=mine, err=err
    )
    with running(runner) as (_, result):
        wait_for(lambda: get(runner.port, "/readyz") == (200, "ok"), 10, "leading and ready")
        lease = cluster.get("Lease", "thing", "ns")
        lease["spec"]["holderIdentity"] = "thief"
        cluster.update(lease)
        wait_for(lambda: get(runner.port, "/healthz")[0] == 500, 15, "unhealthy once the lease is lost")
        assert "lost the Lease ns/thing" in get(runner.port, "/healthz")[1]
        hold.set()
        wait_for(lambda: result != [], 15, "the exit")
    assert result == [EXIT_FAILED]
    assert err.getvalue() == "koord thing: fatal: lost the Lease ns/thing\n"


def test_missing_kind_is_found_through_wrappers_and_one_line_flattens() -> None:
    inner = KindNotServedError("Device", "x")
    outer = PluginLoadError("g", "n", "d", inner)
    assert missing_kind(outer) is inner
    assert missing_kind(RuntimeError("x")) is None
    assert one_line(RuntimeError("a\n  b")) == "RuntimeError: a b"
