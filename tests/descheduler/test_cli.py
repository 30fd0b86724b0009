"""``koord deschedule``: the JSON contract, dry run, rounds, re-scheduling and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cli.main import main
from koord_framework.config.loader import load_descheduler_config
from koord_framework.testing.builders import make_node, make_node_metric, make_pod

REPO = Path(__file__).resolve().parents[2]
T = "2024-01-01T00:00:00Z"

PROFILE = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerConfiguration",
    "deschedulingInterval": "30s",
    "profiles": [
        {
            "name": "koord-descheduler",
            "plugins": {
                "balance": {"enabled": [{"name": "LowNodeLoad"}]},
                "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
                "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
            },
            "pluginConfig": [
                {
                    "name": "LowNodeLoad",
                    "args": {
                        "lowThresholds": {"cpu": 40, "memory": 60},
                        "highThresholds": {"cpu": 70, "memory": 90},
                        "anomalyCondition": {"consecutiveAbnormalities": 1},
                    },
                }
            ],
        }
    ],
}


def _write(path: Path, objs: list[dict[str, Any]]) -> None:
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False))


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Path:
    """hot (4 pods × 1.5 cores + 0.5 system of 8: 81%), cold (idle)."""
    d = tmp_path / "cluster"
    d.mkdir()
    pods = [
        make_pod(
            f"w{i}",
            namespace="apps",
            node="hot",
            cpu="500m",
            memory="1Gi",
            owner_kind="ReplicaSet",
            owner_name="w",
            creation_time=1_704_000_000.0 + i,
        )
        for i in range(4)
    ]
    metrics = [
        make_node_metric(
            "hot",
            update_time=T,
            system={"cpu": "500m", "memory": "1Gi"},
            pods=[{"name": f"w{i}", "namespace": "apps", "cpu": "1500m", "memory": "1Gi"} for i in range(4)],
        ),
        make_node_metric("cold", update_time=T, system={"cpu": "200m", "memory": "1Gi"}),
    ]
    _write(
        d / "nodes.yaml",
        [make_node("hot", cpu="8", memory="16Gi"), make_node("cold", cpu="8", memory="16Gi")],
    )
    _write(d / "pods.yaml", pods)
    _write(d / "metrics.yaml", metrics)
    return d


@pytest.fixture
def config(tmp_path: Path) -> Path:
    p = tmp_path / "profile.yaml"
    p.write_text(yaml.safe_dump(PROFILE, sort_keys=False))
    return p


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["deschedule", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _run_on(
    capsys: pytest.CaptureFixture[str], cluster_dir: Path, config: Path, *argv: str
) -> tuple[int, str, str]:
    return _run(capsys, "--cluster", str(cluster_dir), "--config", str(config), *argv)


def test_json_contract(capsys: pytest.CaptureFixture[str], cluster_dir: Path, config: Path) -> None:
    code, out, err = _run_on(capsys, cluster_dir, config, "--output", "json")
    assert code == 0, err
    result = json.loads(out)
    assert list(result) == ["rounds"]
    (r,) = result["rounds"]
    assert list(r) == ["round", "nodes", "evictions"]
    assert r["round"] == 1
    assert r["nodes"] == {"high": ["hot"], "low": ["cold"]}
    # 6.5 of 8 cores (81.25%) against 70% (5.6 cores): one pod of 1.5 cores is enough. The idle node has
    # room for three (5.4 cores under its high threshold), so w0..w2 are removable and the newest, w2, goes.
    assert r["evictions"] == [
        {
            "pod": "apps/w2",
            "node": "hot",
            "plugin": "LowNodeLoad",
            "reason": "node is overutilized, node cpu usage(81.25%)>threshold(70.00%)",
        },
    ]


def test_rounds_follow_the_cluster_and_dry_run_changes_nothing(
    capsys: pytest.CaptureFixture[str], cluster_dir: Path, config: Path, tmp_path: Path
) -> None:
    code, out, _ = _run_on(capsys, cluster_dir, config, "--output", "json", "--rounds", "3")
    assert code == 0
    rounds = json.loads(out)["rounds"]
    assert [r["round"] for r in rounds] == [1, 2, 3]
    assert len(rounds[0]["evictions"]) == 1
    # After the eviction the node's metrics no longer carry the pod (koordlet's next report): balanced.
    assert rounds[1]["evictions"] == [] and rounds[1]["nodes"]["high"] == []

    code, out, _ = _run_on(capsys, cluster_dir, config, "--output", "json", "--rounds", "2", "--dry-run")
    assert code == 0
    dry = json.loads(out)["rounds"]
    # Nothing changed, so the second round wants the same eviction again.
    assert [e["pod"] for e in dry[0]["evictions"]] == [e["pod"] for e in dry[1]["evictions"]] == ["apps/w2"]


def test_table_output(capsys: pytest.CaptureFixture[str], cluster_dir: Path, config: Path) -> None:
    code, out, _ = _run_on(capsys, cluster_dir, config)
    assert code == 0
    assert "Round 1" in out and "high: hot" in out and "low:  cold" in out
    assert "EVICTED apps/w2" in out
    assert out.rstrip().endswith("1 eviction(s), 0 refused, in 1 round(s)")


def test_then_schedule_places_evicted_pods_and_compares_imbalance(
    capsys: pytest.CaptureFixture[str], cluster_dir: Path, config: Path
) -> None:
    sched = REPO / "configs" / "scheduler" / "default-scheduler.yaml"
    if not sched.is_file():
        pytest.skip("no default-scheduler profile in this tree")
    code, out, err = _run_on(
        capsys, cluster_dir, config, "--output", "json", "--then-schedule", "--scheduler-config", str(sched)
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["schedule"]["pods"] == [{"pod": "apps/w2", "node": "cold"}]
    before, after = result["schedule"]["imbalance"]["before"], result["schedule"]["imbalance"]["after"]
    assert after["cpu"]["spread"] < before["cpu"]["spread"]
    assert before["cpu"]["max"] == 81.25 and after["cpu"]["max"] == 62.5


def test_shipped_config_loads_unchanged_and_runs(
    capsys: pytest.CaptureFixture[str], cluster_dir: Path
) -> None:
    shipped = REPO / "configs" / "descheduler" / "koord-descheduler.yaml"
    loaded = load_descheduler_config(shipped)
    (profile,) = loaded.profiles
    assert profile.name == "koord-descheduler"
    assert profile.plugins.points["evict"] == ("MigrationController",)
    assert profile.plugins.points["filter"] == ("MigrationController",)
    assert profile.plugins.points["balance"] == ()
    assert float(loaded.config.descheduling_interval) == 10.0
    code, out, _ = _run_on(capsys, cluster_dir, shipped, "--output", "json")
    assert code == 0
    assert json.loads(out)["rounds"][0]["evictions"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "--rounds 0"),
        (["--now", "yesterday"], "--now"),
        (["--config", "/nonexistent.yaml"], "/nonexistent.yaml"),
    ],
)
def test_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], cluster_dir: Path, argv: list[str], message: str
) -> None:
    code, _, err = _run(capsys, "--cluster", str(cluster_dir), *argv)
    assert code == 2
    assert message in err
