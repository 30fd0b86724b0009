"""The ElasticQuota benchmark driver on a small cluster: the report's shape and its invariants (no timing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("koord_plugin_elasticquota")
pytest.importorskip("koord_plugin_kubernetes")

from bench import elasticquota


def test_small_run_reports_both_sides_and_fairness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    assert elasticquota.main(["--nodes", "20", "--pods", "300", "--waves", "2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["quotas"] == 30
    assert 0 < report["withoutQuotas"]["bound"] <= 300
    assert 0 < report["withQuotas"]["bound"] <= 300
    assert 0 < report["utilisation"]["withQuotas"] <= 1
    rows = report["fairness"]["quotas"]
    assert len(rows) == 25
    for row in rows:
        assert row["usedCores"] <= row["maxCores"]
        assert row["usedCores"] <= row["demandCores"]
    json.loads(capsys.readouterr().out)
