"""What every plugin of every group shares: a name, typed args, and the extension points it implements.

Extension points are ABCs that carry ``extension_point = "<Name>"``; a plugin class implements a point by
subclassing its ABC. The registry and ``koord plugins list`` read the implemented points from the MRO, so a
plugin never declares them twice.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from typing_extensions import TypeVar

from koord_framework.attribute_docs import install as _install_attribute_docs

_install_attribute_docs()  # before the first model: class creation reads attribute docstrings


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


ArgsT = TypeVar("ArgsT", bound=PluginArgs, default=PluginArgs)
"""A plugin's args type: ``class MyPlugin(SchedulerPlugin[MyArgs], FilterPlugin)`` types ``self.args``."""


class Plugin(Generic[ArgsT]):
    """Base of every plugin class. Subclasses set ``name`` (equal to the entry-point name) and ``Args``.

    Generic over its args type: a plugin that subclasses ``SchedulerPlugin[MyArgs]`` (or the descheduler's,
    the koordlet's base) and sets ``Args = MyArgs`` gets ``self.args: MyArgs``, validated by the base
    constructor, with no ``isinstance`` check of its own. The class is refused at definition time when
    ``Args`` is not the type argument (or a subclass of it).
    """

    name: ClassVar[str] = ""
    Args: ClassVar[type[PluginArgs]] = NoArgs
    args: ArgsT

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = _declared_args(cls)
        if declared is not None and "Args" in cls.__dict__ and not issubclass(cls.Args, declared):
            raise TypeError(
                f"{cls.__name__}.Args is {cls.Args.__name__}, but the class is generic over "
                f"{declared.__name__}: make them agree"
            )

    def close(self) -> None:
        """Release what the plugin holds (threads, watches, handlers); the framework calls it once when the
        component shuts down, in reverse construction order. Default: nothing to release."""

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


def _declared_args(cls: type) -> type[PluginArgs] | None:
    """The args type a class gave ``Plugin``'s parameter (``SchedulerPlugin[MyArgs]``), if any."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            origin = get_origin(base)
            if isinstance(origin, type) and issubclass(origin, Plugin):
                for arg in get_args(base):
                    if isinstance(arg, type) and issubclass(arg, PluginArgs):
                        return arg
    return None


def close_plugins(plugins: Mapping[str, Plugin[Any]], where: str) -> None:
    """``close()`` on each plugin in reverse order (the order components shut down in); a failure is logged
    and the rest still close. The runtime's, for the components' shutdown."""
    for name, plugin in reversed(list(plugins.items())):
        try:
            plugin.close()
        except Exception:
            logging.getLogger(__name__).exception("%s: closing plugin %s failed", where, name)
