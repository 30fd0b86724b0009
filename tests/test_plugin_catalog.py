"""The plugin catalog (``koord_framework/catalog.json``) is what the plugins declare, and a profile naming a
catalogued plugin that is not installed names the distribution to install (docs/adr/0007)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from koord_framework.config.loader import load_text
from koord_framework.config.shipped import distribution_of
from koord_framework.errors import ValidationError
from koord_framework.registry import PluginRegistry

ROOT = Path(__file__).resolve().parents[1]


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("plugin_catalog", ROOT / "tools" / "plugin_catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_catalog_is_in_step_with_the_plugins_entry_points() -> None:
    tool = _tool()
    assert tool.CATALOG.read_text() == tool.render(), "run: .venv/bin/python tools/plugin_catalog.py"


def test_catalog_agrees_with_the_installed_distributions() -> None:
    registry = PluginRegistry.discover("scheduler")
    for name in registry.names():
        dist, _ = registry.distribution(name)
        if dist.startswith("koord-plugin-"):
            assert distribution_of("scheduler", name) == dist


def test_a_plugin_not_installed_names_its_distribution() -> None:
    only_core = PluginRegistry.from_classes(
        "scheduler",
        [
            PluginRegistry.discover("scheduler").get(n)
            for n in ("PrioritySort", "DefaultBinder", "NodeResourcesFit")
        ],
    )
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    multiPoint:
      disabled: [{name: "*"}]
      enabled:
      - {name: PrioritySort}
      - {name: DefaultBinder}
      - {name: NodeResourcesFit}
      - {name: LoadAwareScheduling}
"""
    with pytest.raises(ValidationError) as info:
        load_text(text, "p.yaml", component="scheduler", registries={"scheduler": only_core})
    expected = 'plugin "LoadAwareScheduling" is not installed in koord.scheduler.plugins'
    assert f"{expected}: pip install koord-plugin-loadaware" in str(info.value)


def test_an_unknown_plugin_keeps_its_did_you_mean() -> None:
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    score:
      enabled: [{name: LoadAwareSchedulng}]
"""
    with pytest.raises(ValidationError) as info:
        load_text(text, "p.yaml", component="scheduler")
    assert 'did you mean "LoadAwareScheduling"?' in str(info.value)
