"""The agent loop on a fake host with the embedded cluster: collect, tick, write, report, follow the
cluster; broken strategies contained; ``koord koordlet`` on top."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from prometheus_client import CollectorRegistry

from koord_framework.api.qos import KubeQoS
from koord_framework.cli.main import main
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import ValidationError
from koord_framework.koordlet.agent import AgentOptions, KoordletAgent
from koord_framework.koordlet.qos import IntervalArgs, QOSStrategy
from koord_framework.koordlet.runtimehooks import (
    PodSandboxRequest,
    PodSandboxResponse,
    RuntimeHook,
    RuntimeHookArgs,
    hookimpl,
)
from koord_framework.plugin import PluginArgs
from koord_framework.registry import PluginRegistry
from koord_framework.testing.hosttree import FakeHostTree, make_running_pod

HostFactory = Callable[..., FakeHostTree]
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1"},
    "status": {"capacity": {"cpu": "8", "memory": "16Gi"}, "allocatable": {"cpu": "8", "memory": "16Gi"}},
}
LS = make_running_pod("ls", node="node-1", qos="LS", requests={"cpu": "2"}, limits={"cpu": "4"})
BE = make_running_pod("be", node="node-1", qos="BE", requests={"kubernetes.io/batch-cpu": "4000"})
SLO = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeSLO",
    "metadata": {"name": "node-1"},
    "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}},
}


def suppress_class() -> type[QOSStrategy]:
    cls = PluginRegistry.discover("qos").get("BECPUSuppress")
    assert issubclass(cls, QOSStrategy)
    return cls


def world(tree: FakeHostTree, *objects: dict[str, Any]) -> tuple[MemoryCluster, VirtualClock]:
    clock = VirtualClock(1_700_000_000.0)
    cluster = MemoryCluster(clock)
    for obj in (NODE, SLO, LS, BE, *objects):
        cluster.create(obj)
        if obj.get("kind") == "Pod":
            tree.add_pod(obj)
    return cluster, clock


def burn(tree: FakeHostTree, seconds: float, ls: float, be: float) -> None:
    """One interval of work: LS and BE pods (and the BE QoS dir) use cpu, the node their sum plus 0.5."""
    meta_ls = tree.layout.pod_dir(KubeQoS.BURSTABLE, "uid-ls")
    meta_be = tree.layout.pod_dir(KubeQoS.BEST_EFFORT, "uid-be")
    tree.add_cpu_usage(meta_ls, seconds=ls * seconds)
    tree.add_cpu_usage(meta_be, seconds=be * seconds)
    tree.add_cpu_usage(tree.layout.qos_dir(KubeQoS.BEST_EFFORT), seconds=be * seconds)
    tree.add_node_cpu(seconds=(ls + be + 0.5) * seconds, wall_seconds=seconds)


@pytest.mark.parametrize(("version", "driver"), [(1, "systemd"), (2, "cgroupfs")])
def test_agent_collects_ticks_and_follows_the_cluster(
    koord_host_tree: HostFactory, version: int, driver: str
) -> None:
    tree = koord_host_tree(version=version, driver=driver, cpus=8)
    cluster, clock = world(tree)
    agent = KoordletAgent("node-1", cluster, host=tree.paths, clock=clock, strategies=[suppress_class()])
    first = agent.step()
    assert first.collected is not None and first.collected.node_cpu is None
    assert any("no recent node cpu sample" in d.summary for d in first.decisions)

    clock.advance(1)
    burn(tree, 1, ls=3.0, be=2.0)
    report = agent.step()
    # 8 x 65% - LS 3 - system (5.5 - 5 = 0.5) = 1.7 cores -> quota 170000
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    quota = tree.read("cpu.cfs_quota_us", be_dir)
    assert quota == ("170000" if version == 1 else "170000 100000")
    assert report.ran == ["BECPUSuppress"]
    assert any(w.new.startswith("170000") for w in report.writes)
    assert report.as_dict()["measured"]["podCPUCores"] == {
        "uid-ls": pytest.approx(3.0),
        "uid-be": pytest.approx(2.0),
    }

    # the NodeSLO switches suppression off: the next tick puts the quota back
    slo = cluster.get("NodeSLO", "node-1")
    slo["spec"]["resourceUsedThresholdWithBE"]["enable"] = False
    cluster.update(slo)
    clock.advance(1)
    burn(tree, 1, ls=3.0, be=2.0)
    off = agent.step()
    assert off.ran == ["BECPUSuppress (disabled by NodeSLO)"]
    assert tree.read("cpu.cfs_quota_us", be_dir) == ("-1" if version == 1 else "max 100000")

    # a pod that arrives later is seen through the watch
    late = make_running_pod("late", node="node-1", qos="LS", requests={"cpu": "1"})
    cluster.create(late)
    tree.add_pod(late)
    clock.advance(1)
    assert "uid-late" in {p.uid for p in (agent.step(), agent.state)[1].pods}


class Boom(QOSStrategy):
    name: ClassVar[str] = "Boom"
    Args: ClassVar[type[PluginArgs]] = IntervalArgs

    def enabled(self, node_slo: Any) -> bool:
        return True

    def tick(self, now: float) -> None:
        raise RuntimeError("kaput")


class Counter(QOSStrategy):
    name: ClassVar[str] = "Counter"
    Args: ClassVar[type[PluginArgs]] = IntervalArgs
    ticks: ClassVar[list[float]] = []

    def enabled(self, node_slo: Any) -> bool:
        return True

    def tick(self, now: float) -> None:
        Counter.ticks.append(now)


def test_a_failing_strategy_is_contained(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4)
    cluster, clock = world(tree)
    Counter.ticks = []
    agent = KoordletAgent("node-1", cluster, host=tree.paths, clock=clock, strategies=[Boom, Counter])
    report = agent.step()
    assert report.errors == ["Boom: RuntimeError: kaput"] or "Boom: RuntimeError: kaput" in report.errors
    assert Counter.ticks == [clock.now()]
    assert (
        agent.registry.get_sample_value(
            "koordlet_qos_strategy_duration_seconds_count", {"strategy": "Boom", "status": "error"}
        )
        == 1.0
    )


def test_intervals_drive_the_loop(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4)
    cluster, clock = world(tree)
    Counter.ticks = []
    agent = KoordletAgent(
        "node-1",
        cluster,
        host=tree.paths,
        clock=clock,
        strategies=[(Counter, {"intervalSeconds": 5})],
        options=AgentOptions(report_node_metric=False),
    )
    start = clock.now()
    agent.run(duration=20)
    assert [t - start for t in Counter.ticks] == [0, 5, 10, 15]
    assert clock.now() - start == pytest.approx(20)


def test_bad_strategy_args_name_the_field(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4)
    cluster, clock = world(tree)
    with pytest.raises(ValidationError, match=r"qosStrategies\[0\]\[Counter\]\.args\.intervalSeconds"):
        KoordletAgent(
            "node-1", cluster, host=tree.paths, clock=clock, strategies=[(Counter, {"intervalSeconds": 0})]
        )


def test_node_metric_is_reported(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4)
    cluster, clock = world(tree)
    agent = KoordletAgent(
        "node-1",
        cluster,
        host=tree.paths,
        clock=clock,
        strategies=[],
        options=AgentOptions(create_node_metric=True),
    )
    agent.step()
    clock.advance(1)
    burn(tree, 1, ls=1.0, be=0.5)
    agent.step()
    clock.advance(60)
    burn(tree, 1, ls=1.0, be=0.5)
    report = agent.step()
    assert report.node_metric is not None
    stored = cluster.get("NodeMetric", "node-1")["status"]
    assert {p["name"] for p in stored["podsMetric"]} == {"ls", "be"}
    assert stored["nodeMetric"]["nodeUsage"]["resources"]["cpu"]


def test_default_strategies_are_the_installed_default_on_ones(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4)
    cluster, clock = world(tree)
    registry = PluginRegistry.from_classes("qos", [suppress_class(), Counter])
    agent = KoordletAgent("node-1", cluster, host=tree.paths, clock=clock, qos_registry=registry)
    assert [s.name for s in agent.strategies] == ["BECPUSuppress"]


def _cluster_dir(tmp_path: Path, tree: FakeHostTree) -> Path:
    d = tmp_path / "cluster"
    d.mkdir()
    for obj in (LS, BE):
        tree.add_pod(obj)
    (d / "objects.yaml").write_text(yaml.safe_dump_all([NODE, SLO, LS, BE]))
    return d


def test_cli_once_prints_what_it_measured_decided_and_wrote(
    koord_host_tree: HostFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = koord_host_tree(version=1, driver="systemd", cpus=8)
    cluster_dir = _cluster_dir(tmp_path, tree)
    code = main(
        [
            "koordlet",
            "--node-name",
            "node-1",
            "--cluster",
            str(cluster_dir),
            "--host-root",
            str(tree.root),
            "--once",
            "-o",
            "json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["node"] == "node-1" and out["cgroup"] == "cgroup v1, systemd driver"
    assert out["strategies"] == ["BECPUSuppress", "CPUBurst"] or out["strategies"][0] == "BECPUSuppress"
    assert "podCPUCores" in out["measured"]
    assert any(d["strategy"] == "BECPUSuppress" for d in out["decided"])
    # the fake host did not move between the two collections: BE may use 8 x 65% = 5.2 cores
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    assert tree.read("cpu.cfs_quota_us", be_dir) == "520000"
    assert any(w["new"] == "520000" for w in out["wrote"])


def test_cli_text_and_config(
    koord_host_tree: HostFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = koord_host_tree(version=2, driver="cgroupfs", cpus=4)
    cluster_dir = _cluster_dir(tmp_path, tree)
    config = tmp_path / "koordlet.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "koordlet.koordinator.sh/v1alpha1",
                "kind": "KoordletConfiguration",
                "nodeName": "node-1",
                "qosStrategies": [{"name": "BECPUSuppress", "args": {"intervalSeconds": 2}}],
            }
        )
    )
    code = main(
        [
            "koordlet",
            "--config",
            str(config),
            "--cluster",
            str(cluster_dir),
            "--host-root",
            str(tree.root),
            "--once",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "koordlet node-1: one round (cgroup v2, cgroupfs driver, strategies: BECPUSuppress)" in text
    assert "measured:" in text and "decided:" in text and "wrote:" in text
    assert "BECPUSuppress: cfs quota: BE suppressed to 520000 us per 100 ms" in text  # the Node says 8 cpus


def test_cli_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["koordlet", "--once", "--host-root", str(tmp_path)]) == 2
    assert "no node name" in capsys.readouterr().err
    assert main(["koordlet", "--node-name", "x", "--host-root", str(tmp_path / "missing"), "--once"]) == 2
    assert "not a directory" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: KoordletConfiguration\napiVersion: koordlet.koordinator.sh/v1alpha1\n"
        "qosStrategies: [{name: NoSuchStrategy}]\n"
    )
    assert main(["koordlet", "--node-name", "x", "--config", str(bad), "--once"]) in (1, 2)
    assert "NoSuchStrategy" in capsys.readouterr().err


class _BEShares(RuntimeHook[RuntimeHookArgs]):
    """A runtime hook giving BE pods 3 cpu shares (to see the agent's reconciler apply it)."""

    name: ClassVar[str] = "BEShares"
    Args = RuntimeHookArgs

    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        if request.labels.get("koordinator.sh/qosClass") == "BE":
            response.resources.cpu_shares = 3


def test_the_agent_reconciles_its_runtime_hooks(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4)
    cluster, clock = world(tree)
    agent = KoordletAgent(
        "node-1", cluster, host=tree.paths, clock=clock, hooks=[(_BEShares, RuntimeHookArgs())]
    )
    other = KoordletAgent("node-1", cluster, host=tree.paths, clock=clock, registry=CollectorRegistry())
    assert agent.hooks.pm is not other.hooks.pm and other.hooks.hooks == []
    report = agent.step()
    assert report.errors == [] and "RuntimeHooksReconciler (interval)" in report.ran
    assert tree.read("cpu.shares", tree.layout.pod_dir(KubeQoS.BEST_EFFORT, "uid-be")) == "3"
    agent.stop()
