"""Every long-running command says so when it cannot do its job (issue 24).

For ``koord scheduler``, ``koord descheduler``, ``koord koordlet`` and ``koord device-daemon``: a fatal
exception injected into the work loop fails ``/healthz`` while the command releases what it holds, then the
command returns a non-zero status with the one-line reason ``koord <command>: fatal: <cause>``. The
scheduler, on a cluster that does not serve NodeMetric, waits unready naming the kind and how to install it,
then schedules once it is served; an error inside one scheduling cycle stays that pod's error. The device
daemon waits unready for the Device CRD, and refuses to start without the distribution that contributes the
kind.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cli import devicedaemon, koordlet, serve
from koord_framework.cli.main import build_parser
from koord_framework.cluster.clock import WallClock
from koord_framework.cluster.kinds import KindRegistry
from koord_framework.cluster.kube.errors import KubeApiError
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.descheduler.descheduler import Descheduler
from koord_framework.devices.daemon import DeviceDaemon
from koord_framework.errors import KindNotServedError
from koord_framework.koordlet.agent import KoordletAgent
from koord_framework.scheduler.scheduler import Scheduler
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.hosttree import FakeHostTree, make_running_pod
from koord_framework.testing.probes import free_port, get, wait_for

ROOT = Path(__file__).resolve().parents[2]
SCHEDULER_CONFIG = ROOT / "configs" / "scheduler" / "koord-scheduler.yaml"
DESCHEDULER_CONFIG = ROOT / "configs" / "descheduler" / "koord-descheduler.yaml"
HostFactory = Callable[..., FakeHostTree]


@contextlib.contextmanager
def in_thread(call: Callable[[threading.Event], int]) -> Iterator[tuple[threading.Event, list[int]]]:
    stop = threading.Event()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(call(stop)), daemon=True)
    thread.start()
    try:
        yield stop, result
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive(), "the command did not return"


def hold_close(monkeypatch: pytest.MonkeyPatch, cls: type, method: str = "close") -> threading.Event:
    """Make ``cls.method`` wait for the returned event first: the process lingers while it releases."""
    release = threading.Event()
    original = getattr(cls, method)

    def held(self: Any, *args: Any, **kwargs: Any) -> Any:
        release.wait(20)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, method, held)
    return release


def inject(monkeypatch: pytest.MonkeyPatch, cls: type, method: str, message: str) -> None:
    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(message)

    monkeypatch.setattr(cls, method, broken)


def assert_dies_loudly(
    call: Callable[[threading.Event], int],
    port: int,
    release: threading.Event,
    capsys: pytest.CaptureFixture[str],
    command: str,
    message: str,
) -> None:
    with in_thread(call) as (_, result):
        wait_for(lambda: get(port, "/healthz")[0] == 500, 30, "/healthz failing after the injected error")
        assert get(port, "/healthz") == (500, f"unhealthy: RuntimeError: {message}")
        assert get(port, "/readyz")[0] == 503
        assert result == [], "exited before releasing"
        release.set()
        wait_for(lambda: result != [], 30, "the exit")
    assert result == [1]
    err_lines = capsys.readouterr().err.splitlines()
    assert f"koord {command}: fatal: RuntimeError: {message}" in err_lines
    with pytest.raises(OSError):
        get(port, "/healthz")  # the port went with it


def serve_args(command: str, config: Path, port: int, *extra: str) -> Any:
    return build_parser().parse_args(
        [command, f"--config={config}", f"--address=127.0.0.1:{port}", "--identity=me", *extra]
    )


def test_scheduler_loop_death_exits_non_zero_and_releases_the_lease(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = MemoryCluster(WallClock())
    port = free_port()
    inject(monkeypatch, Scheduler, "expire_permits", "injected: scheduling loop broke")
    release = hold_close(monkeypatch, serve.SchedulerComponent)
    args = serve_args("scheduler", SCHEDULER_CONFIG, port)
    assert_dies_loudly(
        lambda stop: serve.serve("scheduler", args, cluster=cluster, stop=stop),
        port,
        release,
        capsys,
        "scheduler",
        "injected: scheduling loop broke",
    )
    lease = cluster.get("Lease", "koord-scheduler", "koordinator-system")
    assert lease["spec"]["holderIdentity"] == "", "the Lease is handed back for a standby"


def test_descheduler_loop_death_exits_non_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = MemoryCluster(WallClock())
    port = free_port()
    inject(monkeypatch, Descheduler, "run_once", "injected: descheduling loop broke")
    release = hold_close(monkeypatch, serve.DeschedulerComponent)
    args = serve_args("descheduler", DESCHEDULER_CONFIG, port, "--leader-elect=false")
    assert_dies_loudly(
        lambda stop: serve.serve("descheduler", args, cluster=cluster, stop=stop),
        port,
        release,
        capsys,
        "descheduler",
        "injected: descheduling loop broke",
    )


def test_koordlet_loop_death_exits_non_zero(
    koord_host_tree: HostFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tree = koord_host_tree(cpus=4)
    pod = make_running_pod("ls", node="node-1", qos="LS", requests={"cpu": "1"})
    tree.add_pod(pod)
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all([make_node("node-1"), pod]))
    port = free_port()
    inject(monkeypatch, KoordletAgent, "step", "injected: agent loop broke")
    release = hold_close(monkeypatch, KoordletAgent, "stop")
    args = build_parser().parse_args(
        [
            "koordlet",
            "--node-name=node-1",
            f"--cluster={tmp_path / 'objects.yaml'}",
            f"--host-root={tree.root}",
            f"--health-address=127.0.0.1:{port}",
        ]
    )
    assert_dies_loudly(
        lambda stop: koordlet.run(args, stop=stop),
        port,
        release,
        capsys,
        "koordlet",
        "injected: agent loop broke",
    )


class WithoutCRD(MemoryCluster):
    """The embedded cluster as an API server without one of Koordinator's CRDs, until ``installed``."""

    def __init__(self, missing: str = "NodeMetric") -> None:
        super().__init__(WallClock())
        self.missing = missing
        self.installed = threading.Event()

    def serves(self, kind: str) -> bool:
        return kind != self.missing or self.installed.is_set()

    def list(self, kind: str, namespace: str | None = None) -> tuple[list[Any], int]:
        if not self.serves(kind):
            raise KindNotServedError(kind, f"list {kind}: the server could not find the requested resource")
        return super().list(kind, namespace)

    def list_shared(self, kind: str) -> Any:
        if not self.serves(kind):
            raise KindNotServedError(kind, f"list {kind}: the server could not find the requested resource")
        return super().list_shared(kind)


