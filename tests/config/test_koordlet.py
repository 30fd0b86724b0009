"""KoordletConfiguration: defaults, strategies and hooks resolved against their registries."""

from __future__ import annotations

from pathlib import Path

import pytest

from koord_framework.config import LoadedKoordletConfig, load_koordlet_config, load_text
from koord_framework.errors import ValidationError
from koord_framework.registry import PluginRegistry

HEADER = "apiVersion: koordlet.koordinator.sh/v1alpha1\nkind: KoordletConfiguration\n"


def load(body: str, registries: dict[str, PluginRegistry]) -> LoadedKoordletConfig:
    loaded = load_text(HEADER + body, "k.yaml", registries=registries)
    assert isinstance(loaded, LoadedKoordletConfig)
    return loaded


def test_defaults(registries: dict[str, PluginRegistry]) -> None:
    loaded = load("", registries)
    cfg = loaded.config
    assert cfg.node_name is None
    assert cfg.collect_res_used_interval == 1.0
    assert cfg.report_interval == 60.0
    assert cfg.metrics_address == ":9316"
    assert (cfg.host_paths.proc_root, cfg.host_paths.cgroup_root, cfg.host_paths.resctrl_root) == (
        "/proc",
        "/sys/fs/cgroup",
        "/sys/fs/resctrl",
    )
    assert cfg.cgroup_driver is None
    assert loaded.qos_strategies == () and loaded.runtime_hooks == ()
    assert cfg.runtime_hooks.failure_policy == "Ignore"


def test_strategies_and_hooks_resolve_in_order(registries: dict[str, PluginRegistry]) -> None:
    body = """\
nodeName: node-1
collectResUsedInterval: 500ms
cgroupDriver: systemd
hostPaths: {cgroupRoot: /host/sys/fs/cgroup}
qosStrategies:
- name: BEMemoryEvict
- name: BECPUSuppress
  args: {cpuSuppressThresholdPercent: 70}
- name: Unused
  enabled: false
runtimeHooks:
  enabled: [BatchResource, GroupIdentity]
  failurePolicy: Fail
"""
    with pytest.raises(ValidationError) as info:
        load(body, registries)
    assert [p.path for p in info.value.problems] == ["qosStrategies[Unused].name"]
    loaded = load(body.replace("- name: Unused\n  enabled: false\n", ""), registries)
    assert [s.name for s in loaded.qos_strategies] == ["BEMemoryEvict", "BECPUSuppress"]
    assert loaded.qos_strategies[1].args.model_dump(by_alias=True) == {"cpuSuppressThresholdPercent": 70}
    assert [h.name for h in loaded.runtime_hooks] == ["BatchResource", "GroupIdentity"]
    assert loaded.config.collect_res_used_interval == 0.5
    assert loaded.config.host_paths.cgroup_root == "/host/sys/fs/cgroup"
    assert loaded.config.runtime_hooks.failure_policy == "Fail"


def test_disabled_strategy_keeps_validated_args_but_does_not_run(
    registries: dict[str, PluginRegistry],
) -> None:
    loaded = load(
        "qosStrategies:\n- {name: BECPUSuppress, enabled: false, args: {cpuSuppressThresholdPercent: 40}}\n",
        registries,
    )
    assert loaded.qos_strategies == ()
    assert loaded.resolved.disabled_strategies == ("BECPUSuppress",)


def test_koordlet_loader_takes_registries(tmp_path: Path, registries: dict[str, PluginRegistry]) -> None:
    path = tmp_path / "koordlet.yaml"
    path.write_text(HEADER + "qosStrategies: [{name: BECPUSuppress}]\n")
    loaded = load_koordlet_config(path, registries["qos"], registries["runtimehooks"])
    assert loaded.qos_strategies[0].args.model_dump(by_alias=True) == {"cpuSuppressThresholdPercent": 65}
