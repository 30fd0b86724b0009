"""JSON Schema of the configuration kinds, with the args of the installed plugins.

Each ``pluginConfig`` entry (and each koordlet ``qosStrategies`` entry) gets one ``if name == X then args is
XArgs`` branch per installed plugin, so an editor checks args as the loader will. Plugin names are an enum of
what is installed. The schema describes shapes only; cross-field rules (one queue sort plugin, one evict
plugin, ...) are the loader's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from koord_framework.config.common import PluginConfig
from koord_framework.config.koordlet import QoSStrategyConfig
from koord_framework.config.loader import COMPONENTS, Component, model_for
from koord_framework.plugin import Plugin
from koord_framework.registry import PluginRegistry

DRAFT = "https://json-schema.org/draft/2020-12/schema"

RegistryProvider = Callable[[str], PluginRegistry]


def _discover(group: str) -> PluginRegistry:
    return PluginRegistry.discover(group)


def _plugin_branches(
    classes: Sequence[type[Plugin]], refs: dict[type[BaseModel], str]
) -> list[dict[str, Any]]:
    return [
        {
            "if": {"properties": {"name": {"const": cls.name}}, "required": ["name"]},
            "then": {"properties": {"args": {"anyOf": [{"$ref": refs[cls.Args]}, {"type": "null"}]}}},
        }
        for cls in classes
    ]


def component_schema(component: Component, registries: RegistryProvider = _discover) -> dict[str, Any]:
    """The JSON Schema of one kind (``scheduler``, ``descheduler``, ``koordlet``)."""
    model = model_for(component)
    group = "qos" if component == "koordlet" else component
    classes = list(registries(group).load_all().values())
    entry_model: type[BaseModel] = QoSStrategyConfig if component == "koordlet" else PluginConfig
    wanted: list[type[BaseModel]] = list(dict.fromkeys([model, entry_model, *(cls.Args for cls in classes)]))
    entries: list[tuple[type[BaseModel], Any]] = [(m, "validation") for m in wanted]
    keys, combined = models_json_schema(entries, by_alias=True, ref_template="#/$defs/{model}")
    refs = {m: str(keys[(m, "validation")]["$ref"]) for m, _ in entries}
    defs: dict[str, Any] = combined.get("$defs", {})
    top_name = refs[model].rsplit("/", 1)[-1]
    schema: dict[str, Any] = {"$schema": DRAFT, **copy.deepcopy(defs[top_name])}
    schema["$defs"] = {k: v for k, v in defs.items() if k != top_name}
    schema["properties"]["kind"] = {"const": model.KIND}
    schema["properties"]["apiVersion"] = {"const": model.API_VERSION}
    schema["required"] = ["apiVersion", "kind"]

    entry = schema["$defs"].get(refs[entry_model].rsplit("/", 1)[-1])
    if entry is not None:
        names = sorted(cls.name for cls in classes)
        if names:
            entry["properties"]["name"] = {"type": "string", "enum": names}
        entry["allOf"] = _plugin_branches(classes, refs)
    if component == "koordlet":
        hooks = registries("runtimehooks").names()
        hooks_def = schema["$defs"].get("RuntimeHooksConfig")
        if hooks and hooks_def is not None:
            hooks_def["properties"]["enabled"]["items"] = {"type": "string", "enum": hooks}
    return _retarget_self_refs(schema, top_name)


def _retarget_self_refs(schema: dict[str, Any], top_name: str) -> dict[str, Any]:
    """Refs to the top model (none today, but a recursive model would have them) point at the root."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: ("#" if k == "$ref" and v == f"#/$defs/{top_name}" else walk(v)) for k, v in node.items()
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result


def _namespaced(schema: dict[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(root without $defs, $defs) with every definition renamed ``prefix.Name`` so kinds do not collide."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str):
                    out[k] = f"#/$defs/{prefix}" if v == "#" else v.replace("#/$defs/", f"#/$defs/{prefix}.")
                else:
                    out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    body = {k: v for k, v in schema.items() if k not in ("$defs", "$schema")}
    defs = {f"{prefix}.{k}": walk(v) for k, v in schema.get("$defs", {}).items()}
    return walk(body), defs


def combined_schema(registries: RegistryProvider = _discover) -> dict[str, Any]:
    """One schema for any configuration file: the three kinds, told apart by ``kind``."""
    defs: dict[str, Any] = {}
    branches = []
    for component in COMPONENTS:
        body, sub = _namespaced(component_schema(component, registries), component)
        defs.update(sub)
        defs[component] = body
        branches.append({"$ref": f"#/$defs/{component}"})
    return {
        "$schema": DRAFT,
        "title": "koord configuration: KubeSchedulerConfiguration, DeschedulerConfiguration or "
        "KoordletConfiguration",
        "oneOf": branches,
        "$defs": defs,
    }
