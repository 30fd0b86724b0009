"""bench.suite: every step points at a real benchmark, and one failing step does not stop the others."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from bench import suite


def test_every_step_names_an_existing_benchmark() -> None:
    for step in suite.STEPS:
        if step.argv[0] == "-m":
            assert importlib.util.find_spec(step.argv[1]) is not None, step
        else:
            assert (suite.ROOT / step.argv[0]).is_file(), step
    assert len({step.name for step in suite.STEPS}) == len(suite.STEPS)


def test_unknown_step_is_refused_with_the_known_names() -> None:
    with pytest.raises(SystemExit, match=r"unknown step.*nope.*known: scheduler"):
        suite.main(["nope"])


def test_a_failing_step_is_reported_and_the_rest_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail = tmp_path / "fail.py"
    fail.write_text("import sys; sys.exit(3)\n")
    ok = tmp_path / "ok.py"
    marker = tmp_path / "ran"
    ok.write_text(f"open({str(marker)!r}, 'w').close()\n")
    steps = (suite.Step("first", (str(fail),)), suite.Step("second", (str(ok),)))
    monkeypatch.setattr(suite, "STEPS", steps)
    assert suite.main([]) == 1
    assert marker.exists()
    outcomes = suite.run(steps, python=sys.executable)
    assert [o.returncode for o in outcomes] == [3, 0]
    assert "FAILED (exit 3)" in suite.table(outcomes)
