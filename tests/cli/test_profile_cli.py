"""``koord profile validate|schema|defaults`` and the entry point, run in-process through ``main()``."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from koord_framework.cli import main as cli_main
from koord_framework.cli.main import COMMAND_MODULES, main
from koord_framework.registry import GROUPS, PluginRegistry

CONFIG_TESTS = Path(__file__).resolve().parents[1] / "config"
DATA = CONFIG_TESTS / "data"


def _fakes() -> ModuleType:
    name = "koord_config_fake_plugins"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, CONFIG_TESTS / "fake_plugins.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(autouse=True)
def installed(monkeypatch: pytest.MonkeyPatch) -> dict[str, PluginRegistry]:
    """The CLI discovers plugins from entry points; here it finds the fake plugins instead."""
    registries: dict[str, PluginRegistry] = _fakes().registries()
    short = {ep_group: name for name, ep_group in GROUPS.items()}

    def discover(cls: type[PluginRegistry], group: str) -> PluginRegistry:
        name = short.get(group, group)
        # groups the fakes have no plugins for (koord-manager's calculators) are empty
        return registries[name] if name in registries else PluginRegistry.from_classes(group, [])

    monkeypatch.setattr(PluginRegistry, "discover", classmethod(discover))
    return registries


def write(tmp_path: Path, text: str, name: str = "profile.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_command_modules_are_registered() -> None:
    assert COMMAND_MODULES[:2] == ["koord_framework.cli.plugins", "koord_framework.cli.profile"]
    parser = cli_main.build_parser()
    assert "profile" in parser.format_help() and "plugins" in parser.format_help()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("koord ")


def test_no_command_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: koord" in capsys.readouterr().err


def test_unknown_command_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_profile_without_subcommand_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile"]) == 2
    assert "validate" in capsys.readouterr().err


def test_validate_koordinator_scheduler_configmap(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(DATA / "koordinator-scheduler-configmap.yaml")
    assert main(["profile", "validate", path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: valid KubeSchedulerConfiguration"
    assert out[1] == "  profile koord-scheduler: 16 plugins"
    assert out[2].startswith("    default plugins not installed: SchedulingGates, NodePorts, ")


def test_validate_verbose_lists_effective_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(DATA / "koordinator-scheduler-configmap.yaml")
    assert main(["profile", "validate", "-v", path]) == 0
    out = capsys.readouterr().out
    assert "    queueSort: PrioritySort\n" in out
    assert "    bind: Reservation, DefaultBinder\n" in out
    assert "Reservation(5000)" in out and "TaintToleration(3)" in out


def test_validate_descheduler_configmap_with_component(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(DATA / "koordinator-descheduler-configmap.yaml")
    assert main(["profile", "validate", "--component", "descheduler", "-v", path]) == 0
    out = capsys.readouterr().out
    assert "valid DeschedulerConfiguration" in out
    assert "    evict: MigrationController\n" in out


def test_validate_reports_every_problem_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "percentageOfNodesToScore: 120\n"
        "profiles:\n- schedulerName: s\n  pluginConfig:\n"
        "  - {name: LoadAwareScheduling, args: {usageThresholds: {cpu: 101}}}\n",
    )
    assert main(["profile", "validate", path]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"{path}: 2 problem(s)",
        "  percentageOfNodesToScore: must be <= 100",
        "  profiles[0].pluginConfig[LoadAwareScheduling].args.usageThresholds.cpu: must be <= 100",
    ]
    assert "Traceback" not in captured.err


def test_validate_yaml_syntax_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "kind: KubeSchedulerConfiguration\nprofiles: [\n")
    assert main(["profile", "validate", path]) == 1
    err = capsys.readouterr().err
    assert "invalid YAML at line 3, column 1" in err


def test_validate_wrong_component(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(DATA / "koordinator-descheduler-configmap.yaml")
    assert main(["profile", "validate", "--component", "scheduler", path]) == 1
    err = capsys.readouterr().err
    assert "kind: this is a DeschedulerConfiguration, not a KubeSchedulerConfiguration" in err


def test_validate_unreadable_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "validate", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("koord: error: ") and "cannot read" in err
    assert main(["profile", "validate", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_validate_bad_component_choice_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "validate", "--component", "kubelet", "x.yaml"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_validate_koordlet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        "apiVersion: koordlet.koordinator.sh/v1alpha1\nkind: KoordletConfiguration\n"
        "qosStrategies: [{name: BECPUSuppress}]\nruntimeHooks: {enabled: [GroupIdentity]}\n",
    )
    assert main(["profile", "validate", path]) == 0
    out = capsys.readouterr().out
    assert "  qos strategies: BECPUSuppress\n" in out
    assert "  runtime hooks: GroupIdentity (failurePolicy Ignore)\n" in out


def test_unexpected_exceptions_keep_their_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug, not a user error")

    monkeypatch.setattr("koord_framework.cli.profile.load_file", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["profile", "validate", "whatever.yaml"])


def test_schema_for_all_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert [b["$ref"] for b in schema["oneOf"]] == [
        "#/$defs/scheduler",
        "#/$defs/descheduler",
        "#/$defs/koordlet",
    ]


def test_schema_for_one_kind_has_installed_args(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "schema", "--component", "descheduler"]) == 0
    schema = json.loads(capsys.readouterr().out)
    names = schema["$defs"]["PluginConfig"]["properties"]["name"]["enum"]
    assert names == [
        "DefaultEvictor",
        "LowNodeLoad",
        "MigrationController",
        "RemovePodsViolatingNodeAffinity",
    ]


def test_defaults_prints_yaml_args(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "defaults", "LoadAwareScheduling"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("# LoadAwareScheduling (scheduler plugin from ")
    assert yaml.safe_load(out) == {
        "filterExpiredNodeMetrics": True,
        "nodeMetricExpirationSeconds": 180,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "usageThresholds": {"cpu": 65, "memory": 95},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    }


def test_defaults_with_component_and_required_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "defaults", "NeedsTarget", "--component", "scheduler"]) == 0
    out = capsys.readouterr().out
    assert "# required, no default: target" in out
    assert yaml.safe_load(out) == {"target": None}


def test_defaults_of_a_plugin_without_args(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "defaults", "GroupIdentity", "--component", "koordlet"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "{}"


def test_defaults_unknown_plugin_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "defaults", "LoadAware"]) == 2
    err = capsys.readouterr().err
    assert err.startswith('koord: error: plugin "LoadAware" is not installed in any group; installed: ')
    assert main(["profile", "defaults", "LowNodeLoad", "--component", "scheduler"]) == 2
    assert "not installed in the scheduler groups" in capsys.readouterr().err
