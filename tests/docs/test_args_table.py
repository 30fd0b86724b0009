"""``koord_framework.docs.args_table``: tables from args models, README regions, ``koord plugins docs``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import Field, model_validator

from koord_framework.cli.main import main
from koord_framework.config.common import ConfigModel, Duration, LabelSelector
from koord_framework.docs.args_table import (
    args_rows,
    args_table,
    check_readme,
    find_regions,
    render_readme,
    update_readme,
)
from koord_framework.errors import ConfigReadError, ValidationError
from koord_framework.plugin import NoArgs, PluginArgs


class Limits(ConfigModel):
    """How far a thing may go."""

    burst: int = 0
    """Extra items at once."""
    window: Duration = Duration(60)
    """The time window."""


class Pool(ConfigModel):
    name: str
    """The pool's name."""
    selector: LabelSelector | None = None
    """Nodes of the pool."""


class DemoArgs(PluginArgs):
    """Args of a demonstration plugin."""

    threshold: Annotated[int, Field(ge=0, le=100)] = 65
    """Percent of allocatable; 0 turns the check off."""
    weights: dict[str, Annotated[int, Field(gt=0)]] = Field(default_factory=lambda: {"cpu": 1})
    """Score weight | per resource."""
    mode: Literal["", "fast", "exact"] = ""
    """``fast`` or ``exact``."""
    count: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)] = 0
    """A Go int32."""
    limits: Limits = Limits(burst=2)
    """Rate limits."""
    extra: Limits | None = None
    """Optional limits."""
    pools: list[Pool] = []
    """More pools."""
    per_kind: dict[Literal["a", "b"], Limits] = {}
    """Limits per kind."""
    qps: float | str = 10.0
    """Rate (a number or a numeric string)."""
    defaulted: dict[str, int] | None = None
    """Filled in by the validator when unset."""

    @model_validator(mode="after")
    def _defaults(self) -> DemoArgs:
        if self.defaulted is None:
            object.__setattr__(self, "defaulted", {"cpu": 1, "memory": 1})
        return self


ROWS = {r.name: r for r in args_rows(DemoArgs)}


def test_rows_use_yaml_names_in_field_order_and_hide_api_version_and_kind() -> None:
    top = [name for name in ROWS if "." not in name]
    assert top == [
        "threshold",
        "weights",
        "mode",
        "count",
        "limits",
        "extra",
        "pools",
        "perKind",
        "qps",
        "defaulted",
    ]
    assert "apiVersion" not in ROWS and "kind" not in ROWS


@pytest.mark.parametrize(
    ("name", "type_", "default"),
    [
        ("threshold", "int (>= 0, <= 100)", "`65`"),
        ("weights", "map[string]int (> 0)", '`{"cpu": 1}`'),
        ("mode", 'one of `""`, `fast`, `exact`', '`""`'),
        ("count", "int32", "`0`"),
        ("limits", "object", "see below"),
        ("limits.burst", "int", "`2`"),
        ("limits.window", "duration", "`1m0s`"),
        ("extra", "object", "unset"),
        ("extra.burst", "int", "`0`"),
        ("pools", "list[object]", "`[]`"),
        ("pools[].name", "string", "required"),
        ("pools[].selector", "LabelSelector", "unset"),
        ("perKind", "map[a|b]object", "`{}`"),
        ("perKind.<key>.window", "duration", "`1m0s`"),
        ("qps", "float or string", "`10.0`"),
        ("defaulted", "map[string]int", '`{"cpu": 1, "memory": 1}`'),
    ],
)
def test_row_types_and_defaults(name: str, type_: str, default: str) -> None:
    assert (ROWS[name].type, ROWS[name].default) == (type_, default)


def test_descriptions_come_from_attribute_docstrings() -> None:
    assert ROWS["mode"].description == "`fast` or `exact`."
    assert ROWS["weights"].description == "Score weight \\| per resource."
    assert ROWS["limits.window"].description == "The time window."


def test_table_escapes_pipes_in_types_and_has_a_header() -> None:
    table = args_table(DemoArgs)
    lines = table.splitlines()
    assert lines[:2] == ["| field | type | default | description |", "|---|---|---|---|"]
    assert "| `perKind` | map[a\\|b]object | `{}` | Limits per kind. |" in lines
    assert table.endswith("\n")


def test_a_model_without_fields_says_so() -> None:
    assert args_table(NoArgs) == "`NoArgs` has no fields.\n"


# --- regions ---------------------------------------------------------------------------------------------
README = """# demo

Text.

<!-- args-table:DemoArgs -->
| stale |
<!-- /args-table -->

<!-- include:examples/profile.yaml -->
<!-- /include -->
"""


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "profile.yaml").write_text("kind: Demo\n")
    (tmp_path / "README.md").write_text(README)
    return tmp_path


