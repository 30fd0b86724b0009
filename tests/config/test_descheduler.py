"""DeschedulerConfiguration defaulting and plugin merging (node spec §1.1)."""

from __future__ import annotations

import pytest

from koord_framework.config import LoadedDeschedulerConfig, load_text
from koord_framework.config.descheduler import (
    DEFAULT_PLUGINS,
    DeschedulerConfiguration,
    DeschedulerPluginRef,
    DeschedulerPlugins,
    DeschedulerPluginSet,
    merge_plugins,
)
from koord_framework.errors import ValidationError
from koord_framework.registry import PluginRegistry

HEADER = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"


def load(body: str, registries: dict[str, PluginRegistry]) -> LoadedDeschedulerConfig:
    loaded = load_text(HEADER + body, "d.yaml", registries=registries)
    assert isinstance(loaded, LoadedDeschedulerConfig)
    return loaded


def refs(*names: str) -> list[DeschedulerPluginRef]:
    return [DeschedulerPluginRef(name=n) for n in names]


def test_no_profiles_means_one_named_koord_descheduler(registries: dict[str, PluginRegistry]) -> None:
    loaded = load("", registries)
    (prof,) = loaded.profiles
    assert prof.name == "koord-descheduler"
    assert prof.at("evict") == ("MigrationController",)
    assert prof.at("filter") == ("MigrationController",)
    assert prof.at("balance") == () and prof.at("deschedule") == ()
    assert prof.args["MigrationController"].model_dump(by_alias=True)["maxMigratingPerNode"] == 2


def test_top_level_defaults(registries: dict[str, PluginRegistry]) -> None:
    cfg = load("", registries).config
    assert cfg.descheduling_interval == 0.0
    assert cfg.dry_run is False
    assert cfg.healthz_bind_address == "0.0.0.0:10251"
    assert cfg.metrics_bind_address == "0.0.0.0:10251"
    assert cfg.leader_election.resource_lock == "leases"
    assert cfg.leader_election.resource_name == "koord-descheduler"
    assert cfg.leader_election.resource_namespace == "koordinator-system"
    assert cfg.client_connection.qps == 50.0
    assert cfg.client_connection.burst == 100
    assert cfg.client_connection.content_type == "application/vnd.kubernetes.protobuf"
    assert cfg.enable_profiling is True and cfg.enable_contention_profiling is True
    assert cfg.max_no_of_pods_to_evict_per_node is None
    assert cfg.max_no_of_pods_to_evict_total is None


def test_contention_profiling_follows_profiling(registries: dict[str, PluginRegistry]) -> None:
    cfg = load("enableProfiling: false\n", registries).config
    assert cfg.enable_contention_profiling is False


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (":9000", "0.0.0.0:9000"),
        ("127.0.0.1", "127.0.0.1:10251"),
        ("::1", "[::1]:10251"),
        ("[::]:80", "[::]:80"),
    ],
)
def test_bind_addresses_are_normalised_like_koordinator(given: str, expected: str) -> None:
    cfg = DeschedulerConfiguration.model_validate({"healthzBindAddress": given})
    assert cfg.healthz_bind_address == expected


def test_single_unnamed_profile_gets_the_default_name_but_two_do_not(
    registries: dict[str, PluginRegistry],
) -> None:
    assert load("profiles:\n- {}\n", registries).profiles[0].name == "koord-descheduler"
    with pytest.raises(ValidationError) as info:
        load("profiles:\n- {}\n- {}\n", registries)
    assert {p.path for p in info.value.problems} >= {"profiles[0].name", "profiles[1].name"}


def test_enabling_the_default_again_replaces_it_in_place(registries: dict[str, PluginRegistry]) -> None:
    loaded = load(
        "profiles:\n- plugins:\n    filter:\n"
        "      enabled: [{name: MigrationController}, {name: DefaultEvictor}]\n",
        registries,
    )
    assert loaded.profiles[0].at("filter") == ("MigrationController", "DefaultEvictor")


