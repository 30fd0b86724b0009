"""Every ``koord`` command shown in README.md and docs/*.md that runs on the shipped examples is run, and
must say something meaningful (issue 20): pods scheduled with fresh metrics, evictions or an explanation,
a measured round. Synopses (``[--config FILE]``), placeholders and commands that need a real API server or
write into the checkout are not runnable as shown and are left out by the rules below."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Not runnable as shown: a synopsis or placeholder, a real cluster, or a write into the checkout.
NOT_RUNNABLE = re.compile(
    r"\[|\.\.\.|\b[A-Z][A-Z_]{2,}\b|--kubeconfig|my-cluster|manifests/|MyPlugin|plugins/myplugin|"
    r"koord-scheduler-config\.yaml|^koord (scheduler|descheduler)\b|plugins new|completion|"
    # The how-to's snapshot of the reader's own cluster (docs/howto/test-a-profile-change.md).
    r"prod-snap"
)


def _commands() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for doc in DOCS:
        if doc.name == "pypi.md":  # written for a pip install, with the user's own paths
            continue
        in_code = False
        pending = ""
        for line in doc.read_text().splitlines():
            if line.startswith("```"):
                in_code = not in_code
                continue
            if not in_code:
                continue
            text = pending + re.split(r"\s#\s", line)[0].strip()
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            pending = ""
            text = text.removeprefix(".venv/bin/")
            if text.startswith("koord ") and not NOT_RUNNABLE.search(text):
                found.append((doc.name, text))
    return found


COMMANDS = _commands()


def test_the_docs_show_runnable_commands() -> None:
    shown = {cmd.split()[1] for _, cmd in COMMANDS}
    assert {"plugins", "profile", "simulate", "deschedule", "koordlet", "manager"} <= shown


@pytest.mark.parametrize(("doc", "command"), COMMANDS, ids=[f"{d}: {c}" for d, c in COMMANDS])
def test_documented_command_produces_meaningful_output(doc: str, command: str) -> None:
    argv = command.split()[1:]
    proc = subprocess.run(
        [sys.executable, "-m", "koord_framework", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    # 1 is documented for a run that found something (the example cluster leaves pods out by design).
    assert proc.returncode in (0, 1), proc.stderr
    out = proc.stdout
    assert out.strip(), f"{command}: no output"
    what = argv[0]
    if what == "simulate":
        if "json" in argv:
            data = json.loads(out)
            assert data["summary"]["scheduled"] > 0
            if "--explain" in argv:
                # Fresh metrics: LoadAwareScheduling scores some node above 0.
                scores = [
                    s["LoadAwareScheduling"]["raw"]
                    for p in data["pods"]
                    for s in (p.get("scores") or {}).values()
                    if "LoadAwareScheduling" in s
                ]
                assert scores and max(scores) > 0, "LoadAwareScheduling scored 0 everywhere: metrics expired?"
        else:
            summary = next(line for line in out.splitlines() if " scheduled, " in line)
            assert int(summary.split()[0]) > 0
    elif what == "deschedule":
        assert "eviction(s)" in out or '"rounds"' in out
        evicted = re.search(r"^(\d+) eviction\(s\)", out, re.M)
        assert (evicted and int(evicted.group(1)) > 0) or "Explain:" in out, out
    elif what == "compare":
        if "json" in argv:
            data = json.loads(out)
            assert data["kind"] == "KoordCompare" and len(data["runs"]) == argv.count("--config")
            assert all(r["pods"]["placed"] > 0 for r in data["runs"])
        else:
            placed = next(line for line in out.splitlines() if line.startswith("placed "))
            assert all(int(n) > 0 for n in placed.split()[1:]), out
    elif what == "koordlet":
        assert "measured:" in out
    elif what == "profile":
        assert "valid" in out
    elif what == "plugins":
        assert "LoadAwareScheduling" in out or "up to date" in out or ": ok" in out
