"""Registry: discovery through real entry points (fake dist-info dirs on sys.path), errors, loading."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from koord_framework.errors import DuplicatePluginError, PluginLoadError, UnknownPluginError
from koord_framework.plugin import ExtensionPoint, Plugin
from koord_framework.registry import PluginRegistry

GROUP = "koord.test.plugins"


def _dist(root: Path, dist: str, version: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = [f"[{GROUP}]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for mod, src in modules.items():
        (root / f"{mod}.py").write_text(textwrap.dedent(src))


GOOD = """
from koord_framework.plugin import ExtensionPoint, Plugin

class Point(ExtensionPoint):
    extension_point = "Filter"

class Alpha(Plugin, Point):
    name = "Alpha"

class Beta(Plugin):
    name = "Beta"

class Misnamed(Plugin):
    name = "SomethingElse"

class NotAPlugin:
    name = "NotAPlugin"
"""


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for mod in [m for m in sys.modules if m.startswith("fakeplug")]:
            del sys.modules[mod]


def test_discover_and_load_in_given_order(site: Path) -> None:
    _dist(
        site,
        "fake-one",
        "1.2.3",
        {"Alpha": "fakeplug_a:Alpha", "Beta": "fakeplug_a:Beta"},
        {"fakeplug_a": GOOD},
    )
    reg = PluginRegistry.discover(GROUP)
    assert reg.names() == ["Alpha", "Beta"]
    classes = reg.load(["Beta", "Alpha"])
    assert [c.name for c in classes] == ["Beta", "Alpha"]
    assert reg.distribution("Alpha") == ("fake-one", "1.2.3")
    info = {i.name: i for i in reg.describe()}
    assert info["Alpha"].extension_points == ["Filter"]
    assert info["Alpha"].distribution == "fake-one"
    assert info["Beta"].extension_points == []


def test_unknown_name_lists_installed(site: Path) -> None:
    _dist(site, "fake-one", "1.0", {"Alpha": "fakeplug_a:Alpha"}, {"fakeplug_a": GOOD})
    reg = PluginRegistry.discover(GROUP)
    with pytest.raises(UnknownPluginError) as err:
        reg.get("Alpah")
    assert "'Alpah'" in str(err.value)
    assert "installed: Alpha" in str(err.value)


def test_two_distributions_claiming_a_name(site: Path) -> None:
    _dist(site, "fake-one", "1.0", {"Alpha": "fakeplug_a:Alpha"}, {"fakeplug_a": GOOD})
    _dist(site, "fake-two", "2.0", {"Alpha": "fakeplug_b:Alpha"}, {"fakeplug_b": GOOD})
    with pytest.raises(DuplicatePluginError) as err:
        PluginRegistry.discover(GROUP)
    assert "fake-one" in str(err.value) and "fake-two" in str(err.value)


def test_import_failure_names_distribution_and_exception(site: Path) -> None:
    _dist(
        site,
        "fake-broken",
        "0.1",
        {"Broken": "fakeplug_broken:Broken"},
        {"fakeplug_broken": "raise RuntimeError('boom at import')\n"},
    )
    reg = PluginRegistry.discover(GROUP)
    with pytest.raises(PluginLoadError) as err:
        reg.get("Broken")
    msg = str(err.value)
    assert "fake-broken" in msg and "RuntimeError" in msg and "boom at import" in msg


def test_entry_point_name_must_equal_class_name(site: Path) -> None:
    _dist(site, "fake-one", "1.0", {"Wrong": "fakeplug_a:Misnamed"}, {"fakeplug_a": GOOD})
    reg = PluginRegistry.discover(GROUP)
    with pytest.raises(PluginLoadError, match="differs from the class's name"):
        reg.get("Wrong")


def test_entry_point_must_be_a_plugin_class(site: Path) -> None:
    _dist(site, "fake-one", "1.0", {"NotAPlugin": "fakeplug_a:NotAPlugin"}, {"fakeplug_a": GOOD})
    reg = PluginRegistry.discover(GROUP)
    with pytest.raises(PluginLoadError, match="is not a koord_framework Plugin class"):
        reg.get("NotAPlugin")


class _Point(ExtensionPoint):
    extension_point = "Score"


class _InProc(Plugin, _Point):
    name = "InProc"


def test_from_classes_and_with_classes() -> None:
    reg = PluginRegistry.from_classes(GROUP, [_InProc])
    assert reg.get("InProc") is _InProc
    assert reg.describe()[0].extension_points == ["Score"]
    with pytest.raises(DuplicatePluginError):
        reg.with_classes([_InProc])
    with pytest.raises(UnknownPluginError):
        reg.load(["Nope"])


def test_make_test_manager_gives_stevedore_api() -> None:
    from koord_framework.registry import make_test_manager

    mgr = make_test_manager([_InProc], "scheduler")
    assert mgr.names() == ["InProc"]
    assert mgr["InProc"].plugin is _InProc
    assert mgr.namespace == "koord.scheduler.plugins"
