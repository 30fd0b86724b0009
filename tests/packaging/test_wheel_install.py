"""A user's install: wheels of the framework and one plugin into a fresh venv, then the example cluster
scheduled (or descheduled) with no ``--config`` and from outside the checkout (issue 20, docs/adr/0007).

The wheels are built from this checkout without build isolation (the dev venv has setuptools), the
project's own distributions are found in the wheel folder and third-party dependencies through pip's
configured index, as a user's pip would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = (
    ".",
    "plugins/kubernetes",
    "plugins/loadaware",
    "plugins/migration",
    "plugins/lownodeload",
    "libs/descheduling",
)
# The core of the example cluster: nodes, their NodeMetrics, running and pending pods (no CRDs of plugins
# that are not installed here).
EXAMPLE = ("00-nodes.yaml", "10-nodemetrics.yaml", "20-pods-running.yaml", "30-pods-pending.yaml")


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    build = tmp_path_factory.mktemp("build")
    for dist in DISTRIBUTIONS:
        # A copy: an in-tree build would leave build/ and egg-info behind in the checkout.
        src = build / dist.replace("/", "_").strip(".") if dist != "." else build / "framework"
        ignore = shutil.ignore_patterns(
            ".venv",
            ".git",
            "build",
            "*.egg-info",
            "__pycache__",
            "plugins",
            "libs",
            "native",
            "bench",
            "tests",
            ".demo-state",
        )
        shutil.copytree(
            ROOT / dist,
            src,
            ignore=ignore if dist == "." else shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
            symlinks=False,
        )
        proc = _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "-q",
                "-w",
                str(out),
                str(src),
            ]
        )
        assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cluster")
    for name in EXAMPLE:
        shutil.copy(ROOT / "configs/examples/cluster" / name, folder / name)
    return folder


def _venv(path: Path, wheels: Path, *requirements: str) -> Path:
    assert _run([sys.executable, "-m", "venv", str(path)]).returncode == 0
    _install(path, wheels, *requirements)
    return path / "bin/koord"


def _install(path: Path, wheels: Path, *requirements: str) -> None:
    env = dict(os.environ)
    env["PIP_FIND_LINKS"] = " ".join(filter(None, [str(wheels), os.environ.get("PIP_FIND_LINKS", "")]))
    env.pop("PYTHONPATH", None)
    proc = _run([str(path / "bin/python"), "-m", "pip", "install", "-q", *requirements], env=env)
    assert proc.returncode == 0, proc.stderr


def _koord(koord: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return _run([str(koord), *argv], cwd=cwd, env=env)


def test_framework_and_one_plugin(tmp_path: Path, wheels: Path, example: Path) -> None:
    """A scheduler plugin alone, then a descheduler plugin added (one venv: the dependencies are installed
    once)."""
    koord = _venv(tmp_path / "venv", wheels, "koord-framework", "koord-plugin-loadaware")
    listed = _koord(koord, "plugins", "list", cwd=tmp_path)
    assert "LoadAwareScheduling" in listed.stdout and "PrioritySort" in listed.stdout
    assert "Reservation" not in listed.stdout
    proc = _koord(koord, "simulate", "--cluster", str(example), cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    # The default profile without the plugins that are not here, said once.
    assert "koord simulate: no --config: " in proc.stderr
    assert "pip install " in proc.stderr and "koord-plugin-reservation" in proc.stderr
    summary = next(line for line in proc.stdout.splitlines() if " scheduled, " in line)
    assert int(summary.split()[0]) > 0, proc.stdout
    # The Kubernetes client is an extra: asking for a real cluster says how to get it.
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    cfg = tmp_path / "profile.yaml"
    cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    real = _koord(
        koord, "scheduler", "--config", str(cfg), "--kubeconfig", str(tmp_path / "kubeconfig"), cwd=tmp_path
    )
    assert real.returncode == 2 and "pip install 'koord-framework[kube]'" in real.stderr, real.stderr
    assert "Traceback" not in real.stderr

    # The descheduler: no descheduler plugin yet, then LowNodeLoad (which brings MigrationController).
    _install(tmp_path / "venv", wheels, "koord-plugin-lownodeload")
    proc = _koord(koord, "deschedule", "--cluster", str(example), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "round 1" in proc.stdout.lower(), proc.stdout
