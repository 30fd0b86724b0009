"""``koord_framework.codecache``: dataclass methods compiled once, at install time, and read at start-up.

Every check runs in a fresh interpreter with a table of its own (``install`` routes a process once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from koord_framework import codecache

ROOT = Path(__file__).resolve().parents[1]

MODULE = """
from dataclasses import dataclass, field

@dataclass(slots=True)
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)

@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
"""


def _run(code: str, tmp_path: Path) -> dict[str, object]:
    (tmp_path / "probe_module.py").write_text(MODULE)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    probe = textwrap.dedent(code) + "\nimport json\nprint(json.dumps(result))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path, env=env
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _build(tmp_path: Path) -> Path:
    table = tmp_path / "table.marshal"
    result = _run(
        f"""
        from pathlib import Path
        from koord_framework import codecache
        entries, failed = codecache.build(Path({str(table)!r}), ["probe_module"])
        result = {{"entries": entries, "failed": failed}}
        """,
        tmp_path,
    )
    assert result["failed"] == []
    assert isinstance(result["entries"], int) and result["entries"] >= 5  # __init__, __repr__, __eq__, ...
    return table


USE = """
from pathlib import Path
import dataclasses
from koord_framework import codecache
for section in (codecache._exec, codecache._eval, codecache._docs):
    section.clear()  # only the table under test (the package's own was read on import)
codecache._counts.update(hits=0, misses=0)
routed_before = getattr(dataclasses.exec, "koord_codecache", False) if hasattr(dataclasses, "exec") else False
if routed_before:
    codecache._exec.update(codecache._read(Path({table!r}))["exec"])
else:
    codecache.install(Path({table!r}))
from probe_module import Point, Version
p = Point(1, tags=["a"])
result = {{
    "stats": codecache.stats(),
    "repr": repr(p),
    "eq": p == Point(1, 0, ["a"]),
    "order": Version(1, 2) < Version(1, 10),
    "frozen": False,
}}
try:
    Version(1, 2).major = 3
except dataclasses.FrozenInstanceError:
    result["frozen"] = True
"""


def test_a_process_reads_the_methods_it_would_compile_from_the_table(tmp_path: Path) -> None:
    table = _build(tmp_path)
    result = _run(USE.format(table=str(table)), tmp_path)
    stats = result["stats"]
    assert isinstance(stats, dict)
    assert stats["misses"] == 0 and stats["hits"] >= 5
    # The classes behave as compiled ones do.
    assert result["repr"] == "Point(x=1, y=0, tags=['a'])"
    assert result["eq"] is True and result["order"] is True and result["frozen"] is True


def test_a_damaged_or_foreign_table_is_ignored(tmp_path: Path) -> None:
    table = _build(tmp_path)
    good = table.read_bytes()
    for name, data in {
        "foreign": good.replace(codecache._header(), codecache._header()[:-4] + b"\0\0\0\0", 1),
        "truncated": good[: len(good) // 2],
        "garbage": b"not a table",
    }.items():
        bad = tmp_path / f"{name}.marshal"
        bad.write_bytes(data)
        result = _run(USE.format(table=str(bad)), tmp_path)
        stats = result["stats"]
        assert isinstance(stats, dict)
        assert stats["hits"] == 0, name  # compiled as without a table
        assert result["eq"] is True and result["frozen"] is True, name


def test_the_table_is_readable_by_everyone_and_keyed_by_the_exact_source(tmp_path: Path) -> None:
    table = _build(tmp_path)
    assert table.stat().st_mode & 0o444 == 0o444  # the image's user did not build it
    entries = codecache._read(table)["exec"]
    assert entries and all(isinstance(k, str) and k.startswith("def __create_fn__") for k in entries)


def test_exec_of_anything_but_source_text_passes_through() -> None:
    routed = codecache._cached_exec({})
    namespace: dict[str, object] = {}
    routed(compile("x = 1", "<test>", "exec"), namespace)
    assert namespace["x"] == 1


def test_compile_is_cached_for_typing_expressions_only() -> None:
    table: dict[str, object] = {}
    routed = codecache._cached_compile(table)  # type: ignore[arg-type]
    assert eval(routed("1 + 2", "<string>", "eval")) == 3
    assert "1 + 2" in table or not codecache.recording()  # kept only while a build records
    other = routed("y = 2", "<string>", "exec")  # not an expression typing compiles: passed through
    assert "y = 2" not in table
    namespace: dict[str, object] = {}
    exec(other, namespace)
    assert namespace["y"] == 2


MODELS = '''
from pydantic import BaseModel, ConfigDict


class Limits(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    cpu: int = 0
    """Cores the thing may use."""
    memory: "int" = 0
    """Bytes the thing may use."""
'''

DOCS = """
from pathlib import Path
from koord_framework import codecache, attribute_docs
for section in (codecache._exec, codecache._eval, codecache._docs):
    section.clear()
codecache._docs.update(codecache._read(Path({table!r}))["docs"])
attribute_docs._trees.clear()
attribute_docs.install()  # as koord_framework.plugin does
from models_module import Limits
result = {{
    "descriptions": {{k: v.description for k, v in Limits.model_fields.items()}},
    "parsed": sorted(attribute_docs._trees),
}}
"""


def test_attribute_docstrings_come_from_the_table_while_the_file_is_unchanged(tmp_path: Path) -> None:
    (tmp_path / "models_module.py").write_text(MODELS)
    table = tmp_path / "table.marshal"
    _run(
        f"""
        from pathlib import Path
        from koord_framework import attribute_docs, codecache
        attribute_docs.install()
        entries, failed = codecache.build(Path({str(table)!r}), ["models_module"])
        result = {{"failed": failed}}
        """,
        tmp_path,
    )
    expected = {"cpu": "Cores the thing may use.", "memory": "Bytes the thing may use."}
    fresh = _run(DOCS.format(table=str(table)), tmp_path)
    assert fresh == {"descriptions": expected, "parsed": []}  # nothing parsed: all from the table
    source = tmp_path / "models_module.py"
    source.write_text(MODELS.replace("Cores the thing", "CPUs the thing") + "\n")  # changed since the build
    changed = _run(DOCS.format(table=str(table)), tmp_path)
    assert changed["descriptions"] == {**expected, "cpu": "CPUs the thing may use."}
    assert changed["parsed"] == [str(source)]
