"""Profiles: typed models of the scheduler, descheduler and koordlet configurations, and their loader.

``load_file`` reads a configuration (bare, or in the ConfigMap Koordinator ships it in), validates its shape
and then every plugin it names against the installed registries, and returns each profile's effective
plugins with their classes and validated args.

Importing this package imports none of its modules: each name is looked up in its module on first use, so
that a process loading one component's configuration does not build the pydantic models of the others
(``koord scheduler`` start-up; ``tests/config/test_lazy_imports.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koord_framework.config.common import (
        ClientConnection,
        Duration,
        DurationError,
        LabelSelector,
        LeaderElection,
        PluginConfig,
        PluginRef,
        PluginSet,
        format_duration,
        parse_duration,
    )
    from koord_framework.config.descheduler import DeschedulerConfiguration, DeschedulerProfile
    from koord_framework.config.koordlet import KoordletConfiguration, ResolvedPlugin
    from koord_framework.config.loader import (
        COMPONENTS,
        Component,
        LoadedConfig,
        LoadedDeschedulerConfig,
        LoadedKoordletConfig,
        LoadedSchedulerConfig,
        ResolvedDeschedulerProfile,
        ResolvedSchedulerProfile,
        load_descheduler_config,
        load_file,
        load_koordlet_config,
        load_scheduler_config,
        load_text,
    )
    from koord_framework.config.scheduler import (
        DEFAULT_PLUGINS,
        EffectivePlugins,
        KubeSchedulerConfiguration,
        KubeSchedulerProfile,
        Plugins,
        effective_plugins,
        merge_plugin_set,
        merge_plugins,
        resolve_plugins,
    )
    from koord_framework.errors import ConfigReadError

_HOMES: dict[str, str] = {
    "COMPONENTS": "koord_framework.config.loader",
    "ClientConnection": "koord_framework.config.common",
    "Component": "koord_framework.config.loader",
    "ConfigReadError": "koord_framework.errors",
    "DEFAULT_PLUGINS": "koord_framework.config.scheduler",
    "DeschedulerConfiguration": "koord_framework.config.descheduler",
    "DeschedulerProfile": "koord_framework.config.descheduler",
    "Duration": "koord_framework.config.common",
    "DurationError": "koord_framework.config.common",
    "EffectivePlugins": "koord_framework.config.scheduler",
    "KoordletConfiguration": "koord_framework.config.koordlet",
    "KubeSchedulerConfiguration": "koord_framework.config.scheduler",
    "KubeSchedulerProfile": "koord_framework.config.scheduler",
    "LabelSelector": "koord_framework.config.common",
    "LeaderElection": "koord_framework.config.common",
    "LoadedConfig": "koord_framework.config.loader",
    "LoadedDeschedulerConfig": "koord_framework.config.loader",
    "LoadedKoordletConfig": "koord_framework.config.loader",
    "LoadedSchedulerConfig": "koord_framework.config.loader",
    "PluginConfig": "koord_framework.config.common",
    "PluginRef": "koord_framework.config.common",
    "PluginSet": "koord_framework.config.common",
    "Plugins": "koord_framework.config.scheduler",
    "ResolvedDeschedulerProfile": "koord_framework.config.loader",
    "ResolvedPlugin": "koord_framework.config.koordlet",
    "ResolvedSchedulerProfile": "koord_framework.config.loader",
    "effective_plugins": "koord_framework.config.scheduler",
    "format_duration": "koord_framework.config.common",
    "load_descheduler_config": "koord_framework.config.loader",
    "load_file": "koord_framework.config.loader",
    "load_koordlet_config": "koord_framework.config.loader",
    "load_scheduler_config": "koord_framework.config.loader",
    "load_text": "koord_framework.config.loader",
    "merge_plugin_set": "koord_framework.config.scheduler",
    "merge_plugins": "koord_framework.config.scheduler",
    "parse_duration": "koord_framework.config.common",
    "resolve_plugins": "koord_framework.config.scheduler",
}
"""Where each exported name lives."""

__all__ = [
    "COMPONENTS",
    "DEFAULT_PLUGINS",
    "ClientConnection",
    "Component",
    "ConfigReadError",
    "DeschedulerConfiguration",
    "DeschedulerProfile",
    "Duration",
    "DurationError",
    "EffectivePlugins",
    "KoordletConfiguration",
    "KubeSchedulerConfiguration",
    "KubeSchedulerProfile",
    "LabelSelector",
    "LeaderElection",
    "LoadedConfig",
    "LoadedDeschedulerConfig",
    "LoadedKoordletConfig",
    "LoadedSchedulerConfig",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "ResolvedDeschedulerProfile",
    "ResolvedPlugin",
    "ResolvedSchedulerProfile",
    "effective_plugins",
    "format_duration",
    "load_descheduler_config",
    "load_file",
    "load_koordlet_config",
    "load_scheduler_config",
    "load_text",
    "merge_plugin_set",
    "merge_plugins",
    "parse_duration",
    "resolve_plugins",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
