"""Loading a configuration file: YAML, bare or wrapped in a ConfigMap, validated in two phases.

1. *Shape*: the document is parsed (syntax errors name line and column), unwrapped from a ``v1 ConfigMap``
   when it is one, its kind detected, and validated by the pydantic model of that kind — unknown keys, wrong
   types and out-of-range values, each with its YAML path.
2. *Plugins*: every plugin a profile names (at any extension point, in multiPoint, in pluginConfig) must be
   installed in the component's registry and implement the points it is enabled at; each ``pluginConfig``
   validates through the plugin's ``Args`` model; enabled plugins without an entry get default args.

All problems of both phases are collected and raised together as one ``ValidationError``. The result gives
every profile's effective plugins with their classes and validated args, ready to instantiate.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import pydantic
import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.scanner import ScannerError

from koord_framework.config import legacy
from koord_framework.config.common import LabelSelector, PluginConfig, TypedConfig
from koord_framework.config.documents import (
    COMPONENTS,
    KIND_COMPONENT,
    KINDS,
    SCHEDULER_API_VERSION,
    Component,
)
from koord_framework.config.problems import (
    PathPart,
    describe_value,
    entry_selector,
    from_pydantic,
    load_class,
    problem,
    validate_args,
)
from koord_framework.errors import ConfigReadError, Problem, ValidationError
from koord_framework.plugin import Plugin, PluginArgs
from koord_framework.registry import PluginRegistry

if TYPE_CHECKING:
    # Each component's models are imported by the function that loads that component, so that a process
    # loading one configuration does not build the pydantic models of the others (start-up, issue 22).
    from koord_framework.config import descheduler as desched
    from koord_framework.config import koordlet as klet
    from koord_framework.config import scheduler as sched

__all__ = [
    "COMPONENTS",
    "KIND_COMPONENT",
    "Component",
    "LoadedConfig",
    "LoadedDeschedulerConfig",
    "LoadedKoordletConfig",
    "LoadedSchedulerConfig",
    "ResolvedDeschedulerProfile",
    "ResolvedSchedulerProfile",
    "load_descheduler_config",
    "load_file",
    "load_koordlet_config",
    "load_scheduler_config",
    "load_text",
    "model_for",
    "read_text",
]


def model_for(component: Component) -> type[TypedConfig]:
    """The pydantic model of ``component``'s configuration (imports that component's models alone)."""
    if component == "scheduler":
        from koord_framework.config.scheduler import KubeSchedulerConfiguration

        return KubeSchedulerConfiguration
    if component == "descheduler":
        from koord_framework.config.descheduler import DeschedulerConfiguration

        return DeschedulerConfiguration
    from koord_framework.config.koordlet import KoordletConfiguration

    return KoordletConfiguration


MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 100
"""Deepest nesting accepted. Real configurations stay under 20; PyYAML's scanner slows quadratically with
flow nesting and its composer recurses, so hostile depth is refused early with a position."""
MAX_EXPANDED_NODES = 1_000_000
"""Bound on values after YAML aliases expand, so an alias bomb is refused instead of exhausting memory."""

RegistryProvider: TypeAlias = Callable[[str], PluginRegistry]


# --- results ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedSchedulerProfile:
    """One scheduler profile, its plugins merged with the defaults and their args validated."""

    scheduler_name: str
    percentage_of_nodes_to_score: int | None
    """The profile's own value; None means the configuration's."""
    plugins: sched.EffectivePlugins
    args: Mapping[str, PluginArgs]
    """Validated args of every plugin the profile instantiates or configures, defaults applied."""
    spec: sched.KubeSchedulerProfile

    def at(self, point: str) -> tuple[str, ...]:
        return self.plugins.at(point)

    def plugin_class(self, name: str) -> type[Plugin]:
        return self.plugins.classes[name]

    def weight(self, name: str) -> int:
        return self.plugins.score_weights[name]


@dataclass(frozen=True)
class LoadedSchedulerConfig:
    """A validated koord-scheduler configuration and its resolved profiles."""

    source: str
    config: sched.KubeSchedulerConfiguration
    profiles: tuple[ResolvedSchedulerProfile, ...]
    component: Component = "scheduler"
    notes: tuple[str, ...] = ()
    """What was converted on the way (a v1beta2/v1beta3 configuration read as v1), for the user to see."""

    def profile(self, scheduler_name: str) -> ResolvedSchedulerProfile:
        for prof in self.profiles:
            if prof.scheduler_name == scheduler_name:
                return prof
        raise KeyError(scheduler_name)


@dataclass(frozen=True)
class ResolvedDeschedulerProfile:
    """One descheduler profile, its plugins and their args validated."""

    name: str
    plugins: desched.EffectiveDeschedulerPlugins
    args: Mapping[str, PluginArgs]
    node_selector: LabelSelector | None
    spec: desched.DeschedulerProfile

    def at(self, point: str) -> tuple[str, ...]:
        return self.plugins.points[point]

    def plugin_class(self, name: str) -> type[Plugin]:
        return self.plugins.classes[name]


@dataclass(frozen=True)
class LoadedDeschedulerConfig:
    """A validated koord-descheduler configuration and its resolved profiles."""

    source: str
    config: desched.DeschedulerConfiguration
    profiles: tuple[ResolvedDeschedulerProfile, ...]
    component: Component = "descheduler"


@dataclass(frozen=True)
class LoadedKoordletConfig:
    """A validated koordlet configuration and its resolved strategies and hooks."""

    source: str
    config: klet.KoordletConfiguration
    resolved: klet.ResolvedKoordlet
    component: Component = "koordlet"

    @property
    def qos_strategies(self) -> tuple[klet.ResolvedPlugin, ...]:
        return self.resolved.qos_strategies

    @property
    def runtime_hooks(self) -> tuple[klet.ResolvedPlugin, ...]:
        return self.resolved.runtime_hooks


LoadedConfig: TypeAlias = LoadedSchedulerConfig | LoadedDeschedulerConfig | LoadedKoordletConfig


# --- YAML -------------------------------------------------------------------------------------------


def _key_text(key: Any) -> str:
    """Mapping keys as JSON would have them (sigs.k8s.io/yaml turns ``1:`` into ``"1"``)."""
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (Kubernetes' strict decoder does), stringifies keys, and
    bounds nesting depth. Pure Python on purpose: libyaml's parser crashes the process on deep nesting."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _check_flow_level(self) -> None:
        if self.flow_level >= MAX_DEPTH:
            raise ScannerError(None, None, f"nested deeper than {MAX_DEPTH} levels", self.get_mark())

    def fetch_flow_sequence_start(self) -> None:
        self._check_flow_level()
        super().fetch_flow_sequence_start()

    def fetch_flow_mapping_start(self) -> None:
        self._check_flow_level()
        super().fetch_flow_mapping_start()

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, "expected a mapping node", node.start_mark)
        own = sum(
            1 for k, _ in node.value if not (isinstance(k, ScalarNode) and k.tag == "tag:yaml.org,2002:merge")
        )
        self.flatten_mapping(node)
        merged_count = len(node.value) - own
        mapping: dict[str, Any] = {}
        own_keys: set[str] = set()
        for index, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                )
            text = _key_text(key)
            if index >= merged_count:
                # Keys brought in by a ``<<`` merge may be overridden; a key written twice may not.
                if text in own_keys:
                    raise ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {text!r}",
                        key_node.start_mark,
                    )
                own_keys.add(text)
            mapping[text] = self.construct_object(value_node, deep=deep)
        return mapping


@dataclass(frozen=True)
class _Offset:
    """Where an embedded document (a ConfigMap data value) starts in the file, to report file positions."""

    line: int
    column: int


def _yaml_problem(
    exc: BaseException, where: Sequence[PathPart] = (), offset: _Offset | None = None
) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    what = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    context = getattr(exc, "context", None)
    if mark is None:
        return problem(where, f"invalid YAML: {what}")
    line, column = mark.line + 1, mark.column + 1
    if offset is not None:
        line, column = line + offset.line, column + offset.column
    detail = f" ({context})" if context and context != what else ""
    return problem(where, f"invalid YAML at line {line}, column {column}: {what}{detail}")


def _compose_and_construct(text: str) -> tuple[Node | None, Any]:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return node, data


def _parse(
    text: str, where: Sequence[PathPart] = (), offset: _Offset | None = None
) -> tuple[Node | None, Any]:
    """YAML text to (node, data); any failure becomes a ValidationError-ready Problem via _ParseFailed."""
    try:
        node, data = _compose_and_construct(text)
    except yaml.YAMLError as exc:
        raise _ParseFailed(_yaml_problem(exc, where, offset)) from None
    except RecursionError:
        raise _ParseFailed(problem(where, "invalid YAML: nested too deeply")) from None
    except (ValueError, TypeError, OverflowError) as exc:
        # PyYAML's constructors raise these for values like an impossible date (2020-13-45).
        raise _ParseFailed(problem(where, f"invalid YAML value: {exc}")) from None
    _check_expansion(data, where)
    return node, data


class _ParseFailed(Exception):
    def __init__(self, found: Problem) -> None:
        super().__init__(str(found))
        self.problem = found


def _check_expansion(data: Any, where: Sequence[PathPart]) -> None:
    """Refuse recursive aliases and alias bombs before anything walks the data."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(value: Any) -> int:
        if not isinstance(value, (dict, list)):
            return 1
        ident = id(value)
        if ident in sizes:
            return sizes[ident]
        if ident in active:
            raise _ParseFailed(problem(where, "invalid YAML: an alias refers to a node that contains it"))
        active.add(ident)
        children = value.values() if isinstance(value, dict) else value
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_EXPANDED_NODES:
                raise _ParseFailed(problem(where, "the document is too large once its aliases are expanded"))
        active.discard(ident)
        sizes[ident] = total
        return total

    try:
        size(data)
    except RecursionError:
        raise _ParseFailed(problem(where, "invalid YAML: nested too deeply")) from None


