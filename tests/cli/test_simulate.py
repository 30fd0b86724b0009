"""``koord simulate``: exit codes, the json contract (validated against the schema in the repo),
reproducibility, --write-state round trips, and the table's width."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import yaml

from koord_framework.api.objects import PodInfo
from koord_framework.cli.main import main
from koord_framework.registry import PluginRegistry
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import (
    FilterPlugin,
    PreBindPlugin,
    SchedulerPlugin,
    ScorePlugin,
    VectorFilter,
    VectorScore,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.simulate import SCHEMA_PATH
from koord_framework.scheduler.status import Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_framework.testing import make_node, make_node_metric, make_pod
from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort

NOW = "2024-01-01T00:00:00Z"


# --- a tiny JSON Schema checker (the subset simulate_schema.json uses) ----------------------------
_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "null": type(None),
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def schema_errors(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    errors: list[str] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(
            isinstance(value, _TYPES[t]) and not (t in ("integer", "number") and isinstance(value, bool))
            for t in types
        )
        if not ok:
            return [f"{path}: {value!r} is not {types}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: {value} < {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing {key!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                errors += schema_errors(item, props[key], f"{path}.{key}")
            elif extra is False:
                errors.append(f"{path}: unexpected {key!r}")
            elif isinstance(extra, dict):
                errors += schema_errors(item, extra, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    return errors


def test_the_schema_checker_catches_violations() -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    bad = {
        "pods": [{"pod": "a/b", "node": 3, "status": "Done", "message": "", "annotations": {}}],
        "summary": {},
    }
    errors = schema_errors(bad, schema)
    assert any("node" in e for e in errors) and any("status" in e for e in errors)
    assert any("missing 'nodes'" in e for e in errors) and any("missing 'scheduled'" in e for e in errors)


# --- fake plugins standing in for the installed ones ----------------------------------------------
class Fit(SchedulerPlugin, FilterPlugin, VectorFilter, ScorePlugin, VectorScore):
    """Named like the default plugin so that kube-scheduler's default profile enables it."""

    name: ClassVar[str] = "NodeResourcesFit"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        for r in ("cpu", "memory"):
            if pod.requests.get(r, 0) and node.requested.get(r, 0) + pod.requests[r] > node.allocatable.get(
                r, 0
            ):
                return Status.unschedulable(f"Insufficient {r}")
        return Status()

    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        ok = np.ones(rows.size, dtype=bool)
        for r in ("cpu", "memory"):
            if pod.requests.get(r, 0):
                ok &= table.requested_of(r)[rows] + pod.requests[r] <= table.allocatable_of(r)[rows]
        return ok

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        alloc = node.allocatable.get("cpu", 0)
        free = alloc - node.requested.get("cpu", 0) - pod.requests.get("cpu", 0)
        return (max(free, 0) * 100 // alloc if alloc else 0), Status()

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        alloc = table.allocatable_of("cpu")[rows]
        free = np.maximum(alloc - table.requested_of("cpu")[rows] - pod.requests.get("cpu", 0), 0)
        return np.where(alloc > 0, free * 100 // np.where(alloc > 0, alloc, 1), 0)


class Stamp(SchedulerPlugin, PreBindPlugin):
    name: ClassVar[str] = "Stamp"

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        state.pod_mutation.annotations["example.com/placed-on"] = node_name
        return Status()


CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    plugins:
      preBind:
        enabled:
          - name: Stamp
"""


@pytest.fixture(autouse=True)
def fake_installed_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = PluginRegistry.from_classes("scheduler", [Fit, Stamp, HarnessQueueSort, HarnessBinder])
    monkeypatch.setattr(PluginRegistry, "discover", classmethod(lambda cls, group: registry))


def write_cluster(tmp: Path, *, big: bool = False, nodes: int = 3) -> Path:
    folder = tmp / "cluster"
    folder.mkdir()
    objs: list[dict[str, Any]] = [make_node(f"node-{i}", cpu="4", memory="8Gi") for i in range(nodes)]
    objs.append(make_node_metric("node-0", cpu="1", memory="1Gi"))
    objs.append(make_pod("running", namespace="shop", cpu="1", memory="1Gi", node="node-0"))
    for i in range(6):
        objs.append(
            make_pod(f"web-{i}", namespace="shop", cpu="1", memory="512Mi", scheduler_name="koord-scheduler")
        )
    objs.append(make_pod("elsewhere", namespace="shop", cpu="1", scheduler_name="default-scheduler"))
    if big:
        objs.append(make_pod("huge", namespace="shop", cpu="64", scheduler_name="koord-scheduler"))
    (folder / "objects.yaml").write_text(yaml.safe_dump_all(objs))
    (tmp / "config.yaml").write_text(CONFIG)
    return folder


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_on(capsys: pytest.CaptureFixture[str], cluster: Path, *args: str) -> tuple[int, str, str]:
    """``run`` on a cluster folder with the profile ``write_cluster`` wrote next to it."""
    return run(capsys, "--cluster", str(cluster), "--config", str(cluster.parent / "config.yaml"), *args)


# --- exit codes and the json contract -------------------------------------------------------------
def test_json_output_validates_and_exits_0_when_everything_is_scheduled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_on(capsys, write_cluster(tmp_path), "-o", "json", "--now", NOW)
    assert code == 0, err
    doc = json.loads(out)
    assert schema_errors(doc, json.loads(SCHEMA_PATH.read_text())) == []
    assert [p["pod"] for p in doc["pods"]] == [f"shop/web-{i}" for i in range(6)]
    assert all(p["status"] == "Scheduled" and p["node"] for p in doc["pods"])
    assert doc["pods"][0]["annotations"] == {"example.com/placed-on": doc["pods"][0]["node"]}
    assert doc["summary"]["scheduled"] == 6 and doc["summary"]["ignored"] == 1
    assert "filter" not in doc["pods"][0]
    node0 = next(n for n in doc["nodes"] if n["name"] == "node-0")
    assert node0["allocatable"]["cpu"] == "4"
    assert "1 pending pod(s) name a scheduler no profile serves" in err
    assert "(profiles serve: koord-scheduler); left alone: shop/elsewhere (default-scheduler)" in err


def test_explain_adds_filter_verdicts_and_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_on(capsys, write_cluster(tmp_path, big=True), "-o", "json", "--explain", "--now", NOW)
    assert code == 1
    doc = json.loads(out)
    assert schema_errors(doc, json.loads(SCHEMA_PATH.read_text())) == []
    huge = next(p for p in doc["pods"] if p["pod"] == "shop/huge")
    assert huge["status"] == "Unschedulable" and huge["node"] is None
    assert huge["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    assert huge["filter"]["node-1"] == {"plugin": "NodeResourcesFit", "reason": "Insufficient cpu"}
    first = doc["pods"][0]
    assert set(first["scores"]) == {"node-0", "node-1", "node-2"}
    fit = first["scores"]["node-1"]["NodeResourcesFit"]
    assert fit == {"raw": 75, "normalized": 75, "weighted": 75}
    assert first["scores"]["node-1"]["total"] == 75
    assert doc["summary"]["unschedulable"] == 1


def test_explain_table_shows_prebind_annotations_and_rejections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under each bound pod, what PreBind wrote (a cpuset, say); under a rejected one, each reason."""
    cluster = write_cluster(tmp_path, big=True)
    code, out, _ = run_on(capsys, cluster, "--explain", "--now", NOW)
    assert code == 1
    lines = out.splitlines()
    web = next(i for i, line in enumerate(lines) if line.startswith("shop/web-0 "))
    assert lines[web + 1].strip().startswith("example.com/placed-on: node-")
    huge = next(i for i, line in enumerate(lines) if line.startswith("shop/huge "))
    assert lines[huge + 1].strip() == "NodeResourcesFit on node-0, node-1, node-2: Insufficient cpu"
    _, plain, _ = run_on(capsys, cluster, "--now", NOW)
    assert "example.com/placed-on" not in plain


def test_same_seed_same_placements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write_cluster(tmp_path, nodes=8)
    runs = []
    for _ in range(2):
        code, out, _ = run_on(capsys, cluster, "-o", "json", "--seed", "7")
        assert code == 0
        runs.append([(p["pod"], p["node"]) for p in json.loads(out)["pods"]])
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        (
            {
                "bad.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"
                "spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n"
            },
            [],
            "cpu",
        ),
        ({}, ["--config", "missing.yaml"], "missing.yaml"),
        ({}, ["--now", "yesterday"], "--now"),
        (
            {
                "config.yaml": "apiVersion: kubescheduler.config.k8s.io/v1\n"
                "kind: KubeSchedulerConfiguration\n"
                "profiles:\n- plugins: {filter: {enabled: [{name: NoSuchPlugin}]}}\n"
            },
            [],
            "NoSuchPlugin",
        ),
    ],
)
def test_bad_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], args: list[str], message: str
) -> None:
    cluster = write_cluster(tmp_path)
    for name, text in files.items():
        (cluster / name if name == "bad.yaml" else tmp_path / name).write_text(text)
    args = [a if not a.endswith(".yaml") else str(tmp_path / a) for a in args]
    if "--config" not in args:
        args = ["--config", str(tmp_path / "config.yaml"), *args]
    code, out, err = run(capsys, "--cluster", str(cluster), *args)
    assert code == 2
    assert message in err and out == ""


