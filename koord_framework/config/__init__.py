"""Profiles: typed models of the scheduler, descheduler and koordlet configurations, and their loader.

``load_file`` reads a configuration (bare, or in the ConfigMap Koordinator ships it in), validates its shape
and then every plugin it names against the installed registries, and returns each profile's effective
plugins with their classes and validated args.
"""

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
