"""Args tables for plugin READMEs, generated from the ``PluginArgs`` models, and the README regions that hold
them kept in step with the code.

A README marks where a generated table goes::

    <!-- args-table:LoadAwareSchedulingArgs -->
    (generated: do not edit by hand)
    <!-- /args-table -->

and, for a file shown verbatim (the example profile), where its copy goes::

    <!-- include:examples/profile.yaml -->
    <!-- /include -->

``update_readme`` rewrites what is between the markers; ``check_readme`` says whether it is current, which a
test asserts so that a changed default or docstring cannot leave a stale README behind.
``koord plugins docs README.md [--check]`` does both from the command line.

The table has one row per field: its YAML name (the camelCase alias), a short type, the default and the
attribute docstring. Defaults are read from a validated default instance, so defaulting done in validators
(Koordinator's ``SetDefaults_*``) shows as the user gets it. Nested models are expanded with dotted names
(``aggregated.usageThresholds``; ``nodePools[].name`` for a list of models; ``objectLimiters.<key>.burst``
for a map of them); well-known Kubernetes types (``LabelSelector``) are named, not expanded.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticValidationError
from pydantic.fields import FieldInfo

from koord_framework.config.common import Duration, LabelSelector
from koord_framework.errors import ConfigReadError, Problem, ValidationError
from koord_framework.plugin import PluginArgs

__all__ = [
    "ARGS_TABLE_END",
    "INCLUDE_END",
    "ArgRow",
    "ReadmeCheck",
    "Region",
    "RegionState",
    "args_rows",
    "args_table",
    "check_readme",
    "find_regions",
    "installed_args_models",
    "render_readme",
    "update_readme",
]

ARGS_TABLE_END = "<!-- /args-table -->"
INCLUDE_END = "<!-- /include -->"
_OPEN = re.compile(r"<!--\s*(?P<kind>args-table|include):\s*(?P<target>[^\s>]*?)\s*-->")
_CLOSE = re.compile(r"<!--\s*/(?P<kind>args-table|include)\s*-->")
_ENDS = {"args-table": ARGS_TABLE_END, "include": INCLUDE_END}

OPAQUE_MODELS: tuple[type[BaseModel], ...] = (LabelSelector,)
"""Models shown by name instead of expanded: Kubernetes API types a reader already knows."""

_HIDDEN = frozenset(PluginArgs.model_fields)
"""``apiVersion``/``kind``: accepted inside args for Koordinator's ConfigMaps, meaningless to a reader."""

_NAMED_RANGES = {
    (-(2**31), 2**31 - 1): "int32",
    (0, 2**32 - 1): "uint32",
    (-(2**63), 2**63 - 1): "int64",
    (0, 2**64 - 1): "uint64",
}
_HUGE = 2**31 - 1
"""Bounds this large only say "fits the Go integer type"; they are left out of the type text."""

_LANGUAGES = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml", ".py": "python"}


# --- the table ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArgRow:
    """One row of an args table."""

    name: str
    """The YAML path of the field, e.g. ``aggregated.usageThresholds`` or ``nodePools[].name``."""
    type: str
    default: str
    description: str


def _constraints(metadata: Iterable[Any]) -> list[Any]:
    """annotated-types constraints, with those nested in ``Field(...)`` objects flattened out."""
    out: list[Any] = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            out += _constraints(item.metadata)
        else:
            out.append(item)
    return out


def _bounds_text(base: str, metadata: Sequence[Any]) -> str:
    lo = next((m.ge for m in metadata if isinstance(m, Ge)), None)
    hi = next((m.le for m in metadata if isinstance(m, Le)), None)
    if base == "int" and isinstance(lo, int) and isinstance(hi, int) and (lo, hi) in _NAMED_RANGES:
        return _NAMED_RANGES[(lo, hi)]
    parts: list[str] = []
    for m in metadata:
        for kind, symbol in ((Gt, ">"), (Ge, ">="), (Lt, "<"), (Le, "<=")):
            if isinstance(m, kind):
                value = getattr(m, kind.__name__.lower())
                if not (isinstance(value, int | float) and abs(value) >= _HUGE):
                    parts.append(f"{symbol} {value}")
        if isinstance(m, MinLen) and m.min_length:
            parts.append("non-empty" if m.min_length == 1 else f"at least {m.min_length}")
        if isinstance(m, MaxLen):
            parts.append(f"at most {m.max_length}")
    return f"{base} ({', '.join(parts)})" if parts else base


def _literal(values: Iterable[Any]) -> str:
    return ", ".join("`" + json.dumps(v) + "`" if v == "" else f"`{v}`" for v in values)


