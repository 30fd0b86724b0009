"""Manifest loading: good folders and files, malformed documents named precisely, all-or-nothing loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from koord_framework.cluster.manifests import dump_manifests, load_manifests, parse_documents
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import ManifestError
from koord_framework.testing import FakeClock, make_node, make_node_metric, make_pdb, make_pod

HERE = Path(__file__).parent / "manifests"


# --- good manifests ----------------------------------------------------------------------------------


def test_loads_a_folder_recursively_in_sorted_order() -> None:
    objs = load_manifests([HERE])
    keys = [(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objs]
    assert keys == [
        ("Pod", "tools", "from-json"),  # base/extra.json
        ("Node", "", "node-a"),  # base/nodes.yaml
        ("Node", "", "node-b"),
        ("Pod", "default", "web-0"),  # base/pods.yaml
        ("Pod", "batch", "batch-0"),
        ("PodDisruptionBudget", "default", "web"),  # base/policy.yml
        ("PriorityClass", "", "koord-batch"),
        ("NodeMetric", "", "node-a"),  # koordinator/crds.yaml
        ("NodeSLO", "", "node-a"),
        ("ElasticQuota", "team-a", "team-a"),
        ("PodGroup", "default", "gang"),
        ("Device", "", "node-a"),
        ("Reservation", "", "reserve-web"),
        ("PodMigrationJob", "", "move-web-0"),
        ("ClusterColocationProfile", "", "colocation"),
        ("NodeResourceTopology", "", "node-a"),
    ]


def test_yaml_is_read_the_kubernetes_way() -> None:
    objs = {(o["kind"], o["metadata"]["name"]): o for o in load_manifests([HERE / "base"])}
    node = objs[("Node", "node-a")]
    assert node["metadata"]["creationTimestamp"] == "2024-01-01T00:00:00Z", "timestamps stay text"
    assert node["status"]["allocatable"]["pods"] == 110
    typed_list_item = objs[("Pod", "from-json")]
    assert typed_list_item["apiVersion"] == "v1" and typed_list_item["kind"] == "Pod"
    assert objs[("Pod", "web-0")]["metadata"]["namespace"] == "default"


def test_files_may_be_named_one_by_one(tmp_path: Path) -> None:
    objs = load_manifests([HERE / "base" / "nodes.yaml", str(HERE / "base" / "policy.yml")])
    assert [o["metadata"]["name"] for o in objs] == ["node-a", "node-b", "web", "koord-batch"]
    # naming a file twice (directly and through its folder) loads it once
    assert len(load_manifests([HERE / "base", HERE / "base" / "nodes.yaml"])) == 7


def test_hidden_files_and_other_suffixes_are_skipped(tmp_path: Path) -> None:
    shutil.copy(HERE / "base" / "nodes.yaml", tmp_path / "nodes.yaml")
    (tmp_path / "README.md").write_text("not a manifest")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "broken.yaml").write_text("kind: [")
    assert len(load_manifests([tmp_path])) == 2


def test_memory_cluster_from_paths() -> None:
    cluster = MemoryCluster.from_paths([HERE], FakeClock(), seed=1)
    assert cluster.count("Pod") == 3 and cluster.count("Node") == 2
    metric = cluster.get("NodeMetric", "node-a")
    assert metric["status"]["nodeMetric"]["nodeUsage"]["resources"] == {"cpu": "4", "memory": "20Gi"}
    assert cluster.get("Pod", "web-0", "default")["status"]["phase"] == "Running"


def test_dump_then_load_gives_equal_objects(tmp_path: Path) -> None:
    cluster = MemoryCluster.from_paths([HERE], FakeClock(), seed=1)
    cluster.create(make_node("n-9", labels={"yes": "no", "on": "true"}))
    cluster.create(make_pod("odd", annotations={"note": "2024-01-01T00:00:00Z", "n": "010", "e": "1e3"}))
    cluster.create(
        make_node_metric(
            "n-9", cpu="1500m", pods=[{"name": "odd", "cpu": "1"}], aggregated={300: {"p50": {"cpu": "1"}}}
        )
    )
    cluster.create(make_pdb("odd", match_labels={"app": "x"}, max_unavailable="10%"))
    cluster.bind("default", "odd", "n-9")
    written = dump_manifests(cluster, tmp_path / "state")
    assert {p.name for p in written} >= {
        "nodes.yaml",
        "pods.yaml",
        "nodemetrics.yaml",
        "poddisruptionbudgets.yaml",
    }
    reloaded = load_manifests([tmp_path / "state"])
    original = [o for kind in {o["kind"] for o in reloaded} for o in cluster.list(kind)[0]]

    def key(o: dict[str, object]) -> tuple[str, str]:
        meta = o["metadata"]
        assert isinstance(meta, dict)
        return (str(o["kind"]), f"{meta.get('namespace', '')}/{meta['name']}")

    assert sorted(reloaded, key=key) == sorted(original, key=key)
    again = MemoryCluster.from_paths([tmp_path / "state"], FakeClock())
    assert (
        again.get("Pod", "odd", "default")["metadata"]["uid"]
        == cluster.get("Pod", "odd", "default")["metadata"]["uid"]
    )


# --- malformed manifests ----------------------------------------------------------------------------


def _error(tmp_path: Path, name: str, text: str) -> ManifestError:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ManifestError) as info:
        load_manifests([tmp_path])
    return info.value


POD = """apiVersion: v1
kind: Pod
metadata:
  name: ok
