"""``koord plugins list``: a table that fits 100 columns, or JSON; broken plugins are named, not fatal."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

from koord_framework.cli.main import main
from koord_framework.errors import PluginLoadError
from koord_framework.plugin import Plugin
from koord_framework.registry import GROUPS, PluginInfo, PluginRegistry

CONFIG_TESTS = Path(__file__).resolve().parents[1] / "config"


def _fakes() -> ModuleType:
    name = "koord_config_fake_plugins"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, CONFIG_TESTS / "fake_plugins.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def use(monkeypatch: pytest.MonkeyPatch, registries: dict[str, PluginRegistry]) -> None:
    short = {ep_group: name for name, ep_group in GROUPS.items()}

    def discover(cls: type[PluginRegistry], group: str) -> PluginRegistry:
        return registries.get(short.get(group, group)) or PluginRegistry.from_classes(group, [])

    monkeypatch.setattr(PluginRegistry, "discover", classmethod(discover))


def test_table_lists_every_group_within_100_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, _fakes().registries())
    assert main(["plugins", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "GROUP", "EXTENSION", "POINTS", "DISTRIBUTION", "VERSION"]
    assert all(len(line) <= 100 for line in lines)
    rows = {line.split()[0]: line.split()[1] for line in lines[1:] if line and not line.startswith(" ")}
    assert rows["LoadAwareScheduling"] == "scheduler"
    assert rows["MigrationController"] == "descheduler"
    assert rows["BECPUSuppress"] == "qos"
    assert rows["GroupIdentity"] == "runtimehooks"
    coscheduling = next(i for i, line in enumerate(lines) if line.startswith("Coscheduling "))
    assert lines[coscheduling + 1].startswith(" ")  # its ten extension points wrap onto a second line


def test_json_output(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    use(monkeypatch, _fakes().registries())
    assert main(["plugins", "list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["errors"] == []
    entry = next(p for p in data["plugins"] if p["name"] == "MigrationController")
    assert entry["component"] == "descheduler"
    assert entry["group"] == "koord.descheduler.plugins"
    assert entry["extensionPoints"] == ["Evict", "Filter"]


def test_no_plugins(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    use(monkeypatch, {})
    assert main(["plugins", "list"]) == 0
    assert capsys.readouterr().out == "no plugins installed\n"


class _Broken(PluginRegistry):
    """A registry where one plugin fails to import, as a plugin with a bad dependency would."""

    def get(self, name: str) -> type[Plugin]:
        if name == "NodeName":
            raise PluginLoadError(
                self.group, name, "koord-plugin-broken", ImportError("no module named numpyy")
            )
        return super().get(name)

    def describe(self) -> list[PluginInfo]:
        infos: Sequence[PluginInfo] = [self._info(n) for n in self.names()]
        return list(infos)

    def _info(self, name: str) -> PluginInfo:
        cls = self.get(name)
        return PluginInfo(name, self.group, cls.extension_points(), "x", "1")


def test_a_broken_plugin_is_reported_and_the_rest_listed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes = _fakes()
    good = PluginRegistry.from_classes("scheduler", [fakes.NodeName, fakes.PrioritySort])
    broken = _Broken(good.group, good._sources)
    use(monkeypatch, {"scheduler": broken})
    assert main(["plugins", "list"]) == 1
    captured = capsys.readouterr()
    assert "PrioritySort" in captured.out and "NodeName" not in captured.out
    assert "plugin 'NodeName'" in captured.err and "koord-plugin-broken" in captured.err
