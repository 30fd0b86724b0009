"""``KubeSchedulerConfiguration`` (kubescheduler.config.k8s.io/v1) and how a profile's plugins come to be.

Fields and defaults follow ``k8s.io/kube-scheduler/config/v1`` as of Kubernetes 1.35 (the version Koordinator
builds against). The fields that v1 dropped (``healthzBindAddress``, ``metricsBindAddress``) are unknown keys
here, as they are to kube-scheduler.

A profile's plugins are computed in three steps, each as kube-scheduler does it:

1. ``merge_plugins``: the default set (every default plugin under ``multiPoint``) merged with the profile's
   ``plugins`` per extension point — ``disabled: [*]`` drops the defaults, a disabled default is dropped, a
   default that is also enabled is re-configured in place (keeps its position, takes the new weight), and the
   remaining enabled plugins are appended in order.
2. Each specific extension point's ``enabled`` list is taken as given (a plugin must implement the point, and
   may appear once).
3. ``multiPoint`` is expanded into every point its plugins implement, unless that point disables ``*`` or
   the plugin; a plugin also named at the specific point keeps that configuration and runs first. Order per
   point: such overrides, then multiPoint plugins, then the point's other plugins.

Not every Kubernetes plugin exists in this platform (volume plugins, ImageLocality, SchedulingGates, ...).
A *default* plugin that is not installed is dropped and reported in ``EffectivePlugins.skipped_defaults``;
a plugin the profile itself names must be installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import Field, create_model, field_validator, model_validator

from koord_framework.config.common import (
    ClientConnection,
    ConfigModel,
    Duration,
    LeaderElection,
    NonEmptyStr,
    PluginConfig,
    PluginRef,
    PluginSet,
    TypedConfig,
    apply_profile_defaults,
    default_contention_profiling,
    qualified_name_errors,
)
from koord_framework.config.documents import SCHEDULER_API_VERSION, SCHEDULER_KIND
from koord_framework.config.legacy import V1BETA2_SCORE_WEIGHTS
from koord_framework.config.problems import PathPart, load_class, not_implemented_message, problem
from koord_framework.errors import Problem, ValidationError
from koord_framework.plugin import Plugin
from koord_framework.registry import PluginRegistry
from koord_framework.scheduler.interface import EXTENSION_POINT_TABLE, PROFILE_KEYS

API_VERSION = SCHEDULER_API_VERSION
KIND = SCHEDULER_KIND
DEFAULT_SCHEDULER_NAME = "default-scheduler"

EXTENSION_POINTS: dict[str, str] = dict(PROFILE_KEYS)
"""Profile key -> extension-point name (what plugin classes declare), in kube-scheduler's call order; from
the one table of extension points (``scheduler.interface.EXTENSION_POINT_TABLE``)."""

MULTI_POINT = "multiPoint"

INVALID_PLUGINS: frozenset[str] = frozenset({"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"})
"""Plugins removed from kube-scheduler; kube-scheduler v1 refuses a profile naming them."""


class _PluginsBase(ConfigModel):
    def at(self, key: str) -> PluginSet:
        """The set under a profile key (``preFilter``, ``multiPoint``)."""
        found: PluginSet = getattr(self, _ATTR[key])
        return found


if TYPE_CHECKING:

    class Plugins(_PluginsBase):
        """The plugins of a profile, per extension point (kube-scheduler's ``v1.Plugins``)."""

        multi_point: PluginSet

        def __init__(self, **points: PluginSet) -> None: ...

else:
    # One field per row of the extension-point table, plus multiPoint: a new point needs no edit here.
    Plugins = create_model(
        "Plugins",
        __base__=_PluginsBase,
        __doc__="The plugins of a profile, per extension point (kube-scheduler's ``v1.Plugins``).",
        __module__=__name__,
        **{
            point.field: (PluginSet, Field(default=PluginSet(), description=point.doc))
            for point in EXTENSION_POINT_TABLE
        },
        multi_point=(
            PluginSet,
            Field(
                default=PluginSet(),
                description="Enables a plugin at every extension point it implements; specific points take "
                "precedence.",
            ),
        ),
    )


_ATTR: dict[str, str] = {(info.alias or name): name for name, info in Plugins.model_fields.items()}


class KubeSchedulerProfile(ConfigModel):
    """One scheduling profile; pods choose it with ``spec.schedulerName``."""

    scheduler_name: str | None = None
    """Matched against a pod's ``spec.schedulerName``; a lone profile defaults to ``default-scheduler``."""
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    """Overrides the top-level value for this profile (0 means adaptive)."""
    plugins: Plugins | None = None
    plugin_config: list[PluginConfig] = []
    """Arguments per plugin; a plugin without an entry runs with its defaults."""


class ExtenderManagedResource(ConfigModel):
    name: NonEmptyStr
    ignored_by_scheduler: bool = False


class ExtenderTLSConfig(ConfigModel):
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = Field(default="", alias="caFile")
    cert_data: str = ""
    """Base64 of a PEM client certificate (Go ``[]byte``)."""
    key_data: str = ""
    ca_data: str = Field(default="", alias="caData")


class Extender(ConfigModel):
    """An HTTP scheduler extender (kept for fidelity: the platform does not call extenders)."""

    url_prefix: NonEmptyStr
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = Field(default=False, alias="enableHTTPS")
    tls_config: ExtenderTLSConfig | None = None
    http_timeout: Duration = Duration(0)
    node_cache_capable: bool = False
    managed_resources: list[ExtenderManagedResource] = []
    ignorable: bool = False


def default_profiles(data: Any) -> Any:
    """kube-scheduler's profile defaulting on raw input: none → one; a lone unnamed one → default name."""
    return apply_profile_defaults(data, "schedulerName", DEFAULT_SCHEDULER_NAME)


class KubeSchedulerConfiguration(TypedConfig):
    """kube-scheduler's configuration file, with kube-scheduler's defaults applied on load."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = KIND

    parallelism: int = Field(default=16, gt=0, le=2**31 - 1)
    """Worker count for the per-node phases (Filter, Score)."""
    leader_election: LeaderElection = LeaderElection(
        resource_namespace="kube-system", resource_name="kube-scheduler"
    )
    client_connection: ClientConnection = ClientConnection()
    enable_profiling: bool = True
    enable_contention_profiling: bool | None = None
    """Defaults to ``enableProfiling``."""
    percentage_of_nodes_to_score: int = Field(default=0, ge=0, le=100)
    """Stop looking for feasible nodes after this percentage of the cluster; 0 means adaptive (5%–50%)."""
    pod_initial_backoff_seconds: int = Field(default=1, gt=0, le=2**63 - 1)
    """First retry delay for an unschedulable pod, in seconds."""
    pod_max_backoff_seconds: int = Field(default=10, gt=0, le=2**63 - 1)
    """Longest retry delay for an unschedulable pod, in seconds; must be >= podInitialBackoffSeconds."""
    profiles: list[KubeSchedulerProfile] = []
    extenders: list[Extender] = []
    delay_cache_until_active: bool = False
    """Fill caches only after winning leader election (slower fail-over, less memory on standbys)."""

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        return default_contention_profiling(default_profiles(data))

    @field_validator("leader_election")
    @classmethod
    def _lock_object(cls, v: LeaderElection) -> LeaderElection:
        return v.with_lock_object("kube-system", "kube-scheduler")


# --- the default plugin set and the merge ---------------------------------------------------------


def _p(name: str, weight: int | None = None) -> PluginRef:
    return PluginRef(name=name, weight=weight)


DEFAULT_PLUGINS = Plugins(
    multi_point=PluginSet(
        enabled=[
            _p("SchedulingGates"),
            _p("PrioritySort"),
            _p("NodeUnschedulable"),
            _p("NodeName"),
            _p("TaintToleration", 3),
            _p("NodeAffinity", 2),
            _p("NodePorts"),
            _p("NodeResourcesFit", 1),
            _p("VolumeRestrictions"),
            _p("NodeVolumeLimits"),
            _p("VolumeBinding"),
            _p("VolumeZone"),
            _p("PodTopologySpread", 2),
            _p("InterPodAffinity", 2),
            # The DynamicResourceAllocation gate is on by default since 1.34, which inserts this plugin
            # before DefaultPreemption (freeing an idle claim beats evicting a pod).
            _p("DynamicResources"),
            _p("DefaultPreemption"),
            _p("NodeResourcesBalancedAllocation", 1),
            _p("ImageLocality", 1),
            _p("DefaultBinder"),
        ]
    )
)
"""kube-scheduler v1's ``getDefaultPlugins()`` with its default feature gates."""

V1BETA2_DEFAULT_PLUGINS = Plugins(
    multi_point=PluginSet(
        enabled=[
            _p(ref.name, V1BETA2_SCORE_WEIGHTS.get(ref.name, ref.weight))
            for ref in DEFAULT_PLUGINS.multi_point.enabled
        ]
    )
)
"""The defaults of a ``v1beta2`` configuration (``config.legacy``): v1beta2's score weights."""

_T = TypeVar("_T")


def merge_entries(
    defaults: Sequence[_T], custom: Sequence[_T], disabled: set[str], name_of: Any
) -> list[tuple[_T, int | None]]:
    """``mergePluginSet``'s enabled list, each entry with its index in ``custom`` (None for a default).

    A default also named in ``custom`` is replaced in place by the *last* such custom entry (a Go map keeps
    the last write); every custom entry not used for a replacement is appended, duplicates included, so the
    framework can refuse them.
    """
    by_name: dict[str, int] = {}
    for i, entry in enumerate(custom):
        by_name[name_of(entry)] = i
    out: list[tuple[_T, int | None]] = []
    replaced: set[int] = set()
    if "*" not in disabled:
        for entry in defaults:
            name = name_of(entry)
            if name in disabled:
                continue
            if name in by_name:
                idx = by_name[name]
                replaced.add(idx)
                out.append((custom[idx], idx))
            else:
                out.append((entry, None))
    out += [(entry, i) for i, entry in enumerate(custom) if i not in replaced]
    return out


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """kube-scheduler's ``mergePluginSet``; ``disabled`` keeps custom then default names, without weights."""
    disabled = [PluginRef(name=p.name) for p in (*custom.disabled, *default.disabled)]
    names = {p.name for p in disabled}
    enabled = [e for e, _ in merge_entries(default.enabled, custom.enabled, names, lambda p: p.name)]
    return PluginSet(enabled=enabled, disabled=disabled)


def merge_plugins(default: Plugins, custom: Plugins | None) -> Plugins:
    """kube-scheduler's ``mergePlugins``: ``merge_plugin_set`` for every extension point and multiPoint."""
    if custom is None:
        return default
    return Plugins(
        **{
            _ATTR[key]: merge_plugin_set(default.at(key), custom.at(key))
            for key in [MULTI_POINT, *EXTENSION_POINTS]
        }
    )


# --- effective plugins ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EffectivePlugins:
    """What a profile runs: plugin names per extension point in call order, and Score weights."""

    points: Mapping[str, tuple[str, ...]]
    """Profile key (``preFilter``) -> plugin names, in call order. Every key of ``EXTENSION_POINTS``."""
    score_weights: Mapping[str, int]
    """Weight of every plugin at ``score`` (unset or 0 means 1)."""
    skipped_defaults: tuple[str, ...]
    """Default plugins left out because they are not installed."""
    needed: tuple[str, ...]
    """Every plugin the profile instantiates (named at any point or multiPoint), in first-mention order."""
    classes: Mapping[str, type[Plugin]] = field(default_factory=dict)

    def at(self, point: str) -> tuple[str, ...]:
        """Plugins at a profile key (``filter``) or an extension-point name (``Filter``)."""
        if point in self.points:
            return self.points[point]
        for key, name in EXTENSION_POINTS.items():
            if name == point:
                return self.points[key]
        raise KeyError(point)


def resolve_plugins(
    profile: KubeSchedulerProfile,
    registry: PluginRegistry,
    where: Sequence[PathPart] = ("profiles", 0),
    defaults: Plugins = DEFAULT_PLUGINS,
) -> tuple[EffectivePlugins, list[Problem]]:
    """The effective plugins of ``profile`` and every problem found on the way (paths under ``where``)."""
    problems: list[Problem] = []
    custom = profile.plugins or Plugins()
    plugins_path = [*where, "plugins"]
    classes: dict[str, type[Plugin]] = {}
    skipped: list[str] = []
    troubled: set[str] = set()  # profile keys with a problem, so the count checks do not pile on

    # Step 1: merge, then drop the defaults that are not installed and check what the profile names.
    merged: dict[str, list[tuple[PluginRef, list[PathPart] | None]]] = {}
    disabled: dict[str, set[str]] = {}
    for key in [MULTI_POINT, *EXTENSION_POINTS]:
        d, c = defaults.at(key), custom.at(key)
        disabled[key] = {p.name for p in (*c.disabled, *d.disabled)}
        kept: list[tuple[PluginRef, list[PathPart] | None]] = []
        for ref, idx in merge_entries(d.enabled, c.enabled, disabled[key], lambda p: p.name):
            at: list[PathPart] | None = None if idx is None else [*plugins_path, key, "enabled", idx]
            if at is None:
                if ref.name not in registry:
                    if ref.name not in skipped:
                        skipped.append(ref.name)
                    continue
                cls = classes.get(ref.name) or load_class(registry, ref.name, [*plugins_path, key], problems)
            elif ref.name in INVALID_PLUGINS:
                problems.append(
                    problem(
                        at, f'"{ref.name}" was removed from kube-scheduler and is invalid in {API_VERSION}'
                    )
                )
                troubled.add(key)
                continue
            else:
                cls = classes.get(ref.name) or load_class(registry, ref.name, at, problems)
            if cls is None:
                troubled.add(key)
                continue
            classes[ref.name] = cls
            kept.append((ref, at))
        merged[key] = kept

    # Step 2: the specific extension points, as configured.
    points: dict[str, list[str]] = {}
    for key, point in EXTENSION_POINTS.items():
        names: list[str] = []
        for ref, at in merged[key]:
            implemented = classes[ref.name].extension_points()
            here = at or [*plugins_path, key]
            if point not in implemented:
                problems.append(problem(here, not_implemented_message(ref.name, point, implemented)))
                troubled.add(key)
            elif ref.name in names:
                problems.append(problem(here, f'plugin "{ref.name}" is enabled more than once at {key}'))
                troubled.add(key)
            else:
                names.append(ref.name)
        points[key] = names

    # Step 3: expand multiPoint into the points its plugins implement.
    for key, point in EXTENSION_POINTS.items():
        if "*" in disabled[key]:
            continue
        specific = points[key]
        overrides: list[str] = []
        from_multi: list[str] = []
        for ref, at in merged[MULTI_POINT]:
            if point not in classes[ref.name].extension_points() or ref.name in disabled[key]:
                continue
            if ref.name in specific:
                if ref.name not in overrides:
                    overrides.append(ref.name)
            elif ref.name in from_multi:
                problems.append(
                    problem(
                        at or [*plugins_path, MULTI_POINT],
                        f'plugin "{ref.name}" is enabled more than once in multiPoint',
                    )
                )
                troubled.add(key)
            else:
                from_multi.append(ref.name)
        points[key] = (
            [n for n in specific if n in overrides] + from_multi + [n for n in specific if n not in overrides]
        )

    if "queueSort" not in troubled and len(points["queueSort"]) != 1:
        got = ", ".join(points["queueSort"]) or "none"
        problems.append(
            problem(
                [*plugins_path, "queueSort"],
                f"exactly one queue sort plugin is required, got {len(points['queueSort'])} ({got})",
            )
        )
    if "bind" not in troubled and not points["bind"]:
        problems.append(problem([*plugins_path, "bind"], "at least one bind plugin is required"))

    # Score weights: the score point's own entries first, then multiPoint; the first mention wins.
    weights: dict[str, int] = {}
    for ref, _ in [*merged["score"], *merged[MULTI_POINT]]:
        if ref.name in points["score"] and ref.name not in weights:
            weights[ref.name] = ref.weight or 1

    needed: list[str] = []
    for key in [MULTI_POINT, *EXTENSION_POINTS]:
        for ref, _ in merged[key]:
            if ref.name not in needed:
                needed.append(ref.name)
    result = EffectivePlugins(
        points={k: tuple(v) for k, v in points.items()},
        score_weights=weights,
        skipped_defaults=tuple(skipped),
        needed=tuple(needed),
        classes=dict(classes),
    )
    return result, _unique(problems)


def effective_plugins(
    profile: KubeSchedulerProfile,
    registry: PluginRegistry,
    *,
    source: str = "<profile>",
    defaults: Plugins = DEFAULT_PLUGINS,
) -> EffectivePlugins:
    """``resolve_plugins`` for callers that want an exception: raises ``ValidationError`` on any problem."""
    result, problems = resolve_plugins(profile, registry, ("profiles", 0), defaults)
    if problems:
        raise ValidationError(source, problems)
    return result


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


# --- configuration-level checks --------------------------------------------------------------------


def configuration_problems(cfg: KubeSchedulerConfiguration) -> list[Problem]:
    """kube-scheduler's ``ValidateKubeSchedulerConfiguration`` checks that need more than one field."""
    out: list[Problem] = [problem(["leaderElection", f], m) for f, m in cfg.leader_election.problems()]
    if cfg.leader_election.leader_elect and cfg.leader_election.resource_lock != "leases":
        out.append(problem(["leaderElection", "resourceLock"], 'must be "leases"'))
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        out.append(
            problem(["podMaxBackoffSeconds"], "must be greater than or equal to podInitialBackoffSeconds")
        )
    seen: dict[str, int] = {}
    for i, prof in enumerate(cfg.profiles):
        name = prof.scheduler_name or ""
        if not name:
            out.append(
                problem(["profiles", i, "schedulerName"], "required when there is more than one profile")
            )
        elif name in seen:
            out.append(
                problem(["profiles", i, "schedulerName"], f'duplicate "{name}" (also profiles[{seen[name]}])')
            )
        else:
            seen[name] = i
    out += _queue_sort_problems(cfg.profiles)
    out += _extender_problems(cfg.extenders)
    return out


def _queue_sort_problems(profiles: Sequence[KubeSchedulerProfile]) -> list[Problem]:
    """Every profile must sort the one shared queue the same way (``validateCommonQueueSort``)."""
    if not profiles:
        return []
    out: list[Problem] = []
    canon = (profiles[0].plugins or Plugins()).at("queueSort")
    if len(canon.enabled) > 1:
        out.append(
            problem(
                ["profiles", 0, "plugins", "queueSort", "enabled"],
                "only one queue sort plugin can be enabled",
            )
        )
    for i, prof in enumerate(profiles[1:], start=1):
        if (prof.plugins or Plugins()).at("queueSort") != canon:
            out.append(problem(["profiles", i, "plugins", "queueSort"], "must be the same for all profiles"))
    return out


def _extender_problems(extenders: Sequence[Extender]) -> list[Problem]:
    out: list[Problem] = []
    managed: set[str] = set()
    binders = 0
    for i, ext in enumerate(extenders):
        if ext.prioritize_verb and ext.weight <= 0:
            out.append(problem(["extenders", i, "weight"], "must have a positive weight applied to it"))
        if ext.bind_verb:
            binders += 1
        for j, res in enumerate(ext.managed_resources):
            where: list[PathPart] = ["extenders", i, "managedResources", j, "name"]
            errs = qualified_name_errors(res.name)
            out += [problem(where, m) for m in errs]
            if not errs and not _is_extended_resource_name(res.name):
                out.append(problem(where, "is an invalid extended resource name"))
            if res.name in managed:
                out.append(problem(where, "duplicate extender managed resource name"))
            managed.add(res.name)
    if binders > 1:
        out.append(problem(["extenders"], f"only one extender can implement bind, found {binders}"))
    return out


def _is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: namespaced, not kubernetes.io, not a ``requests.`` quota name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name)
