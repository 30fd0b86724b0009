"""Koordinator v1.3-v1.5's ``koord-scheduler-config`` (v1beta2, v1beta3) validates unchanged, converted to v1
as kube-scheduler converts, and says what it converted (tests/config/data/koordinator/README.md cites the
files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from koord_framework.config.loader import load_scheduler_config

DATA = Path(__file__).parent / "data" / "koordinator"


@pytest.mark.parametrize(("tag", "version"), [("v1.3.0", "v1beta2"), ("v1.5.0", "v1beta3")])
def test_koordinators_older_configmaps_validate_unchanged(tag: str, version: str) -> None:
    loaded = load_scheduler_config(DATA / f"scheduler-config-{tag}.yaml")
    assert loaded.notes[0].startswith(f"converted from kubescheduler.config.k8s.io/{version} to ")
    (prof,) = loaded.profiles
    assert prof.scheduler_name == "koord-scheduler"
    assert prof.at("queueSort") == ("PrioritySort",)
    assert any("Coscheduling -> PrioritySort" in n for n in loaded.notes)
    assert "LoadAwareScheduling" in prof.at("filter") and "DefaultBinder" in prof.at("bind")
    assert prof.args["LoadAwareScheduling"].model_dump()["node_metric_expiration_seconds"] == 300


def test_v1beta2_keeps_its_own_default_weights_and_drops_the_unknown_batch_fit() -> None:
    old = load_scheduler_config(DATA / "scheduler-config-v1.3.0.yaml")
    new = load_scheduler_config(DATA / "scheduler-config-v1.5.0.yaml")
    assert old.profiles[0].plugins.score_weights["TaintToleration"] == 1
    assert new.profiles[0].plugins.score_weights["TaintToleration"] == 3
    assert "BatchResourceFit" not in old.profiles[0].at("filter")
    assert any("BatchResourceFit dropped" in n for n in old.notes)


def test_a_v1_configuration_has_no_notes() -> None:
    root = Path(__file__).resolve().parents[2]
    assert load_scheduler_config(root / "configs/scheduler/koord-scheduler.yaml").notes == ()
