"""Fixtures for the config tests: registries of fake plugins (no real plugin is needed to test profiles)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from koord_framework.registry import PluginRegistry

DATA = Path(__file__).with_name("data")


def load_fakes() -> ModuleType:
    """tests/config/fake_plugins.py as a module (tests are not a package under --import-mode=importlib)."""
    name = "koord_config_fake_plugins"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("fake_plugins.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def fakes() -> ModuleType:
    return load_fakes()


@pytest.fixture
def registries(fakes: ModuleType) -> dict[str, PluginRegistry]:
    result: dict[str, PluginRegistry] = fakes.registries()
    return result


@pytest.fixture(scope="module")
def shared_registries() -> dict[str, PluginRegistry]:
    """Module-scoped, for hypothesis tests (which must not take function-scoped fixtures)."""
    result: dict[str, PluginRegistry] = load_fakes().registries()
    return result


@pytest.fixture
def data_dir() -> Path:
    return DATA
