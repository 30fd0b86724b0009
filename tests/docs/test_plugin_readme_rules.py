"""``check_plugin_readme`` and ``registered_metrics``: the README rules, each shown to catch what it is for,
on a distribution rendered from the framework's template."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from koord_framework.docs import check_plugin_readme, registered_metrics, update_readme
from koord_framework.docs.metric_names import exposed_names
from koord_framework.docs.plugin_readme import PluginDistribution, parse_sections
from koord_framework.templates import render_plugin

GOOD_README = """\
# koord-plugin-demoreadme

A demonstration plugin: filters nodes without a label and prefers listed label values.

## Maturity

**alpha**: rendered from the template for this test and never run against a cluster.

## Extension points

| point | what it does |
|---|---|
| PreFilter | reads the args once per pod |
| Filter | rejects nodes without the label |
| Score | 100 for a preferred value |

## Args

<!-- args-table:DemoReadmeArgs -->
<!-- /args-table -->

## Example profile

[`examples/profile.yaml`](examples/profile.yaml):

<!-- include:examples/profile.yaml -->
<!-- /include -->

## Metrics

| metric | type | labels | meaning |
|---|---|---|---|
| `koord_demo_decisions_total` | counter | `result` | what it decided |
| `koord_scheduler_plugin_duration_seconds` | histogram | `plugin` | (framework) time per extension point |

## Testing

```sh
pytest plugins/demoreadme
```
"""

METRICS_SOURCE = """\
from prometheus_client import Counter

DECISIONS = "koord_demo_decisions_total"


def build(registry):
    return Counter(DECISIONS, "What it decided.", ["result"], registry=registry)
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = render_plugin("DemoReadme", tmp_path)
    monkeypatch.syspath_prepend(str(root / "src"))
    (root / "src" / "koord_plugin_demoreadme" / "metrics.py").write_text(METRICS_SOURCE)
    (root / "README.md").write_text(GOOD_README)
    _regenerate(root)
    return root


def _regenerate(root: Path) -> None:
    # The rendered distribution is importable (src on sys.path) but not installed: name its model.
    [cls] = PluginDistribution.read(root).plugin_classes()
    update_readme(root / "README.md", {cls.Args.__name__: cls.Args})


def _problems(root: Path) -> list[str]:
    return [str(p) for p in check_plugin_readme(root)]


def _edit(root: Path, old: str, new: str) -> None:
    readme = root / "README.md"
    text = readme.read_text()
    assert old in text
    readme.write_text(text.replace(old, new))


def test_a_complete_readme_passes(plugin: Path) -> None:
    assert _problems(plugin) == []
    assert [ep.name for ep in PluginDistribution.read(plugin).entry_points] == ["DemoReadme"]


def test_sections_must_all_be_there_in_order(plugin: Path) -> None:
    _edit(plugin, "## Maturity", "## Status")
    assert "sections: missing `## Maturity`" in _problems(plugin)
    _edit(plugin, "## Status", "## Maturity")
    text = (plugin / "README.md").read_text()
    metrics = text[text.index("## Metrics") : text.index("## Testing")]
    (plugin / "README.md").write_text(text.replace(metrics, "").replace("## Args", metrics + "## Args"))
    assert [p for p in _problems(plugin) if p.startswith("sections:")] == [
        "sections: sections must come in the order Maturity, Extension points, Args, Example profile, "
        "Metrics, Testing; found Maturity, Extension points, Metrics, Args, Example profile, Testing"
    ]


def test_title_and_summary_are_required(plugin: Path) -> None:
    _edit(
        plugin, "A demonstration plugin: filters nodes without a label and prefers listed label values.\n", ""
    )
    assert _problems(plugin) == ["title: a summary paragraph must follow the title"]


def test_maturity_needs_a_level_and_a_reason(plugin: Path) -> None:
    _edit(plugin, "**alpha**", "alpha")
    assert _problems(plugin) == ["Maturity: must say **alpha**, **beta** or **stable**"]
    _edit(
        plugin,
        "alpha: rendered from the template for this test and never run against a cluster.",
        "**beta**.",
    )
    assert _problems(plugin) == ["Maturity: must say why, in a sentence"]