def _model_in(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The model a field holds and how: ``("", ...)`` directly, ``"[]"`` in a list, ``".<key>"`` in a map."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _model_in(args[0])
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return _model_in(rest[0]) if len(rest) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    if origin in (list, tuple, set, frozenset, Sequence, Collection) and args:
        inner = _model_in(args[0])
        return (inner[0], "[]") if inner is not None and not inner[1] else None
    if origin in (dict, Mapping) and len(args) == 2:
        inner = _model_in(args[1])
        return (inner[0], ".<key>") if inner is not None and not inner[1] else None
    return None


def type_text(annotation: Any, metadata: Sequence[Any] = (), opaque: Collection[type[BaseModel]] = ()) -> str:
    """A short, YAML-minded name for a field type: ``int (>= 0, <= 100)``, ``map[string]int``,
    ``list[one of `a`, `b`]``, ``duration``, ``int or string``, ``LabelSelector``, ``object``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(args[0], [*metadata, *_constraints(args[1:])], opaque)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return type_text(rest[0], metadata, opaque)
        return " or ".join(type_text(a, (), opaque) for a in rest)
    if origin is Literal:
        return "one of " + _literal(args)
    if origin in (list, tuple, set, frozenset, Sequence, Collection):
        inner = type_text(args[0], (), opaque) if args else "any"
        return _bounds_text(f"list[{inner}]", metadata)
    if origin in (dict, Mapping):
        key, value = args if len(args) == 2 else (str, Any)
        key_text = (
            "|".join(str(v) for v in typing.get_args(key)) if typing.get_origin(key) is Literal else "string"
        )
        return _bounds_text(f"map[{key_text}]{type_text(value, (), opaque)}", metadata)
    if annotation is Any or annotation is object:
        return "any"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return annotation.__name__ if annotation in opaque else "object"
        if issubclass(annotation, bool):
            return "bool"
        if issubclass(annotation, Duration):
            return "duration"
        if issubclass(annotation, int):
            return _bounds_text("int", metadata)
        if issubclass(annotation, float):
            return _bounds_text("float", metadata)
        if issubclass(annotation, str):
            return _bounds_text("string", metadata)
        return annotation.__name__
    return str(annotation)


def _json(annotation: Any, value: Any) -> Any:
    """``value`` as it would be written in YAML (aliases, durations as Go strings, defaults left out)."""
    try:
        return TypeAdapter(annotation).dump_python(value, mode="json", by_alias=True, exclude_defaults=True)
    except Exception:  # a type pydantic cannot build an adapter for: the value's own JSON is close enough
        return json.loads(json.dumps(value, default=str))


def default_text(annotation: Any, value: Any) -> str:
    if value is None:
        return "unset"
    dumped = _json(annotation, value)
    if isinstance(dumped, str):
        return "`" + json.dumps(dumped) + "`" if dumped == "" else f"`{dumped}`"
    return "`" + json.dumps(dumped, separators=(", ", ": ")) + "`"


def _describe(text: str | None) -> str:
    text = re.sub(r"\s+", " ", text or "").strip().replace("``", "`")
    return text.replace("|", "\\|")


def _class_doc(model: type[BaseModel]) -> str:
    doc = model.__dict__.get("__doc__") or ""
    return doc.strip().split("\n\n")[0]


def _default_instance(model: type[BaseModel]) -> BaseModel | None:
    """``model`` validated from nothing, so validator-applied defaults count; None when that is refused."""
    try:
        return model.model_validate({})
    except PydanticValidationError:
        return None


def args_rows(model: type[BaseModel], *, opaque: Collection[type[BaseModel]] = OPAQUE_MODELS) -> list[ArgRow]:
    """The rows of ``args_table(model)``: every field, nested models expanded (see the module docstring)."""
    rows: list[ArgRow] = []

    def walk(cls: type[BaseModel], prefix: str, instance: BaseModel | None, path: tuple[type, ...]) -> None:
        for name, info in cls.model_fields.items():
            if not prefix and name in _HIDDEN and issubclass(cls, PluginArgs):
                continue
            alias = info.alias or name
            annotation = info.annotation
            metadata = _constraints(info.metadata)
            nested = _model_in(annotation)
            expand = nested is not None and nested[0] not in opaque and nested[0] not in path
            if instance is not None:
                value: Any = getattr(instance, name)
                required = False
            else:
                required = info.is_required()
                value = None if required else info.get_default(call_default_factory=True, validated_data={})
            if required:
                default = "required"
            elif expand and nested is not None and not nested[1] and value is not None:
                default = "see below"
            else:
                default = default_text(annotation, value)
            description = info.description
            if not description and nested is not None:
                description = _class_doc(nested[0])
            rows.append(
                ArgRow(
                    prefix + alias, type_text(annotation, metadata, opaque), default, _describe(description)
                )
            )
            if expand and nested is not None:
                model_cls, how = nested
                inner = value if not how and isinstance(value, model_cls) else None
                walk(model_cls, f"{prefix}{alias}{how}.", inner, (*path, model_cls))

    walk(model, "", _default_instance(model), (model,))
    return rows


def args_table(model: type[BaseModel], *, opaque: Collection[type[BaseModel]] = OPAQUE_MODELS) -> str:
    """A Markdown table of ``model``'s fields: field (YAML name), type, default, description.

    Ends with a newline. A model without fields gives a one-line sentence instead of an empty table.
    """
    rows = args_rows(model, opaque=opaque)
    if not rows:
        return f"`{model.__name__}` has no fields.\n"
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for r in rows:
        kind = r.type.replace("|", "\\|")
        lines.append(f"| `{r.name}` | {kind} | {r.default} | {r.description} |")
    return "\n".join(lines) + "\n"


# --- README regions ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Region:
    """A generated region of a README: ``kind`` is ``args-table`` or ``include``."""

    kind: str
    target: str
    """The args model's name (``args-table``) or the included file, relative to the README (``include``)."""
    line: int
    """1-based line of the opening marker."""
    start: int
    """Offset just past the opening marker."""
    end: int
    """Offset of the closing marker."""

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.target}"


