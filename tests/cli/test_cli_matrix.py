"""The CLI's edges, as a newcomer meets them (issue 20): closed pipes, empty inputs, missing files and bare
flags end with the documented exit status (0 ok, 1 a problem found, 2 bad input) and a one-line reason,
never a traceback. Each case runs the real ``koord`` in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "configs/examples/cluster")
KOORD = f"{sys.executable} -m koord_framework"


def _koord(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "koord_framework", *argv], capture_output=True, text=True, cwd=cwd
    )


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inputs")
    (root / "empty.yaml").write_text("")
    (root / "empty-dir").mkdir()
    (root / "no-yaml").mkdir()
    (root / "no-yaml" / "notes.txt").write_text("not a manifest\n")
    return {p.name: p for p in root.iterdir()}


@pytest.mark.parametrize(
    "command",
    [
        "plugins list",
        "plugins list --json",
        f"simulate --cluster {EXAMPLE} -o yaml",
        f"deschedule --cluster {EXAMPLE} --dry-run --explain",
        "completion bash",
    ],
)
def test_a_closed_pipe_ends_the_command_quietly(command: str) -> None:
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{KOORD} {command} | head -n1 >/dev/null"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    _no_traceback(proc)
    assert "BrokenPipe" not in proc.stderr
    assert proc.returncode in (0, 1), proc.stderr  # 1: the example leaves pods unscheduled by design


@pytest.mark.parametrize("command", ["simulate", "deschedule"])
@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("empty.yaml", "no objects in this file"),
        ("empty-dir", "no manifests (*.yaml, *.yml, *.json) in this folder"),
        ("no-yaml", "no manifests (*.yaml, *.yml, *.json) in this folder"),
    ],
)
def test_empty_inputs_are_bad_input(command: str, name: str, reason: str, inputs: dict[str, Path]) -> None:
    proc = _koord(command, "--cluster", str(inputs[name]))
    _no_traceback(proc)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"koord {command}: error: --cluster {inputs[name]}: {reason}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["simulate", "--cluster", "/nonexistent/cluster"],
            "/nonexistent/cluster: no such file or directory",
        ),
        (
            ["simulate", "--cluster", EXAMPLE, "--config", "/nonexistent.yaml"],
            "/nonexistent.yaml: cannot read",
        ),
        (
            ["deschedule", "--cluster", EXAMPLE, "--config", "/nonexistent.yaml"],
            "/nonexistent.yaml: cannot read",
        ),
        (["profile", "validate", "/nonexistent.yaml"], "/nonexistent.yaml"),
        (
            ["koordlet", "--node-name", "no-such-node", "--cluster", EXAMPLE, "--once"],
            "the cluster has no Node",
        ),
        (
            [
                "scheduler",
                "--config",
                str(ROOT / "configs/scheduler/koord-scheduler.yaml"),
                "--kubeconfig",
                "/no/kc",
            ],
            "kubeconfig /no/kc: no such file",
        ),
    ],
)
def test_missing_files_exit_2_with_the_reason(argv: list[str], message: str) -> None:
    proc = _koord(*argv)
    _no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 3, proc.stderr


def test_bare_flags_parse_as_go_booleans() -> None:
    from koord_framework.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["scheduler", "--config", "x.yaml", "--leader-elect"])
    assert args.leader_elect == "true"
    args = parser.parse_args(["scheduler", "--config", "x.yaml", "--leader-elect", "false"])
    assert args.leader_elect == "false"
    args = parser.parse_args(["koordlet", "--v", "4", "--dry-run", "--once"])
    assert args.v == 4 and args.dry_run


def test_usage_errors_exit_2_and_help_exits_0() -> None:
    assert _koord().returncode == 2
    assert _koord("--help").returncode == 0
    bad = _koord("simulate")
    _no_traceback(bad)
    assert bad.returncode == 2 and "--cluster" in bad.stderr


def test_koordlet_dry_run_once_writes_nothing_and_says_so(tmp_path: Path) -> None:
    proc = _koord("koordlet", "--node-name", "node-00", "--cluster", EXAMPLE, "--once", "--dry-run")
    _no_traceback(proc)
    assert proc.returncode in (0, 1)
    assert "would write (--dry-run, nothing written):" in proc.stdout
    assert "NodeMetric: status written" not in proc.stdout
