"""``koord explain``: the sub-verbs' help, output forms, bad input, and a live cluster only read."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from koord_framework.cli import explain as cli
from koord_framework.cli.main import main
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import ClusterPort, EventRecord, Obj

EXAMPLES = str(Path(__file__).resolve().parents[2] / "configs" / "examples" / "cluster")
SCHEMAS = Path(cli.__file__).resolve().parents[1] / "explain"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("verb", ["pod", "node", "quota"])
def test_each_verb_has_help(capsys: pytest.CaptureFixture[str], verb: str) -> None:
    code, out, _ = _run(capsys, verb, "--help")
    assert code == 0
    assert f"koord explain {verb}" in out and "--cluster" in out and "--kubeconfig" in out
    assert "--config" in out and "--output" in out


def test_explain_help_lists_the_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and all(v in out for v in ("pod", "node", "quota"))
    assert main(["--help"]) == 0
    assert "explain" in capsys.readouterr().out


def test_pod_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "pod", "shop/web-1", "--cluster", EXAMPLES)
    assert code == 0
    assert out.startswith("pod shop/web-1 (profile koord-scheduler): Scheduled on ")
    assert "TaintToleration: node(s) had untolerated taint" in out  # a rejected group
    assert "#1 " in out and "Permit: Allow" in out


def test_pod_json_matches_the_schema_and_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "pod", "shop/web-1", "--cluster", EXAMPLES, "-o", "json")
    assert code == 0
    data = json.loads(out)
    jsonschema.validate(data, json.loads((SCHEMAS / "pod_schema.json").read_text()))
    assert data["summary"]["nodes"] == data["summary"]["feasible"] + data["summary"]["rejected"]
    assert sum(g["count"] for g in data["rejected"]) == data["summary"]["rejected"]
    assert len(data["nodes"]) == data["summary"]["feasible"]  # JSON: every feasible node by default
    best = data["nodes"][0]
    assert data["result"]["node"] in {best["name"], *data["result"]["tiedWith"]}
    for v in data["nodes"]:
        assert v["total"] == sum(s["weighted"] for s in v["scores"].values())


def test_pod_focus_and_top(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "pod", "shop/web-1", "--cluster", EXAMPLES, "--node", "node-22")
    assert code == 0 and "node node-22: rejected by TaintToleration" in out
    # --node runs every Filter plugin on the node on its own: past the first rejection too.
    assert "    NodeResourcesFit: " in out and "    LoadAwareScheduling: Success" in out
    code, out, _ = _run(
        capsys, "pod", "ml/infer-half-0", "--cluster", EXAMPLES, "--node", "node-22", "-o", "json"
    )
    (node,) = json.loads(out)["nodes"]
    verdicts = {f["plugin"]: f["code"] for f in node["filters"]}
    assert verdicts["TaintToleration"] == "UnschedulableAndUnresolvable"
    assert verdicts["NodeResourcesFit"] == "Unschedulable" and verdicts["DeviceShare"] == "Success"
    code, out, _ = _run(capsys, "pod", "shop/web-1", "--cluster", EXAMPLES, "-o", "json", "--nodes", "2")
    assert code == 0 and len(json.loads(out)["nodes"]) == 2


def test_a_bound_pod_is_re_evaluated_as_pending(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = MemoryCluster.from_paths([EXAMPLES])
    bound = next(p for p in cluster.list("Pod")[0] if (p.get("spec") or {}).get("nodeName"))
    key = f"{bound['metadata']['namespace']}/{bound['metadata']['name']}"
    code, out, _ = _run(capsys, "pod", key, "--cluster", EXAMPLES, "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert data["reEvaluated"] and data["boundTo"] == bound["spec"]["nodeName"]
    code, out, _ = _run(capsys, "pod", key, "--cluster", EXAMPLES)
    assert f"re-evaluated as if pending: the pod is bound to {bound['spec']['nodeName']}" in out


@pytest.mark.parametrize(
    ("argv", "named", "suggested"),
    [
        (["pod", "shop/web-99"], "pod 'shop/web-99'", "shop/web-9"),
        (["node", "node-099"], "node 'node-099'", "node-09"),
        (["quota", "quota-tem-a"], "quota 'quota-tem-a'", None),
        (["pod", "shop/web-1", "--node", "node-2x"], "node 'node-2x'", "node-2"),
    ],
)
def test_unknown_names_are_named_with_close_ones(
    capsys: pytest.CaptureFixture[str], argv: list[str], named: str, suggested: str | None
) -> None:
    code, _, err = _run(capsys, *argv, "--cluster", EXAMPLES)
    assert code == 2
    assert named in err and "not found" in err
    if suggested:
        assert "did you mean" in err and suggested in err


# --- a live cluster is only read ----------------------------------------------------------------
class ReadOnlyPort(ClusterPort):
    """A live cluster stand-in that fails the test on any write."""

    def __init__(self, inner: MemoryCluster) -> None:
        self.inner = inner
        self.clock = inner.clock
        self.kinds = inner.kinds
        self.reads = 0

    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        self.reads += 1
        return self.inner.get(kind, name, namespace)

    def list(self, kind: str, namespace: str | None = None) -> tuple[list[Obj], int]:
        self.reads += 1
        return self.inner.list(kind, namespace)

    def subscribe(self, kinds: Iterable[str], handler: Any, since: int | None = None) -> Any:
        raise AssertionError("explain must not watch the live cluster")

    def _write(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a write reached the live cluster: {args}")

    def create(self, obj: Obj) -> Obj:
        return self._write("create", obj)

    def update(self, obj: Obj) -> Obj:
        return self._write("update", obj)

    def patch(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool = False
    ) -> Obj:
        return self._write("patch", kind, name)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        self._write("delete", kind, name)

    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        self._write("bind", namespace, name, node)

    def evict(self, namespace: str, name: str, **kwargs: Any) -> None:  # type: ignore[override]
        self._write("evict", namespace, name)

    def record_event(self, event: EventRecord) -> None:
        self._write("event", event)


def _args(what: str, target: str, **extra: Any) -> argparse.Namespace:
    base = {"what": what, "target": target, "cluster": None, "kubeconfig": "unused", "config": None}
    base.update({"output": "json", "now": None, "nodes": None, "node": None, "seed": 0})
    base.update(extra)
    return argparse.Namespace(**base)


@pytest.mark.parametrize(
    ("what", "target"),
    [("pod", "shop/web-1"), ("pod", "training/llm-worker-0"), ("node", "numa-00"), ("quota", "shop")],
)
def test_a_live_cluster_is_only_read(capsys: pytest.CaptureFixture[str], what: str, target: str) -> None:
    """The pod is scheduled, reserved, permitted and pre-bound: on the copy; the port sees lists only."""
    live = MemoryCluster.from_paths([EXAMPLES])
    before = live.resource_version
    port = ReadOnlyPort(live)
    assert cli.run(_args(what, target), port=port) == 0
    assert port.reads > 0 and live.resource_version == before
    assert json.loads(capsys.readouterr().out)


def test_a_thousand_nodes_read_compactly() -> None:
    """1,000 nodes, half of them full: one line for the 500 rejected, at most ``--nodes`` score lines."""
    from bench import workloads as wl
    from koord_framework.cli.common import shipped_config
    from koord_framework.cluster.clock import VirtualClock, parse_time
    from koord_framework.explain.pod import explain_pod
    from koord_framework.explain.render import render_pod

    cluster = MemoryCluster(VirtualClock(parse_time(wl.NOW)), seed=0)
    for obj in wl.basic_nodes(1000):
        cluster.create(obj)
    for i in range(500):  # 3 of the 4 CPUs of every even node taken
        cluster.create(wl.pod(f"big-{i}", {"cpu": "3", "memory": "1Gi"}, node_name=f"node-{2 * i}"))
    cluster.create(wl.pod("web", {"cpu": "2", "memory": "1Gi"}, scheduler_name="koord-scheduler"))
    ex = explain_pod(cluster, shipped_config("scheduler", "test"), "default/web")
    assert ex.status == "Scheduled" and ex.node is not None and int(ex.node.split("-")[1]) % 2 == 1
    groups = ex.groups()
    assert [(g["plugin"], g["count"]) for g in groups] == [("NodeResourcesFit", 500)]
    text = render_pod(ex, top=5)
    assert len(text.splitlines()) <= 25
    assert "500 x NodeResourcesFit: Insufficient cpu" in text


def test_a_quota_refusal_is_explained_at_prefilter(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Why a quota refused a pod: ElasticQuota's PreFilter, with the quota's runtime, used and request."""
    greedy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "greedy", "namespace": "shop"},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "main", "image": "app", "resources": {"requests": {"cpu": "150"}}}],
        },
    }
    (tmp_path / "greedy.json").write_text(json.dumps(greedy))
    code, out, _ = _run(
        capsys, "pod", "shop/greedy", "--cluster", EXAMPLES, "--cluster", str(tmp_path), "-o", "json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["preFilter"]["status"] == "Unschedulable" and data["preFilter"]["plugin"] == "ElasticQuota"
    assert (
        "quotaName: shop" in data["preFilter"]["reason"]
        and "exceedDimensions: [cpu]" in data["preFilter"]["reason"]
    )
    assert data["result"]["status"] == "Unschedulable" and data["summary"]["feasible"] == 0
    assert [g["plugin"] for g in data["rejected"]] == ["ElasticQuota"]
