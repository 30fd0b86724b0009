"""Write ``koord_framework/catalog.json``: every plugin the project's distributions declare, by entry-point
group, with the distribution that provides it.

The table is read from the plugins' own ``pyproject.toml`` entry points, so it is what the plugins declare;
the framework ships it so that a profile naming a plugin that is not installed is answered with the
distribution to install. ``tests/test_plugin_catalog.py`` fails when it is out of step; run

    .venv/bin/python tools/plugin_catalog.py

after adding a plugin distribution or an entry point.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "koord_framework" / "catalog.json"
GROUPS = (
    "koord.scheduler.plugins",
    "koord.descheduler.plugins",
    "koord.koordlet.qos",
    "koord.koordlet.runtimehooks",
    "koord.manager.noderesource",
)


def build() -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {g: {} for g in GROUPS}
    for pyproject in sorted((ROOT / "plugins").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        for group, eps in project.get("entry-points", {}).items():
            if group in table:
                for name in eps:
                    table[group][name] = project["name"]
    return {g: dict(sorted(v.items())) for g, v in table.items()}


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        sys.exit(0 if CATALOG.read_text() == render() else 1)
    CATALOG.write_text(render())
