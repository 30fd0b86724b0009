"""The plumbing ``koord simulate`` and ``koord deschedule`` share: --now, default profiles, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from koord_framework.cli.common import UsageError, bad_input, cut, parse_now

REPO = Path(__file__).resolve().parents[2]


def test_parse_now() -> None:
    assert parse_now(None) is None
    assert parse_now("") is None
    assert parse_now("2024-01-01T00:00:00Z") == 1704067200.0
    with pytest.raises(UsageError, match=r"^--now 'yesterday': not an RFC 3339 time \("):
        parse_now("yesterday")


def test_bad_input_reports_on_stderr_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert bad_input("simulate", "broken") == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "koord simulate: error: broken\n")


def test_cut() -> None:
    assert cut("abcdef", 6) == "abcdef"
    assert cut("abcdefg", 6) == "abcde…"
    assert cut("abc", 0) == "…"
