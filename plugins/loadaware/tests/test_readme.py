"""The README's args table is generated from the args model; this fails when someone forgets to regenerate."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_args_table", ROOT / "tools" / "gen_args_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_args_table_is_up_to_date() -> None:
    assert _generator().main(["--check", "--readme", str(ROOT / "README.md")]) == 0, (
        "README.md args table is stale: run `python plugins/loadaware/tools/gen_args_table.py`"
    )


def test_table_lists_every_field_with_its_yaml_name() -> None:
    from koord_plugin_loadaware import LoadAwareSchedulingArgs

    names = [row[0] for row in _generator().rows(LoadAwareSchedulingArgs)]
    expected = [
        f.alias for n, f in LoadAwareSchedulingArgs.model_fields.items() if n not in ("api_version", "kind")
    ]
    assert [n for n in names if "." not in n] == expected
    assert "aggregated.scoreAggregationType" in names


def test_stale_table_is_detected(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- args-table:begin -->\n| old |\n<!-- args-table:end -->\n")
    gen = _generator()
    assert gen.main(["--check", "--readme", str(readme)]) == 1
    assert gen.main(["--readme", str(readme)]) == 0
    assert gen.main(["--check", "--readme", str(readme)]) == 0
    assert "`usageThresholds`" in readme.read_text()
