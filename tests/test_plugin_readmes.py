"""Every plugin distribution's README is complete and current, checked the same way for all of them.

``koord_framework.docs.check_plugin_readme`` holds the rules (sections and their order, maturity, extension
points, generated args tables and example, metrics registered in the code, how to test). A failure lists
every problem; stale generated regions are fixed with ``koord plugins docs plugins/<name>``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import koord_framework
from koord_framework.docs import SECTIONS, check_plugin_readme, registered_metrics
from koord_framework.docs.plugin_readme import PluginDistribution, parse_sections

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
FRAMEWORK_METRICS, _ = registered_metrics([Path(koord_framework.__file__).parent])


def test_there_are_plugins_to_check() -> None:
    assert len(PLUGINS) >= 9
    assert FRAMEWORK_METRICS, "the framework registers metrics; the scan found none"


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_readme_follows_the_plugin_readme_rules(plugin: Path) -> None:
    problems = check_plugin_readme(plugin, framework_metrics=FRAMEWORK_METRICS)
    listing = "\n".join(f"  {p}" for p in problems)
    assert not problems, (
        f"{plugin.relative_to(ROOT)}/README.md:\n{listing}\n"
        f"(generated regions: koord plugins docs {plugin.relative_to(ROOT)})"
    )


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_required_sections_are_in_order(plugin: Path) -> None:
    """Spelled out apart from the full check, so a reader sees the section list the rule enforces."""
    text = (plugin / "README.md").read_text(encoding="utf-8")
    titles = [s.title for s in parse_sections(text) if s.level == 2]
    found = [name for name in SECTIONS for t in titles if t == name or t.startswith(name + " ")]
    assert [n for n in found if n != "Differences from Koordinator"] == [
        "Maturity",
        "Extension points",
        "Args",
        "Example profile",
        "Metrics",
        "Testing",
    ]


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_every_registered_metric_is_in_the_readme(plugin: Path) -> None:
    found, unresolved = registered_metrics([plugin / "src"])
    assert not unresolved
    text = (plugin / "README.md").read_text(encoding="utf-8")
    assert [m.name for m in found if m.name not in text] == []


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_example_profile_exists_and_names_the_plugins(plugin: Path) -> None:
    profile = plugin / "examples" / "profile.yaml"
    assert profile.is_file()
    content = profile.read_text(encoding="utf-8")
    for ep in PluginDistribution.read(plugin).entry_points:
        assert ep.name in content
