"""Turning what went wrong into ``Problem(path, message)`` a person can act on.

Paths are YAML paths into the configuration document (``profiles[0].plugins.filter.enabled[2]``);
entries of ``pluginConfig`` (and koordlet ``qosStrategies``) are named by their plugin
(``pluginConfig[LoadAwareScheduling]``) because that is how a reader finds them. Messages say what is
expected and what was found, and an unknown key comes with the closest known one.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Union

import pydantic
from pydantic import BaseModel

from koord_framework.errors import PluginError, Problem, format_path
from koord_framework.plugin import Plugin, PluginArgs
from koord_framework.registry import PluginRegistry

PathPart = str | int
"""One step of a path: a key, a list index, or an already-bracketed ``"[Name]"`` selector."""

KEYED_LISTS = frozenset({"pluginConfig", "qosStrategies"})
"""Lists whose entries a path names by their ``name`` rather than their index."""

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def key_part(key: str) -> str:
    """A mapping key as a path step: plain keys stay dotted, others are quoted (``["kubernetes.io/os"]``)."""
    if key.startswith("[") or _PLAIN_KEY.match(key):
        return key
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'["{escaped}"]'


def render_path(parts: Iterable[PathPart]) -> str:
    return format_path(p if isinstance(p, int) else key_part(p) for p in parts)


def problem(parts: Iterable[PathPart], message: str) -> Problem:
    return Problem(render_path(parts), message)


def entry_selector(name: str) -> str:
    """The path step for a keyed-list entry (``[LoadAwareScheduling]``)."""
    return f"[{name}]"


def describe_value(value: Any) -> str:
    """What a user wrote, briefly: ``string "abc"``, ``integer 5``, ``a list``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def suggest(word: str, candidates: Iterable[str]) -> str:
    """``'; did you mean "X"?'`` for the closest candidate, or ``''``."""
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.8)
    return f'; did you mean "{matches[0]}"?' if matches else ""


# --- pydantic errors ----------------------------------------------------------------------------------

_TYPE_MESSAGES: dict[str, str] = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dataclass_type": "must be a mapping",
    "duration_type": 'must be a duration string such as "10s", "1m30s" or "300ms"',
}


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


def _fields_by_key(model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        out[info.alias or name] = info.annotation
        out.setdefault(name, info.annotation)
    return out


def _type_at(root: Any, loc: Sequence[PathPart]) -> Any:
    """The declared type at ``loc`` under ``root`` (a model class), or None when it cannot be told."""
    tp = root
    for part in loc:
        tp = _unwrap(tp)
        origin = typing.get_origin(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
            fields = _fields_by_key(tp)
            if part not in fields:
                return None
            tp = fields[part]
        elif origin in (list, tuple, Sequence) and isinstance(part, int):
            tp = typing.get_args(tp)[0]
        elif origin in (dict, Mapping) and isinstance(part, str):
            tp = typing.get_args(tp)[1]
        else:
            return None
    return _unwrap(tp)


def _known_keys(model: type[BaseModel]) -> list[str]:
    hidden = {"apiVersion", "kind"} if issubclass(model, PluginArgs) else set()
    return [
        info.alias or name for name, info in model.model_fields.items() if (info.alias or name) not in hidden
    ]


def _message(err: Mapping[str, Any], root: Any) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    loc = tuple(err.get("loc", ()))
    if kind == "extra_forbidden":
        parent = _type_at(root, loc[:-1]) if root is not None else None
        key = str(loc[-1]) if loc else ""
        if isinstance(parent, type) and issubclass(parent, BaseModel):
            known = _known_keys(parent)
            hint = suggest(key, known)
            if not hint and len(known) <= 16:
                hint = f" (known fields: {', '.join(known)})"
            return f"unknown field{hint}"
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}, got {describe_value(value)}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}"
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    if kind == "less_than":
        return f"must be < {ctx.get('lt')}"
    if kind == "greater_than":
        return f"must be > {ctx.get('gt')}"
    if kind == "string_too_short":
        n = ctx.get("min_length")
        return "must not be empty" if n == 1 else f"must be at least {n} characters long"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} item(s)"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected')}, got {describe_value(value)}"
    if kind == "string_pattern_mismatch":
        return f"must match the pattern {ctx.get('pattern')!r}, got {describe_value(value)}"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    msg = str(err.get("msg", "invalid value"))
    return msg[:1].lower() + msg[1:]