def test_stale_regions_are_reported_then_regenerated(plugin_dir: Path) -> None:
    readme = plugin_dir / "README.md"
    before = check_readme(readme, {"DemoArgs": DemoArgs})
    assert not before.ok
    assert [r.label for r in before.stale] == ["args-table:DemoArgs", "include:examples/profile.yaml"]
    assert before.messages()[0] == f"{readme}:5: args-table:DemoArgs is out of date"

    changed = update_readme(readme, {"DemoArgs": DemoArgs})
    assert [r.label for r in changed] == ["args-table:DemoArgs", "include:examples/profile.yaml"]
    text = readme.read_text()
    assert "<!-- args-table:DemoArgs -->\n| field | type | default | description |" in text
    assert "<!-- include:examples/profile.yaml -->\n```yaml\nkind: Demo\n```\n<!-- /include -->" in text
    assert check_readme(readme, {"DemoArgs": DemoArgs}).ok
    assert update_readme(readme, {"DemoArgs": DemoArgs}) == []


def test_text_outside_regions_is_kept(plugin_dir: Path) -> None:
    readme = plugin_dir / "README.md"
    update_readme(readme, {"DemoArgs": DemoArgs})
    text = readme.read_text()
    assert text.startswith("# demo\n\nText.\n\n<!-- args-table:DemoArgs -->\n")
    assert text.endswith("<!-- /include -->\n")


def test_changing_the_included_file_makes_the_readme_stale(plugin_dir: Path) -> None:
    readme = plugin_dir / "README.md"
    update_readme(readme, {"DemoArgs": DemoArgs})
    (plugin_dir / "examples" / "profile.yaml").write_text("kind: Changed\n")
    assert [r.label for r in check_readme(readme, {"DemoArgs": DemoArgs}).stale] == [
        "include:examples/profile.yaml"
    ]


def test_a_required_model_without_a_region_is_a_problem(plugin_dir: Path) -> None:
    result = check_readme(plugin_dir / "README.md", {"DemoArgs": DemoArgs, "Limits": Limits})
    assert "no <!-- args-table:Limits --> region" in [p.message for p in result.problems]
    known_only = check_readme(plugin_dir / "README.md", known={"DemoArgs": DemoArgs, "Limits": Limits})
    assert known_only.problems == []


def test_module_colon_class_markers_are_imported(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("<!-- args-table:koord_framework.config.common:PluginRef -->\n<!-- /args-table -->\n")
    assert update_readme(readme, {})
    assert "| `weight` | int32 | unset |" in readme.read_text()


def test_broken_markers_and_unknown_models_are_problems_and_nothing_is_written(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = (
        "<!-- args-table:Nope -->\n<!-- /args-table -->\n"
        "<!-- args-table:DemoArgs -->\nunclosed\n"
        "<!-- /include -->\n"
        "<!-- include:missing.yaml -->\n<!-- /include -->\n"
    )
    readme.write_text(text)
    _, _, problems = render_readme(text, tmp_path, {"DemoArgs": DemoArgs})
    messages = [f"{p.path}: {p.message}" for p in problems]
    assert messages[0] == "line 3: <!-- args-table:DemoArgs --> is not closed by <!-- /args-table -->"
    assert messages[1] == "line 5: <!-- /include --> closes no open region"
    assert messages[2].startswith("line 1: args-table:Nope: unknown args model 'Nope' (known: DemoArgs")
    assert messages[3].startswith("line 6: include:missing.yaml: cannot read")
    with pytest.raises(ValidationError) as err:
        update_readme(readme, {"DemoArgs": DemoArgs})
    assert err.value.source == str(readme)
    assert readme.read_text() == text


def test_find_regions_reports_positions() -> None:
    regions, problems = find_regions("a\n<!-- include:x.yaml -->\nold\n<!-- /include -->\n")
    assert problems == []
    assert [(r.kind, r.target, r.line) for r in regions] == [("include", "x.yaml", 2)]


def test_an_unreadable_readme_is_a_read_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigReadError, match="cannot read"):
        check_readme(tmp_path / "missing.md", {})


# --- the command line ------------------------------------------------------------------------------------
def test_cli_check_fails_on_stale_and_update_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# x\n<!-- args-table:koord_framework.config.common:PluginRef -->\n| old |\n<!-- /args-table -->\n"
    )
    assert main(["plugins", "docs", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert f"{readme}:2: args-table:koord_framework.config.common:PluginRef is out of date" in err
    assert f"fix: koord plugins docs {tmp_path}" in err

    assert main(["plugins", "docs", str(readme)]) == 0
    assert "updated args-table:koord_framework.config.common:PluginRef" in capsys.readouterr().out
    assert main(["plugins", "docs", str(readme), "--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_cli_reports_broken_markers_without_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("<!-- args-table:NoSuchArgsAnywhere -->\n<!-- /args-table -->\n")
    assert main(["plugins", "docs", str(readme)]) == 1
    assert "unknown args model 'NoSuchArgsAnywhere'" in capsys.readouterr().err


def test_cli_resolves_installed_plugins_args_by_class_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("koord_plugin_loadaware")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- args-table:LoadAwareSchedulingArgs -->\n<!-- /args-table -->\n")
    assert main(["plugins", "docs", str(readme)]) == 0
    assert '| `usageThresholds` | map[string]int (>= 0, <= 100) | `{"cpu": 65, "memory": 95}` |' in (
        readme.read_text()
    )


def test_cli_missing_readme_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "docs", str(tmp_path / "nowhere.md"), "--check"]) == 2
    assert "cannot read" in capsys.readouterr().err
