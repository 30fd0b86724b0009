"""Koordinator's unit-test cases of the quota manager and the runtime calculator that the vectors lack
(``core/group_quota_manager_test.go``, ``core/runtime_quota_calculator_test.go``,
``core/scale_minquota_when_over_root_res_test.go``), plus bad input."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_elasticquota.calculator import QuotaTree, hamilton_split
from koord_plugin_elasticquota.manager import GroupQuotaManager, QuotaNotFoundError
from koord_plugin_elasticquota.quota_object import (
    DEFAULT_QUOTA_NAME,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    ElasticQuotaSpec,
    QuotaObjectError,
)
from koord_plugin_elasticquota.scale_min import ScaleMinQuotaManager

from koord_framework.api.objects import PodInfo
from koord_framework.testing import make_pod

GI = 1 << 30


def res(cpu: int, mem: int) -> dict[str, int]:
    """cpu in cores, memory in bytes (the Go tests' createResourceList)."""
    return {"cpu": cpu * 1000, "memory": mem}


def quota(
    name: str,
    parent: str,
    max_: dict[str, int],
    min_: dict[str, int],
    *,
    lent: bool = True,
    is_parent: bool = False,
    weight: str | None = None,
) -> dict[str, Any]:
    def q(d: dict[str, int]) -> dict[str, str]:
        return {"cpu": f"{d['cpu']}m", "memory": str(d["memory"])}

    meta: dict[str, Any] = {
        "name": name,
        "labels": {
            "quota.scheduling.koordinator.sh/parent": parent,
            "quota.scheduling.koordinator.sh/is-parent": "true" if is_parent else "false",
            "quota.scheduling.koordinator.sh/allow-lent-resource": "true" if lent else "false",
        },
    }
    if weight is not None:
        meta["annotations"] = {"quota.scheduling.koordinator.sh/shared-weight": weight}
    return {"kind": "ElasticQuota", "metadata": meta, "spec": {"max": q(max_), "min": q(min_)}}


# --- the calculator --------------------------------------------------------------------------------
def test_redistribution_case2_zero_weight_gets_only_its_min() -> None:
    tree = QuotaTree()
    tree.insert("node1", 40, 5, 10, 0, True)
    tree.insert("node2", 60, 20, 15, 0, True)
    tree.insert("node3", 50, 40, 20, 0, True)
    tree.insert("node4", 0, 70, 15, 0, True)
    tree.redistribution(100)
    assert {n: v.runtime for n, v in tree.nodes.items()} == {
        "node1": 5,
        "node2": 20,
        "node3": 40,
        "node4": 15,
    }


def test_integer_distribution_loses_nothing() -> None:
    # IterationAdjustQuota_IntegerDistribution: 3 spare GPUs among ten equal borrowers are all handed out.
    tree = QuotaTree()
    tree.insert("donor", 1, 0, 3, 0, True)
    mins = [8, 8, 8, 8, 8, 8, 8, 8, 7, 7]
    for i, m in enumerate(mins):
        tree.insert(f"borrower-{i:02d}", 1, 100, m, 0, True)
    tree.redistribution(81)
    assert sum(n.runtime for n in tree.nodes.values()) == 81
    assert tree.nodes["donor"].runtime == 0
    for i, m in enumerate(mins):
        assert tree.nodes[f"borrower-{i:02d}"].runtime >= m


def test_hamilton_ties_go_to_smaller_names_and_zero_weights_get_nothing() -> None:
    assert hamilton_split(2, [("b", 1), ("a", 1), ("c", 1)]) == [1, 1, 0]
    assert hamilton_split(5, [("a", 0), ("b", 2)]) == [0, 5]
    assert hamilton_split(7, [("a", 0)]) == [0]
    # memory-sized operands stay exact
    big = 200 * GI
    shares = hamilton_split(big, [("a", 3 * GI), ("b", 7 * GI), ("c", 11 * GI)])
    assert sum(shares) == big


def test_non_lent_quota_keeps_its_min_even_without_request() -> None:
    tree = QuotaTree()
    tree.insert("a", 1, 0, 30, 0, False)
    tree.insert("b", 1, 100, 10, 0, True)
    tree.redistribution(100)
    assert tree.nodes["a"].runtime == 30
    assert tree.nodes["b"].runtime == 70


# --- the manager -----------------------------------------------------------------------------------
def test_new_manager_has_root_system_and_default_quotas() -> None:
    mgr = GroupQuotaManager(system_max=res(10, 10), default_max=res(20, 20))
    assert set(mgr.quota_names()) == {ROOT_QUOTA_NAME, SYSTEM_QUOTA_NAME, DEFAULT_QUOTA_NAME}
    assert mgr.refresh_runtime(DEFAULT_QUOTA_NAME) == res(20, 20)
    assert mgr.refresh_runtime(SYSTEM_QUOTA_NAME) == res(10, 10)
    tree = GroupQuotaManager("tree-1")
    assert tree.quota_names() == [ROOT_QUOTA_NAME]


def test_multi_update_quota_request() -> None:
    mgr = GroupQuotaManager()
    mgr.update_cluster_total_resource(res(96, 160 * GI))
    mgr.update_quota(quota("test1", ROOT_QUOTA_NAME, res(96, 160 * GI), res(50, 80 * GI), is_parent=True))
    mgr.update_quota(quota("test1-a", "test1", res(96, 160 * GI), res(50, 80 * GI), is_parent=True))
    mgr.update_quota(quota("a-123", "test1-a", res(96, 160 * GI), res(50, 80 * GI)))
    request = res(96, 130 * GI)
    mgr.add_pod_request_delta("a-123", request, request)
    for name in ("a-123", "test1-a", "test1"):
        assert mgr.refresh_runtime(name) == request
    # decrease a-123's max: its limited request (and so its parents' request) drops
    mgr.update_quota(quota("a-123", "test1-a", res(64, 128 * GI), res(50, 80 * GI)))
    parent = mgr.get_quota_info("test1-a")
    assert parent is not None and parent.calc.max == res(96, 160 * GI)
    runtime = mgr.refresh_runtime("a-123")
    assert runtime == parent.calc.request == res(64, 128 * GI)
    child = mgr.get_quota_info("a-123")
    assert child is not None and child.calc.request == request
    # increase again
    mgr.update_quota(quota("a-123", "test1-a", res(100, 200 * GI), res(90, 160 * GI)))
    assert parent.calc.request == res(96, 130 * GI)
    assert mgr.refresh_runtime("a-123") == request


def test_update_cluster_total_resource_minus_system_and_default_used() -> None:
    mgr = GroupQuotaManager()
    mgr.update_cluster_total_resource(res(96, 160 * GI))
    assert mgr.total == mgr.total_except_system_and_default == res(96, 160 * GI)
    mgr.update_cluster_total_resource(res(-32, 200 * GI))
    assert mgr.total_except_system_and_default == res(64, 360 * GI)
    mgr.update_cluster_total_resource(res(36, 180 * GI))
    total = res(100, 540 * GI)
    sys_used = res(10, 30 * GI)
    mgr._update_group_delta_used(SYSTEM_QUOTA_NAME, sys_used, res(0, 0), 0)
    assert mgr.total == total
    assert mgr.total_except_system_and_default == res(90, 510 * GI)
    assert mgr.calculators[ROOT_QUOTA_NAME].total == res(90, 510 * GI)
    mgr._update_group_delta_used(DEFAULT_QUOTA_NAME, res(10, 30), res(0, 0), 0)
    assert mgr.total_except_system_and_default == {"cpu": 80_000, "memory": 510 * GI - 30}
    assert mgr.refresh_runtime(ROOT_QUOTA_NAME) == {"cpu": 80_000, "memory": 510 * GI - 30}


def test_multi_child_max_greater_than_parent_max() -> None:
    mgr = GroupQuotaManager()
    mgr.update_cluster_total_resource(res(350, 1800 * GI))
    mgr.update_quota(quota("test1", ROOT_QUOTA_NAME, res(300, 1024 * GI), res(176, 756 * GI), is_parent=True))
    mgr.update_quota(quota("test1-sub1", "test1", res(500, 2048 * GI), res(100, 512 * GI)))
    request = res(400, 1500 * GI)
    mgr.add_pod_request_delta("test1-sub1", request, request)
    test1 = mgr.get_quota_info("test1")
    assert test1 is not None and test1.calc.request == request
    assert mgr.refresh_runtime("test1-sub1") == res(300, 1024 * GI)
    mgr.add_pod_request_delta("test1-sub1", request, request)
    assert mgr.refresh_runtime("test1-sub1") == res(300, 1024 * GI)


def test_shared_weight_annotation_decides_the_split_and_defaults_to_max() -> None:
    mgr = GroupQuotaManager(scale_min_enabled=False)
    mgr.update_cluster_total_resource(res(100, 100 * GI))
    mgr.update_quota(
        quota("a", ROOT_QUOTA_NAME, res(100, 100 * GI), res(0, 0), weight='{"cpu": 3, "memory": 1}')
    )
    mgr.update_quota(
        quota("b", ROOT_QUOTA_NAME, res(100, 100 * GI), res(0, 0), weight='{"cpu": 1, "memory": 1}')
    )
    mgr.update_quota(quota("c", ROOT_QUOTA_NAME, res(100, 100 * GI), res(0, 0), weight="not json"))
    info = mgr.get_quota_info("c")
    assert info is not None and info.calc.shared_weight == res(100, 100 * GI)
    mgr.add_pod_request_delta("a", res(100, 0))
    mgr.add_pod_request_delta("b", res(100, 0))
    assert mgr.refresh_runtime("a") == {"cpu": 75_000, "memory": 0}
    assert mgr.refresh_runtime("b") == {"cpu": 25_000, "memory": 0}


def test_pods_request_used_reserve_unreserve_and_delete() -> None:
    mgr = GroupQuotaManager()
    mgr.update_cluster_total_resource(res(10, 10 * GI))
    mgr.update_quota(quota("p", ROOT_QUOTA_NAME, res(10, 10 * GI), res(4, 4 * GI), is_parent=True))
    mgr.update_quota(quota("q", "p", res(10, 10 * GI), res(4, 4 * GI)))
    pending = PodInfo.from_manifest(make_pod("a", cpu="2", memory="1Gi", labels={"x": "y"}))
    bound = PodInfo.from_manifest(make_pod("b", cpu="1", memory="1Gi", node="n1"))
    mgr.on_pod_add("q", pending)
    mgr.on_pod_add("q", bound)
    q, p = mgr.get_quota_info("q"), mgr.get_quota_info("p")
    assert q is not None and p is not None
    assert q.calc.request == {"cpu": 3000, "memory": 2 * GI}
    assert q.calc.used == p.calc.used == {"cpu": 1000, "memory": GI}
    mgr.reserve_pod("q", pending)
    assert q.calc.used == p.calc.used == {"cpu": 3000, "memory": 2 * GI}
    mgr.reserve_pod("q", pending)  # idempotent
    assert q.calc.used == {"cpu": 3000, "memory": 2 * GI}
    mgr.unreserve_pod("q", pending)
    mgr.unreserve_pod("q", pending)
    assert q.calc.used == p.calc.used == {"cpu": 1000, "memory": GI}
    mgr.on_pod_delete("q", bound)
    assert q.calc.used == p.calc.used == {"cpu": 0, "memory": 0}
    assert q.calc.request == {"cpu": 2000, "memory": GI}
    # a pod of another namespace under the same name is another pod
    other = PodInfo.from_manifest(make_pod("a", namespace="other", cpu="1"))
    mgr.on_pod_add("q", other)
    assert q.calc.request["cpu"] == 3000


def test_request_is_masked_to_the_quota_max_names() -> None:
    mgr = GroupQuotaManager()
    mgr.update_quota({"metadata": {"name": "q"}, "spec": {"max": {"cpu": "10"}}})
    mgr.on_pod_add(
        "q", PodInfo.from_manifest(make_pod("a", cpu="1", memory="1Gi", requests={"nvidia.com/gpu": 1}))
    )
    info = mgr.get_quota_info("q")
    assert info is not None and info.calc.request == {"cpu": 1000}


def test_parent_change_rebuilds_and_keeps_the_pods() -> None:
    mgr = GroupQuotaManager()
    mgr.update_cluster_total_resource(res(100, 100 * GI))
    mgr.update_quota(quota("p1", ROOT_QUOTA_NAME, res(50, 50 * GI), res(10, 10 * GI), is_parent=True))
    mgr.update_quota(quota("p2", ROOT_QUOTA_NAME, res(50, 50 * GI), res(10, 10 * GI), is_parent=True))
    mgr.update_quota(quota("c", "p1", res(50, 50 * GI), res(5, 5 * GI)))
    mgr.on_pod_add("c", PodInfo.from_manifest(make_pod("a", cpu="3", node="n")))
    p1, p2 = mgr.get_quota_info("p1"), mgr.get_quota_info("p2")
    assert p1 is not None and p2 is not None and p1.calc.used["cpu"] == 3000
    mgr.update_quota(quota("c", "p2", res(50, 50 * GI), res(5, 5 * GI)))
    p1, p2 = mgr.get_quota_info("p1"), mgr.get_quota_info("p2")
    assert p1 is not None and p2 is not None
    assert p1.calc.used.get("cpu", 0) == 0
    assert p2.calc.used["cpu"] == 3000
    assert mgr.children("p2") == ["c"]


def test_delete_quota_releases_its_request_from_the_parent() -> None:
    mgr = GroupQuotaManager()
    mgr.update_quota(quota("p", ROOT_QUOTA_NAME, res(50, 50 * GI), res(10, 10 * GI), is_parent=True))
    mgr.update_quota(quota("c", "p", res(50, 50 * GI), res(5, 5 * GI)))
    mgr.add_pod_request_delta("c", res(4, 0))
    mgr.delete_quota("c")
    p = mgr.get_quota_info("p")
    assert p is not None and p.calc.request["cpu"] == 0
    with pytest.raises(QuotaNotFoundError):
        mgr.delete_quota("c")


def test_reset_rebuilds_children_listed_before_parents() -> None:
    mgr = GroupQuotaManager(scale_min_enabled=False)
    mgr.update_cluster_total_resource(res(100, 100 * GI))
    child = quota("c", "p", res(100, 100 * GI), res(10, 10 * GI))
    parent = quota("p", ROOT_QUOTA_NAME, res(100, 100 * GI), res(20, 20 * GI), is_parent=True)
    mgr.reset_quotas([child, parent])
    mgr.add_pod_request_delta("c", res(60, 0))
    assert mgr.refresh_runtime("c") == {"cpu": 60_000, "memory": 0}
    assert mgr.refresh_runtime("p") == {"cpu": 60_000, "memory": 0}  # p lends what it does not ask for


# --- min scaling -----------------------------------------------------------------------------------
def test_scale_min_update_remove_and_disabled_children() -> None:
    s = ScaleMinQuotaManager()
    s.update("p", "a", {"cpu": 100}, True)
    s.update("p", "b", {"cpu": 100}, True)
    s.update("p", "c", {"cpu": 50}, False)
    assert s.scaled_min({"cpu": 150}, "p", "a") == {"cpu": 50}
    assert s.scaled_min({"cpu": 150}, "p", "c") is None  # not scaling
    assert s.scaled_min({"cpu": 40}, "p", "a") == {"cpu": 0}  # the disabled min takes it all
    assert s.scaled_min({"cpu": 500}, "p", "a") == {"cpu": 100}  # enough: the original
    s.update("p", "a", {"cpu": 300}, True)
    assert s.enabled_sum["p"] == {"cpu": 400}
    s.remove("p", "a")
    assert s.enabled_sum["p"] == {"cpu": 100}
    assert s.scaled_min({"cpu": 10}, "p", "a") is None


# --- bad input -------------------------------------------------------------------------------------
def test_malformed_quantities_name_the_quota_and_field() -> None:
    with pytest.raises(QuotaObjectError, match=r"ElasticQuota ns/q: spec.max.cpu"):
        ElasticQuotaSpec.from_manifest(
            {"metadata": {"name": "q", "namespace": "ns"}, "spec": {"max": {"cpu": "x"}}}
        )
    with pytest.raises(QuotaObjectError, match=r"without metadata\.name"):
        ElasticQuotaSpec.from_manifest({"metadata": {}, "spec": {}})


def test_quota_with_unknown_parent_gets_no_runtime_until_the_parent_exists() -> None:
    mgr = GroupQuotaManager()
    mgr.update_cluster_total_resource(res(10, 10 * GI))
    mgr.update_quota(quota("orphan", "missing", res(10, 10 * GI), res(1, GI)))
    assert mgr.refresh_runtime("orphan") == {}  # as upstream: nothing computed (the plugin refuses its pods)
    assert [i.name for i in mgr.path_to_root("orphan")] == ["orphan"]
    assert not mgr.attached("orphan")
    mgr.reset_quotas([quota("missing", ROOT_QUOTA_NAME, res(10, 10 * GI), res(1, GI), is_parent=True)])
    assert mgr.attached("orphan")
    mgr.add_pod_request_delta("orphan", res(4, 0))
    assert mgr.refresh_runtime("orphan") == {"cpu": 4000, "memory": 0}


def test_cycle_in_parents_does_not_loop() -> None:
    mgr = GroupQuotaManager()
    mgr.reset_quotas(
        [
            quota("a", "b", res(10, 10), res(0, 0), is_parent=True),
            quota("b", "a", res(10, 10), res(0, 0), is_parent=True),
        ]
    )
    assert [i.name for i in mgr.path_to_root("a")] == ["a", "b"]
    assert mgr.refresh_runtime("a") is None


def test_scaled_min_with_an_idle_sibling() -> None:
    # MultiUpdateQuotaRequest_WithScaledMinQuota2: b asks nothing, a and c share p's 200 after scaling.
    mgr = GroupQuotaManager(scale_min_enabled=True)
    mgr.update_cluster_total_resource(res(1, GI))
    mgr.update_quota(quota("p", ROOT_QUOTA_NAME, res(1000, 1000 * GI), res(300, 300 * GI), is_parent=True))
    for name in ("a", "b", "c"):
        mgr.update_quota(quota(name, "p", res(1000, 1000 * GI), res(100, 100 * GI)))
    request = res(200, 200 * GI)
    mgr.add_pod_request_delta("a", request, request)
    mgr.add_pod_request_delta("b", res(0, 0), res(0, 0))
    mgr.add_pod_request_delta("c", request, request)
    mgr.update_cluster_total_resource(res(199, 199 * GI))
    assert mgr.refresh_runtime("p") == res(200, 200 * GI)
    for name in ("a", "b", "c"):
        mgr.refresh_runtime(name)
    assert mgr.refresh_runtime("a") == res(100, 100 * GI)
    assert mgr.refresh_runtime("b") == res(0, 0)
    assert mgr.refresh_runtime("c") == res(100, 100 * GI)
    p = mgr.get_quota_info("p")
    assert p is not None and p.calc.auto_scale_min == res(200, 200 * GI)
    for name in ("a", "b", "c"):
        info = mgr.get_quota_info(name)
        assert info is not None
        assert info.calc.auto_scale_min == {"cpu": 66666, "memory": 200 * GI // 3}


def test_default_quota_stays_out_of_the_root_split() -> None:
    big = {"cpu": ((2**63 - 1) // 5) * 1000, "memory": (2**63 - 1) // 5}
    mgr = GroupQuotaManager(scale_min_enabled=False, default_max=big, system_max=big)
    mgr.update_cluster_total_resource(res(100, 100 * GI))
    mgr.update_quota(
        {
            "metadata": {"name": DEFAULT_QUOTA_NAME},
            "spec": {"max": {"cpu": str(big["cpu"] // 1000), "memory": str(big["memory"])}},
        }
    )
    mgr.update_quota(quota("a", ROOT_QUOTA_NAME, res(100, 100 * GI), res(10, 10 * GI)))
    mgr.on_pod_add(DEFAULT_QUOTA_NAME, PodInfo.from_manifest(make_pod("d", cpu="50", memory="50Gi")))
    mgr.add_pod_request_delta("a", res(80, 80 * GI))
    # the default quota's pending pod does not take a's share of the cluster
    assert mgr.refresh_runtime("a") == res(80, 80 * GI)
    assert DEFAULT_QUOTA_NAME not in mgr.calculators[ROOT_QUOTA_NAME].trees["cpu"].nodes
    assert mgr.refresh_runtime(DEFAULT_QUOTA_NAME) == big
