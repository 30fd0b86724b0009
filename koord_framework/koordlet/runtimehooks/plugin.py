"""The base class of a runtime-hook provider (entry-point group ``koord.koordlet.runtimehooks``).

A provider is a plugin class subclassing ``RuntimeHook[MyArgs]`` whose methods named after the hook
specifications (``pre_run_pod_sandbox``, ``pre_create_container``, ...) are marked ``@hookimpl``. The
koordlet builds each enabled provider once with its typed args and a ``HookContext`` and registers it in
its own ``HookManager``; providers never call each other and never call ``pm.hook``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, cast

from prometheus_client import CollectorRegistry
from pydantic import Field

from koord_framework.cluster.clock import Clock, WallClock
from koord_framework.errors import KoordError
from koord_framework.koordlet.cgroups import CgroupLayout, CgroupReader
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.runtimehooks.protocol import FailurePolicy
from koord_framework.koordlet.states import NodeState
from koord_framework.plugin import ArgsT, ExtensionPoint, Plugin, PluginArgs

__all__ = ["HookContext", "HookError", "RuntimeHook", "RuntimeHookArgs"]


class HookError(KoordError):
    """A hook could not serve a request (bad annotation, missing host fact). The message names the field."""


class RuntimeHookArgs(PluginArgs):
    """Args every hook provider has: its own switch and its failure policy."""

    enable: bool = True
    """The hook's own switch, on top of the koordlet's feature gate for it (``--feature-gates``; the
    plugin's README names Koordinator's gate and its default): the hook runs when both are on."""
    failure_policy: FailurePolicy | None = Field(default=None)
    """``Fail``, ``Ignore`` or ``""`` (None); unset means the koordlet's ``runtimeHooks.failurePolicy``."""


@dataclass(slots=True)
class HookContext:
    """What a provider may use: the node's state, host paths, cgroup reads, the clock and a registry."""

    node_name: str
    host: HostPaths
    layout: CgroupLayout
    state_provider: Callable[[], NodeState]
    clock: Clock = field(default_factory=WallClock)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    @property
    def reader(self) -> CgroupReader:
        return CgroupReader(self.layout)

    @property
    def state(self) -> NodeState:
        return self.state_provider()


class RuntimeHook(Plugin[ArgsT], ExtensionPoint):
    """Base of every hook provider. Subclasses set ``name``, ``Args`` and mark their stage methods."""

    extension_point: ClassVar[str] = "RuntimeHook"
    feature_gate: ClassVar[str] = ""
    """Koordinator's koordlet feature gate for this hook (documentation until the gate module lands)."""

    def __init__(self, args: ArgsT, context: HookContext) -> None:
        self.args = cast(ArgsT, type(self).parse_args(args))
        self.context = context

    @property
    def enabled(self) -> bool:
        return bool(getattr(self.args, "enable", True))

    @property
    def failure_policy(self) -> FailurePolicy | None:
        value = getattr(self.args, "failure_policy", None)
        return FailurePolicy(value) if value is not None else None