def find_regions(text: str) -> tuple[list[Region], list[Problem]]:
    """The generated regions of ``text`` in order, and what is wrong with the markers (unclosed, nested,
    stray closing markers, an empty target)."""
    regions: list[Region] = []
    problems: list[Problem] = []
    pos = 0
    while True:
        opening = _OPEN.search(text, pos)
        closing = _CLOSE.search(text, pos)
        if closing is not None and (opening is None or closing.start() < opening.start()):
            line = text.count("\n", 0, closing.start()) + 1
            problems.append(Problem(f"line {line}", f"{closing.group(0)} closes no open region"))
            pos = closing.end()
            continue
        if opening is None:
            return regions, problems
        kind, target = opening.group("kind"), opening.group("target")
        line = text.count("\n", 0, opening.start()) + 1
        end = text.find(_ENDS[kind], opening.end())
        following = _OPEN.search(text, opening.end())
        if end < 0 or (following is not None and following.start() < end):
            problems.append(Problem(f"line {line}", f"{opening.group(0)} is not closed by {_ENDS[kind]}"))
            pos = opening.end()
            continue
        if not target:
            problems.append(Problem(f"line {line}", f"{opening.group(0)} names nothing"))
        else:
            regions.append(Region(kind, target, line, opening.end(), end))
        pos = end + len(_ENDS[kind])


def installed_args_models() -> dict[str, type[PluginArgs]]:
    """The ``Args`` model of every installed plugin of every group, by class name (``LoadAwareSchedulingArgs``
    for ``LoadAwareScheduling``).

    A name two installed plugins use for different models maps to neither (the README must then say
    ``module:Class``); plugins that fail to import are skipped (``koord plugins list`` reports them).
    """
    from koord_framework.errors import PluginError
    from koord_framework.registry import GROUPS, PluginRegistry

    found: dict[str, type[PluginArgs]] = {}
    clashes: set[str] = set()
    for group in GROUPS:
        try:
            registry = PluginRegistry.discover(group)
        except PluginError:
            continue
        for name in registry.names():
            try:
                model = registry.get(name).Args
            except PluginError:
                continue
            key = model.__name__
            if found.get(key, model) is not model:
                clashes.add(key)
            found[key] = model
    return {k: v for k, v in found.items() if k not in clashes}


def _import_model(target: str) -> type[BaseModel] | str:
    """``package.module:Class`` imported, or why not."""
    import importlib

    module_name, _, attr = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        return f"cannot import {target}: {exc}"
    if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
        return f"{target} is not a pydantic model"
    return obj


def _render_region(
    region: Region, base: Path, models: Mapping[str, type[BaseModel]], opaque: Collection[type[BaseModel]]
) -> str | Problem:
    """The text that belongs between the markers of ``region`` (newline after the opening marker included)."""
    where = f"line {region.line}"
    if region.kind == "include":
        path = base / region.target
        try:
            content = path.read_text(encoding="utf-8")
        except OSError as exc:
            return Problem(where, f"{region.label}: cannot read {path}: {exc.strerror or exc}")
        fence = "````" if "```" in content else "```"
        return f"\n{fence}{_LANGUAGES.get(path.suffix, '')}\n{content.rstrip()}\n{fence}\n"
    model: type[BaseModel] | str | None = models.get(region.target)
    if model is None:
        if ":" in region.target:
            model = _import_model(region.target)
        else:
            known = ", ".join(sorted(models)) or "none"
            model = f"unknown args model {region.target!r} (known: {known}; or write module:Class)"
    if isinstance(model, str):
        return Problem(where, f"{region.label}: {model}")
    return "\n" + args_table(model, opaque=opaque)


