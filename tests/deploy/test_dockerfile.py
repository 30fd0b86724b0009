"""The Dockerfile and tools/image, checked statically: one image with the framework and every plugin, the same
layout whether the base is pulled (docker/podman build) or made by mmdebstrap (`make image`).

The image itself is built and run by tests/e2e/test_image.py.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lines() -> list[str]:
    text = (ROOT / "Dockerfile").read_text()
    # Join continuation lines, drop comments.
    return [
        ln
        for ln in re.sub(r"\\\n\s*", " ", text).splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]


def stages() -> list[list[str]]:
    out: list[list[str]] = []
    for line in lines():
        if line.startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def test_both_stages_are_debian_bookworm_by_default() -> None:
    args = dict(ln.split(None, 1)[1].split("=", 1) for ln in lines() if ln.startswith("ARG ") and "=" in ln)
    assert args["BASE"] == "docker.io/library/debian:bookworm-slim"
    assert args["BUILD_BASE"] == "${BASE}"
    builder, runtime = stages()
    assert builder[0] == "FROM ${BUILD_BASE} AS builder"
    assert runtime[0] == "FROM ${BASE}"


def test_runtime_stage_installs_nothing_but_python_and_the_built_venv() -> None:
    runtime = stages()[1]
    assert not [ln for ln in runtime if "pip " in ln], "no pip in the runtime stage"
    assert "RUN koord-packages install runtime && rm /usr/local/sbin/koord-packages" in runtime
    assert "COPY --from=builder /opt/koord /opt/koord" in runtime
    assert any(ln.startswith("ENV PATH=/opt/koord/bin:") for ln in runtime)
    assert 'ENTRYPOINT ["koord"]' in runtime
    assert "USER 65532:65532" in runtime


def test_package_lists_keep_build_tools_out_of_the_runtime() -> None:
    def listed(flavour: str) -> set[str]:
        out = subprocess.run(
            ["sh", str(ROOT / "tools/image/packages.sh"), "list", flavour],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return set(out.split())

    runtime, build = listed("runtime"), listed("build")
    assert runtime == {"python3"}
    assert {"gcc", "python3-dev", "libffi-dev", "python3-venv"} <= build
    assert runtime <= build, "the builder's Python is the runtime's"


def test_every_plugin_and_library_is_built_by_the_glob() -> None:
    builder = stages()[0]
    [wheel] = [ln for ln in builder if "pip wheel" in ln and ' ".[kube]" ' in ln]
    # The framework with its kube extra (the image talks to API servers); plugins depend on the family
    # libraries: those must be built from the tree too.
    assert ' ".[kube]" libs/*/ plugins/*/' in wheel
    assert "./native" in wheel
    plugins = sorted(p.parent.name for p in ROOT.glob("plugins/*/pyproject.toml"))
    assert plugins, "there are plugins to install"
    assert (
        sorted(p.name for p in ROOT.glob("plugins/*/") if p.is_dir() and not p.name.startswith("."))
        == plugins
    ), "every directory under plugins/ is an installable distribution"
    [install] = [ln for ln in builder if "install" in ln and "/opt/koord" in ln]
    assert "--no-index" in install, "the venv is filled from the built wheels only"


def test_build_context_leaves_local_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "**/__pycache__"} <= set(ignored)