spec:
  containers:
    - name: c
"""


def _assert_where(err: ManifestError, path: Path, doc: int | None, field: str) -> None:
    assert (err.file, err.doc, err.path) == (str(path), doc, field)
    text = str(err)
    assert text.startswith(str(path)), text
    if doc is not None:
        assert f"(document {doc})" in text
    assert field in text


def test_bad_container_quantity(tmp_path: Path) -> None:
    err = _error(
        tmp_path,
        "pods.yaml",
        POD
        + "---\n"
        + POD.replace("name: ok", "name: bad").replace(
            "    - name: c\n", "    - name: c\n      resources:\n        requests:\n          cpu: two\n"
        ),
    )
    _assert_where(err, tmp_path / "pods.yaml", 1, "spec.containers[0].resources.requests.cpu")
    assert "invalid quantity 'two'" in err.message


def test_bad_node_capacity(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  capacity: {cpu: '4', memory: 8Gb}\n"
    err = _error(tmp_path, "n.yaml", text)
    _assert_where(err, tmp_path / "n.yaml", 0, "status.capacity.memory")


def test_bad_node_metric_usage(tmp_path: Path) -> None:
    text = """apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeMetric
metadata: {name: n1}
status:
  nodeMetric:
    nodeUsage:
      resources: {cpu: 1, memory: "-"}
"""
    err = _error(tmp_path, "m.yaml", text)
    _assert_where(err, tmp_path / "m.yaml", 0, "status.nodeMetric.nodeUsage.resources.memory")


def test_bad_pod_metric_usage(tmp_path: Path) -> None:
    text = """apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeMetric
metadata: {name: n1}
status:
  podsMetric:
    - {name: a, namespace: default, podUsage: {resources: {cpu: 100m}}}
    - {name: b, namespace: default, podUsage: {resources: {cpu: 1x}}}
"""
    err = _error(tmp_path, "m.yaml", text)
    _assert_where(err, tmp_path / "m.yaml", 0, "status.podsMetric[1].podUsage.resources.cpu")


def test_unknown_aggregation_type(tmp_path: Path) -> None:
    text = """apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeMetric
metadata: {name: n1}
status:
  nodeMetric:
    aggregatedNodeUsages:
      - {duration: 5m, usage: {p42: {resources: {cpu: 1}}}}
