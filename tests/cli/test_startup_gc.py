"""koord scheduler's start-up: no cyclic garbage collection while its caches fill, then the initial state
frozen out of the collector's passes (issue 22, gap 4); the collector is back on whatever happens."""

from __future__ import annotations

import argparse
import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koord_framework.cli import serve
from koord_framework.cluster.clock import WallClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.config.loader import load_scheduler_config
from koord_framework.errors import KoordError
from koord_framework.scheduler.scheduler import Scheduler
from koord_framework.testing import make_node, make_pod

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "scheduler" / "koord-scheduler.yaml"


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    assert gc.isenabled()
    yield
    gc.unfreeze()
    gc.enable()


def _cluster() -> MemoryCluster:
    cluster = MemoryCluster(WallClock())
    cluster.create(make_node("n1", cpu="4", memory="8Gi"))
    cluster.create(make_pod("p1", cpu="100m", scheduler_name="koord-scheduler"))
    return cluster


def test_collector_off_while_caches_fill_then_the_initial_state_is_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}
    start = Scheduler.start

    def observed_start(self: Scheduler) -> None:
        seen["collecting while filling"] = gc.isenabled()
        start(self)

    def observed_run(self: Scheduler, stop: threading.Event, **_: Any) -> None:
        seen["collecting while running"] = gc.isenabled()
        seen["frozen"] = gc.get_freeze_count()

    monkeypatch.setattr(Scheduler, "start", observed_start)
    monkeypatch.setattr(Scheduler, "run", observed_run)
    component = serve.SchedulerComponent(_cluster(), load_scheduler_config(CONFIG), CollectorRegistry())
    assert not gc.isenabled(), "off from the build on"
    component.run(threading.Event())
    component.close()
    assert seen["collecting while filling"] is False
    assert seen["collecting while running"] is True
    assert seen["frozen"] > 0, "what the start-up built is out of the collector's passes"
    assert [p.pod.name for _, p in component.scheduler.pending_pods()] == ["p1"]


def test_collector_is_back_on_when_the_build_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> Scheduler:
        raise RuntimeError("injected: a plugin cannot be built")

    monkeypatch.setattr(Scheduler, "from_config", broken)
    with pytest.raises(RuntimeError, match="injected"):
        serve.SchedulerComponent(_cluster(), load_scheduler_config(CONFIG), CollectorRegistry())
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0, "nothing frozen by a build that failed"


def test_collector_is_back_on_when_closed_before_running() -> None:
    component = serve.SchedulerComponent(_cluster(), load_scheduler_config(CONFIG), CollectorRegistry())
    component.close()
    assert gc.isenabled()


def _serve_args(config: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["scheduler", f"--config={config}", "--address=127.0.0.1:0"])


def test_what_the_profile_load_made_is_frozen_before_the_collector_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Re-enabling the collector after importing and loading made its first pass walk every object made so
    far (~80 ms of start-up): they live as long as the process, so they are frozen first."""
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def at_build(*_: Any, **__: Any) -> Any:
        seen["collecting"], seen["frozen"] = gc.isenabled(), gc.get_freeze_count()
        raise Stop

    monkeypatch.setattr(serve, "ComponentRunner", at_build)
    with pytest.raises(Stop):
        serve.serve("scheduler", _serve_args(CONFIG), cluster=_cluster())
    assert seen["collecting"] is True
    assert seen["frozen"] > 0


def test_a_profile_that_fails_to_load_freezes_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: 7\n"
    )
    with pytest.raises(KoordError):
        serve.serve("scheduler", _serve_args(broken), cluster=_cluster())
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