def _block_offset(text: str, value_node: Node) -> _Offset | None:
    """File position of a literal/folded block's first content line, so inner errors point into the file."""
    if not isinstance(value_node, ScalarNode) or value_node.style not in ("|", ">"):
        return None
    lines = text.splitlines()
    first = value_node.start_mark.line + 1
    for line in lines[first:]:
        if line.strip():
            return _Offset(line=first, column=len(line) - len(line.lstrip(" ")))
    return _Offset(line=first, column=0)


# --- documents --------------------------------------------------------------------------------------


@dataclass
class _Document:
    """The configuration document found in a file (itself or a ConfigMap's key) and what is wrong."""

    data: Any
    component: Component | None
    problems: list[Problem]


def _unwrap(text: str, node: Node | None, data: Any, component: Component | None) -> _Document:
    """The configuration document inside ``data``: itself, or the chosen key of a ConfigMap."""
    if data is None:
        return _Document(None, component, [problem([], "the file holds no YAML document")])
    if not isinstance(data, dict):
        return _Document(
            None, component, [problem([], f"expected a mapping at the top level, got {describe_value(data)}")]
        )
    if data.get("kind") != "ConfigMap":
        return _typed(data, component)
    problems: list[Problem] = []
    if data.get("apiVersion") != "v1":
        problems.append(
            problem(
                ["apiVersion"],
                f'a ConfigMap must have apiVersion "v1", got {describe_value(data.get("apiVersion"))}',
            )
        )
    entries = data.get("data")
    if not isinstance(entries, dict) or not entries:
        problems.append(problem(["data"], "the ConfigMap holds no configuration (data is empty or missing)"))
        return _Document(None, component, problems)
    bad = [k for k, v in entries.items() if not isinstance(v, str)]
    for key in bad:
        problems.append(
            problem(
                ["data", key], f"must be a string holding a YAML document, got {describe_value(entries[key])}"
            )
        )
    if bad:
        return _Document(None, component, problems)
    key, failure = _choose_key(entries, component)
    if key is None:
        problems.append(problem(["data"], failure))
        return _Document(None, component, problems)
    value_node = _data_value_node(node, key)
    offset = _block_offset(text, value_node) if value_node is not None else None
    try:
        _, inner = _parse(entries[key], ["data", key], offset)
    except _ParseFailed as exc:
        problems.append(exc.problem)
        return _Document(None, component, problems)
    if isinstance(inner, dict) and inner.get("kind") == "ConfigMap":
        problems.append(problem(["data", key], "holds another ConfigMap; expected a configuration document"))
        return _Document(None, component, problems)
    if not isinstance(inner, dict):
        problems.append(
            problem(["data", key], f"expected a configuration mapping, got {describe_value(inner)}")
        )
        return _Document(None, component, problems)
    doc = _typed(inner, component)
    doc.problems[:0] = problems
    return doc