def _display_loc(loc: Sequence[PathPart], raw: Any) -> list[PathPart]:
    """Rewrite ``pluginConfig, 2`` to ``pluginConfig, [Name]`` when entry 2 names its plugin unambiguously."""
    out: list[PathPart] = []
    node = raw
    for i, part in enumerate(loc):
        step: PathPart = part
        if isinstance(part, int) and i > 0 and loc[i - 1] in KEYED_LISTS and isinstance(node, list):
            name = _entry_name(node, part)
            if name is not None:
                step = entry_selector(name)
        out.append(step)
        node = _child(node, part)
    return out


def _entry_name(entries: list[Any], index: int) -> str | None:
    if not 0 <= index < len(entries):
        return None
    entry = entries[index]
    name = entry.get("name") if isinstance(entry, Mapping) else None
    if not isinstance(name, str) or not name or "[" in name or "]" in name:
        return None
    same = [e for e in entries if isinstance(e, Mapping) and e.get("name") == name]
    return name if len(same) == 1 else None


def _child(node: Any, part: PathPart) -> Any:
    if isinstance(node, Mapping) and isinstance(part, str):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def from_pydantic(
    exc: pydantic.ValidationError,
    *,
    prefix: Sequence[PathPart] = (),
    model: type[BaseModel] | None = None,
    raw: Any = None,
) -> list[Problem]:
    """Every error of ``exc`` as a Problem under ``prefix``; ``raw`` is the input (to name keyed entries)."""
    out: list[Problem] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err.get("loc", ()) if isinstance(p, (str, int))]
        out.append(problem([*prefix, *_display_loc(loc, raw)], _message(err, model)))
    return out


# --- plugins ----------------------------------------------------------------------------------------


def unknown_plugin_message(name: str, registry: PluginRegistry, *, listing: bool = True) -> str:
    from koord_framework.config.shipped import distribution_of

    installed = registry.names()
    dist = distribution_of(registry.group, name)
    if dist is not None:  # one of the project's plugins: say which distribution brings it
        return f'plugin "{name}" is not installed in {registry.group}: pip install {dist}'
    message = f'plugin "{name}" is not installed in {registry.group}{suggest(name, installed)}'
    if listing:
        message += f" (installed: {', '.join(installed) if installed else 'none'})"
    return message


def not_implemented_message(name: str, point: str, implemented: Sequence[str]) -> str:
    """A plugin named at an extension point it does not implement, with the points it does."""
    have = ", ".join(implemented) or "none"
    return f'plugin "{name}" does not implement {point} (it implements: {have})'


def load_class(
    registry: PluginRegistry, name: str, where: Sequence[PathPart], problems: list[Problem]
) -> type[Plugin] | None:
    """The plugin class called ``name``, or None with a problem at ``where`` (not installed, or broken)."""
    if name not in registry:
        # The installed list is long; say it once per group rather than on every line.
        listed = any(
            p.message.startswith("plugin ")
            and f"{registry.group}" in p.message
            and "(installed: " in p.message
            for p in problems
        )
        problems.append(problem(where, unknown_plugin_message(name, registry, listing=not listed)))
        return None
    try:
        return registry.get(name)
    except PluginError as exc:
        problems.append(problem(where, str(exc)))
        return None


def validate_args(
    cls: type[Plugin], raw: Mapping[str, Any] | None, where: Sequence[PathPart], problems: list[Problem]
) -> PluginArgs | None:
    """``raw`` validated into ``cls.Args`` (defaults for None); problems land under ``where`` (the args)."""
    kind = raw.get("kind") if isinstance(raw, Mapping) else None
    expected = f"{cls.name}Args"
    if isinstance(kind, str) and kind and kind != expected:
        # Kubernetes decodes args as <Plugin>Args and refuses any other kind, so a pasted block of another
        # plugin's args is caught here rather than failing on its first unknown field.
        problems.append(
            problem([*where, "kind"], f'must be "{expected}" for plugin {cls.name}, got "{kind}"')
        )
        return None
    try:
        if getattr(cls.parse_args, "__func__", None) is _BASE_PARSE_ARGS:
            # YAML must use camelCase names, as Kubernetes' decoder requires; Python callers may use either.
            return cls.Args.model_validate(dict(raw) if raw is not None else {}, by_name=False)
        return cls.parse_args(dict(raw) if raw is not None else None)
    except pydantic.ValidationError as exc:
        found = from_pydantic(exc, prefix=where, model=cls.Args, raw=raw)
        if raw is None:
            # No pluginConfig entry: say so, or "required field is missing" reads as if the user wrote one.
            found = [
                Problem(p.path, f"{p.message} (plugin {cls.name} has no pluginConfig entry)") for p in found
            ]
        problems.extend(found)
        return None


_BASE_PARSE_ARGS = Plugin.parse_args.__func__  # type: ignore[attr-defined]
