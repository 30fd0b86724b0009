"""The plumbing ``koord simulate`` and ``koord deschedule`` share: --now, default profiles, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from koord_framework.cli.common import UsageError, bad_input, config_path, cut, parse_now

REPO = Path(__file__).resolve().parents[2]


def test_parse_now() -> None:
    assert parse_now(None) is None
    assert parse_now("") is None
    assert parse_now("2024-01-01T00:00:00Z") == 1704067200.0
    with pytest.raises(UsageError, match=r"^--now 'yesterday': not an RFC 3339 time \("):
        parse_now("yesterday")


def test_config_path_prefers_the_given_file_then_the_working_directory_then_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = Path("configs/scheduler/koord-scheduler.yaml")
    assert config_path("elsewhere.yaml", shipped) == Path("elsewhere.yaml")  # given: taken as is
    monkeypatch.chdir(tmp_path)
    assert config_path(None, shipped) == REPO / shipped  # not here: the source tree's copy
    (tmp_path / "configs/scheduler").mkdir(parents=True)
    (tmp_path / shipped).write_text("kind: KubeSchedulerConfiguration\n")
    assert config_path(None, shipped) == shipped  # the working directory's copy wins


def test_config_path_names_the_option_when_there_is_no_default(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(UsageError) as info:
        config_path(None, missing, option="--scheduler-config")
    assert str(info.value) == f"no --scheduler-config given and {missing} was not found"


def test_bad_input_reports_on_stderr_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert bad_input("simulate", "broken") == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "koord simulate: error: broken\n")


def test_cut() -> None:
    assert cut("abcdef", 6) == "abcdef"
    assert cut("abcdefg", 6) == "abcde…"
    assert cut("abc", 0) == "…"
