"""The koordlet's feature gates switch its QoS strategies and runtime hooks (``KOORDLET_PLUGIN_GATES``),
each both ways, at the one switch point: ``KoordletAgent``'s construction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.featuregates import FeatureGateError, gates_for
from koord_framework.koordlet.agent import KoordletAgent
from koord_framework.registry import PluginRegistry
from koord_framework.testing.hosttree import FakeHostTree

HostFactory = Callable[..., FakeHostTree]
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1"},
    "status": {"capacity": {"cpu": "8", "memory": "16Gi"}, "allocatable": {"cpu": "8", "memory": "16Gi"}},
}


def agent(tree: FakeHostTree, gates: str | None, **kw: Any) -> KoordletAgent:
    cluster = MemoryCluster(VirtualClock(1_700_000_000.0))
    cluster.create(NODE)
    parsed = gates_for("koordlet").parse(gates) if gates is not None else None
    return KoordletAgent("node-1", cluster, host=tree.paths, gates=parsed, **kw)


def qos(name: str) -> Any:
    return PluginRegistry.discover("qos").get(name)


def hook(name: str) -> Any:
    cls = PluginRegistry.discover("runtimehooks").get(name)
    return (cls, cls.parse_args(None))


def names(a: KoordletAgent) -> list[str]:
    return sorted(s.name for s in a.strategies)


def test_default_gates_run_koordinators_default_strategies(koord_host_tree: HostFactory) -> None:
    # BECPUSuppress, CPUBurst and RdtResctrl are on by default; the eviction gates are off.
    assert names(agent(koord_host_tree(), "")) == ["BECPUSuppress", "CPUBurst", "Resctrl"]


@pytest.mark.parametrize(
    ("gates", "present", "absent"),
    [
        ("CPUBurst=false", [], ["CPUBurst"]),
        ("BECPUSuppress=false", [], ["BECPUSuppress"]),
        ("RdtResctrl=false", [], ["Resctrl"]),
        ("BECPUEvict=true", ["BECPUEvict"], []),
        ("BEMemoryEvict=true", ["BEMemoryEvict"], []),
        ("AllAlpha=true", ["BECPUEvict", "BEMemoryEvict"], []),
    ],
)
def test_gates_switch_default_strategies(
    koord_host_tree: HostFactory, gates: str, present: list[str], absent: list[str]
) -> None:
    got = names(agent(koord_host_tree(), gates))
    assert set(present) <= set(got)
    assert not set(absent) & set(got)


def test_gates_switch_configured_strategies(koord_host_tree: HostFactory) -> None:
    configured = [qos("BECPUSuppress"), qos("BECPUEvict")]
    assert names(agent(koord_host_tree(), "", strategies=configured)) == ["BECPUSuppress"]
    assert names(agent(koord_host_tree(), "BECPUEvict=true", strategies=configured)) == [
        "BECPUEvict",
        "BECPUSuppress",
    ]
    assert names(agent(koord_host_tree(), "BECPUSuppress=false", strategies=configured)) == []
    # without gates (embedding, tests) the strategies given run as given
    assert names(agent(koord_host_tree(), None, strategies=configured)) == ["BECPUEvict", "BECPUSuppress"]


def test_eviction_triggers_follow_their_own_gates(koord_host_tree: HostFactory) -> None:
    spec = (qos("BECPUEvict"), {"triggers": ["BECPUEvict", "CPUEvict"]})
    a = agent(koord_host_tree(), "CPUEvict=true", strategies=[spec])
    assert [s.args.triggers for s in a.strategies] == [["CPUEvict"]]
    a = agent(koord_host_tree(), "CPUEvict=true,BECPUEvict=true", strategies=[spec])
    assert [s.args.triggers for s in a.strategies] == [["BECPUEvict", "CPUEvict"]]
    # the strategy is on (CPUAllocatableEvict), but none of the triggers it was given is
    a = agent(koord_host_tree(), "CPUAllocatableEvict=true", strategies=[spec])
    assert a.strategies == []


@pytest.mark.parametrize(
    ("gate", "hook_name", "default_on"),
    [
        ("GroupIdentity", "GroupIdentity", True),
        ("CPUSetAllocator", "CPUSetAllocator", True),
        ("BatchResource", "BatchResource", True),
        ("CPUNormalization", "CPUNormalization", False),
        ("GPUEnvInject", "GPUEnvInject", False),
    ],
)
def test_gates_switch_runtime_hooks(
    koord_host_tree: HostFactory, gate: str, hook_name: str, default_on: bool
) -> None:
    hooks = [hook(hook_name)]
    registered = [h.name for h in agent(koord_host_tree(), "", hooks=hooks).hooks.hooks]
    assert (hook_name in registered) is default_on
    flipped = f"{gate}={'false' if default_on else 'true'}"
    registered = [h.name for h in agent(koord_host_tree(), flipped, hooks=hooks).hooks.hooks]
    assert (hook_name in registered) is not default_on


def test_runtime_hook_gates_are_koordinator_koordlet_gates() -> None:
    gates = gates_for("koordlet")
    assert gates.values["GroupIdentity"] and gates.values["BatchResource"] and gates.values["CPUSetAllocator"]
    assert not gates.values["CPUNormalization"] and not gates.values["Resctrl"]
    with pytest.raises(FeatureGateError, match="unrecognized feature gate: NoSuchHook"):
        gates.parse("NoSuchHook=true")
