"""``koord simulate`` with ElasticQuota: a pod refused by its quota is explained (quota, runtime, used,
request) and the JSON output reports every quota after the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from koord_framework.cli.main import main
from koord_framework.testing import make_node, make_pod

PROFILE = Path(__file__).resolve().parents[1] / "examples" / "profile.yaml"
LABEL = "quota.scheduling.koordinator.sh/name"


def test_simulate_explains_quota_refusals_and_reports_quotas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("koord_plugin_kubernetes")
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "team", "namespace": "default"},
        "spec": {"max": {"cpu": "2", "memory": "8Gi"}, "min": {"cpu": "1", "memory": "1Gi"}},
    }
    pods = [
        make_pod(f"p{i}", cpu="1", memory="1Gi", labels={LABEL: "team"}, scheduler_name="koord-scheduler")
        for i in range(3)
    ]
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump_all([make_node("n1", cpu="16", memory="64Gi"), quota, *pods])
    )
    code = main(
        [
            "simulate",
            "--cluster",
            str(tmp_path),
            "--config",
            str(PROFILE),
            "-o",
            "json",
            "--explain",
            "--now",
            "2024-01-01T00:00:00Z",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 1  # one pod is left unscheduled
    refused = [p for p in doc["pods"] if p["status"] == "Unschedulable"]
    assert len(refused) == 1
    message = refused[0]["message"]
    assert (
        "Insufficient quotas, quotaName: team, runtime: cpu:2,memory:3Gi, used: cpu:2,memory:2Gi" in message
    )
    assert "pod's request: cpu:1,memory:1Gi, exceedDimensions: [cpu]" in message
    quotas = {q["name"]: q for q in doc["plugins"]["ElasticQuota"]}
    assert quotas["team"]["used"] == {"cpu": "2", "memory": "2Gi"}
    assert quotas["team"]["runtime"] == {"cpu": "2", "memory": "3Gi"}
    assert quotas["team"]["request"] == {"cpu": "3", "memory": "3Gi"}
    assert quotas["team"]["max"] == {"cpu": "2", "memory": "8Gi"}


def test_simulate_table_explain_prints_the_whole_quota_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("koord_plugin_kubernetes")
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "team", "namespace": "default"},
        "spec": {"max": {"cpu": "1", "memory": "8Gi"}},
    }
    pods = [
        make_pod(f"p{i}", cpu="1", memory="1Gi", labels={LABEL: "team"}, scheduler_name="koord-scheduler")
        for i in range(2)
    ]
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump_all([make_node("n1", cpu="16", memory="64Gi"), quota, *pods])
    )
    args = ["simulate", "--cluster", str(tmp_path), "--config", str(PROFILE), "--explain"]
    assert main([*args, "--now", "2024-01-01T00:00:00Z"]) == 1
    out = capsys.readouterr().out
    assert "Insufficient quotas, quotaName: team, runtime: cpu:1,memory:2Gi, used: cpu:1,memory:1Gi" in out
    assert "pod's request: cpu:1,memory:1Gi, exceedDimensions: [cpu]" in out
