"""The plugin template renders into a distribution whose own tests pass once it is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from koord_framework.templates import render_plugin


def test_render_refuses_bad_names_and_existing_dirs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CamelCase"):
        render_plugin("node-label", tmp_path)
    render_plugin("NodeLabelPreference", tmp_path)
    with pytest.raises(FileExistsError):
        render_plugin("NodeLabelPreference", tmp_path)


def test_rendered_plugin_installs_and_passes_its_tests(tmp_path: Path) -> None:
    plugin_dir = render_plugin("NodeLabelPreference", tmp_path / "src")
    assert (plugin_dir / "src" / "koord_plugin_nodelabelpreference" / "plugin.py").is_file()
    text = (plugin_dir / "pyproject.toml").read_text()
    assert 'NodeLabelPreference = "koord_plugin_nodelabelpreference.plugin:NodeLabelPreference"' in text
    from koord_framework.docs.plugin_readme import check_plugin_readme

    assert check_plugin_readme(plugin_dir) == []
    assert "`labelKey`" in (plugin_dir / "README.md").read_text()
    leftovers = [p for p in plugin_dir.rglob("*") if "__PluginName__" in p.name or "__module__" in p.name]
    assert not leftovers
    for path in plugin_dir.rglob("*"):
        if path.is_file():
            assert "__PluginName__" not in path.read_text(), path

    # Install into a private target dir (never into the project's venv), then run the rendered tests with
    # that dir on the path: its entry point is found exactly as an installed third-party plugin's would be.
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(plugin_dir),
        ],
        check=True,
        capture_output=True,
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(plugin_dir / "tests")],
        env=env,
        cwd=plugin_dir,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout


def test_cli_new_renders_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from koord_framework.cli.main import main

    assert main(["plugins", "new", "MyScore", "--dest", str(tmp_path)]) == 0
    assert (tmp_path / "myscore" / "pyproject.toml").is_file()
    assert "created" in capsys.readouterr().out
    assert main(["plugins", "new", "MyScore", "--dest", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["plugins", "new", "bad-name", "--dest", str(tmp_path)]) == 2


def test_cli_new_defaults_to_a_koord_plugin_folder_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from koord_framework.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["plugins", "new", "NodeLabelPreference"]) == 0
    root = tmp_path / "koord-plugin-nodelabelpreference"
    assert (root / "src/koord_plugin_nodelabelpreference/py.typed").is_file()
    assert (root / "tests/test_conformance.py").is_file()  # where docs/writing-plugins.md puts it
    assert "schedulerName: koord-scheduler" in (root / "examples/profile.yaml").read_text()
    assert "koord-plugin-kubernetes" in (root / "pyproject.toml").read_text()
    assert not (tmp_path / "plugins").exists()
