"""What every plugin of every group shares: a name, typed args, and the extension points it implements.

Extension points are ABCs that carry ``extension_point = "<Name>"``; a plugin class implements a point by
subclassing its ABC. The registry and ``koord plugins list`` read the implemented points from the MRO, so a
plugin never declares them twice.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class PluginArgs(BaseModel):
    """Base of every ``<PluginName>Args`` model.

    Frozen, unknown keys refused, camelCase aliases (the YAML spelling of Koordinator), and attribute
    docstrings that become the JSON schema's descriptions and the README's args table. ``apiVersion`` and
    ``kind`` are accepted because Koordinator's ConfigMaps put them inside every ``args`` block.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
    )

    api_version: str | None = Field(default=None, alias="apiVersion", exclude=True)
    """Ignored; Koordinator's ConfigMaps carry it inside args."""
    kind: str | None = Field(default=None, exclude=True)
    """Ignored; Koordinator's ConfigMaps carry it inside args."""


class NoArgs(PluginArgs):
    """For plugins that take no arguments."""


class ExtensionPoint:
    """Marker base of the extension-point ABCs of every group."""

    extension_point: ClassVar[str] = ""


class Plugin:
    """Base of every plugin class. Subclasses set ``name`` (equal to the entry-point name) and ``Args``."""

    name: ClassVar[str] = ""
    Args: ClassVar[type[PluginArgs]] = NoArgs

    @classmethod
    def extension_points(cls) -> list[str]:
        """The extension points this class implements, in MRO order, without duplicates."""
        seen: list[str] = []
        for klass in cls.__mro__:
            point = klass.__dict__.get("extension_point")
            if isinstance(point, str) and point and point not in seen:
                seen.append(point)
        return seen

    @classmethod
    def parse_args(cls, raw: Any) -> PluginArgs:
        """Validate raw args (a mapping, ``None`` or an already-built model) into ``cls.Args``."""
        if isinstance(raw, cls.Args):
            return raw
        return cls.Args.model_validate(raw or {})
