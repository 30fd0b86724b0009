"""The Dockerfile, checked statically (no docker here): one image with the framework and every plugin."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def stages() -> list[list[str]]:
    text = (ROOT / "Dockerfile").read_text()
    # Join continuation lines, drop comments.
    lines = [
        ln
        for ln in re.sub(r"\\\n\s*", " ", text).splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]
    out: list[list[str]] = []
    for line in lines:
        if line.startswith("FROM "):
            out.append([])
        out[-1].append(line)
    return out


def test_runtime_is_python_3_11_slim_and_installs_only_built_wheels() -> None:
    builder, runtime = stages()
    assert runtime[0].split()[1] == "python:3.11-slim"
    assert builder[0].split()[1].startswith("python:3.11")
    installs = [ln for ln in runtime if "pip install" in ln]
    assert installs and all("--no-index" in ln for ln in installs), (
        "the runtime stage reaches no package index"
    )
    assert any(ln.startswith('ENTRYPOINT ["koord"]') for ln in runtime)
    assert any(ln.startswith("USER ") and not ln.startswith("USER root") for ln in runtime)


def test_every_plugin_is_built_by_the_glob() -> None:
    builder = stages()[0]
    [wheel] = [ln for ln in builder if "pip wheel" in ln]
    assert " . " in wheel and "plugins/*/" in wheel
    # Plugins depend on the family libraries: those must be built from the tree too, before the plugins.
    assert " libs/*/ plugins/*/" in wheel
    plugins = sorted(p.parent.name for p in ROOT.glob("plugins/*/pyproject.toml"))
    assert plugins, "there are plugins to install"
    assert (
        sorted(p.name for p in ROOT.glob("plugins/*/") if p.is_dir() and not p.name.startswith("."))
        == plugins
    ), "every directory under plugins/ is an installable distribution"


def test_build_context_leaves_local_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "**/__pycache__"} <= set(ignored)
