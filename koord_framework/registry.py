"""The plugin registry: stevedore loads the classes a profile names, one entry-point group at a time.

One ``PluginRegistry`` per group per framework instance; there is no module-global registry. Tests and
third-party harnesses build registries from classes directly with ``PluginRegistry.from_classes``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from stevedore import ExtensionManager, NamedExtensionManager
from stevedore.extension import Extension

from koord_framework.errors import DuplicatePluginError, PluginLoadError, UnknownPluginError
from koord_framework.plugin import Plugin

GROUPS: dict[str, str] = {
    "scheduler": "koord.scheduler.plugins",
    "descheduler": "koord.descheduler.plugins",
    "qos": "koord.koordlet.qos",
    "runtimehooks": "koord.koordlet.runtimehooks",
    "noderesource": "koord.manager.noderesource",
    "webhooks": "koord.manager.webhooks",
    "controllers": "koord.manager.controllers",
}
"""Short component name -> entry-point group."""


@dataclass(frozen=True)
class PluginInfo:
    """What ``koord plugins list`` shows of one installed plugin."""

    name: str
    group: str
    extension_points: list[str]
    distribution: str
    version: str
    module: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "extensionPoints": self.extension_points,
            "distribution": self.distribution,
            "version": self.version,
            "module": self.module,
        }


@dataclass
class _Source:
    """Where a registered plugin comes from: an entry point, or a class registered in process."""

    entry_point: metadata.EntryPoint | None
    known: tuple[str, str] | None = None
    """(distribution, version) when given; else read from the entry point's distribution on first use:
    parsing every distribution's metadata at discovery was a tenth of loading a profile (start-up)."""
    cls: type[Plugin] | None = None

    @property
    def distribution(self) -> str:
        return self._dist()[0]

    @property
    def version(self) -> str:
        return self._dist()[1]

    def _dist(self) -> tuple[str, str]:
        if self.known is None:
            self.known = _dist_of(self.entry_point) if self.entry_point is not None else ("<unknown>", "")
        return self.known