"""
    err = _error(tmp_path, "m.yaml", text)
    _assert_where(err, tmp_path / "m.yaml", 0, "status.nodeMetric.aggregatedNodeUsages[0].usage.p42")
    assert "avg, p50, p90, p95, p99" in err.message


def test_missing_name(tmp_path: Path) -> None:
    err = _error(tmp_path, "p.yaml", POD.replace("  name: ok\n", "  labels: {a: b}\n"))
    _assert_where(err, tmp_path / "p.yaml", 0, "metadata.name")
    assert "required" in err.message


def test_invalid_pod_name(tmp_path: Path) -> None:
    err = _error(tmp_path, "p.yaml", POD.replace("name: ok", "name: Web_0"))
    _assert_where(err, tmp_path / "p.yaml", 0, "metadata.name")
    assert "DNS-1123" in err.message


def test_invalid_namespace(tmp_path: Path) -> None:
    err = _error(tmp_path, "p.yaml", POD.replace("  name: ok\n", "  name: ok\n  namespace: Team.A\n"))
    _assert_where(err, tmp_path / "p.yaml", 0, "metadata.namespace")


def test_unknown_kind_lists_known_kinds(tmp_path: Path) -> None:
    err = _error(tmp_path, "x.yaml", POD + "---\napiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n")
    _assert_where(err, tmp_path / "x.yaml", 1, "kind")
    assert "unknown kind 'Gadget'" in err.message
    for known in ("Pod", "Node", "NodeMetric", "Reservation", "ElasticQuota", "List"):
        assert known in err.message


def test_wrong_api_version(tmp_path: Path) -> None:
    err = _error(tmp_path, "x.yaml", POD.replace("apiVersion: v1", "apiVersion: apps/v1"))
    _assert_where(err, tmp_path / "x.yaml", 0, "apiVersion")
    assert "use 'v1'" in err.message


def test_label_value_must_be_a_string(tmp_path: Path) -> None:
    err = _error(tmp_path, "x.yaml", POD.replace("  name: ok\n", "  name: ok\n  labels:\n    version: 2\n"))
    _assert_where(err, tmp_path / "x.yaml", 0, "metadata.labels.version")


def test_error_inside_a_list_names_the_item(tmp_path: Path) -> None:
    text = """apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c}]}}
  - {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: [{image: nginx}]}}
"""
    err = _error(tmp_path, "list.yaml", text)
    _assert_where(err, tmp_path / "list.yaml", 0, "items[1].spec.containers[0].name")


def test_yaml_syntax_error_names_the_document_and_line(tmp_path: Path) -> None:
    err = _error(tmp_path, "x.yaml", POD + "---\n" + POD + "---\nkind: Pod\nmetadata: {name: [\n")
    _assert_where(err, tmp_path / "x.yaml", 2, "")
    assert "invalid YAML: line" in err.message


def test_duplicate_key_is_refused(tmp_path: Path) -> None:
    err = _error(tmp_path, "x.yaml", POD.replace("  name: ok\n", "  name: ok\n  name: again\n"))
    _assert_where(err, tmp_path / "x.yaml", 0, "metadata.name")
    assert err.message == "line 5: duplicate key 'name'"
    err = _error(tmp_path, "x.json", '{"apiVersion": "v1", "kind": "Pod", "kind": "Node"}')
    _assert_where(err, tmp_path / "x.json", 0, "")
    assert "duplicate key 'kind'" in err.message


def test_duplicate_object_across_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(POD)
    err = _error(tmp_path, "b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n---\n" + POD)
    _assert_where(err, tmp_path / "b.yaml", 1, "metadata.name")
    assert f"defined twice (first in {tmp_path / 'a.yaml'}, document 0)" in err.message


def test_bad_taint_effect(tmp_path: Path) -> None:
    text = (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec:\n  taints: [{key: k, effect: Sometimes}]\n"
    )
    err = _error(tmp_path, "n.yaml", text)
    _assert_where(err, tmp_path / "n.yaml", 0, "spec.taints[0].effect")


def test_pdb_rules(tmp_path: Path) -> None:
    both = (
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\n"
        "spec: {minAvailable: 1, maxUnavailable: 1}\n"
    )
    err = _error(tmp_path, "b.yaml", both)
    _assert_where(err, tmp_path / "b.yaml", 0, "spec")
    assert "cannot be both set" in err.message
    bad_percent = both.replace("minAvailable: 1, maxUnavailable: 1", "minAvailable: half")
    err = _error(tmp_path, "b.yaml", bad_percent)
    _assert_where(err, tmp_path / "b.yaml", 0, "spec.minAvailable")


def test_request_above_limit(tmp_path: Path) -> None:
    text = POD.replace(
        "    - name: c\n",
        "    - name: c\n      resources:\n        requests: {memory: 2Gi}\n        limits: {memory: 1Gi}\n",
    )
    err = _error(tmp_path, "p.yaml", text)
    _assert_where(err, tmp_path / "p.yaml", 0, "spec.containers[0].resources.requests.memory")


def test_priority_must_be_an_integer(tmp_path: Path) -> None:
    err = _error(tmp_path, "p.yaml", POD.replace("spec:\n", "spec:\n  priority: high\n"))
    _assert_where(err, tmp_path / "p.yaml", 0, "spec.priority")


def test_extended_resource_name_is_bracketed(tmp_path: Path) -> None:
    text = POD.replace(
        "    - name: c\n",
        "    - name: c\n      resources:\n        requests: {kubernetes.io/batch-cpu: lots}\n",
    )
    err = _error(tmp_path, "p.yaml", text)
    _assert_where(
        err, tmp_path / "p.yaml", 0, "spec.containers[0].resources.requests[kubernetes.io/batch-cpu]"
    )


def test_reservation_needs_owners(tmp_path: Path) -> None:
    text = """apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {name: r}
