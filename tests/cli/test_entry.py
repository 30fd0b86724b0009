"""The ``koord`` entry point: lazy subcommand imports, ``python -m koord_framework``, closed pipes, and the
completion script."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

import pytest

from koord_framework.cli.main import COMMANDS, build_parser


def _sub_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {c.dest: c.help or "" for c in action._choices_actions}


def test_summaries_in_the_table_are_the_ones_the_modules_register() -> None:
    registered = _sub_help(build_parser(full=True))
    for name, command in COMMANDS.items():
        assert registered[name] == command.summary, name


def test_help_imports_no_command_module() -> None:
    code = (
        "import sys\n"
        "from koord_framework.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('koord_framework.cli.', "
        "'koord_framework.scheduler', 'koord_framework.cluster', 'kubernetes', 'numpy')))\n"
        "print('HEAVY=' + ','.join(m for m in heavy if m != 'koord_framework.cli.main'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    last = out.stdout.strip().splitlines()[-1]
    assert last == "HEAVY=", f"imported by koord --help: {last}"


def test_python_m_koord_framework_runs_the_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "koord_framework", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("koord ")


@pytest.mark.parametrize("argv", [["plugins", "list", "--json"], ["completion", "bash"]])
def test_a_closed_pipe_ends_quietly(argv: list[str]) -> None:
    # `head -c1` reads one byte and exits: the rest of the output meets a closed pipe.
    koord = f"{sys.executable} -m koord_framework " + " ".join(argv)
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{koord} | head -c1 >/dev/null"], capture_output=True, text=True
    )
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.stderr == ""
    assert proc.returncode == 0


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_completes_commands_and_options() -> None:
    script = subprocess.run(
        [sys.executable, "-m", "koord_framework", "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    probe = (
        script
        + 'COMP_WORDS=(koord sim); COMP_CWORD=1; _koord; echo "${COMPREPLY[@]}"\n'
        + 'COMP_WORDS=(koord simulate --cl); COMP_CWORD=2; _koord; echo "${COMPREPLY[@]}"\n'
        + 'COMP_WORDS=(koord plugins ""); COMP_CWORD=2; _koord; echo "${COMPREPLY[@]}"\n'
    )
    lines = subprocess.run(
        ["bash", "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert lines[0] == "simulate"
    assert lines[1] == "--cluster"
    assert {"list", "new", "docs"} <= set(lines[2].split())


def test_help_texts_show_no_rest_markup(capsys: pytest.CaptureFixture[str]) -> None:
    from koord_framework.cli.main import main

    for argv in (["--help"], *([name, "--help"] for name in COMMANDS)):
        assert main(list(argv)) == 0
        out = capsys.readouterr().out
        assert "``" not in out, argv


def test_plugin_table_never_cuts_names(capsys: pytest.CaptureFixture[str]) -> None:
    from koord_framework.cli.main import main

    assert main(["plugins", "list"]) == 0
    out = capsys.readouterr().out
    assert "NodeResourcesBalancedAllocation " in out and "…" not in out
