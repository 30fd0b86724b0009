"""``KoordletConfiguration`` (koordlet.koordinator.sh/v1alpha1): the node agent's configuration, ours.

Koordinator configures its koordlet with flags and feature gates; a plugin platform needs a document that
names which QoS strategies and runtime hooks run, with their args, so this kind is new. It stays small: the
node, the collection and report intervals, host roots, the cgroup driver, strategies and hooks.

Nothing runs unless named: a strategy or hook that is installed but not listed stays off, as an unset
feature gate would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from koord_framework.config.common import (
    ConfigModel,
    Duration,
    NonEmptyStr,
    TypedConfig,
    socket_address_errors,
)
from koord_framework.config.documents import KOORDLET_API_VERSION, KOORDLET_KIND
from koord_framework.config.problems import PathPart, entry_selector, load_class, problem, validate_args
from koord_framework.errors import Problem
from koord_framework.plugin import Plugin, PluginArgs
from koord_framework.registry import PluginRegistry

API_VERSION = KOORDLET_API_VERSION
KIND = KOORDLET_KIND


class HostPaths(ConfigModel):
    """Where the koordlet finds the host's pseudo file systems (a container mounts them elsewhere)."""

    proc_root: str = "/proc"
    cgroup_root: str = "/sys/fs/cgroup"
    resctrl_root: str = "/sys/fs/resctrl"
    var_lib_kubelet_root: str = "/var/lib/kubelet"
    """kubelet's root dir, where its ``cpu_manager_state`` checkpoint is (``--var-lib-kubelet-root-dir``)."""

    @field_validator("proc_root", "cgroup_root", "resctrl_root", "var_lib_kubelet_root")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"must be an absolute path, got {v!r}")
        return v


class QoSStrategyConfig(ConfigModel):
    """One QoS strategy (``BECPUSuppress``, ``BEMemoryEvict``, ...) with its args."""

    name: NonEmptyStr
    enabled: bool = True
    """List a strategy with ``enabled: false`` to keep its args while switching it off."""
    args: dict[str, Any] | None = None


class RuntimeHooksConfig(ConfigModel):
    enabled: list[NonEmptyStr] = []
    """Hook providers to register (``GroupIdentity``, ``CPUSetAllocator``, ``BatchResource``, ...)."""
    failure_policy: Literal["Fail", "Ignore"] = "Ignore"
    """``Ignore`` logs a failing hook and lets the container start; ``Fail`` refuses the runtime request."""
    args: dict[NonEmptyStr, dict[str, Any]] = {}
    """Each hook's args by hook name (its ``enable`` switch, its own ``failurePolicy``, ...)."""


class KoordletConfiguration(TypedConfig):
    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = KIND

    node_name: str | None = None
    """The node this agent runs on; unset means the ``NODE_NAME`` environment variable at start-up."""
    collect_res_used_interval: Duration = Duration(1)
    """How often resource usage is sampled (Koordinator's ``CollectResUsedInterval``)."""
    report_interval: Duration = Duration(60)
    """How often the NodeMetric status is written."""
    metrics_address: str = ":9316"
    """``host:port`` of the Prometheus endpoint."""
    host_paths: HostPaths = HostPaths()
    cgroup_driver: Literal["cgroupfs", "systemd"] | None = None
    """Unset means detect it from the kubepods directory names."""
    qos_strategies: list[QoSStrategyConfig] = []
    runtime_hooks: RuntimeHooksConfig = RuntimeHooksConfig()

    @field_validator("metrics_address")
    @classmethod
    def _listen_address(cls, v: str) -> str:
        errors = socket_address_errors(v)
        if errors:
            raise ValueError(errors[0])
        return v

    @field_validator("collect_res_used_interval", "report_interval")
    @classmethod
    def _positive(cls, v: Duration) -> Duration:
        if v <= 0:
            raise ValueError(f"must be greater than 0s, got {v.go_string()}")
        return v


@dataclass(frozen=True)
class ResolvedPlugin:
    """A configured plugin ready to instantiate: its class and validated args."""

    name: str
    cls: type[Plugin]
    args: PluginArgs


@dataclass(frozen=True)
class ResolvedKoordlet:
    qos_strategies: tuple[ResolvedPlugin, ...]
    """Enabled strategies, in configuration order."""
    disabled_strategies: tuple[str, ...]
    runtime_hooks: tuple[ResolvedPlugin, ...]


def resolve(
    cfg: KoordletConfiguration, qos: PluginRegistry, hooks: PluginRegistry
) -> tuple[ResolvedKoordlet, list[Problem]]:
    """Phase 2: every named strategy and hook installed, no duplicates, strategy args valid."""
    problems: list[Problem] = []
    strategies: list[ResolvedPlugin] = []
    disabled: list[str] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(cfg.qos_strategies):
        if entry.name in seen:
            problems.append(
                problem(
                    ["qosStrategies", i],
                    f'duplicate strategy "{entry.name}" (also qosStrategies[{seen[entry.name]}])',
                )
            )
            continue
        seen[entry.name] = i
        where: list[PathPart] = ["qosStrategies", entry_selector(entry.name)]
        cls = load_class(qos, entry.name, [*where, "name"], problems)
        if cls is None:
            continue
        args = validate_args(cls, entry.args, [*where, "args"], problems)
        if args is None:
            continue
        if entry.enabled:
            strategies.append(ResolvedPlugin(entry.name, cls, args))
        else:
            disabled.append(entry.name)
    hook_list: list[ResolvedPlugin] = []
    seen_hooks: set[str] = set()
    for i, name in enumerate(cfg.runtime_hooks.enabled):
        at: Sequence[PathPart] = ["runtimeHooks", "enabled", i]
        if name in seen_hooks:
            problems.append(problem(at, f'duplicate hook "{name}"'))
            continue
        seen_hooks.add(name)
        cls = load_class(hooks, name, at, problems)
        if cls is None:
            continue
        args = validate_args(cls, cfg.runtime_hooks.args.get(name), ["runtimeHooks", "args", name], problems)
        if args is not None:
            hook_list.append(ResolvedPlugin(name, cls, args))
    return ResolvedKoordlet(tuple(strategies), tuple(disabled), tuple(hook_list)), problems
