"""The plugin base: one table of extension points, plugins generic over their args, and ``close()``."""

from __future__ import annotations

from typing import Any

import pytest

from koord_framework.api.objects import PodInfo
from koord_framework.config.scheduler import EXTENSION_POINTS as CONFIG_POINTS
from koord_framework.config.scheduler import Plugins
from koord_framework.descheduler.interface import BalancePlugin, DeschedulerPlugin
from koord_framework.descheduler.interface import Handle as DeschedulerHandle
from koord_framework.plugin import PluginArgs
from koord_framework.scheduler.framework import Framework, PluginLayout
from koord_framework.scheduler.interface import (
    EXTENSION_POINT_TABLE,
    EXTENSION_POINTS,
    PROFILE_KEYS,
    CycleState,
    FilterPlugin,
    NodeInfo,
    SchedulerPlugin,
    Status,
)
from koord_framework.testing import make_node
from koord_framework.testing.descheduler import DeschedulerHarness
from koord_framework.testing.scheduler import SchedulerHarness


class LabelArgs(PluginArgs):
    label: str = "pool"
    """The label a node must carry."""


class NeedsLabel(SchedulerPlugin[LabelArgs], FilterPlugin):
    name = "NeedsLabel"
    Args = LabelArgs
    closed: list[str] = []

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        # ``self.args`` is a LabelArgs without an isinstance check of the plugin's own.
        label = self.args.label
        return Status.success() if label in node.node.labels else Status.unschedulable(f"no {label}")

    def close(self) -> None:
        NeedsLabel.closed.append(self.args.label)


def test_the_table_is_where_profile_keys_the_plugins_model_and_the_runner_come_from() -> None:
    names = [p.name for p in EXTENSION_POINT_TABLE]
    assert list(EXTENSION_POINTS) == names
    assert list(PROFILE_KEYS.values()) == names
    assert CONFIG_POINTS == PROFILE_KEYS
    aliases = {info.alias for info in Plugins.model_fields.values()}
    assert aliases == {*PROFILE_KEYS, "multiPoint"}
    parsed = Plugins.model_validate({p.key: {"enabled": [{"name": "X"}]} for p in EXTENSION_POINT_TABLE})
    for point in EXTENSION_POINT_TABLE:
        assert [r.name for r in parsed.at(point.key).enabled] == ["X"]
    fw = Framework("p", PluginLayout.every_point([NeedsLabel]), {}, None, _NoMetrics())
    assert list(fw.by_point) == names
    assert [n for n, _ in fw.by_point["Filter"]] == ["NeedsLabel"]


class _NoMetrics:
    def observe_plugin(self, *args: Any) -> None:
        pass


def test_args_are_validated_into_the_declared_type_even_when_given_raw() -> None:
    plugin = NeedsLabel({"label": "zone"}, None)  # type: ignore[arg-type]
    assert isinstance(plugin.args, LabelArgs)
    assert plugin.args.label == "zone"
    with pytest.raises(ValueError, match="label"):
        NeedsLabel({"label": 3}, None)  # type: ignore[arg-type]


def test_args_that_disagree_with_the_type_argument_are_refused_at_class_definition() -> None:
    class Other(PluginArgs):
        pass

    with pytest.raises(TypeError, match="generic over LabelArgs"):

        class Wrong(SchedulerPlugin[LabelArgs], FilterPlugin):
            name = "Wrong"
            Args = Other

            def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
                return Status.success()


def test_the_scheduler_closes_every_plugin_once_on_shutdown() -> None:
    NeedsLabel.closed.clear()
    h = SchedulerHarness([(NeedsLabel, {"label": "zone"})])
    h.add(make_node("a", labels={"zone": "z1"}))
    h.scheduler.close()
    h.scheduler.close()
    assert NeedsLabel.closed == ["zone"]


class Counting(DeschedulerPlugin[LabelArgs], BalancePlugin):
    name = "Counting"
    Args = LabelArgs
    closed = 0

    def __init__(self, args: LabelArgs, handle: DeschedulerHandle) -> None:
        super().__init__(args, handle)

    def balance(self, nodes: Any) -> Any:
        return None

    def close(self) -> None:
        Counting.closed += 1


def test_the_descheduler_closes_every_plugin_once_on_shutdown() -> None:
    Counting.closed = 0
    h = DeschedulerHarness([Counting])
    h.run_once()
    h.descheduler.close()
    h.descheduler.close()
    assert Counting.closed == 1


def test_shared_slots_are_per_profile_or_per_component() -> None:
    from koord_framework.cluster.memory import MemoryCluster
    from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler

    layout = PluginLayout.every_point([NeedsLabel])
    sched = Scheduler(MemoryCluster(), [ProfileSpec("a", layout), ProfileSpec("b", layout)])
    a, b = sched.handles["a"], sched.handles["b"]
    made: list[str] = []

    def make(tag: str) -> object:
        made.append(tag)
        return object()

    first = a.shared("index", lambda: make("a"))
    assert a.shared("index", lambda: make("again")) is first
    assert b.shared("index", lambda: make("b")) is not first
    registry_wide = a.shared("collectors", lambda: make("c"), scope="component")
    assert b.shared("collectors", lambda: make("never"), scope="component") is registry_wide
    assert made == ["a", "b", "c"]
    sched.close()