spec:
  template: {spec: {containers: [{name: c}]}}
"""
    err = _error(tmp_path, "r.yaml", text)
    _assert_where(err, tmp_path / "r.yaml", 0, "spec.owners")


def test_document_must_be_a_mapping(tmp_path: Path) -> None:
    err = _error(tmp_path, "x.yaml", POD + "---\n- just\n- a list\n")
    _assert_where(err, tmp_path / "x.yaml", 1, "")
    assert "expected an object" in err.message


def test_json_syntax_error(tmp_path: Path) -> None:
    err = _error(tmp_path, "x.json", '{"apiVersion": "v1", "kind": }')
    _assert_where(err, tmp_path / "x.json", 0, "")
    assert "invalid JSON" in err.message


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no such file or directory") as info:
        load_manifests([tmp_path / "nope"])
    assert info.value.file == str(tmp_path / "nope") and info.value.doc is None


def test_alias_bombs_are_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(ManifestError, match="aliases expand past"):
        parse_documents("\n".join(lines), "bomb.yaml")


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(ManifestError, match="recursive"):
        parse_documents("&a [*a]", "loop.yaml")


# --- nothing half-loaded -----------------------------------------------------------------------------


def test_a_bad_document_loads_nothing(tmp_path: Path) -> None:
    shutil.copytree(HERE, tmp_path / "m")
    (tmp_path / "m" / "zz-bad.yaml").write_text(POD.replace("name: ok", "name: BAD"))
    cluster = MemoryCluster(FakeClock())
    seen: list[object] = []
    cluster.subscribe(["Pod", "Node"], seen.append)
    with pytest.raises(ManifestError):
        cluster.load([tmp_path / "m"])
    assert cluster.resource_version == 0 and cluster.write_count == 0
    assert cluster.count("Pod") == 0 and cluster.count("Node") == 0
    assert seen == []


def test_an_object_the_cluster_has_loads_nothing(tmp_path: Path) -> None:
    cluster = MemoryCluster(FakeClock())
    cluster.create(make_node("node-b"))
    with pytest.raises(ManifestError, match="Node node-b already exists") as info:
        cluster.load([HERE])
    assert info.value.file == str(HERE / "base" / "nodes.yaml") and info.value.doc == 2
    assert cluster.count("Node") == 1 and cluster.count("Pod") == 0


def test_load_returns_the_count_and_delivers_events(tmp_path: Path) -> None:
    cluster = MemoryCluster(FakeClock())
    seen: list[object] = []
    cluster.subscribe(["Node"], seen.append)
    assert cluster.load([HERE]) == 16
    assert len(seen) == 2
