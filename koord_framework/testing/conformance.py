"""Conformance base classes: subclass one in a plugin's tests and the platform's contracts are checked.

    class TestConformance(SchedulerPluginConformance):
        plugin_class = LoadAwareScheduling
        invalid_args = [{"usageThresholds": {"cpu": 101}}]

Checked for every plugin: the entry point exists under the plugin's group with the class's ``name``; the
default args validate; ``valid_args`` validate and ``invalid_args`` are refused; the args JSON schema builds;
the class implements at least one extension point. For scheduler plugins, additionally on seeded random
clusters: Filter/Score never raise, scores stay within [0, 100] after normalisation, and the vectorised forms
(``filter_all``/``score_all``) agree with the per-node forms exactly.
"""

from __future__ import annotations

import json
import random
from typing import Any, ClassVar

import pytest

from koord_framework.plugin import Plugin
from koord_framework.registry import GROUPS, PluginRegistry


class PluginConformance:
    plugin_class: ClassVar[type[Plugin]]
    group: ClassVar[str] = "scheduler"
    valid_args: ClassVar[list[dict[str, Any]]] = []
    invalid_args: ClassVar[list[dict[str, Any]]] = []
    require_entry_point: ClassVar[bool] = True
    """Set False for an in-tree example class that is deliberately not installed."""

    def test_entry_point_name_equals_class_name(self) -> None:
        if not self.require_entry_point:
            pytest.skip("plugin is not installed through an entry point")
        registry = PluginRegistry.discover(self.group)
        name = self.plugin_class.name
        assert name, "plugin class must set a non-empty `name`"
        assert name in registry, f"{name} is not registered under {GROUPS.get(self.group, self.group)}"
        assert registry.get(name) is self.plugin_class

    def test_default_args_validate(self) -> None:
        args = self.plugin_class.parse_args(None)
        assert isinstance(args, self.plugin_class.Args)

    def test_valid_args(self) -> None:
        for raw in self.valid_args:
            self.plugin_class.parse_args(raw)

    def test_invalid_args_rejected(self) -> None:
        from pydantic import ValidationError

        for raw in self.invalid_args:
            with pytest.raises(ValidationError):
                self.plugin_class.parse_args(raw)

    def test_args_are_frozen_and_strict(self) -> None:
        from pydantic import ValidationError

        with pytest.raises(ValidationError):
            self.plugin_class.parse_args({"noSuchFieldAnywhere": 1})

    def test_args_schema_builds(self) -> None:
        schema = self.plugin_class.Args.model_json_schema(by_alias=True)
        json.dumps(schema)
        assert schema.get("type") == "object"

    def test_implements_an_extension_point(self) -> None:
        assert self.plugin_class.extension_points(), "plugin implements no extension point"


class SchedulerPluginConformance(PluginConformance):
    """Adds behavioural checks on seeded random clusters through the ``SchedulerHarness``."""

    group: ClassVar[str] = "scheduler"
    harness_args: ClassVar[dict[str, Any] | None] = None
    """Args the behavioural checks run the plugin with (None: defaults)."""
    random_clusters: ClassVar[int] = 5
    extra_plugins: ClassVar[list[Any]] = []
    """Other plugins the harness needs alongside (classes or (class, args) pairs)."""

    def make_harness(self) -> Any:
        """The harness the behavioural checks use; override to pass ``now=`` or other options."""
        from koord_framework.testing.scheduler import SchedulerHarness

        plugin: Any = (self.plugin_class, self.harness_args) if self.harness_args else self.plugin_class
        return SchedulerHarness([plugin, *self.extra_plugins])

    def make_objects(self, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(objects to load, pending pods) of one random cluster; override to add the objects your plugin
        reads (NodeMetrics, CRDs). The default is ``koord_framework.testing.random_cluster``."""
        from koord_framework.testing import random_cluster

        return random_cluster(rng)

    def _clusters(self) -> list[tuple[Any, list[dict[str, Any]]]]:
        out = []
        for seed in range(self.random_clusters):
            harness = self.make_harness()
            objects, pending = self.make_objects(random.Random(seed))
            harness.add(*objects)
            out.append((harness, pending))
        return out

    def test_scores_in_range_and_vector_forms_agree(self) -> None:
        from koord_framework.scheduler.interface import FilterPlugin, ScorePlugin

        if not (issubclass(self.plugin_class, FilterPlugin) or issubclass(self.plugin_class, ScorePlugin)):
            pytest.skip("neither Filter nor Score")
        for harness, pending in self._clusters():
            for pod in pending:
                harness.check_vector_forms(pod, self.plugin_class.name)
                if issubclass(self.plugin_class, ScorePlugin):
                    for node, score in harness.normalized_scores(pod).items():
                        assert 0 <= score <= 100, f"{self.plugin_class.name} scored {node} {score}"
