"""``--controllers`` and ``--noderesource-plugins``: Koordinator's lists, both ways."""

from __future__ import annotations

import json

import pytest
from koord_plugin_batchresource import BatchResource
from prometheus_client import CollectorRegistry

from koord_framework.api.resources import BATCH_CPU
from koord_framework.cli.manager import enabled_controllers, load_plugins
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import KoordError
from koord_framework.manager.component import ManagerComponent
from koord_framework.manager.selection import enabled
from koord_framework.testing import make_node
from koord_framework.testing.builders import make_node_metric

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("selection", "name", "want"),
    [
        (["*"], "MidResource", True),
        (["BatchResource"], "MidResource", False),
        (["BatchResource"], "BatchResource", True),
        (["*", "-MidResource"], "MidResource", False),
        (["*", "-MidResource"], "BatchResource", True),
        (["-MidResource", "*"], "MidResource", False),
        (["MidResource", "-MidResource"], "MidResource", True),  # the first entry naming it decides
        ([], "MidResource", False),
    ],
)
def test_enabled_follows_koordinator(selection: list[str], name: str, want: bool) -> None:
    assert enabled(name, selection) is want


def test_default_loads_every_calculator_in_koordinator_order() -> None:
    names = [p.name for p in load_plugins()]
    assert names[:6] == [
        "CPUNormalization",
        "ResourceAmplification",
        "MidResource",
        "BatchResource",
        "GPUDeviceResource",
        "RDMADeviceResource",
    ]


def test_a_calculator_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [p.name for p in load_plugins("*,-MidResource,-CPUNormalization")]
    assert "MidResource" not in names and "CPUNormalization" not in names
    assert "BatchResource" in names
    assert [p.name for p in load_plugins("BatchResource")] == ["BatchResource"]
    assert [p.name for p in load_plugins("BatchResource,GPUDeviceResource")] == [
        "BatchResource",
        "GPUDeviceResource",
    ]
    # Koordinator's calculators that are not installed are accepted names
    from koord_framework.registry import PluginRegistry

    discover = PluginRegistry.discover

    class _WithoutGPU:
        def __init__(self, group: str) -> None:
            self.registry = discover(group)

        def load_all(self) -> dict[str, object]:
            return {k: v for k, v in self.registry.load_all().items() if k != "GPUDeviceResource"}

    monkeypatch.setattr(PluginRegistry, "discover", _WithoutGPU)
    assert [p.name for p in load_plugins("BatchResource,GPUDeviceResource")] == ["BatchResource"]


@pytest.mark.parametrize("text", ["*,-NoSuchPlugin", "BatchResorce"])
def test_unknown_calculator_is_an_error_naming_it(text: str) -> None:
    with pytest.raises(KoordError, match="--noderesource-plugins: unknown name"):
        load_plugins(text)


def test_controllers_selection() -> None:
    assert enabled_controllers("*") == {"nodeslo", "nodemetric", "noderesource"}
    assert enabled_controllers("*,-noderesource") == {"nodeslo", "nodemetric"}
    assert enabled_controllers("nodeslo,colocationprofile") == {"nodeslo"}
    with pytest.raises(KoordError, match="--controllers: unknown name 'nodeslos'"):
        enabled_controllers("nodeslos")


def _cluster() -> MemoryCluster:
    c = MemoryCluster(VirtualClock(NOW), seed=0)
    c.create(make_node("n1", cpu="16", memory="32Gi"))
    c.create(make_node_metric("n1", cpu="2", memory="4Gi", update_time=NOW))
    c.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
            "data": {"colocation-config": json.dumps({"enable": True})},
        }
    )
    return c


@pytest.mark.parametrize("controllers", [None, frozenset({"nodeslo"})])
def test_disabled_controllers_do_nothing(controllers: frozenset[str] | None) -> None:
    c = _cluster()
    m = ManagerComponent(
        c,
        CollectorRegistry(),
        config_namespace="koordinator-system",
        plugins=[BatchResource()],
        controllers=controllers,
    )
    try:
        m.sync_once()
    finally:
        m.close()
    assert c.try_get("NodeSLO", "n1") is not None
    batch = BATCH_CPU in c.get("Node", "n1")["status"]["allocatable"]
    policy = "metricCollectPolicy" in (c.get("NodeMetric", "n1").get("spec") or {})
    assert batch is (controllers is None)
    assert policy is (controllers is None)