# --- --write-state --------------------------------------------------------------------------------
def test_write_state_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write_cluster(tmp_path)
    state = tmp_path / "state"
    code, out, _ = run_on(capsys, cluster, "-o", "json", "--write-state", str(state), "--now", NOW)
    assert code == 0
    first = json.loads(out)
    code, out, err = run_on(capsys, state, "-o", "json", "--now", NOW)
    again = json.loads(out)
    # Everything of ours is bound now; the one pod naming another scheduler is all that is pending, so
    # nothing was done, and the status says so.
    assert code == 1
    assert "nothing done" in err and "left alone: shop/elsewhere (default-scheduler)" in err
    assert again["pods"] == []
    assert again["nodes"] == first["nodes"]


# --- the table ------------------------------------------------------------------------------------
def test_table_fits_100_columns_and_lists_every_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_on(capsys, write_cluster(tmp_path, big=True))
    assert code == 1
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0].split() == ["POD", "STATUS", "NODE", "MESSAGE"]
    assert any(line.startswith("shop/huge") and "Unschedulable" in line for line in lines)
    assert "6 scheduled, 1 unschedulable, 0 waiting" in out
    assert any(line.startswith("node-0") for line in lines)


def test_yaml_output_is_the_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = write_cluster(tmp_path)
    _, out_yaml, _ = run_on(capsys, cluster, "--now", NOW, "-o", "yaml")
    _, out_json, _ = run_on(capsys, cluster, "--now", NOW, "-o", "json")
    a, b = yaml.safe_load(out_yaml), json.loads(out_json)
    for doc in (a, b):
        doc["summary"].pop("seconds")
        doc["summary"].pop("podsPerSecond")
    assert a == b


