"""A plugin's args with every default filled in, as the YAML a user would write (camelCase, Go durations).

``koord profile defaults NAME`` prints this, so a user starts a ``pluginConfig`` entry from what the plugin
really does when left unconfigured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic import TypeAdapter

from koord_framework.plugin import Plugin


@dataclass(frozen=True)
class PluginDefaults:
    name: str
    args: dict[str, Any]
    """The args mapping with defaults (JSON-compatible values, camelCase keys)."""
    required: tuple[str, ...]
    """Keys without a default (shown as null in ``args``): the user must set them."""

    def as_plugin_config(self) -> dict[str, Any]:
        """A ready ``pluginConfig`` entry: ``{"name": ..., "args": {...}}``."""
        return {"name": self.name, "args": {"kind": f"{self.name}Args", **self.args}}


def plugin_defaults(cls: type[Plugin]) -> PluginDefaults:
    """The default args of ``cls``; model validators run, so derived defaults show as the plugin sees them."""
    try:
        args = cls.Args.model_validate({}).model_dump(mode="json", by_alias=True)
        return PluginDefaults(cls.name, args, ())
    except pydantic.ValidationError:
        pass
    # Some args have no complete default: show each field's own default, and null for the required ones.
    out: dict[str, Any] = {}
    required: list[str] = []
    for name, info in cls.Args.model_fields.items():
        if info.exclude:
            continue
        key = info.alias or name
        if info.is_required():
            out[key] = None
            required.append(key)
        else:
            value = info.get_default(call_default_factory=True)
            out[key] = TypeAdapter(Any if info.annotation is None else info.annotation).dump_python(
                value, mode="json", by_alias=True
            )
    return PluginDefaults(cls.name, out, tuple(required))
