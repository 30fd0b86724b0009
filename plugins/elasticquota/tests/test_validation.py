"""Validation of quota objects (the webhook's pure function) and ``koord quota check``/``tree``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from koord_plugin_elasticquota.validation import validate_quota, validate_quotas

from koord_framework.cli.main import main
from koord_framework.testing import make_node, make_pod

PARENT = "metadata.labels[quota.scheduling.koordinator.sh/parent]"
IS_PARENT = "metadata.labels[quota.scheduling.koordinator.sh/is-parent]"


def eq(
    name: str, max_: dict[str, str], min_: dict[str, str], parent: str = "", is_parent: bool = False
) -> dict[str, Any]:
    labels = {"quota.scheduling.koordinator.sh/is-parent": "true" if is_parent else "false"}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"max": max_, "min": min_},
    }


def messages(quotas: list[dict[str, Any]], pods: list[dict[str, Any]] = ()) -> list[str]:  # type: ignore[assignment]
    return [str(p) for p in validate_quotas(quotas, pods)]


def test_a_good_tree_has_no_problem() -> None:
    quotas = [
        eq("p", {"cpu": "10"}, {"cpu": "6"}, is_parent=True),
        eq("a", {"cpu": "8"}, {"cpu": "3"}, parent="p"),
        eq("b", {"cpu": "8"}, {"cpu": "3"}, parent="p"),
    ]
    assert messages(quotas) == []


def test_min_greater_than_max_names_quota_and_field() -> None:
    assert messages([eq("a", {"cpu": "2"}, {"cpu": "3"})]) == [
        "ElasticQuota a: spec.min.cpu: min 3 is greater than max 2"
    ]
    assert messages([eq("a", {"cpu": "2"}, {"memory": "1Gi"})]) == [
        "ElasticQuota a: spec.min.memory: has no matching spec.max entry"
    ]


def test_unknown_parent_and_parent_not_marked() -> None:
    out = messages([eq("a", {"cpu": "2"}, {}, parent="ghost"), eq("b", {"cpu": "2"}, {}, parent="a")])
    assert f"ElasticQuota a: {PARENT}: parent quota 'ghost' does not exist" in out
    assert (
        f"ElasticQuota b: {PARENT}: parent quota 'a' is not marked "
        "quota.scheduling.koordinator.sh/is-parent=true" in out
    )


def test_cycle_is_reported_once() -> None:
    out = messages(
        [
            eq("a", {"cpu": "2"}, {}, parent="b", is_parent=True),
            eq("b", {"cpu": "2"}, {}, parent="a", is_parent=True),
        ]
    )
    cycles = [m for m in out if "cycle" in m]
    assert cycles == [f"ElasticQuota a: {PARENT}: the quota tree has a cycle: a -> b -> a"]


def test_children_min_sum_above_parent_min() -> None:
    out = messages(
        [
            eq("p", {"cpu": "10"}, {"cpu": "4"}, is_parent=True),
            eq("a", {"cpu": "8"}, {"cpu": "3"}, parent="p"),
            eq("b", {"cpu": "8"}, {"cpu": "3"}, parent="p"),
        ]
    )
    assert out == ["ElasticQuota p: spec.min.cpu: children's min sum 6 is greater than the parent's min 4"]


def test_parent_with_pods_malformed_quantity_and_duplicates() -> None:
    quotas = [
        eq("p", {"cpu": "10"}, {}, is_parent=True),
        eq("bad", {"cpu": "lots"}, {}),
        eq("p", {"cpu": "1"}, {}),
    ]
    pod = make_pod("x", labels={"quota.scheduling.koordinator.sh/name": "p"})
    out = messages(quotas, [pod])
    assert "ElasticQuota bad: spec: ElasticQuota default/bad: spec.max.cpu: " in out[0]
    assert "ElasticQuota p: metadata.name: defined more than once" in out
    assert f"ElasticQuota p: {IS_PARENT}: a parent quota cannot have pods (1 pod(s) name it)" in out


def test_validate_one_quota_against_stored_ones() -> None:
    stored = [
        eq("p", {"cpu": "10"}, {"cpu": "4"}, is_parent=True),
        eq("a", {"cpu": "8"}, {"cpu": "3"}, parent="p"),
    ]
    assert validate_quota(eq("b", {"cpu": "8"}, {"cpu": "1"}, parent="p"), stored) == []
    problems = validate_quota(eq("b", {"cpu": "8"}, {"cpu": "2"}, parent="p"), stored)
    assert [p.field for p in problems] == ["spec.min.cpu"] and problems[0].quota == "p"


def write(tmp: Path, objs: list[dict[str, Any]]) -> Path:
    (tmp / "c.yaml").write_text(yaml.safe_dump_all(objs))
    return tmp


def test_cli_check_and_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = [
        make_node("n1", cpu="10"),
        eq("p", {"cpu": "10"}, {"cpu": "6"}, is_parent=True),
        eq("a", {"cpu": "8"}, {"cpu": "3"}, parent="p"),
        eq("b", {"cpu": "8"}, {"cpu": "3"}, parent="p"),
        make_pod("x", cpu="5", labels={"quota.scheduling.koordinator.sh/name": "a"}),
        make_pod("y", cpu="5", labels={"quota.scheduling.koordinator.sh/name": "b"}, node="n1"),
    ]
    folder = write(tmp_path, good)
    assert main(["quota", "check", "--cluster", str(folder)]) == 0
    assert main(["quota", "tree", "--cluster", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "- p (parent)" in out and "  - a (leaf)" in out
    assert main(["quota", "tree", "--cluster", str(folder), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # a and b each ask 5 of the 10 cores: each gets its min 3 and half of the 4 left
    assert doc["a"]["runtime"] == {"cpu": "5"} and doc["b"]["runtime"] == {"cpu": "5"}
    assert doc["b"]["used"] == {"cpu": "5", "memory": "0"} or doc["b"]["used"]["cpu"] == "5"
    bad = tmp_path / "bad"
    bad.mkdir()
    write(bad, [eq("a", {"cpu": "1"}, {"cpu": "2"})])
    assert main(["quota", "check", "--cluster", str(bad)]) == 1
    assert "spec.min.cpu: min 2 is greater than max 1" in capsys.readouterr().out
    assert main(["quota", "check", "--cluster", str(tmp_path / "missing")]) == 2


def test_example_cluster_quotas_are_valid() -> None:
    root = Path(__file__).resolve().parents[3]
    folder = root / "configs" / "examples" / "cluster"
    if not (folder / "quota-tree.yaml").is_file():
        pytest.skip("example cluster not present")
    assert main(["quota", "check", "--cluster", str(folder)]) == 0