def render_readme(
    text: str,
    base: Path,
    models: Mapping[str, type[BaseModel]] | None = None,
    *,
    opaque: Collection[type[BaseModel]] = OPAQUE_MODELS,
) -> tuple[str, list[Region], list[Problem]]:
    """``text`` with every generated region regenerated; the regions whose content changed; problems.

    ``base`` is the directory include paths are relative to; ``models`` maps marker names to models
    (default: ``installed_args_models()``). A region that cannot be rendered is left as it is and reported.
    """
    if models is None:
        models = installed_args_models()
    regions, problems = find_regions(text)
    out: list[str] = []
    changed: list[Region] = []
    pos = 0
    for region in regions:
        rendered = _render_region(region, base, models, opaque)
        out.append(text[pos : region.start])
        current = text[region.start : region.end]
        if isinstance(rendered, Problem):
            problems.append(rendered)
            out.append(current)
        else:
            if rendered != current:
                changed.append(region)
            out.append(rendered)
        pos = region.end
    out.append(text[pos:])
    return "".join(out), changed, problems


@dataclass(frozen=True)
class RegionState:
    region: Region
    up_to_date: bool


@dataclass(frozen=True)
class ReadmeCheck:
    """The result of ``check_readme``: each region's state, and problems (bad markers, unknown models,
    unreadable includes, expected regions that are missing)."""

    path: Path
    regions: list[RegionState] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def stale(self) -> list[Region]:
        return [r.region for r in self.regions if not r.up_to_date]

    @property
    def ok(self) -> bool:
        return not self.problems and not self.stale

    def messages(self) -> list[str]:
        """One line per finding: ``README.md:64: args-table:XArgs is out of date``."""
        out = [f"{self.path}:{r.line}: {r.label} is out of date" for r in self.stale]
        for p in self.problems:
            line = p.path.removeprefix("line ") if p.path.startswith("line ") else ""
            out.append(f"{self.path}:{line}: {p.message}" if line else f"{self.path}: {p}")
        return out

    def __str__(self) -> str:
        if self.ok:
            return f"{self.path}: up to date ({len(self.regions)} generated region(s))"
        return "\n".join(self.messages())


def _read(readme: Path) -> str:
    try:
        return readme.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigReadError(f"{readme}: cannot read: {exc.strerror or exc}") from None


def check_readme(
    readme_path: str | Path,
    models: Mapping[str, type[BaseModel]] | None = None,
    *,
    known: Mapping[str, type[BaseModel]] | None = None,
    opaque: Collection[type[BaseModel]] = OPAQUE_MODELS,
) -> ReadmeCheck:
    """Whether every generated region of the README is up to date.

    ``models`` maps marker names to models, e.g. ``{"LoadAwareSchedulingArgs": LoadAwareSchedulingArgs}``;
    each of them must have a region. ``known`` maps more names that regions may use without having to.
    With neither, marker names resolve among the installed plugins' args models. ``module:Class`` markers
    are always imported. Raises ``ConfigReadError`` when the README cannot be read.
    """
    readme = Path(readme_path)
    text = _read(readme)
    resolve: Mapping[str, type[BaseModel]] | None = None
    if models is not None or known is not None:
        resolve = {**(known or {}), **(models or {})}
    _, changed, problems = render_readme(text, readme.parent, resolve, opaque=opaque)
    regions, _ = find_regions(text)
    stale = {(r.kind, r.target, r.line) for r in changed}
    states = [RegionState(r, (r.kind, r.target, r.line) not in stale) for r in regions]
    if models is not None:
        present = {r.target for r in regions if r.kind == "args-table"}
        for name in models:
            if name not in present:
                problems.append(Problem("", f"no <!-- args-table:{name} --> region"))
    return ReadmeCheck(readme, states, problems)


def update_readme(
    readme_path: str | Path,
    models: Mapping[str, type[BaseModel]] | None = None,
    *,
    opaque: Collection[type[BaseModel]] = OPAQUE_MODELS,
) -> list[Region]:
    """Regenerate every region of the README in place; returns the regions that changed.

    Raises ``ValidationError`` (nothing written) when a marker is broken or a region cannot be rendered,
    and ``ConfigReadError`` when the README cannot be read.
    """
    readme = Path(readme_path)
    text = _read(readme)
    new_text, changed, problems = render_readme(text, readme.parent, models, opaque=opaque)
    if problems:
        raise ValidationError(str(readme), problems)
    if new_text != text:
        readme.write_text(new_text, encoding="utf-8")
    return changed