def bound_to(cluster: MemoryCluster, name: str) -> str:
    return str(cluster.get("Pod", name, "default")["spec"].get("nodeName") or "")


def test_scheduler_without_the_node_metric_crd_waits_unready_then_schedules(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = WithoutCRD()
    cluster.create(make_node("n1", cpu="4", memory="8Gi"))
    cluster.create(make_pod("p1", cpu="100m", scheduler_name="koord-scheduler"))
    port = free_port()
    args = serve_args("scheduler", SCHEDULER_CONFIG, port, "--leader-elect=false")
    with (
        caplog.at_level(logging.INFO, logger="koord"),
        in_thread(lambda stop: serve.serve("scheduler", args, cluster=cluster, stop=stop)) as (stop, result),
    ):
        wait_for(lambda: "waiting for NodeMetric" in get(port, "/readyz")[1], 30, "unready on NodeMetric")
        assert get(port, "/readyz")[0] == 503
        assert get(port, "/healthz") == (200, "ok")
        assert bound_to(cluster, "p1") == ""
        cluster.installed.set()
        wait_for(lambda: get(port, "/readyz") == (200, "ok"), 30, "ready once NodeMetric is served")
        wait_for(lambda: bound_to(cluster, "p1") == "n1", 30, "the pod scheduled")
        stop.set()
        wait_for(lambda: result != [], 30, "the exit")
    assert result == [0]
    waiting = [r.getMessage() for r in caplog.records if "waiting for NodeMetric" in r.getMessage()]
    assert len(waiting) == 1
    assert "kubectl apply -f configs/crds/slo.koordinator.sh_nodemetrics.yaml" in waiting[0]


def test_descheduler_without_the_node_metric_crd_waits_unready_then_runs() -> None:
    cluster = WithoutCRD("NodeMetric")
    cluster.create(make_node("n1"))
    port = free_port()
    args = serve_args("descheduler", DESCHEDULER_CONFIG, port, "--leader-elect=false", "--dry-run")
    with in_thread(lambda stop: serve.serve("descheduler", args, cluster=cluster, stop=stop)) as (
        stop,
        result,
    ):
        wait_for(lambda: "waiting for NodeMetric" in get(port, "/readyz")[1], 30, "unready on NodeMetric")
        assert get(port, "/healthz") == (200, "ok")
        cluster.installed.set()
        wait_for(lambda: get(port, "/readyz") == (200, "ok"), 30, "ready once NodeMetric is served")
        stop.set()
        wait_for(lambda: result != [], 30, "the exit")
    assert result == [0]


def test_koordlet_without_the_node_slo_crd_waits_unready_then_runs(
    koord_host_tree: HostFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = koord_host_tree(cpus=4)
    cluster = WithoutCRD("NodeSLO")
    cluster.create(make_node("node-1"))
    monkeypatch.setattr(koordlet, "_cluster", lambda args: cluster)
    port = free_port()
    args = build_parser().parse_args(
        [
            "koordlet",
            "--node-name=node-1",
            "--kubeconfig",
            f"--host-root={tree.root}",
            f"--health-address=127.0.0.1:{port}",
        ]
    )
    with in_thread(lambda stop: koordlet.run(args, stop=stop)) as (stop, result):
        wait_for(lambda: "waiting for NodeSLO" in get(port, "/readyz")[1], 30, "unready on NodeSLO")
        assert get(port, "/healthz") == (200, "ok")
        cluster.installed.set()
        wait_for(lambda: get(port, "/readyz") == (200, "ok"), 30, "ready once NodeSLO is served")
        stop.set()
        wait_for(lambda: result != [], 30, "the exit")
    assert result == [0]


class ForbiddenPods(MemoryCluster):
    def list(self, kind: str, namespace: str | None = None) -> tuple[list[Any], int]:
        if kind == "Pod":
            raise KubeApiError(
                403, "Forbidden", 'list pods: pods is forbidden: User "x" cannot list (HTTP 403)'
            )
        return super().list(kind, namespace)


def test_koordlet_that_cannot_list_its_pods_exits_non_zero(
    koord_host_tree: HostFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = koord_host_tree(cpus=4)
    cluster = ForbiddenPods(WallClock())
    cluster.create(make_node("node-1"))
    monkeypatch.setattr(koordlet, "_cluster", lambda args: cluster)
    port = free_port()
    args = build_parser().parse_args(
        [
            "koordlet",
            "--node-name=node-1",
            "--kubeconfig",
            f"--host-root={tree.root}",
            f"--health-address=127.0.0.1:{port}",
        ]
    )
    with in_thread(lambda stop: koordlet.run(args, stop=stop)) as (_, result):
        wait_for(lambda: result != [], 30, "the exit")
    assert result == [1]
    assert "koord koordlet: fatal: list pods: pods is forbidden" in capsys.readouterr().err


def test_an_error_inside_one_scheduling_cycle_stays_that_pods_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from koord_plugin_kubernetes.noderesources import NodeResourcesFit

    original = NodeResourcesFit.pre_filter

    def sometimes_broken(self: Any, state: Any, pod: Any, *a: Any, **k: Any) -> Any:
        if pod.name == "bad":
            raise RuntimeError("injected: one pod's PreFilter broke")
        return original(self, state, pod, *a, **k)

    monkeypatch.setattr(NodeResourcesFit, "pre_filter", sometimes_broken)
    cluster = MemoryCluster(WallClock())
    cluster.create(make_node("n1", cpu="4", memory="8Gi"))
    cluster.create(make_pod("bad", cpu="100m", scheduler_name="koord-scheduler"))
    cluster.create(make_pod("good", cpu="100m", scheduler_name="koord-scheduler"))
    port = free_port()
    args = serve_args("scheduler", SCHEDULER_CONFIG, port, "--leader-elect=false")
    with in_thread(lambda stop: serve.serve("scheduler", args, cluster=cluster, stop=stop)) as (_, result):
        wait_for(lambda: bound_to(cluster, "good") == "n1", 30, "the good pod scheduled")
        assert get(port, "/healthz") == (200, "ok") and get(port, "/readyz") == (200, "ok")
        assert bound_to(cluster, "bad") == "" and result == []


def test_the_missing_kind_table_is_koordinators() -> None:
    scheduler, descheduler = serve.MISSING_KINDS["scheduler"], serve.MISSING_KINDS["descheduler"]
    # informer factories: WaitForCacheSync without a limit
    assert scheduler.timeout("NodeMetric") is None and scheduler.timeout("Reservation") is None
    assert descheduler.timeout("NodeMetric") is None
    # controller-runtime's MigrationController: CacheSyncTimeout, 2 minutes, then the manager exits
    assert descheduler.timeout("PodMigrationJob") == 120.0 and descheduler.timeout("Reservation") == 120.0
    # a cluster without a built-in kind is not one to wait for
    assert scheduler.timeout("Lease") == 0.0
    assert koordlet.KOORDLET_WAITS_FOR == ("NodeSLO", "NodeMetric")


def device_daemon_args(tmp_path: Path, port: int, *source: str) -> Any:
    (tmp_path / "host").mkdir(exist_ok=True)  # a host without devices: the Device lists none
    return build_parser().parse_args(
        [
            "device-daemon",
            "--node-name=node-1",
            *source,
            f"--host-root={tmp_path / 'host'}",
            "--no-nvml",
            "--sleep-interval=50ms",
            f"--health-address=127.0.0.1:{port}",
            f"--output-file={tmp_path / 'device.json'}",
        ]
    )


def test_device_daemon_loop_death_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump(make_node("node-1")))
    port = free_port()
    inject(monkeypatch, DeviceDaemon, "sync", "injected: device scan broke")
    release = hold_close(monkeypatch, devicedaemon.DeviceDaemonComponent)
    args = device_daemon_args(tmp_path, port, f"--cluster={tmp_path / 'objects.yaml'}")
    assert_dies_loudly(
        lambda stop: devicedaemon.run(args, stop=stop),
        port,
        release,
        capsys,
        "device-daemon",
        "injected: device scan broke",
    )


def test_device_daemon_without_the_device_crd_waits_unready_then_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = WithoutCRD("Device")
    cluster.create(make_node("node-1"))
    monkeypatch.setattr(devicedaemon, "_cluster", lambda args: cluster)
    port = free_port()
    args = device_daemon_args(tmp_path, port, "--kubeconfig")
    with in_thread(lambda stop: devicedaemon.run(args, stop=stop)) as (stop, result):
        wait_for(lambda: "waiting for Device" in get(port, "/readyz")[1], 30, "unready on Device")
        assert get(port, "/healthz") == (200, "ok")
        assert cluster.try_get("Device", "node-1") is None
        cluster.installed.set()
        wait_for(lambda: get(port, "/readyz") == (200, "ok"), 30, "ready once Device is served")
        assert cluster.try_get("Device", "node-1") is not None
        stop.set()
        wait_for(lambda: result != [], 30, "the exit")
    assert result == [0]


def test_device_daemon_without_the_deviceshare_distribution_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = MemoryCluster(WallClock(), kinds=KindRegistry.builtin())  # Device is not a built-in kind
    monkeypatch.setattr(devicedaemon, "_cluster", lambda args: cluster)
    args = device_daemon_args(tmp_path, free_port(), "--kubeconfig")
    assert devicedaemon.run(args, stop=threading.Event()) == 1
    err = capsys.readouterr().err
    assert "unknown kind 'Device'" in err and "install koord-plugin-deviceshare" in err
