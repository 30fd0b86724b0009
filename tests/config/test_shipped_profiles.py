"""The default profiles ship with the framework and are fitted to the installed plugins (docs/adr/0007)."""

from __future__ import annotations

from pathlib import Path

from koord_framework.config.loader import LoadedSchedulerConfig, load_text
from koord_framework.config.shipped import shipped_profile
from koord_framework.registry import PluginRegistry

ROOT = Path(__file__).resolve().parents[2]


def _subset(group: str, distributions: set[str]) -> PluginRegistry:
    full = PluginRegistry.discover(group)
    keep = [full.get(n) for n in full.names() if full.distribution(n)[0] in distributions]
    return PluginRegistry.from_classes(group, keep)


def test_with_everything_installed_the_shipped_profile_is_koordinators_file() -> None:
    profile = shipped_profile("scheduler")
    assert profile.left_out == ()
    assert profile.text == (ROOT / "configs/scheduler/koord-scheduler.yaml").read_text()
    assert profile.note("simulate") is None


def test_one_scheduler_plugin_and_the_core_make_a_working_profile() -> None:
    subset = _subset("scheduler", {"koord-plugin-kubernetes", "koord-plugin-loadaware"})
    profile = shipped_profile("scheduler", subset)
    assert set(profile.left_out) == {
        "Coscheduling",
        "Reservation",
        "NodeNUMAResource",
        "DeviceShare",
        "ElasticQuota",
    }
    loaded = load_text(profile.text, profile.source, component="scheduler", registries={"scheduler": subset})
    assert isinstance(loaded, LoadedSchedulerConfig)
    prof = loaded.profiles[0]
    assert prof.scheduler_name == "koord-scheduler"
    assert prof.at("queueSort") == ("PrioritySort",)
    assert "LoadAwareScheduling" in prof.at("filter") and "LoadAwareScheduling" in prof.at("score")
    assert prof.at("bind") == ("DefaultBinder",)
    assert prof.args["LoadAwareScheduling"].model_dump()["node_metric_expiration_seconds"] == 300
    note = profile.note("simulate")
    assert note is not None and note.startswith("koord simulate: no --config: ")
    assert "pip install koord-plugin-coscheduling koord-plugin-deviceshare" in note


def test_one_descheduler_plugin_and_the_evictor_make_a_working_profile() -> None:
    subset = _subset("descheduler", {"koord-plugin-migration", "koord-plugin-lownodeload"})
    profile = shipped_profile("descheduler", subset)
    assert profile.left_out == ()
    load_text(profile.text, profile.source, component="descheduler", registries={"descheduler": subset})
