"""``koord koordlet`` as the long-running agent: /healthz, /readyz and /metrics on ``--health-address``,
readiness after the first collection and strategy round, a clean stop (``stop`` event or SIGTERM), and no
server at all with ``--once``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.api.qos import KubeQoS
from koord_framework.cli import koordlet, serve
from koord_framework.cli.main import build_parser, main
from koord_framework.health import HealthServer
from koord_framework.koordlet.agent import RoundReport
from koord_framework.koordlet.metrics.collector import CollectResult
from koord_framework.testing.hosttree import FakeHostTree, make_running_pod
from koord_framework.testing.probes import free_port, get, wait_for

HostFactory = Callable[..., FakeHostTree]
ROOT = Path(__file__).resolve().parents[2]
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1"},
    "status": {"capacity": {"cpu": "8", "memory": "16Gi"}, "allocatable": {"cpu": "8", "memory": "16Gi"}},
}
SLO = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeSLO",
    "metadata": {"name": "node-1"},
    "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}},
}
LS = make_running_pod("ls", node="node-1", qos="LS", requests={"cpu": "2"}, limits={"cpu": "4"})
BE = make_running_pod("be", node="node-1", qos="BE", requests={"kubernetes.io/batch-cpu": "4000"})


def cluster_dir(tmp_path: Path, tree: FakeHostTree) -> Path:
    d = tmp_path / "cluster"
    d.mkdir()
    for pod in (LS, BE):
        tree.add_pod(pod)
    (d / "objects.yaml").write_text(yaml.safe_dump_all([NODE, SLO, LS, BE]))
    return d


@contextlib.contextmanager
def running(argv: list[str]) -> Iterator[tuple[threading.Event, list[int], threading.Thread]]:
    """``koord koordlet ARGV`` in a thread; stopped through its ``stop`` event on the way out."""
    args = build_parser().parse_args(["koordlet", *argv])
    stop = threading.Event()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(koordlet.run(args, stop=stop)), daemon=True)
    thread.start()
    try:
        yield stop, result, thread
    finally:
        stop.set()
        thread.join(10)


def test_serves_health_readiness_and_the_agents_own_metrics_until_stopped(
    koord_host_tree: HostFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = koord_host_tree(version=1, driver="systemd", cpus=8)
    port = free_port()
    argv = ["--node-name", "node-1", "--cluster", str(cluster_dir(tmp_path, tree))]
    argv += ["--host-root", str(tree.root), "--health-address", f"127.0.0.1:{port}", "-o", "json"]
    with running(argv) as (stop, result, thread):
        wait_for(lambda: get(port, "/readyz") == (200, "ok"), 20, "/readyz 200")
        assert get(port, "/healthz") == (200, "ok")
        assert get(port, "/livez") == (200, "ok")
        assert get(port, "/nothing-here")[0] == 404
        status, metrics = get(port, "/metrics")
        assert status == 200
        # every strategy had its round, and BECPUSuppress wrote the BE quota through the executor
        assert 'koordlet_qos_strategy_duration_seconds_count{status="ok",strategy="BECPUSuppress"}' in metrics
        assert 'koordlet_qos_strategy_duration_seconds_count{status="ok",strategy="CPUBurst"}' in metrics
        # the agent's registry, not prometheus_client's global one (process_*, python_*)
        assert "python_info" not in metrics and "process_cpu_seconds_total" not in metrics
        # Once two collections gave a node cpu rate, BECPUSuppress limits BE to 8 cpus x 65% (the default
        # threshold) on the idle host, and the write shows in the executor's counter.
        be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
        wait_for(
            lambda: (
                tree.read("cpu.cfs_quota_us", be_dir) == "520000"
                and 'koordlet_be_suppress_cpu_cores{type="cfsQuota"} 5.2\n' in get(port, "/metrics")[1]
            ),
            20,
            "the BE quota write",
        )
        assert (
            'koordlet_resource_update_total{resource="cpu.cfs_quota_us",status="written"}'
            in (get(port, "/metrics")[1])
        )
        stop.set()
        thread.join(10)
        assert not thread.is_alive(), "the agent did not stop"
        assert result == [0]
    with pytest.raises(OSError):
        get(port, "/healthz")  # the server went with the agent
    captured = capsys.readouterr()
    assert f"serving /healthz, /readyz and /metrics on port {port}" in captured.err
    assert '"decided"' in captured.out


def _report(*, node_memory: int | None, ran: list[str], errors: list[str] | None = None) -> RoundReport:
    return RoundReport(
        time=0.0, collected=CollectResult(time=0.0, node_memory=node_memory), ran=ran, errors=errors or []
    )


def test_ready_after_the_host_was_read_and_every_strategy_had_its_round() -> None:
    ready = koordlet.Readiness(["BECPUSuppress", "CPUBurst"])
    assert not ready()
    # /proc unreadable: the strategies ran blind, that round does not count
    ready.observe(_report(node_memory=None, ran=["BECPUSuppress", "CPUBurst"], errors=["read /proc/stat"]))
    assert not ready()
    ready.observe(RoundReport(time=1.0))  # a step with nothing due
    assert not ready()
    ready.observe(_report(node_memory=1 << 30, ran=["BECPUSuppress (disabled by NodeSLO)"]))
    assert not ready(), "CPUBurst has not had its round since the host was read"
    # a strategy that raised had its round all the same (contained, counted as status="error")
    ready.observe(RoundReport(time=2.0, errors=["CPUBurst: RuntimeError: boom"]))
    assert ready()
    ready.observe(_report(node_memory=None, ran=[]))
    assert ready(), "ready stays ready"


def test_without_strategies_ready_once_the_host_was_read() -> None:
    ready = koordlet.Readiness([])
    ready.observe(_report(node_memory=None, ran=[]))
    assert not ready()
    ready.observe(_report(node_memory=0, ran=[]))
    assert ready()


def test_once_serves_nothing(
    koord_host_tree: HostFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tree = koord_host_tree(cpus=4)
    built: list[Any] = []
    monkeypatch.setattr(koordlet, "ComponentRunner", lambda *a, **k: built.append(a))
    argv = ["koordlet", "--node-name", "node-1", "--cluster", str(cluster_dir(tmp_path, tree))]
    argv += ["--host-root", str(tree.root), "--once", "--health-address", "not-an-address"]
    assert main(argv) == 0
    assert built == []
    assert "serving" not in capsys.readouterr().err


def test_bad_or_busy_health_address_is_bad_input(
    koord_host_tree: HostFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = koord_host_tree(cpus=4)
    base = ["koordlet", "--node-name", "node-1", "--cluster", str(cluster_dir(tmp_path, tree))]
    base += ["--host-root", str(tree.root), "--duration", "0"]
    assert main([*base, "--health-address", "localhost"]) == 2
    assert "--health-address 'localhost': expected HOST:PORT" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        assert main([*base, "--health-address", f"127.0.0.1:{busy}"]) == 2
    assert f"--health-address 127.0.0.1:{busy}: Address already in use" in capsys.readouterr().err


def test_koordinators_addr_flag_is_accepted() -> None:
    args = build_parser().parse_args(["koordlet", "--addr=:9400"])
    assert args.health_address == ":9400"
    assert build_parser().parse_args(["koordlet"]).health_address == "0.0.0.0:9316"


def test_the_health_server_still_lives_where_the_serving_commands_found_it() -> None:
    assert serve.HealthServer is HealthServer


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM")
def test_sigterm_stops_the_agent_cleanly(koord_host_tree: HostFactory, tmp_path: Path) -> None:
    tree = koord_host_tree(cpus=4)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "koord_framework.cli.main",
            "koordlet",
            "--node-name=node-1",
            f"--cluster={cluster_dir(tmp_path, tree)}",
            f"--host-root={tree.root}",
            f"--health-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(lambda: get(port, "/readyz")[0] == 200, 60, "/readyz 200 from the process")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err[-2000:]
    assert "Traceback" not in err
