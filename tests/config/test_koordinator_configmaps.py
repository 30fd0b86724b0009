"""Koordinator's own koord-scheduler-config and koord-descheduler-config ConfigMaps load unchanged."""

from __future__ import annotations

from pathlib import Path

import yaml

from koord_framework.config import (
    LoadedDeschedulerConfig,
    LoadedSchedulerConfig,
    load_descheduler_config,
    load_file,
    load_scheduler_config,
    load_text,
)
from koord_framework.registry import PluginRegistry

REPO = Path(__file__).resolve().parents[2]


def test_scheduler_configmap_loads_with_koordinators_plugins(
    data_dir: Path, registries: dict[str, PluginRegistry]
) -> None:
    loaded = load_file(data_dir / "koordinator-scheduler-configmap.yaml", registries=registries)
    assert isinstance(loaded, LoadedSchedulerConfig)
    cfg = loaded.config
    assert cfg.leader_election.leader_elect is True
    assert cfg.leader_election.resource_name == "koord-scheduler"
    assert cfg.leader_election.resource_namespace == "koordinator-system"
    assert cfg.leader_election.lease_duration == 15.0
    assert cfg.parallelism == 16
    assert cfg.pod_initial_backoff_seconds == 1
    assert cfg.pod_max_backoff_seconds == 10
    assert cfg.client_connection.qps == 50.0 and cfg.client_connection.burst == 100

    (prof,) = loaded.profiles
    assert prof.scheduler_name == "koord-scheduler"
    assert loaded.profile("koord-scheduler") is prof
    points = {k: list(v) for k, v in prof.plugins.points.items()}
    assert points == {
        "preEnqueue": ["Coscheduling"],
        "queueSort": ["PrioritySort"],
        "preFilter": [
            "NodeAffinity",
            "NodeResourcesFit",
            "SchedulingHint",
            "Reservation",
            "NodeNUMAResource",
            "DeviceShare",
            "Coscheduling",
            "ElasticQuota",
        ],
        "filter": [
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "LoadAwareScheduling",
            "NodeNUMAResource",
            "DeviceShare",
            "Reservation",
        ],
        "postFilter": ["Reservation", "Coscheduling", "ElasticQuota", "DefaultPreemption"],
        "preScore": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "Reservation", "Coscheduling"],
        "score": [
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "LoadAwareScheduling",
            "NodeNUMAResource",
            "DeviceShare",
            "Reservation",
            "Coscheduling",
        ],
        "reserve": [
            "LoadAwareScheduling",
            "NodeNUMAResource",
            "DeviceShare",
            "Reservation",
            "Coscheduling",
            "ElasticQuota",
        ],
        "permit": ["Coscheduling"],
        "preBind": ["NodeNUMAResource", "DeviceShare", "Reservation", "Coscheduling", "DefaultPreBind"],
        "bind": ["Reservation", "DefaultBinder"],
        "postBind": ["Coscheduling"],
    }
    assert prof.weight("Reservation") == 5000
    assert prof.weight("TaintToleration") == 3
    assert prof.weight("LoadAwareScheduling") == 1
    # Kubernetes defaults this platform does not implement are left out, and said so.
    assert "ImageLocality" in prof.plugins.skipped_defaults
    assert "VolumeBinding" in prof.plugins.skipped_defaults
    assert "NodeResourcesFit" not in prof.plugins.skipped_defaults

    load_aware = prof.args["LoadAwareScheduling"]
    assert load_aware.model_dump(by_alias=True) == {
        "filterExpiredNodeMetrics": False,
        "nodeMetricExpirationSeconds": 300,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "usageThresholds": {"cpu": 0, "memory": 0},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    }
    fit = prof.args["NodeResourcesFit"].model_dump(by_alias=True)
    assert [r["name"] for r in fit["scoringStrategy"]["resources"]] == [
        "cpu",
        "memory",
        "kubernetes.io/batch-cpu",
        "kubernetes.io/batch-memory",
    ]
    # A plugin enabled without a pluginConfig entry still gets (default) args.
    assert prof.args["Coscheduling"].model_dump() == {}
    assert set(prof.plugins.needed) <= set(prof.args)
    assert prof.plugin_class("Reservation").name == "Reservation"


