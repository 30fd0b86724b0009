"""Koordinator's ``DeschedulerConfiguration`` (descheduler/v1alpha2) and a profile's effective plugins.

Defaulting follows Koordinator's ``SetDefaults_DeschedulerConfiguration``: no profiles → one; a lone unnamed
profile → ``koord-descheduler``; the default plugin set (evict and filter: ``MigrationController``) merged
per extension point as kube-scheduler merges (``disabled: [*]`` drops the defaults, a disabled default is
dropped, a default also enabled is re-configured in place, the rest is appended). Exactly one evict plugin
must remain.

As for the scheduler, a default plugin that is not installed is left out and reported as a skipped default;
a plugin the profile names must be installed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import field_validator, model_validator

from koord_framework.config.common import (
    ClientConnection,
    ConfigModel,
    Duration,
    LabelSelector,
    LeaderElection,
    NonEmptyStr,
    PluginConfig,
    TypedConfig,
    UInt,
    apply_profile_defaults,
    default_contention_profiling,
    socket_address_errors,
    split_host_port,
)
from koord_framework.config.documents import DESCHEDULER_API_VERSION, DESCHEDULER_KIND
from koord_framework.config.problems import PathPart, load_class, not_implemented_message, problem
from koord_framework.config.scheduler import merge_entries
from koord_framework.errors import Problem
from koord_framework.plugin import Plugin
from koord_framework.registry import PluginRegistry

API_VERSION = DESCHEDULER_API_VERSION
KIND = DESCHEDULER_KIND
DEFAULT_PROFILE_NAME = "koord-descheduler"
DEFAULT_PORT = 10251
DEFAULT_BIND_ADDRESS = f"0.0.0.0:{DEFAULT_PORT}"

EXTENSION_POINTS: dict[str, str] = {
    "deschedule": "Deschedule",
    "balance": "Balance",
    "evict": "Evict",
    "filter": "Filter",
}
"""Profile key -> extension-point name. Deschedule then Balance run per cycle; Evict and Filter serve them."""


class DeschedulerPluginRef(ConfigModel):
    """A plugin by name (descheduler plugins have no weight)."""

    name: NonEmptyStr


class DeschedulerPluginSet(ConfigModel):
    enabled: list[DeschedulerPluginRef] = []
    disabled: list[DeschedulerPluginRef] = []
    """Default plugins not to run here; ``- name: "*"`` drops every default of this point."""


class DeschedulerPlugins(ConfigModel):
    deschedule: DeschedulerPluginSet = DeschedulerPluginSet()
    """Per-node strategies that evict pods breaking a rule."""
    balance: DeschedulerPluginSet = DeschedulerPluginSet()
    """Whole-cluster strategies that move pods to even out load (``LowNodeLoad``)."""
    evict: DeschedulerPluginSet = DeschedulerPluginSet()
    """How pods are evicted; exactly one plugin."""
    filter: DeschedulerPluginSet = DeschedulerPluginSet()
    """Which pods may be evicted; all filter plugins must agree."""

    def at(self, key: str) -> DeschedulerPluginSet:
        return getattr(self, key)  # type: ignore[no-any-return]


class DeschedulerProfile(ConfigModel):
    name: str = ""
    plugin_config: list[PluginConfig] = []
    plugins: DeschedulerPlugins | None = None
    node_selector: LabelSelector | None = None
    """Nodes this profile works on; unset means every node the top-level selector allows."""


def _normalise_bind_address(address: str) -> str:
    """Koordinator's defaulting: ``":p"`` → ``"0.0.0.0:p"``, a bare IP gets the default port."""
    try:
        host, port = split_host_port(address)
    except ValueError:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return address  # left for validation to report
        return f"[{ip}]:{DEFAULT_PORT}" if ip.version == 6 else f"{ip}:{DEFAULT_PORT}"
    host = host or "0.0.0.0"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def default_profiles(data: Any) -> Any:
    """Koordinator's profile defaulting on raw input: none → one; a lone unnamed one → koord-descheduler."""
    return apply_profile_defaults(data, "name", DEFAULT_PROFILE_NAME, unset=(None, ""))


class DeschedulerConfiguration(TypedConfig):
    """koord-descheduler's configuration file, with Koordinator's defaults applied on load."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = KIND

    leader_election: LeaderElection = LeaderElection(
        resource_namespace="koordinator-system", resource_name="koord-descheduler"
    )
    client_connection: ClientConnection = ClientConnection()
    enable_profiling: bool = True
    enable_contention_profiling: bool | None = None
    """Defaults to ``enableProfiling``."""
    healthz_bind_address: str = DEFAULT_BIND_ADDRESS
    """``host:port`` of the health endpoint."""
    metrics_bind_address: str = DEFAULT_BIND_ADDRESS
    """``host:port`` of the metrics endpoint."""
    descheduling_interval: Duration = Duration(0)
    """Time between descheduling cycles; 0 runs one cycle and stops."""
    dry_run: bool = False
    """Decide and log evictions without evicting."""
    profiles: list[DeschedulerProfile] = []
    node_selector: LabelSelector | None = None
    """Only nodes matching this selector are descheduled."""
    max_no_of_pods_to_evict_per_node: UInt | None = None
    """Evictions per node per cycle; unset means unlimited."""
    max_no_of_pods_to_evict_per_namespace: UInt | None = None
    """Evictions per namespace per cycle; unset means unlimited."""
    max_no_of_pods_to_evict_total: UInt | None = None
    """Evictions per cycle; unset means unlimited."""

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        return default_contention_profiling(default_profiles(data))

    @field_validator("leader_election")
    @classmethod
    def _lock_object(cls, v: LeaderElection) -> LeaderElection:
        return v.with_lock_object("koordinator-system", DEFAULT_PROFILE_NAME)

    @field_validator("healthz_bind_address", "metrics_bind_address")
    @classmethod
    def _bind_address(cls, v: str) -> str:
        return _normalise_bind_address(v)


# --- effective plugins ------------------------------------------------------------------------------


def _ref(name: str) -> DeschedulerPluginRef:
    return DeschedulerPluginRef(name=name)


DEFAULT_PLUGINS = DeschedulerPlugins(
    evict=DeschedulerPluginSet(enabled=[_ref("MigrationController")]),
    filter=DeschedulerPluginSet(enabled=[_ref("MigrationController")]),
)
"""Koordinator's defaults: MigrationController evicts (through PodMigrationJobs) and filters."""