def _dist_of(ep: metadata.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ("<unknown>", "")
    return (dist.metadata["Name"] or "<unknown>", dist.version or "")


class PluginRegistry:
    """The installed plugins of one entry-point group."""

    def __init__(self, group: str, sources: Mapping[str, _Source]) -> None:
        self.group = group
        self._sources = dict(sources)
        self._loaded: dict[str, type[Plugin]] = {
            name: src.cls for name, src in self._sources.items() if src.cls is not None
        }

    # --- construction -------------------------------------------------------------------------------
    @classmethod
    def discover(cls, group: str) -> PluginRegistry:
        """Index the entry points of ``group`` without importing them.

        Two distributions claiming one name is an error naming both. The same distribution listed twice
        (a path on ``sys.path`` twice) is not.
        """
        group = GROUPS.get(group, group)
        found: dict[str, list[metadata.EntryPoint]] = {}
        for ep in metadata.entry_points(group=group):
            found.setdefault(ep.name, []).append(ep)
        sources: dict[str, _Source] = {}
        for name, eps in found.items():
            if len(eps) == 1:
                sources[name] = _Source(eps[0])  # its distribution is read when someone asks
                continue
            claims: list[tuple[metadata.EntryPoint, str, str]] = []
            for ep in eps:
                dist, ver = _dist_of(ep)
                if not any(d == dist and e.value == ep.value for e, d, _ in claims):
                    claims.append((ep, dist, ver))
            if len(claims) > 1:
                raise DuplicatePluginError(group, name, [f"{d} {v} ({e.value})" for e, d, v in claims])
            ep, dist, ver = claims[0]
            sources[name] = _Source(ep, (dist, ver))
        return cls(group, sources)

    @classmethod
    def from_classes(cls, group: str, classes: Iterable[type[Plugin]]) -> PluginRegistry:
        """A registry of in-process classes (tests, harnesses); no entry points involved."""
        group = GROUPS.get(group, group)
        sources: dict[str, _Source] = {}
        for klass in classes:
            if klass.name in sources:
                raise DuplicatePluginError(
                    group, klass.name, [klass.__module__, sources[klass.name].distribution]
                )
            sources[klass.name] = _Source(None, (klass.__module__, ""), cls=klass)
        return cls(group, sources)

    def with_classes(self, classes: Iterable[type[Plugin]]) -> PluginRegistry:
        """This registry plus in-process classes (a test adding a fake plugin to the installed ones)."""
        extra = PluginRegistry.from_classes(self.group, classes)
        for name in extra._sources:
            if name in self._sources:
                raise DuplicatePluginError(
                    self.group, name, [self._sources[name].distribution, extra._sources[name].distribution]
                )
        return PluginRegistry(self.group, {**self._sources, **extra._sources})

    # --- queries ------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return sorted(self._sources)

    def __contains__(self, name: object) -> bool:
        return name in self._sources

    def distribution(self, name: str) -> tuple[str, str]:
        src = self._require(name)
        return src.distribution, src.version

    def get(self, name: str) -> type[Plugin]:
        """The plugin class called ``name``, imported on first use."""
        if name in self._loaded:
            return self._loaded[name]
        self._require(name)
        self.load([name])
        return self._loaded[name]

    def load(self, names: Sequence[str]) -> list[type[Plugin]]:
        """Import the named plugins through stevedore, in the given order.

        Unknown names raise ``UnknownPluginError`` listing what is installed; an import failure raises
        ``PluginLoadError`` with the distribution and the exception (never a bare traceback).
        """
        for name in names:
            self._require(name)
        missing = [n for n in dict.fromkeys(names) if n not in self._loaded]
        if missing:
            failures: list[tuple[str, BaseException]] = []

            def on_failure(_mgr: Any, ep: metadata.EntryPoint, exc: BaseException) -> None:
                failures.append((ep.name, exc))

            # stevedore keeps a process-wide, never-invalidated cache of each group's entry points; drop
            # this group's entry so stevedore sees exactly what ``discover`` indexed (a distribution
            # installed after the first load would otherwise stay invisible for the process's lifetime).
            ExtensionManager.ENTRY_POINT_CACHE.pop(self.group, None)
            mgr = NamedExtensionManager(
                self.group,
                names=missing,
                name_order=True,
                invoke_on_load=False,
                on_load_failure_callback=on_failure,
                on_missing_entrypoints_callback=None,
            )
            if failures:
                name, exc = failures[0]
                raise PluginLoadError(self.group, name, self._sources[name].distribution, exc)
            for ext in mgr.extensions:
                self._loaded[ext.name] = self._check(ext.name, ext.plugin)
        return [self._loaded[n] for n in names]

    def load_all(self) -> dict[str, type[Plugin]]:
        self.load(self.names())
        return dict(self._loaded)

    def describe(self) -> list[PluginInfo]:
        """One ``PluginInfo`` per installed plugin (imports them to read their extension points)."""
        out = []
        for name in self.names():
            klass = self.get(name)
            src = self._sources[name]
            out.append(
                PluginInfo(
                    name=name,
                    group=self.group,
                    extension_points=klass.extension_points(),
                    distribution=src.distribution,
                    version=src.version,
                    module=klass.__module__,
                )
            )
        return out

    # --- internals ----------------------------------------------------------------------------------
    def _require(self, name: str) -> _Source:
        src = self._sources.get(name)
        if src is None:
            raise UnknownPluginError(self.group, name, self.names())
        return src

    def _check(self, name: str, obj: Any) -> type[Plugin]:
        src = self._sources[name]
        if not (isinstance(obj, type) and issubclass(obj, Plugin)):
            raise PluginLoadError(
                self.group,
                name,
                src.distribution,
                TypeError(f"{obj!r} is not a koord_framework Plugin class"),
            )
        if obj.name != name:
            raise PluginLoadError(
                self.group,
                name,
                src.distribution,
                ValueError(f"entry-point name {name!r} differs from the class's name {obj.name!r}"),
            )
        return obj


def make_test_manager(classes: Iterable[type[Plugin]], group: str) -> ExtensionManager[Any]:
    """A stevedore manager over in-process classes, for code that wants the stevedore API in tests."""
    namespace = GROUPS.get(group, group)
    exts = [
        Extension(c.name, metadata.EntryPoint(c.name, f"{c.__module__}:{c.__qualname__}", namespace), c, None)
        for c in classes
    ]
    return ExtensionManager.make_test_instance(exts, namespace=namespace)
