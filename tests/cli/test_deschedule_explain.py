"""``koord deschedule --explain``: the verdict on candidates that stayed, and profiles that can do nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koord_framework.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_profile_without_balance_or_deschedule_plugins_is_explained(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["deschedule", "--cluster", str(ROOT / "configs/examples/cluster"), "--dry-run", "--explain"])
    out = capsys.readouterr().out
    assert code == 0
    assert "profile koord-descheduler: no deschedule or balance plugin is enabled" in out
    assert "(LowNodeLoad configured in pluginConfig but not enabled)" in out


PROFILE = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  plugins:
    balance:
      enabled: [{name: LowNodeLoad}]
  pluginConfig:
  - name: LowNodeLoad
    args:
      lowThresholds: {cpu: 45, memory: 55}
      highThresholds: {cpu: 75, memory: 80}
      anomalyCondition: {consecutiveAbnormalities: 1}
  - name: MigrationController
    args:
      namespaces:
        exclude: [shop]
"""


def test_candidates_refused_by_a_filter_name_the_filter_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The LowNodeLoad example, with MigrationController (the default evictor) excluding the pods' namespace.
    config = tmp_path / "profile.yaml"
    config.write_text(PROFILE)
    cluster = ROOT / "plugins/lownodeload/examples/cluster"
    argv = ["deschedule", "--cluster", str(cluster), "--config", str(config), "--dry-run", "--explain"]
    assert main([*argv, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rounds"][0]["nodes"]["high"]  # there was something to do
    assert doc["rounds"][0]["evictions"] == []
    verdicts = {c["pod"]: c["verdict"] for c in doc["explain"]["candidates"]}
    assert verdicts, doc["explain"]
    for pod, verdict in verdicts.items():
        assert pod.startswith("shop/")
        assert verdict == "refused by Filter MigrationController: namespace shop is in namespaces.exclude"
    assert main(argv) == 0
    assert (
        "refused by Filter MigrationController: namespace shop is in namespaces.exclude"
        in capsys.readouterr().out
    )
