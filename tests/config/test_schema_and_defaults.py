"""The JSON Schema carries the installed plugins' args; defaults come out as the YAML a user would write."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from koord_framework.config.defaults import plugin_defaults
from koord_framework.config.schema import combined_schema, component_schema
from koord_framework.registry import PluginRegistry


def refs_in(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in refs_in(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs_in(v)]
    return []


def assert_refs_resolve(schema: dict[str, Any]) -> None:
    for ref in refs_in(schema):
        assert ref.startswith("#/$defs/") or ref == "#", ref
        if ref != "#":
            assert ref.removeprefix("#/$defs/") in schema["$defs"], ref


def test_scheduler_schema_ties_args_to_plugin_names(registries: dict[str, PluginRegistry]) -> None:
    schema = component_schema("scheduler", registries.__getitem__)
    json.dumps(schema)  # serialisable
    assert_refs_resolve(schema)
    assert schema["properties"]["kind"] == {"const": "KubeSchedulerConfiguration"}
    assert schema["properties"]["apiVersion"] == {"const": "kubescheduler.config.k8s.io/v1"}
    entry = schema["$defs"]["PluginConfig"]
    assert "LoadAwareScheduling" in entry["properties"]["name"]["enum"]
    branches = {b["if"]["properties"]["name"]["const"]: b["then"] for b in entry["allOf"]}
    assert set(branches) == set(registries["scheduler"].names())
    ref = branches["LoadAwareScheduling"]["properties"]["args"]["anyOf"][0]["$ref"]
    args_schema = schema["$defs"][ref.removeprefix("#/$defs/")]
    thresholds = args_schema["properties"]["usageThresholds"]
    assert thresholds["additionalProperties"]["maximum"] == 100
    assert args_schema["additionalProperties"] is False
    assert "Percent of allocatable" in thresholds["description"]


def test_durations_are_strings_in_the_schema(registries: dict[str, PluginRegistry]) -> None:
    schema = component_schema("descheduler", registries.__getitem__)
    assert schema["properties"]["deschedulingInterval"]["type"] == "string"
    lease = schema["$defs"]["LeaderElection"]["properties"]["leaseDuration"]
    assert lease["type"] == "string" and "pattern" in lease


def test_koordlet_schema_lists_strategies_and_hooks(registries: dict[str, PluginRegistry]) -> None:
    schema = component_schema("koordlet", registries.__getitem__)
    assert_refs_resolve(schema)
    entry = schema["$defs"]["QoSStrategyConfig"]
    assert entry["properties"]["name"]["enum"] == ["BECPUSuppress", "BEMemoryEvict"]
    hooks = schema["$defs"]["RuntimeHooksConfig"]["properties"]["enabled"]["items"]
    assert hooks["enum"] == ["BatchResource", "GroupIdentity"]


def test_combined_schema_keeps_the_kinds_apart(registries: dict[str, PluginRegistry]) -> None:
    schema = combined_schema(registries.__getitem__)
    assert_refs_resolve(schema)
    assert [b["$ref"] for b in schema["oneOf"]] == [
        "#/$defs/scheduler",
        "#/$defs/descheduler",
        "#/$defs/koordlet",
    ]
    sched = schema["$defs"]["scheduler.PluginConfig"]["properties"]["name"]["enum"]
    desched = schema["$defs"]["descheduler.PluginConfig"]["properties"]["name"]["enum"]
    assert "LoadAwareScheduling" in sched and "LoadAwareScheduling" not in desched
    assert "MigrationController" in desched


def test_schema_accepts_the_koordinator_configmap_content(
    registries: dict[str, PluginRegistry], data_dir: Path
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = yaml.safe_load((data_dir / "koordinator-scheduler-configmap.yaml").read_text())
    inner = yaml.safe_load(doc["data"]["koord-scheduler-config"])
    jsonschema.validate(inner, component_schema("scheduler", registries.__getitem__))


def test_defaults_use_yaml_names_and_go_durations(fakes: ModuleType) -> None:
    result = plugin_defaults(fakes.LoadAwareScheduling)
    assert result.required == ()
    assert result.args == {
        "filterExpiredNodeMetrics": True,
        "nodeMetricExpirationSeconds": 180,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "usageThresholds": {"cpu": 65, "memory": 95},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    }
    assert result.as_plugin_config()["args"]["kind"] == "LoadAwareSchedulingArgs"


def test_defaults_show_required_fields_as_null(fakes: ModuleType) -> None:
    result = plugin_defaults(fakes.NeedsTarget)
    assert result.args == {"target": None}
    assert result.required == ("target",)


def test_defaults_render_durations_as_go_strings(fakes: ModuleType) -> None:
    from koord_framework.config.common import Duration
    from koord_framework.plugin import PluginArgs

    class TimedArgs(PluginArgs):
        detector_cache_timeout: Duration = Duration(300)
        """How long anomaly detectors are cached."""

    cls = fakes.make_plugin("Timed", ["Filter"], TimedArgs)
    assert plugin_defaults(cls).args == {"detectorCacheTimeout": "5m0s"}
