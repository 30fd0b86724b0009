"""The README's args table matches the ``Args`` model (names, defaults, descriptions)."""

from __future__ import annotations

import json
import typing
from pathlib import Path

from koord_plugin_cpuburst import CPUBurstArgs as ARGS
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

README = Path(__file__).resolve().parent.parent / "README.md"


def rows(model: type[BaseModel]) -> list[str]:
    out = []
    for name, f in model.model_fields.items():
        if name in ("api_version", "kind"):
            continue
        default = f.default if f.default is not PydanticUndefined else f.default_factory()  # type: ignore[call-arg,misc]
        ann = f.annotation
        kind = getattr(ann, "__name__", str(ann))
        if str(ann).startswith("list[typing.Literal"):
            kind = "list of " + " \\| ".join(f"`{a}`" for a in typing.get_args(typing.get_args(ann)[0]))
        for m in f.metadata:
            for attr, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
                if (v := getattr(m, attr, None)) is not None:
                    kind += f" ({sym} {v})"
            if (v := getattr(m, "min_length", None)) is not None:
                kind += f" (at least {v})"
        desc = " ".join((f.description or "").split())
        out.append(f"| `{f.alias}` | {kind} | `{json.dumps(default)}` | {desc} |")
    return out


def test_readme_args_table_matches_the_model() -> None:
    text = README.read_text()
    for row in rows(ARGS):
        assert row in text, f"README.md args table is stale, expected row:\n{row}"


def test_example_profile_loads() -> None:
    from koord_framework.config.loader import load_koordlet_config

    loaded = load_koordlet_config(README.parent / "examples" / "profile.yaml")
    assert ARGS.__name__.removesuffix("Args") in [s.name for s in loaded.qos_strategies]