def test_disabled_default_is_dropped_and_custom_appended(registries: dict[str, PluginRegistry]) -> None:
    body = """\
profiles:
- plugins:
    evict:
      disabled: [{name: MigrationController}]
      enabled: [{name: DefaultEvictor}]
    balance:
      enabled: [{name: LowNodeLoad}]
    deschedule:
      enabled: [{name: RemovePodsViolatingNodeAffinity}]
"""
    prof = load(body, registries).profiles[0]
    assert prof.at("evict") == ("DefaultEvictor",)
    assert prof.at("filter") == ("MigrationController",)
    assert prof.at("balance") == ("LowNodeLoad",)
    assert prof.at("deschedule") == ("RemovePodsViolatingNodeAffinity",)
    assert prof.plugins.needed == (
        "RemovePodsViolatingNodeAffinity",
        "LowNodeLoad",
        "DefaultEvictor",
        "MigrationController",
    )
    # Every needed plugin has args, defaults where there was no pluginConfig.
    assert prof.args["LowNodeLoad"].model_dump(by_alias=True)["nodeFit"] is True


def test_duplicate_custom_plugin_is_kept_and_refused(registries: dict[str, PluginRegistry]) -> None:
    with pytest.raises(ValidationError) as info:
        load(
            "profiles:\n- plugins:\n    balance:\n"
            "      enabled: [{name: LowNodeLoad}, {name: LowNodeLoad}]\n",
            registries,
        )
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("profiles[0].plugins.balance.enabled[1]", 'plugin "LowNodeLoad" is already registered at balance')
    ]


def test_merge_plugins_per_spec() -> None:
    custom = DeschedulerPlugins(
        evict=DeschedulerPluginSet(enabled=refs("A", "MigrationController"), disabled=refs()),
        filter=DeschedulerPluginSet(enabled=refs("B"), disabled=refs("*")),
        balance=DeschedulerPluginSet(enabled=refs("C", "C")),
    )
    merged = merge_plugins(DEFAULT_PLUGINS, custom)
    assert [p.name for p in merged.evict.enabled] == ["MigrationController", "A"]
    assert [p.name for p in merged.filter.enabled] == ["B"]
    assert [p.name for p in merged.balance.enabled] == ["C", "C"]
    assert merged.deschedule.enabled == []
    assert merge_plugins(DEFAULT_PLUGINS, None) == DEFAULT_PLUGINS


def test_default_evictor_not_installed_is_skipped_then_no_evict_plugin(fakes: object) -> None:
    registry = PluginRegistry.from_classes("descheduler", [])
    with pytest.raises(ValidationError) as info:
        load_text(HEADER, "d.yaml", registries={"descheduler": registry})
    assert [(p.path, p.message) for p in info.value.problems] == [
        (
            "profiles[0].plugins.evict",
            "no evict plugin is enabled (default MigrationController is not installed)",
        )
    ]


def test_eviction_limits_and_selectors(registries: dict[str, PluginRegistry]) -> None:
    body = """\
maxNoOfPodsToEvictPerNode: 3
maxNoOfPodsToEvictPerNamespace: 5
maxNoOfPodsToEvictTotal: 20
deschedulingInterval: 2m
dryRun: true
nodeSelector:
  matchLabels: {pool: batch}
  matchExpressions:
  - {key: kubernetes.io/os, operator: In, values: [linux]}
profiles:
- name: p
  nodeSelector: {matchLabels: {zone: a}}
"""
    loaded = load(body, registries)
    cfg = loaded.config
    assert (cfg.max_no_of_pods_to_evict_per_node, cfg.max_no_of_pods_to_evict_per_namespace) == (3, 5)
    assert cfg.max_no_of_pods_to_evict_total == 20
    assert cfg.descheduling_interval == 120.0
    assert cfg.dry_run is True
    assert cfg.node_selector is not None
    assert cfg.node_selector.matches({"pool": "batch", "kubernetes.io/os": "linux"})
    assert not cfg.node_selector.matches({"pool": "batch", "kubernetes.io/os": "windows"})
    assert not cfg.node_selector.matches({"kubernetes.io/os": "linux"})
    assert loaded.profiles[0].node_selector is not None
    assert loaded.profiles[0].node_selector.matches({"zone": "a"})
