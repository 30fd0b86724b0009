"""``koord manager``: one pass, the long-running component, its probes, its loud end, bad input."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import pytest

from koord_framework.cli import manager as manager_cli
from koord_framework.cli.main import build_parser, main
from koord_framework.cluster.clock import WallClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.manager.controller import ControllerLoop
from koord_framework.testing import make_node
from koord_framework.testing.probes import free_port, get, wait_for

from .test_fail_loudly import in_thread

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "configs" / "examples" / "cluster"


def args_for(*extra: str) -> argparse.Namespace:
    return build_parser().parse_args(["manager", "--cluster", str(EXAMPLE), *extra])


def cluster() -> MemoryCluster:
    c = MemoryCluster(WallClock(), seed=0)
    c.create(make_node("n1"))
    return c


def test_once_reports_every_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manager", "--cluster", str(EXAMPLE), "--once"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["NODE", "NODESLO"]
    assert " yes " in out


def test_unknown_feature_gate_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manager", "--cluster", str(EXAMPLE), "--once", "--feature-gates", "Nope=true"]) == 2
    assert "unrecognized feature gate: Nope" in capsys.readouterr().err


def test_help_lists_feature_gates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manager", "--help"]) == 0
    assert "PodMutatingWebhook=true|false (BETA - default=true)" in capsys.readouterr().out


@pytest.mark.parametrize("leader", ["false", "true"])
def test_runs_until_stopped_and_is_ready(leader: str) -> None:
    port = free_port()
    c = cluster()
    args = args_for(
        "--metrics-addr", f"127.0.0.1:{port}", "--enable-leader-election", leader, "--resync", "1"
    )
    with in_thread(lambda stop: manager_cli.run(args, cluster=c, stop=stop)) as (stop, result):
        wait_for(lambda: get(port, "/readyz")[0] == 200, 20, "/readyz 200")
        # With leader election /readyz is 200 while still a standby (by design): the first pass may follow.
        wait_for(lambda: c.try_get("NodeSLO", "n1") is not None, 20, "the NodeSLO of n1")
        c.create(make_node("n2"))
        wait_for(lambda: c.try_get("NodeMetric", "n2") is not None, 10, "the new node's NodeMetric")
        status, body = get(port, "/metrics")
        assert status == 200 and "koord_manager_reconciles" in body
        stop.set()
    assert result == [0]


def test_a_dying_loop_fails_loudly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(self: ControllerLoop, stop: threading.Event, on_round: object = None) -> None:
        time.sleep(0.2)
        raise RuntimeError("injected loop failure")

    monkeypatch.setattr(ControllerLoop, "run", boom)
    port = free_port()
    args = args_for("--metrics-addr", f"127.0.0.1:{port}", "--enable-leader-election", "false")
    with in_thread(lambda stop: manager_cli.run(args, cluster=cluster(), stop=stop)) as (_stop, result):
        wait_for(lambda: bool(result), 20, "the command to end")
    assert result == [1]
    assert "koord manager: fatal: RuntimeError: injected loop failure" in capsys.readouterr().err


def test_the_loop_closes_on_the_example_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``make demo``: the manager computes batch resources from the example NodeMetrics; the BE pods that
    request them schedule on the cluster it leaves, with the same designed rejections as the raw example."""
    from koord_framework.cli.simulate import simulate

    now = ["--now", "2024-01-01T00:00:00Z"]
    assert main(["manager", "--cluster", str(EXAMPLE), "--once", *now, "--write-state", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "batchAllocatable[CPU(Milli-Core)]:5600 = nodeCapacity:16000 - nodeSafetyMargin:6400" in out
    state = yaml_docs(tmp_path / "state.yaml")
    node = next(d for d in state if d["kind"] == "Node" and d["metadata"]["name"] == "node-00")
    assert node["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "5600"
    config = ROOT / "configs" / "scheduler" / "koord-scheduler.yaml"
    from koord_framework.cluster.clock import parse_time

    result, _ = simulate([str(tmp_path)], config, seed=1, now=parse_time("2024-01-01T00:00:00Z"))
    placed = result.to_dict()["pods"]
    be = [p for p in placed if p["pod"].startswith("batch/spark-exec-")]
    assert be and all(p["node"] for p in be)
    raw, _ = simulate([str(EXAMPLE)], config, seed=1, now=parse_time("2024-01-01T00:00:00Z"))
    unplaced = sorted(p["pod"] for p in placed if not p["node"])
    assert unplaced == sorted(p["pod"] for p in raw.to_dict()["pods"] if not p["node"])


def yaml_docs(path: Path) -> list[dict[str, object]]:
    import yaml

    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_metrics_carry_the_webhook_series(tmp_path: Path) -> None:
    """The webhook's series (Koordinator's binding-admission counter and duration histogram, the workers'
    summed in) are on ``koord manager``'s ``/metrics``."""
    port = free_port()
    args = args_for(
        "--metrics-addr",
        f"127.0.0.1:{port}",
        "--enable-leader-election",
        "false",
        "--resync",
        "1",
        "--webhook",
        "true",
        "--webhook-port",
        "0",
        "--webhook-workers",
        "1",
        "--webhook-cert-dir",
        str(tmp_path / "certs"),
    )
    from tests.manager.test_webhook_writes import _configurations

    c = cluster()
    _configurations(c)
    with in_thread(lambda stop: manager_cli.run(args, cluster=c, stop=stop)) as (stop, result):
        wait_for(lambda: get(port, "/readyz")[0] == 200, 30, "/readyz 200")
        _, body = get(port, "/metrics")
        assert "# TYPE koord_manager_webhook_binding_admission_decisions_total counter" in body
        assert "# TYPE koord_manager_webhook_webhook_duration_milliseconds histogram" in body
        assert "# TYPE koord_manager_webhook_duration_seconds histogram" in body
        stop.set()
    assert result == [0]