def test_every_implemented_extension_point_is_described(plugin: Path) -> None:
    _edit(plugin, "| Score | 100 for a preferred value |\n", "")
    assert _problems(plugin) == ["Extension points: DemoReadme implements Score, not described"]


def test_args_table_must_exist_and_be_current(plugin: Path) -> None:
    _edit(plugin, "`labelKey`", "`labelKeyOld`")
    [stale] = _problems(plugin)
    assert stale.endswith("args-table:DemoReadmeArgs is out of date")
    text = (plugin / "README.md").read_text()
    start, end = (
        text.index("<!-- args-table:"),
        text.index("<!-- /args-table -->") + len("<!-- /args-table -->"),
    )
    (plugin / "README.md").write_text(text[:start] + text[end:])
    assert any("no <!-- args-table:DemoReadmeArgs --> region" in p for p in _problems(plugin))


def test_example_profile_is_shown_current_and_valid(plugin: Path) -> None:
    profile = plugin / "examples" / "profile.yaml"
    profile.write_text(profile.read_text().replace("preferredValues: [general]", "preferredValues: [other]"))
    [stale] = _problems(plugin)
    assert stale.endswith("include:examples/profile.yaml is out of date")
    profile.write_text(profile.read_text().replace("preferredValues: [other]", "noSuchArg: 1"))
    _regenerate(plugin)
    [invalid] = _problems(plugin)
    assert invalid.startswith("Example profile: examples/profile.yaml does not validate:")
    assert "noSuchArg" in invalid


def test_metrics_registered_in_src_must_be_described_and_described_ones_must_exist(plugin: Path) -> None:
    _edit(plugin, "| `koord_demo_decisions_total` | counter | `result` | what it decided |\n", "")
    assert _problems(plugin) == ["Metrics: `koord_demo_decisions` (counter, metrics.py) is not described"]
    _edit(plugin, "## Testing", "`koord_demo_decisions_total`, `koord_demo_typo_total`\n\n## Testing")
    assert _problems(plugin) == [
        "Metrics: `koord_demo_typo_total` is registered neither by the plugin nor by the framework"
    ]


def test_testing_says_how_to_run_the_tests(plugin: Path) -> None:
    _edit(plugin, "pytest plugins/demoreadme", "make check")
    assert _problems(plugin) == ["Testing: must say how to run the tests (a `pytest` command)"]


def test_headings_inside_code_blocks_do_not_count() -> None:
    text = "# t\n\n```md\n## Maturity\n```\n\n## Args\nx\n"
    assert [(s.level, s.title, s.line) for s in parse_sections(text)] == [(1, "t", 1), (2, "Args", 7)]


# --- metric names ---------------------------------------------------------------------------------------
def test_metric_names_are_read_from_every_import_style(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        textwrap.dedent(
            """
            import prometheus_client as pc
            from prometheus_client import Gauge as G, Histogram
            from prometheus_client.core import GaugeMetricFamily
            from collections import Counter

            PREFIX = "koord_x_"

            def make(registry, dynamic):
                p = "koord_y_"
                if registry:
                    h = Histogram("seconds", "h", namespace="koord", subsystem="z", registry=registry)
                Counter()  # collections.Counter: not a metric
                GaugeMetricFamily(PREFIX + "family", "f")
                G(f"{PREFIX}gauge", "g")
                pc.Counter(p + "things_total", "c")
                pc.Summary(dynamic, "unknowable")
            """
        )
    )
    found, unresolved = registered_metrics([src])
    assert [(m.name, m.kind) for m in found] == [
        ("koord_x_family", "gauge"),
        ("koord_x_gauge", "gauge"),
        ("koord_y_things", "counter"),
        ("koord_z_seconds", "histogram"),
    ]
    assert [(u.kind, u.line) for u in unresolved] == [("summary", 17)]
    assert exposed_names(found[2])[:2] == ("koord_y_things", "koord_y_things_total")