def merge_plugins(default: DeschedulerPlugins, custom: DeschedulerPlugins | None) -> DeschedulerPlugins:
    """Koordinator's ``mergePlugins``: per point, the merged enabled list (disabled names are consumed)."""
    if custom is None:
        return default
    merged: dict[str, DeschedulerPluginSet] = {}
    for key in EXTENSION_POINTS:
        d, c = default.at(key), custom.at(key)
        disabled = {p.name for p in c.disabled}
        entries = merge_entries(d.enabled, c.enabled, disabled, lambda p: p.name)
        merged[key] = DeschedulerPluginSet(enabled=[e for e, _ in entries])
    return DeschedulerPlugins(**merged)


@dataclass(frozen=True)
class EffectiveDeschedulerPlugins:
    points: Mapping[str, tuple[str, ...]]
    """Profile key (``balance``) -> plugin names in call order."""
    skipped_defaults: tuple[str, ...]
    needed: tuple[str, ...]
    classes: Mapping[str, type[Plugin]] = field(default_factory=dict)

    @property
    def evictor(self) -> str | None:
        evict = self.points.get("evict", ())
        return evict[0] if len(evict) == 1 else None


def resolve_plugins(
    profile: DeschedulerProfile,
    registry: PluginRegistry,
    where: Sequence[PathPart] = ("profiles", 0),
    defaults: DeschedulerPlugins = DEFAULT_PLUGINS,
) -> tuple[EffectiveDeschedulerPlugins, list[Problem]]:
    problems: list[Problem] = []
    custom = profile.plugins or DeschedulerPlugins()
    plugins_path = [*where, "plugins"]
    classes: dict[str, type[Plugin]] = {}
    skipped: list[str] = []
    points: dict[str, tuple[str, ...]] = {}
    troubled: set[str] = set()
    needed: list[str] = []
    for key, point in EXTENSION_POINTS.items():
        d, c = defaults.at(key), custom.at(key)
        disabled = {p.name for p in c.disabled}
        names: list[str] = []
        for ref, idx in merge_entries(d.enabled, c.enabled, disabled, lambda p: p.name):
            at: list[PathPart] = [*plugins_path, key] if idx is None else [*plugins_path, key, "enabled", idx]
            if idx is None and ref.name not in registry:
                if ref.name not in skipped:
                    skipped.append(ref.name)
                continue
            cls = classes.get(ref.name) or load_class(registry, ref.name, at, problems)
            if cls is None:
                troubled.add(key)
                continue
            classes[ref.name] = cls
            implemented = cls.extension_points()
            if point not in implemented:
                problems.append(problem(at, not_implemented_message(ref.name, point, implemented)))
                troubled.add(key)
            elif ref.name in names:
                problems.append(problem(at, f'plugin "{ref.name}" is already registered at {key}'))
                troubled.add(key)
            else:
                names.append(ref.name)
                if ref.name not in needed:
                    needed.append(ref.name)
        points[key] = tuple(names)
    if "evict" not in troubled:
        if not points["evict"]:
            hint = (
                f" (default {', '.join(skipped)} is not installed)"
                if "MigrationController" in skipped
                else ""
            )
            problems.append(problem([*plugins_path, "evict"], f"no evict plugin is enabled{hint}"))
        elif len(points["evict"]) > 1:
            problems.append(
                problem(
                    [*plugins_path, "evict"],
                    f"only one evict plugin can be enabled, got {len(points['evict'])} "
                    f"({', '.join(points['evict'])})",
                )
            )
    result = EffectiveDeschedulerPlugins(
        points=points, skipped_defaults=tuple(skipped), needed=tuple(needed), classes=dict(classes)
    )
    return result, problems


def configuration_problems(cfg: DeschedulerConfiguration) -> list[Problem]:
    """Koordinator's ``ValidateDeschedulerConfiguration`` checks beyond field shapes."""
    out: list[Problem] = [problem(["leaderElection", f], m) for f, m in cfg.leader_election.problems()]
    out += [problem(["healthzBindAddress"], m) for m in socket_address_errors(cfg.healthz_bind_address)]
    out += [problem(["metricsBindAddress"], m) for m in socket_address_errors(cfg.metrics_bind_address)]
    if cfg.descheduling_interval < 0:
        out.append(problem(["deschedulingInterval"], "must not be negative (0 runs one cycle)"))
    if cfg.node_selector is not None:
        out += [problem(["nodeSelector", *p], m) for p, m in cfg.node_selector.problems()]
    seen: dict[str, int] = {}
    for i, prof in enumerate(cfg.profiles):
        if not prof.name:
            out.append(problem(["profiles", i, "name"], "required when there is more than one profile"))
        elif prof.name in seen:
            out.append(
                problem(
                    ["profiles", i, "name"], f'duplicate "{prof.name}" (also profiles[{seen[prof.name]}])'
                )
            )
        else:
            seen[prof.name] = i
        if prof.node_selector is not None:
            out += [problem(["profiles", i, "nodeSelector", *p], m) for p, m in prof.node_selector.problems()]
    return out