def test_descheduler_configmap_loads_with_koordinators_plugins(
    data_dir: Path, registries: dict[str, PluginRegistry]
) -> None:
    loaded = load_file(data_dir / "koordinator-descheduler-configmap.yaml", registries=registries)
    assert isinstance(loaded, LoadedDeschedulerConfig)
    cfg = loaded.config
    assert cfg.descheduling_interval == 10.0
    assert cfg.dry_run is False
    assert cfg.enable_profiling is True and cfg.enable_contention_profiling is True
    assert cfg.healthz_bind_address == "0.0.0.0:10251"
    assert cfg.leader_election.resource_name == "koord-descheduler"
    assert cfg.leader_election.resource_namespace == "koordinator-system"
    (prof,) = loaded.profiles
    assert prof.name == "koord-descheduler"
    assert {k: list(v) for k, v in prof.plugins.points.items()} == {
        "deschedule": [],
        "balance": [],
        "evict": ["MigrationController"],
        "filter": ["MigrationController"],
    }
    assert prof.plugins.evictor == "MigrationController"
    migration = prof.args["MigrationController"].model_dump(by_alias=True)
    assert migration["evictionPolicy"] == "Eviction"
    assert migration["evictQPS"] == "10"
    assert migration["namespaces"] == {"include": [], "exclude": ["kube-system", "koordinator-system"]}
    # LowNodeLoad is configured but not enabled in Koordinator's shipped ConfigMap; its args still validate.
    low = prof.args["LowNodeLoad"].model_dump(by_alias=True)
    assert low["highThresholds"] == {"cpu": 75.0, "memory": 80.0}


def test_bare_configuration_inside_the_configmap_loads_the_same(
    data_dir: Path, registries: dict[str, PluginRegistry]
) -> None:
    wrapped = yaml.safe_load((data_dir / "koordinator-scheduler-configmap.yaml").read_text())
    bare = wrapped["data"]["koord-scheduler-config"]
    from_bare = load_text(bare, "bare.yaml", registries=registries)
    from_map = load_file(data_dir / "koordinator-scheduler-configmap.yaml", registries=registries)
    assert isinstance(from_bare, LoadedSchedulerConfig) and isinstance(from_map, LoadedSchedulerConfig)
    assert from_bare.config == from_map.config
    assert from_bare.profiles[0].plugins.points == from_map.profiles[0].plugins.points


def test_component_specific_loaders(data_dir: Path, registries: dict[str, PluginRegistry]) -> None:
    sched = load_scheduler_config(data_dir / "koordinator-scheduler-configmap.yaml", registries["scheduler"])
    assert sched.profiles[0].scheduler_name == "koord-scheduler"
    desched = load_descheduler_config(
        data_dir / "koordinator-descheduler-configmap.yaml", registries["descheduler"]
    )
    assert desched.profiles[0].name == "koord-descheduler"


def test_configmap_with_several_keys_picks_the_configuration(registries: dict[str, PluginRegistry]) -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\ndata:\n"
        "  notes: 'just: text'\n"
        "  config: |\n"
        "    apiVersion: descheduler/v1alpha2\n"
        "    kind: DeschedulerConfiguration\n"
    )
    loaded = load_text(text, "cm.yaml", registries=registries)
    assert isinstance(loaded, LoadedDeschedulerConfig)


def test_shipped_descheduler_config_is_koordinators_configmap(data_dir: Path) -> None:
    shipped = REPO / "configs" / "descheduler" / "koord-descheduler.yaml"
    assert shipped.read_bytes() == (data_dir / "koordinator-descheduler-configmap.yaml").read_bytes()
