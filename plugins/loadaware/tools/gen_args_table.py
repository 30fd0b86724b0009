"""Generate a plugin's args table (Markdown) from its ``PluginArgs`` model and keep the README in step.

The table is rendered from the model's JSON schema, so names (YAML spelling), types, ranges, defaults and
descriptions (attribute docstrings) have one source: the code. Nested models are expanded with dotted names.
Written to be reusable by every plugin (a candidate for ``koord_framework.docs``):

    python tools/gen_args_table.py            # rewrite the table in README.md
    python tools/gen_args_table.py --check    # exit 1 if README.md is out of date (CI, tests)

The README marks the table's place with ``<!-- args-table:begin -->`` and ``<!-- args-table:end -->``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

BEGIN = "<!-- args-table:begin -->"
END = "<!-- args-table:end -->"
_HIDDEN = frozenset({"apiVersion", "kind"})
"""Accepted for Koordinator compatibility, meaningless to a user: not listed."""


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return dict(defs[ref.rsplit("/", 1)[-1]])
    return schema


def _non_null(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema without a ``null`` alternative, and whether null was allowed."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        rest = [o for o in options if o.get("type") != "null"]
        if len(rest) == 1 and len(rest) < len(options):
            return _resolve(rest[0], defs), True
    return _resolve(schema, defs), False


def _range(schema: dict[str, Any]) -> str:
    lo = schema.get("minimum")
    lo_ex = schema.get("exclusiveMinimum")
    hi = schema.get("maximum")
    hi_ex = schema.get("exclusiveMaximum")
    parts = []
    if lo is not None and lo > -(2**62):
        parts.append(f">= {lo}")
    if lo_ex is not None:
        parts.append(f"> {lo_ex}")
    if hi is not None and hi < 2**62:
        parts.append(f"<= {hi}")
    if hi_ex is not None:
        parts.append(f"< {hi_ex}")
    return ", ".join(parts)


def type_of(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """A short, user-facing type: ``int (>= 0, <= 100)``, ``map[string]int``, ``duration``, ``one of …``."""
    schema, _ = _non_null(schema, defs)
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" if v != "" else '`""`' for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type")
    if kind == "string" and "pattern" in schema and "ms" in str(schema["pattern"]):
        return "duration"
    if kind == "integer":
        rng = _range(schema)
        return f"int ({rng})" if rng else "int"
    if kind == "boolean":
        return "bool"
    if kind == "string":
        return "string"
    if kind == "array":
        return f"list[{type_of(schema.get('items', {}), defs)}]"
    if kind == "object" and "properties" not in schema:
        values = schema.get("additionalProperties")
        inner = type_of(values, defs) if isinstance(values, dict) else "any"
        return f"map[string]{inner}"
    if kind == "object":
        return "object"
    return kind or "any"


def _model_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Defaults by YAML name, default factories included (the JSON schema leaves those out)."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        value = info.get_default(call_default_factory=True, validated_data={})
        out[info.alias or name] = (
            value.model_dump(mode="json", by_alias=True) if isinstance(value, BaseModel) else value
        )
    return out


def _default(defaults: dict[str, Any], name: str, required: bool) -> str:
    if required:
        return "required"
    value = defaults.get(name)
    if value is None:
        return "unset"
    if value == {} or value == []:
        return "empty"
    if isinstance(value, str):
        return f'`"{value}"`' if value == "" else f"`{value}`"
    return "`" + json.dumps(value, separators=(", ", ": "), default=str) + "`"


def _describe(text: str) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    text = text.replace("``", "`")
    return text.replace("|", "\\|")


def _nested_model(owner: type[BaseModel] | None, alias: str) -> type[BaseModel] | None:
    """The model class of a nested field (through ``X | None``), to read its defaults."""
    if owner is None:
        return None
    for name, info in owner.model_fields.items():
        if (info.alias or name) != alias:
            continue
        candidates = [info.annotation, *getattr(info.annotation, "__args__", ())]
        for candidate in candidates:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                return candidate
    return None


def rows(model: type[BaseModel]) -> list[tuple[str, str, str, str]]:
    """(YAML name, type, default, description) for every field, nested models expanded with dots."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    out: list[tuple[str, str, str, str]] = []

    def walk(obj: dict[str, Any], prefix: str, owner: type[BaseModel] | None) -> None:
        required = set(obj.get("required", ()))
        defaults = _model_defaults(owner) if owner is not None else {}
        for name, field in obj.get("properties", {}).items():
            if not prefix and name in _HIDDEN:
                continue
            target, _ = _non_null(field, defs)
            nested = target.get("type") == "object" and "properties" in target
            out.append(
                (
                    prefix + name,
                    "object" if nested else type_of(field, defs),
                    _default(defaults, name, name in required),
                    _describe(field.get("description") or target.get("description") or ""),
                )
            )
            if nested:
                walk(target, prefix + name + ".", _nested_model(owner, name))

    walk(schema, "", model)
    return out


def render_args_table(model: type[BaseModel]) -> str:
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    lines += [f"| `{n}` | {t} | {d} | {desc} |" for n, t, d, desc in rows(model)]
    return "\n".join(lines) + "\n"


def replace_table(readme: str, table: str) -> str:
    """``readme`` with the text between the markers replaced by ``table``; ValueError without markers."""
    start = readme.find(BEGIN)
    end = readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README has no {BEGIN} ... {END} markers")
    return readme[: start + len(BEGIN)] + "\n" + table + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if README.md is not up to date")
    parser.add_argument("--readme", type=Path, default=Path(__file__).resolve().parent.parent / "README.md")
    opts = parser.parse_args(argv)

    from koord_plugin_loadaware.args import LoadAwareSchedulingArgs

    current = opts.readme.read_text()
    wanted = replace_table(current, render_args_table(LoadAwareSchedulingArgs))
    if opts.check:
        if current != wanted:
            print(f"{opts.readme}: args table is out of date; run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        opts.readme.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
