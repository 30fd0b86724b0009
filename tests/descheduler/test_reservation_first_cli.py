"""``koord deschedule --then-schedule`` with MigrationController in ReservationFirst mode: the scheduler
places the migration's Reservation, the pod is evicted only then, and its replacement lands on the
reserved node; the PodMigrationJob shows every step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cli.deschedule import deschedule
from koord_framework.cli.main import main
from koord_framework.cluster.clock import VirtualClock, parse_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.config.loader import load_descheduler_config, load_scheduler_config
from koord_framework.testing.builders import make_node, make_node_metric, make_pod

REPO = Path(__file__).resolve().parents[2]
SCHEDULER = REPO / "configs" / "scheduler" / "koord-scheduler.yaml"
T = "2024-01-01T00:00:00Z"

PROFILE = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerConfiguration",
    "profiles": [
        {
            "name": "koord-descheduler",
            "plugins": {
                "balance": {"enabled": [{"name": "LowNodeLoad"}]},
                "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "MigrationController"}]},
                "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "MigrationController"}]},
            },
            "pluginConfig": [
                {
                    "name": "MigrationController",
                    "args": {"defaultJobMode": "ReservationFirst", "defaultJobTTL": "5m"},
                },
                {
                    "name": "LowNodeLoad",
                    "args": {
                        "lowThresholds": {"cpu": 40, "memory": 60},
                        "highThresholds": {"cpu": 70, "memory": 90},
                        "anomalyCondition": {"consecutiveAbnormalities": 1},
                    },
                },
            ],
        }
    ],
}


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Path:
    """hot (4 replicas × 1.5 cores measured + 0.5 system of 8: 81%), cold (idle), of koord-scheduler."""
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
            scheduler_name="koord-scheduler",
            labels={"app": "w"},
            creation_time=1_704_000_000.0 + i,
            status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        )
        for i in range(4)
    ]
    owner = pods[0]["metadata"]["ownerReferences"][0]
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "w", "namespace": "apps", "uid": owner["uid"]},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "w"}}},
        "status": {"replicas": 4, "readyReplicas": 4},
    }
    metrics = [
        make_node_metric(
            "hot",
            update_time=T,
            system={"cpu": "500m", "memory": "1Gi"},
            pods=[{"name": f"w{i}", "namespace": "apps", "cpu": "1500m", "memory": "1Gi"} for i in range(4)],
        ),
        make_node_metric("cold", update_time=T, system={"cpu": "200m", "memory": "1Gi"}),
    ]
    nodes = [make_node("hot", cpu="8", memory="16Gi"), make_node("cold", cpu="8", memory="16Gi")]
    for name, objs in (("nodes", nodes), ("workloads", [rs]), ("pods", pods), ("metrics", metrics)):
        (d / f"{name}.yaml").write_text(yaml.safe_dump_all(objs, sort_keys=False))
    return d


@pytest.fixture
def config(tmp_path: Path) -> Path:
    p = tmp_path / "profile.yaml"
    p.write_text(yaml.safe_dump(PROFILE, sort_keys=False))
    return p


def _cond(job: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in job["status"].get("conditions") or ():
        if c["type"] == kind:
            return dict(c)
    raise AssertionError(f"no {kind} condition: {job['status']}")


def test_eviction_goes_through_a_reservation_and_the_replacement_takes_it(
    cluster_dir: Path, config: Path
) -> None:
    now = parse_time(T)
    assert now is not None
    cluster = MemoryCluster(VirtualClock(now), seed=0)
    cluster.load([str(cluster_dir)])
    result = deschedule(
        cluster,
        load_descheduler_config(config),
        scheduler_config=load_scheduler_config(SCHEDULER),
    )
    (evicted,) = result["rounds"][0]["evictions"]
    assert evicted["pod"] == "apps/w2" and evicted["plugin"] == "LowNodeLoad"
    assert result["schedule"]["pods"] == [{"pod": "apps/w2", "node": "cold"}]

    (job,) = cluster.list("PodMigrationJob")[0]
    ref = job["spec"]["reservationOptions"]["reservationRef"]
    reservation = cluster.get("Reservation", ref["name"])
    # The reservation was placed away from the pod's node, then consumed by the replacement.
    assert reservation["status"]["nodeName"] == "cold"
    assert reservation["status"]["phase"] == "Succeeded"
    replacement = cluster.get("Pod", "w2", "apps")
    assert replacement["spec"]["nodeName"] == "cold"
    allocated = json.loads(
        replacement["metadata"]["annotations"]["scheduling.koordinator.sh/reservation-allocated"]
    )
    assert allocated["name"] == ref["name"]

    status = job["status"]
    assert status["phase"] == "Succeeded" and status["status"] == "Complete"
    assert status["nodeName"] == "cold"
    assert status["podRef"]["name"] == "w2" and status["podRef"]["uid"] == replacement["metadata"]["uid"]
    assert status["message"] == f'Bind Pod "apps/w2" in Reservation "{ref["name"]}"'
    for kind in (
        "ReservationCreated",
        "ReservationScheduled",
        "Eviction",
        "ReservationBound",
        "BoundPodReady",
    ):
        assert _cond(job, kind)["status"] == "True", kind
    assert _cond(job, "Eviction")["reason"] == "EvictComplete"
    # The eviction came after the reservation was scheduled.
    job_events = [e.reason for e in cluster.events if e.kind == "PodMigrationJob"]
    assert job_events.index("ReservationScheduled") < job_events.index("Evicting")


def test_cli_reports_the_replacement_on_the_reserved_node(
    capsys: pytest.CaptureFixture[str], cluster_dir: Path, config: Path
) -> None:
    code = main(
        [
            "deschedule",
            "--cluster",
            str(cluster_dir),
            "--config",
            str(config),
            "--output",
            "json",
            "--then-schedule",
            "--scheduler-config",
            str(SCHEDULER),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["schedule"]["pods"] == [{"pod": "apps/w2", "node": "cold"}]
    after = result["schedule"]["imbalance"]["after"]["cpu"]
    before = result["schedule"]["imbalance"]["before"]["cpu"]
    assert after["spread"] < before["spread"]