def test_end_to_end_with_the_installed_default_profile(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("koord_plugin_kubernetes")
    pytest.importorskip("koord_plugin_loadaware")
    monkeypatch.undo()  # the real entry points
    repo = Path(__file__).resolve().parents[2]
    example = repo / "configs" / "examples" / "cluster"
    if not example.is_dir():
        pytest.skip("example cluster not present")
    monkeypatch.chdir(repo)
    code, out, err = run(capsys, "--cluster", str(example), "-o", "json", "--now", NOW, "--seed", "3")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert schema_errors(doc, json.loads(SCHEMA_PATH.read_text())) == []
    assert doc["summary"]["scheduled"] > 0
    _, again, _ = run(capsys, "--cluster", str(example), "-o", "json", "--now", NOW, "--seed", "3")
    assert [(p["pod"], p["node"]) for p in json.loads(again)["pods"]] == [
        (p["pod"], p["node"]) for p in doc["pods"]
    ]


def test_progress_bar_only_on_a_terminal_and_only_after_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from koord_framework.cli import simulate as cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    now = [100.0]
    monkeypatch.setattr("koord_framework.cli.simulate.time.monotonic", lambda: now[0])
    tty, pipe = Terminal(), io.StringIO()
    bars = [cli._Progress(tty), cli._Progress(pipe)]
    for bar in bars:
        bar.update(10, 100)
    assert tty.getvalue() == ""  # not yet a second
    now[0] += 1.5
    for bar in bars:
        bar.update(50, 100)
    assert "50/100 pods scheduled" in tty.getvalue() and "#" * 15 + "." * 15 in tty.getvalue()
    assert pipe.getvalue() == ""
    bars[0].clear()
    assert tty.getvalue().endswith("\r")
