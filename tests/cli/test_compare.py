"""``koord compare``: isolation of the runs, the JSON contract, arrivals and replays, descheduling rounds, and
bad input reported before anything runs."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from koord_framework.cli.main import main
from koord_framework.compare import SCHEMA_PATH
from koord_framework.compare.measures import (
    NodeRow,
    distribution,
    fragmentation,
    go_percent,
    reasons_of,
    violations,
)
from koord_framework.compare.workload import WorkloadError, load_workload, replay_pods
from koord_framework.scheduler.interface import NodeUsageEstimate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "configs/examples/cluster")
SMALL = str(ROOT / "plugins/lownodeload/examples/cluster")
CURRENT = str(ROOT / "configs/scheduler/koord-scheduler.yaml")
CANDIDATE = str(ROOT / "configs/examples/compare/candidate.yaml")
LOWNODELOAD = str(ROOT / "plugins/lownodeload/examples/profile.yaml")
SCHEMA = json.loads(SCHEMA_PATH.read_text())


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["compare", *argv, "-o", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def _simulate(capsys: pytest.CaptureFixture[str], cluster: str, config: str) -> dict[str, Any]:
    assert main(["simulate", "--cluster", cluster, "--config", config, "-o", "json"]) in (0, 1)
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_help_names_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--help"]) == 0
    out = capsys.readouterr().out
    for option in (
        "--cluster",
        "--config",
        "--workload",
        "--scale",
        "--deschedule-rounds",
        "--html",
        "--label",
    ):
        assert option in out


def test_runs_are_isolated_and_match_simulate(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = _json(capsys, "--cluster", EXAMPLE, "--config", CURRENT, "--config", CANDIDATE)
    jsonschema.validate(doc, SCHEMA)
    assert code == 1  # the example cluster leaves pods out by design
    current, candidate = doc["runs"]
    assert (current["label"], candidate["label"]) == ("koord-scheduler", "candidate")
    # The first run is what `koord simulate` does with the same profile, on the same snapshot and clock: the
    # second run, on its own copy, changed nothing of it.
    alone = _simulate(capsys, EXAMPLE, CURRENT)["summary"]
    assert current["pods"]["placed"] == alone["scheduled"]
    assert current["pods"]["unschedulable"] == alone["unschedulable"]
    # The candidate's profile has another scheduler name: the pending pods were handed to it.
    assert candidate["profiles"] == ["koord-scheduler-candidate"]
    assert candidate["retargeted"] > 0 and candidate["pods"]["placed"] > 0
    # Its usage thresholds (cpu 65%) filter: LoadAware's reason shows up, and violations are measured.
    assert "node(s) cpu usage exceed threshold" in candidate["pods"]["unschedulableByReason"]
    assert current["utilisation"]["estimatedBy"] == "LoadAwareScheduling"
    assert current["loadAwareViolations"]["byResource"] == {}  # Koordinator ships thresholds of 0: off
    names = current["nodes"]["names"]
    assert names == sorted(names) and len(names) == current["utilisation"]["requested"]["cpu"]["nodes"]
    assert current["quotas"] and current["gangs"]["total"] >= 1
    assert sum(current["utilisation"]["requested"]["cpu"]["histogram"]["counts"]) == len(names)


def test_descheduling_rounds_report_evictions(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = _json(
        capsys,
        "--cluster",
        SMALL,
        "--config",
        CURRENT,
        "--config",
        CANDIDATE,
        "--deschedule-rounds",
        "2",
        "--descheduler-config",
        LOWNODELOAD,
    )
    jsonschema.validate(doc, SCHEMA)
    assert code == 0
    for run in doc["runs"]:
        ev = run["evictions"]
        assert ev["total"] >= 1 and len(ev["rounds"]) == 2
        assert all(reason.startswith("LowNodeLoad: node is overutilized") for reason in ev["byReason"])
        # The evicted pods came back and were placed again, under either scheduler name.
        assert run["phases"]["descheduled"]["evictions"] == ev["total"]
        assert run["phases"]["descheduled"]["placed"] >= ev["total"]
        assert run["pods"]["unschedulable"] == 0


def test_arrivals_and_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = tmp_path / "arrivals.jsonl"
    workload.write_text(
        "# two batches\n"
        '{"at": 0, "count": 3, "name": "web", "namespace": "shop", "cpu": "500m", "memory": "512Mi"}\n'
        "\n"
        '{"at": 120, "count": 2, "pod": {"metadata": {"name": "job"}, "spec": {"containers": [{"name": "c",'
        ' "resources": {"requests": {"cpu": "1"}}}]}}}\n'
    )
    code, doc, _ = _json(
        capsys, "--cluster", SMALL, "--config", CURRENT, "--workload", str(workload), "--scale", "1"
    )
    jsonschema.validate(doc, SCHEMA)
    run = doc["runs"][0]
    bound = run["phases"]["snapshot"]["bound"]
    assert run["pods"]["replayed"] == bound
    assert run["pods"]["arrived"] == 5 and doc["input"]["arrivals"] == 5
    assert run["pods"]["placed"] + run["pods"]["unschedulable"] + run["pods"]["waiting"] == bound + 5
    # The second batch arrived two minutes into the run, on the virtual clock.
    assert run["time"]["simulatedUntil"] >= "2024" and doc["now"] < run["time"]["simulatedUntil"]
    assert code in (0, 1)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"count": 2, "cpu": "1"}', "'name'"),
        ('{"name": "x", "cpu": "lots"}', "'cpu'"),
        ('{"name": "x", "count": 0}', "'count'"),
        ('{"name": "x", "memory": "-1Gi"}', "'memory'"),
        ('{"name": "x", "at": -5}', "'at'"),
        ('{"name": "x", "colour": "red"}', "'colour'"),
        ('{"pod": {"metadata": {"name": "p"}, "spec": {"containers": []}}}', "'pod.spec.containers'"),
        ("not json", "not a JSON object"),
    ],
)
def test_bad_workload_line_names_file_line_and_field(tmp_path: Path, line: str, field: str) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text('{"name": "ok"}\n' + line + "\n")
    with pytest.raises(WorkloadError) as err:
        load_workload(path)
    assert f"{path}:2" in str(err.value) and field in str(err.value)


def test_bad_input_is_reported_before_any_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n  - schedulerName: x\n    pluginConfig:\n      - name: LoadAwareScheduling\n"
        "        args: {usageThresholds: {cpu: lots}}\n"
    )
    code = main(["compare", "--cluster", SMALL, "--config", CURRENT, "--config", str(broken)])
    out, err = capsys.readouterr()
    assert code == 2 and not out
    assert str(broken) in err and "usageThresholds" in err
    workload = tmp_path / "w.jsonl"
    workload.write_text('{"name": "x", "memory": "1 GB"}\n')
    code = main(["compare", "--cluster", SMALL, "--config", CURRENT, "--workload", str(workload)])
    out, err = capsys.readouterr()
    assert code == 2 and not out and f"{workload}:1" in err and "'memory'" in err
    code = main(["compare", "--cluster", SMALL, "--config", CURRENT, "--label", "a", "--label", "b"])
    assert code == 2 and "--label" in capsys.readouterr().err


def test_html_without_matplotlib_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    code = main(["compare", "--cluster", SMALL, "--config", CURRENT, "--html", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 2 and "matplotlib" in err and "koord-framework[report]" in err
    assert not (tmp_path / "r.html").exists()


def test_html_report_is_self_contained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["compare", "--cluster", SMALL, "--config", CURRENT, "--html", str(out)]) in (0, 1)
    capsys.readouterr()
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") >= 3
    assert "<script" not in text and "<link" not in text and "<img" not in text


# --- measures -------------------------------------------------------------------------------------------
def test_reasons_split_the_fit_error_histogram() -> None:
    msg = (
        "0/28 nodes are available: 2 node(s) had untolerated taint {dedicated: ml-team}, 22 Insufficient cpu."
        " preemption: 0/28 nodes are available: 28 No preemption victims found for incoming pod."
    )
    assert reasons_of(msg) == ["node(s) had untolerated taint {dedicated: ml-team}", "Insufficient cpu"]
    assert reasons_of("quota exhausted") == ["quota exhausted"]
    assert reasons_of("") == ["(no message)"]


def test_distribution_and_rounding() -> None:
    d = distribution([5.0, 15.0, 15.0, 99.9, 130.0, None])
    assert d is not None
    assert d["nodes"] == 5 and d["histogram"]["counts"] == [1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    assert d["p50"] == 15.0 and d["max"] == 130.0
    assert distribution([None]) is None
    assert go_percent(645, 1000) == 65 and go_percent(644, 1000) == 64


def _row(name: str, cpu: int, mem: int, req_cpu: int, req_mem: int, pods: int = 0) -> NodeRow:
    return NodeRow(name, {"cpu": cpu, "memory": mem, "pods": 10}, {"cpu": req_cpu, "memory": req_mem}, pods)


def test_fragmentation_counts_stranded_capacity() -> None:
    gi = 1 << 30
    rows = [
        _row("a", 8000, 32 * gi, 0, 31 * gi),  # 8 cpu free, 1Gi: the cpu is stranded for a 2Gi pod
        _row("b", 8000, 32 * gi, 8000, 0),  # 32Gi free, no cpu: the memory is stranded
        _row("c", 8000, 32 * gi, 4000, 16 * gi),  # fits the reference
        _row("d", 8000, 32 * gi, 0, 0, pods=10),  # full by pod count: everything stranded
    ]
    out = fragmentation(rows, {"cpu": 1000, "memory": 2 * gi})
    assert out["nodesFittingReference"] == 1 and out["fullNodes"] == 1
    assert out["cpu"]["free"] == "12" and out["cpu"]["stranded"] == "16"
    assert out["memory"]["stranded"] == "64Gi" and out["memory"]["largestOnOneNode"] == "32Gi"


def test_violations_use_loadaware_rounding() -> None:
    est = NodeUsageEstimate({"cpu": 655, "memory": 10}, {"cpu": 1000, "memory": 100}, {"cpu": 65})
    rows = [_row("hot", 1000, 100, 0, 0), _row("none", 1000, 100, 0, 0)]
    rows[0].estimate = est
    out = violations(rows)
    assert out is not None
    assert out["nodes"] == 1 and out["byResource"] == {"cpu": 1} and out["nodesWithoutEstimate"] == 1
    assert out["worst"][0] == {"node": "hot", "over": {"cpu": {"percent": 66, "threshold": 65}}}
    assert violations([_row("x", 1, 1, 0, 0)]) is None


def test_replay_copies_bound_pods_as_pending() -> None:
    pods = [
        {"metadata": {"name": "a", "uid": "1"}, "spec": {"nodeName": "n"}, "status": {"phase": "Running"}},
        {"metadata": {"name": "b"}, "spec": {}, "status": {"phase": "Pending"}},
        {"metadata": {"name": "c"}, "spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}},
    ]
    out = replay_pods(pods, 2)
    assert [p["metadata"]["name"] for p in out] == ["a-replay-1", "a-replay-2"]
    assert all("nodeName" not in p["spec"] and "uid" not in p["metadata"] for p in out)
    assert pods[0]["metadata"]["name"] == "a"  # the originals are untouched


def test_profile_without_loadaware_is_measured_by_an_observer(capsys: pytest.CaptureFixture[str]) -> None:
    default = str(ROOT / "configs/scheduler/default-scheduler.yaml")
    code, doc, _ = _json(capsys, "--cluster", EXAMPLE, "--config", default, "--config", CURRENT)
    jsonschema.validate(doc, SCHEMA)
    plain, koord = doc["runs"]
    assert plain["utilisation"]["estimatedBy"] == "LoadAwareScheduling (observer)"
    assert koord["utilisation"]["estimatedBy"] == "LoadAwareScheduling"
    # Same snapshot, same metrics: before any placement differs, both see the same nodes estimated.
    assert (
        plain["utilisation"]["estimated"]["cpu"]["nodes"] == koord["utilisation"]["estimated"]["cpu"]["nodes"]
    )
    # default-scheduler's profile has no ElasticQuota nor Coscheduling: nothing to report for them.
    assert plain["quotas"] is None and plain["gangs"] is None
    assert plain["retargeted"] > 0 and code in (0, 1)