def _choose_key(entries: Mapping[str, str], component: Component | None) -> tuple[str | None, str]:
    if len(entries) == 1:
        return next(iter(entries)), ""
    wanted = {KINDS[component][0]} if component else set(KIND_COMPONENT)
    matching = []
    for key, value in entries.items():
        try:
            _, inner = _parse(value)
        except _ParseFailed:
            continue
        if isinstance(inner, dict) and inner.get("kind") in wanted:
            matching.append(key)
    kinds = " or ".join(sorted(wanted))
    if len(matching) == 1:
        return matching[0], ""
    if not matching:
        return None, f"none of the keys ({', '.join(entries)}) holds a {kinds}"
    return None, f"several keys hold a {kinds} ({', '.join(matching)}); keep one per ConfigMap"


def _data_value_node(node: Node | None, key: str) -> Node | None:
    if not isinstance(node, MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.value == "data" and isinstance(v, MappingNode):
            for dk, dv in v.value:
                if isinstance(dk, ScalarNode) and dk.value == key:
                    found: Node = dv
                    return found
    return None


def _typed(data: dict[str, Any], component: Component | None) -> _Document:
    kind = data.get("kind")
    problems: list[Problem] = []
    known = ", ".join(KIND_COMPONENT)
    if kind is None or kind == "":
        if component is None:
            problems.append(problem(["kind"], f"required: one of {known} (or a ConfigMap holding one)"))
        else:
            problems.append(problem(["kind"], f"required: {KINDS[component][0]}"))
        return _Document(data, component, problems)
    if not isinstance(kind, str) or kind not in KIND_COMPONENT:
        shown = repr(kind) if isinstance(kind, str) else describe_value(kind)
        problems.append(problem(["kind"], f"unsupported kind {shown}; expected one of {known} or ConfigMap"))
        return _Document(None, component, problems)
    detected = KIND_COMPONENT[kind]
    if component is not None and component != detected:
        problems.append(
            problem(["kind"], f"this is a {kind}, not a {KINDS[component][0]} (--component {component})")
        )
        return _Document(None, component, problems)
    if not data.get("apiVersion"):
        problems.append(problem(["apiVersion"], f"required: {KINDS[detected][1]}"))
    return _Document(data, detected, problems)


# --- per component ----------------------------------------------------------------------------------


def _config_at(where: Sequence[PathPart], entries: Sequence[Any], index: int, name: str) -> list[PathPart]:
    """Path of pluginConfig entry ``index``: by plugin name when that names it unambiguously."""
    same = sum(1 for e in entries if e.name == name)
    step: PathPart = entry_selector(name) if same == 1 and "[" not in name and "]" not in name else index
    return [*where, "pluginConfig", step]


def _resolve_args(
    where: Sequence[PathPart],
    plugin_config: Sequence[Any],
    needed: Sequence[str],
    classes: Mapping[str, type[Plugin]],
    registry: PluginRegistry,
    problems: list[Problem],
    invalid: frozenset[str] = frozenset(),
) -> dict[str, PluginArgs]:
    """Args of every pluginConfig entry and, with defaults, of every needed plugin without one."""
    args: dict[str, PluginArgs] = {}
    seen: dict[str, int] = {}
    for j, entry in enumerate(plugin_config):
        if entry.name in seen:
            problems.append(
                problem(
                    [*where, "pluginConfig", j],
                    f'duplicate config for plugin "{entry.name}" (also pluginConfig[{seen[entry.name]}])',
                )
            )
            continue
        seen[entry.name] = j
        at = _config_at(where, plugin_config, j, entry.name)
        if entry.name in invalid:
            problems.append(
                problem(
                    at,
                    f'"{entry.name}" was removed from kube-scheduler and is invalid in '
                    f"{SCHEDULER_API_VERSION}",
                )
            )
            continue
        cls = classes.get(entry.name) or load_class(registry, entry.name, at, problems)
        if cls is None:
            continue
        value = validate_args(cls, entry.args, [*at, "args"], problems)
        if value is not None:
            args[entry.name] = value
    for name in needed:
        if name not in seen and name in classes:
            value = validate_args(
                classes[name], None, [*where, "pluginConfig", entry_selector(name), "args"], problems
            )
            if value is not None:
                args[name] = value
    return args


def _validate_shape(model: type[TypedConfig], data: Any, raw_for_paths: Any, problems: list[Problem]) -> Any:
    try:
        return model.model_validate(data, by_name=False)
    except pydantic.ValidationError as exc:
        problems.extend(from_pydantic(exc, model=model, raw=raw_for_paths))
        return None


def _profiles_to_resolve(
    cfg: Any, data: Any, profile_model: type[pydantic.BaseModel]
) -> list[tuple[int, Any, Any]]:
    """(index, model or None, raw) per profile: phase 2 runs on every profile whose shape is valid, even
    when another part of the file is not; a profile with shape problems gets its pluginConfig checked."""
    if cfg is not None:
        return [(i, prof, None) for i, prof in enumerate(cfg.profiles)]
    raw = data.get("profiles") if isinstance(data, dict) else None
    out: list[tuple[int, Any, Any]] = []
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            try:
                out.append((i, profile_model.model_validate(item, by_name=False), item))
            except pydantic.ValidationError:
                out.append((i, None, item))
    return out


ProfileResolver: TypeAlias = Callable[[Any, PluginRegistry, list[PathPart]], tuple[Any, list[Problem]]]


def _resolve_profiles(
    cfg: Any,
    data: Any,
    profile_model: type[pydantic.BaseModel],
    resolve_plugins: ProfileResolver,
    registry: PluginRegistry,
    problems: list[Problem],
    invalid: frozenset[str] = frozenset(),
) -> list[tuple[Any, Any, dict[str, PluginArgs]]]:
    """Phase 2 of a component with profiles (scheduler, descheduler): ``(profile, effective plugins, args)``
    of every profile whose shape is valid; every problem found goes to ``problems``."""
    resolved: list[tuple[Any, Any, dict[str, PluginArgs]]] = []
    for i, prof, raw in _profiles_to_resolve(cfg, data, profile_model):
        where: list[PathPart] = ["profiles", i]
        if prof is None:
            _check_config_entries(where, raw, registry, problems)
            continue
        eff, found = resolve_plugins(prof, registry, where)
        problems += found
        args = _resolve_args(where, prof.plugin_config, eff.needed, eff.classes, registry, problems, invalid)
        resolved.append((prof, eff, args))
    return resolved


def _check_config_entries(
    where: Sequence[PathPart], raw_profile: Any, registry: PluginRegistry, problems: list[Problem]
) -> None:
    """Args of the well-formed pluginConfig entries of a profile whose shape is broken elsewhere."""
    entries_raw = raw_profile.get("pluginConfig") if isinstance(raw_profile, dict) else None
    if not isinstance(entries_raw, list):
        return
    from koord_framework.config.scheduler import INVALID_PLUGINS

    entries = []
    for item in entries_raw:
        try:
            entries.append(PluginConfig.model_validate(item, by_name=False))
        except pydantic.ValidationError:
            return  # the entries' shape is already reported; their names cannot be trusted
    _resolve_args(where, entries, (), {}, registry, problems, INVALID_PLUGINS)


def _load_scheduler(
    data: Any, problems: list[Problem], registry: PluginRegistry, source: str
) -> LoadedSchedulerConfig:
    from koord_framework.config import scheduler as sched

    old_defaults = legacy.v1beta2(data)
    data, notes = legacy.convert_scheduler(data)
    resolve = sched.resolve_plugins
    if old_defaults:
        resolve = functools.partial(sched.resolve_plugins, defaults=sched.V1BETA2_DEFAULT_PLUGINS)
        notes.append("v1beta2's default score weights: TaintToleration, NodeAffinity, InterPodAffinity 1")
    data = sched.default_profiles(data)
    cfg = _validate_shape(sched.KubeSchedulerConfiguration, data, data, problems)
    if cfg is not None:
        problems += sched.configuration_problems(cfg)
    invalid_plugins = sched.INVALID_PLUGINS
    resolved = [
        ResolvedSchedulerProfile(
            scheduler_name=prof.scheduler_name or "",
            percentage_of_nodes_to_score=prof.percentage_of_nodes_to_score,
            plugins=eff,
            args=args,
            spec=prof,
        )
        for prof, eff, args in _resolve_profiles(
            cfg, data, sched.KubeSchedulerProfile, resolve, registry, problems, invalid_plugins
        )
    ]
    if not problems:
        problems += _queue_sort_args_problems(resolved)
    if problems or cfg is None:
        raise ValidationError(source, problems)
    return LoadedSchedulerConfig(source=source, config=cfg, profiles=tuple(resolved), notes=tuple(notes))


def _queue_sort_args_problems(profiles: Sequence[ResolvedSchedulerProfile]) -> list[Problem]:
    """The shared queue is sorted by one plugin with one configuration, whatever the profile."""
    if len(profiles) < 2 or len(profiles[0].at("queueSort")) != 1:
        return []
    name = profiles[0].at("queueSort")[0]
    canon = profiles[0].args.get(name)
    out = []
    for i, prof in enumerate(profiles[1:], start=1):
        mine = prof.args.get(name)
        if canon is not None and mine is not None and mine.model_dump() != canon.model_dump():
            out.append(
                problem(
                    ["profiles", i, "pluginConfig", entry_selector(name), "args"],
                    "queueSort args must be the same for all profiles",
                )
            )
    return out


def _load_descheduler(
    data: Any, problems: list[Problem], registry: PluginRegistry, source: str
) -> LoadedDeschedulerConfig:
    from koord_framework.config import descheduler as desched

    data = desched.default_profiles(data)
    cfg = _validate_shape(desched.DeschedulerConfiguration, data, data, problems)
    if cfg is not None:
        problems += desched.configuration_problems(cfg)
    resolved = [
        ResolvedDeschedulerProfile(
            name=prof.name, plugins=eff, args=args, node_selector=prof.node_selector, spec=prof
        )
        for prof, eff, args in _resolve_profiles(
            cfg, data, desched.DeschedulerProfile, desched.resolve_plugins, registry, problems
        )
    ]
    if problems or cfg is None:
        raise ValidationError(source, problems)
    return LoadedDeschedulerConfig(source=source, config=cfg, profiles=tuple(resolved))


def _load_koordlet(
    data: Any, problems: list[Problem], provider: RegistryProvider, source: str
) -> LoadedKoordletConfig:
    from koord_framework.config import koordlet as klet

    cfg = _validate_shape(klet.KoordletConfiguration, data, data, problems)
    if cfg is None:
        raise ValidationError(source, problems)
    resolved, found = klet.resolve(cfg, provider("qos"), provider("runtimehooks"))
    problems += found
    if problems:
        raise ValidationError(source, problems)
    return LoadedKoordletConfig(source=source, config=cfg, resolved=resolved)


# --- entry points -----------------------------------------------------------------------------------


def _provider(registries: Mapping[str, PluginRegistry] | RegistryProvider | None) -> RegistryProvider:
    """Registries by component group: injected ones first, the installed entry points otherwise."""
    if callable(registries):
        return registries
    given = dict(registries or {})
    cache: dict[str, PluginRegistry] = {}

    def get(group: str) -> PluginRegistry:
        if group in given:
            return given[group]
        if group not in cache:
            cache[group] = PluginRegistry.discover(group)
        return cache[group]

    return get


def load_text(
    text: str,
    source: str = "<string>",
    *,
    component: Component | None = None,
    registries: Mapping[str, PluginRegistry] | RegistryProvider | None = None,
) -> LoadedConfig:
    """Load a configuration from YAML text. ``component`` forces the expected kind; else ``kind`` decides.

    ``registries`` maps a group (``scheduler``, ``descheduler``, ``qos``, ``runtimehooks``) to a registry;
    groups not given are discovered from installed entry points.
    """
    try:
        node, data = _parse(text)
    except _ParseFailed as exc:
        raise ValidationError(source, [exc.problem]) from None
    doc = _unwrap(text, node, data, component)
    target = doc.component
    if target is None or doc.data is None:
        raise ValidationError(source, doc.problems)
    provider = _provider(registries)
    problems = list(doc.problems)
    if target == "scheduler":
        return _load_scheduler(doc.data, problems, provider("scheduler"), source)
    if target == "descheduler":
        return _load_descheduler(doc.data, problems, provider("descheduler"), source)
    return _load_koordlet(doc.data, problems, provider, source)


def read_text(path: str | os.PathLike[str]) -> str:
    """The file's text; ``ConfigReadError`` when it cannot be read, ``ValidationError`` if it is not text."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise ConfigReadError(f"{path}: is a directory, not a configuration file")
        if size > MAX_FILE_BYTES:
            raise ConfigReadError(
                f"{path}: {size} bytes is more than a configuration file may hold ({MAX_FILE_BYTES})"
            )
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigReadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(str(path), [Problem("", f"not UTF-8 text (byte {exc.start})")]) from None


def load_file(
    path: str | os.PathLike[str],
    *,
    component: Component | None = None,
    registries: Mapping[str, PluginRegistry] | RegistryProvider | None = None,
) -> LoadedConfig:
    """Load a configuration file (bare, or a ConfigMap wrapping one). See ``load_text``."""
    return load_text(read_text(path), str(path), component=component, registries=registries)


def load_scheduler_config(
    path: str | os.PathLike[str], registry: PluginRegistry | None = None
) -> LoadedSchedulerConfig:
    loaded = load_file(path, component="scheduler", registries={"scheduler": registry} if registry else None)
    assert isinstance(loaded, LoadedSchedulerConfig)
    return loaded


def load_descheduler_config(
    path: str | os.PathLike[str], registry: PluginRegistry | None = None
) -> LoadedDeschedulerConfig:
    loaded = load_file(
        path, component="descheduler", registries={"descheduler": registry} if registry else None
    )
    assert isinstance(loaded, LoadedDeschedulerConfig)
    return loaded


def load_koordlet_config(
    path: str | os.PathLike[str],
    qos_registry: PluginRegistry | None = None,
    hooks_registry: PluginRegistry | None = None,
) -> LoadedKoordletConfig:
    given = {k: v for k, v in (("qos", qos_registry), ("runtimehooks", hooks_registry)) if v is not None}
    loaded = load_file(path, component="koordlet", registries=given)
    assert isinstance(loaded, LoadedKoordletConfig)
    return loaded
