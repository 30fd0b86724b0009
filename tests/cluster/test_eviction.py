"""Eviction through MemoryCluster: PodDisruptionBudgets with policy/v1 semantics, dry runs, records."""

from __future__ import annotations

from typing import Any

import pytest

from koord_framework.cluster.disruption import (
    SelectorError,
    disruption_status,
    scaled_value,
    selector_matches,
)
from koord_framework.cluster.memory import EVICTION_EVENT_REASON, MemoryCluster
from koord_framework.cluster.port import EvictionRecord, WatchEvent
from koord_framework.errors import ClusterError, ConflictError, NotFoundError, TooManyRequestsError
from koord_framework.testing import FakeClock, make_pdb, make_pod


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cluster(clock: FakeClock) -> MemoryCluster:
    return MemoryCluster(clock, seed=3)


def _web(cluster: MemoryCluster, n: int, **kwargs: Any) -> None:
    for i in range(n):
        cluster.create(make_pod(f"web-{i}", labels={"app": "web"}, node=f"n{i}", **kwargs))


# --- the arithmetic -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (3, 10, True, 3),
        ("50%", 3, True, 2),
        ("50%", 3, False, 1),
        ("10%", 15, True, 2),
        ("10%", 15, False, 1),
        ("100%", 7, True, 7),
        ("0%", 7, True, 0),
        ("33%", 0, True, 0),
    ],
)
def test_scaled_value_rounds_as_intstr(value: int | str, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up) == expected


@pytest.mark.parametrize("bad", ["5", "50", "%", "five%", True, 1.5, None])
def test_scaled_value_rejects_non_percent_strings(bad: Any) -> None:
    with pytest.raises(ValueError, match="invalid value for IntOrString"):
        scaled_value(bad, 10, True)


def test_selector_operators() -> None:
    labels = {"app": "web", "tier": "fe"}
    assert selector_matches({}, labels)
    assert not selector_matches(None, labels)
    assert selector_matches({"matchLabels": {"app": "web"}}, labels)
    assert not selector_matches({"matchLabels": {"app": "db"}}, labels)
    expr = [
        {"key": "tier", "operator": "In", "values": ["fe", "be"]},
        {"key": "app", "operator": "NotIn", "values": ["db"]},
        {"key": "app", "operator": "Exists"},
        {"key": "canary", "operator": "DoesNotExist"},
    ]
    assert selector_matches({"matchExpressions": expr}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "canary", "operator": "Exists"}]}, labels)
    assert not selector_matches(
        {"matchExpressions": [{"key": "x", "operator": "In", "values": ["1"]}]}, labels
    )
    assert selector_matches(
        {"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["1"]}]}, labels
    )
    with pytest.raises(SelectorError, match="unknown operator"):
        selector_matches({"matchExpressions": [{"key": "x", "operator": "Gt", "values": ["1"]}]}, labels)
    with pytest.raises(SelectorError, match="needs values"):
        selector_matches({"matchExpressions": [{"key": "x", "operator": "In"}]}, labels)


def _status(pdb: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[int, int, int, int]:
    s = disruption_status(pdb, pods, lambda ref, ns: None)
    return (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed)


def _owned(n: int, owner: str = "rs", ready: int | None = None) -> list[dict[str, Any]]:
    pods = [
        make_pod(f"p{i}", labels={"app": "web"}, node="n", owner_kind="ReplicaSet", owner_name=owner)
        for i in range(n)
    ]
    for i, pod in enumerate(pods):
        if ready is not None and i >= ready:
            pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    return pods


def test_status_min_available_int_counts_matched_pods() -> None:
    pdb = make_pdb("b", match_labels={"app": "web"}, min_available=2)
    assert _status(pdb, _owned(3)) == (3, 2, 3, 1)
    assert _status(pdb, _owned(3, ready=2)) == (3, 2, 2, 0)


def test_status_min_available_percent_rounds_up() -> None:
    pdb = make_pdb("b", match_labels={"app": "web"}, min_available="50%")
    # 3 pods whose (absent) controller each count once: expected 3, desired ceil(1.5) = 2
    assert _status(pdb, _owned(3)) == (3, 2, 3, 1)


def test_status_max_unavailable_percent_rounds_up() -> None:
    pdb = make_pdb("b", match_labels={"app": "web"}, max_unavailable="50%")
    # maxUnavailable = ceil(1.5) = 2, so desired = 3 - 2 = 1
    assert _status(pdb, _owned(3)) == (3, 1, 3, 2)
    pdb = make_pdb("b", match_labels={"app": "web"}, max_unavailable="10%")
    # ceil(0.5) = 1 unavailable allowed out of 5
    assert _status(pdb, _owned(5)) == (5, 4, 5, 1)


def test_status_unmanaged_pods_do_not_count_for_percentages() -> None:
    bare = [make_pod(f"p{i}", labels={"app": "web"}, node="n") for i in range(3)]
    pdb = make_pdb("b", match_labels={"app": "web"}, max_unavailable=1)
    assert _status(pdb, bare) == (0, 0, 3, 0), "no expected pods: the budget allows nothing, as upstream"
    pdb = make_pdb("b", match_labels={"app": "web"}, min_available=1)
    assert _status(pdb, bare) == (3, 1, 3, 2)


def test_status_of_budget_without_numbers() -> None:
    pdb = make_pdb("b", match_labels={"app": "web"})
    assert _status(pdb, _owned(2)) == (0, 0, 2, 0)
    pdb["apiVersion"] = "policy/v1beta1"  # v1beta1 defaults minAvailable to 1
    assert _status(pdb, _owned(2)) == (2, 1, 2, 1)


def test_status_uses_workload_replicas(cluster: MemoryCluster) -> None:
    cluster.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "uid": "dep-uid"},
            "spec": {"replicas": 4},
        }
    )
    cluster.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-abc",
                "ownerReferences": [
                    {"kind": "Deployment", "name": "web", "uid": "dep-uid", "controller": True}
                ],
            },
            "spec": {"replicas": 4},
        }
    )
    rs_uid = cluster.get("ReplicaSet", "web-abc", "default")["metadata"]["uid"]
    for i in range(3):  # one replica is missing: expected pods still 4
        pod = make_pod(f"web-{i}", labels={"app": "web"}, node="n")
        pod["metadata"]["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": "web-abc", "uid": rs_uid, "controller": True}
        ]
        cluster.create(pod)
    cluster.create(make_pdb("web", match_labels={"app": "web"}, max_unavailable="25%"))
    status = cluster.disruption_status("default", "web")
    assert (status.expected_pods, status.desired_healthy, status.current_healthy) == (4, 3, 3)
    assert status.disruptions_allowed == 0
    with pytest.raises(TooManyRequestsError):
        cluster.evict("default", "web-0", reason="rebalance", requested_by="test")


# --- the eviction API ---------------------------------------------------------------------------------


def test_evict_without_budget_deletes_and_records(cluster: MemoryCluster, clock: FakeClock) -> None:
    pod = cluster.create(make_pod("p", node="n1"))
    seen: list[WatchEvent] = []
    cluster.subscribe(["Pod"], seen.append)
    clock.advance(5)
    cluster.evict("default", "p", reason="node overloaded", requested_by="LowNodeLoad")
    assert cluster.try_get("Pod", "p", "default") is None
    assert [e.type for e in seen] == ["DELETED"]
    assert cluster.evictions == [
        EvictionRecord(
            namespace="default",
            name="p",
            uid=pod["metadata"]["uid"],
            node="n1",
            reason="node overloaded",
            requested_by="LowNodeLoad",
            time=clock.now(),
            dry_run=False,
        )
    ]
    (event,) = cluster.events
    assert (event.kind, event.namespace, event.name, event.reason) == (
        "Pod",
        "default",
        "p",
        EVICTION_EVENT_REASON,
    )
    assert "node overloaded" in event.message and event.component == "LowNodeLoad"


def test_budget_refuses_with_429_once_exhausted(cluster: MemoryCluster) -> None:
    _web(cluster, 3)
    cluster.create(make_pdb("web", match_labels={"app": "web"}, min_available=2))
    cluster.evict("default", "web-0", reason="r", requested_by="t")
    with pytest.raises(TooManyRequestsError, match="needs 2 healthy pods and has 2 currently"):
        cluster.evict("default", "web-1", reason="r", requested_by="t")
    assert cluster.try_get("Pod", "web-1", "default") is not None
    assert [r.name for r in cluster.evictions] == ["web-0"]


def test_budget_in_another_namespace_does_not_apply(cluster: MemoryCluster) -> None:
    _web(cluster, 1)
    cluster.create(make_pdb("web", namespace="other", match_labels={"app": "web"}, min_available=1))
    cluster.evict("default", "web-0", reason="r", requested_by="t")
    assert cluster.try_get("Pod", "web-0", "default") is None


def test_empty_selector_selects_every_pod_in_policy_v1_only(cluster: MemoryCluster) -> None:
    _web(cluster, 2)
    cluster.create(make_pdb("all", selector={}, min_available=2))
    with pytest.raises(TooManyRequestsError):
        cluster.evict("default", "web-0", reason="r", requested_by="t")
    cluster.patch("PodDisruptionBudget", "all", "default", {"apiVersion": "policy/v1beta1"})
    cluster.evict("default", "web-0", reason="r", requested_by="t")


def test_pending_and_terminating_pods_ignore_budgets(cluster: MemoryCluster) -> None:
    cluster.create(make_pod("pending", labels={"app": "web"}))
    cluster.create(
        make_pod(
            "leaving",
            labels={"app": "web"},
            node="n1",
            metadata={"deletionTimestamp": "2024-01-01T00:00:00Z"},
        )
    )
    cluster.create(make_pdb("web", match_labels={"app": "web"}, max_unavailable=0))
    cluster.evict("default", "pending", reason="r", requested_by="t")
    cluster.evict("default", "leaving", reason="r", requested_by="t")
    assert cluster.count("Pod") == 0


def test_unready_pod_may_go_while_the_budget_is_healthy(cluster: MemoryCluster) -> None:
    _web(cluster, 3)
    cluster.create(
        make_pod(
            "sick",
            labels={"app": "web"},
            node="n9",
            status={"conditions": [{"type": "Ready", "status": "False"}]},
        )
    )
    cluster.create(make_pdb("web", match_labels={"app": "web"}, min_available=3))
    # healthy 3 >= desired 3, and the unready pod does not count: evicting it costs nothing
    cluster.evict("default", "sick", reason="r", requested_by="t")
    with pytest.raises(TooManyRequestsError):
        cluster.evict("default", "web-0", reason="r", requested_by="t")


def test_unready_pod_is_protected_when_the_budget_is_short(cluster: MemoryCluster) -> None:
    _web(cluster, 1)
    cluster.create(
        make_pod(
            "sick",
            labels={"app": "web"},
            node="n9",
            status={"conditions": [{"type": "Ready", "status": "False"}]},
        )
    )
    cluster.create(make_pdb("web", match_labels={"app": "web"}, min_available=2))
    with pytest.raises(TooManyRequestsError):
        cluster.evict("default", "sick", reason="r", requested_by="t")
    cluster.patch(
        "PodDisruptionBudget", "web", "default", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    )
    cluster.evict("default", "sick", reason="r", requested_by="t")


def test_two_matching_budgets_are_refused_for_good(cluster: MemoryCluster) -> None:
    _web(cluster, 3)
    cluster.create(make_pdb("a", match_labels={"app": "web"}, min_available=1))
    cluster.create(
        make_pdb("b", selector={"matchExpressions": [{"key": "app", "operator": "Exists"}]}, min_available=1)
    )
    with pytest.raises(ClusterError, match="more than one PodDisruptionBudget") as info:
        cluster.evict("default", "web-0", reason="r", requested_by="t")
    assert not isinstance(info.value, TooManyRequestsError)


def test_dry_run_changes_nothing_but_is_recorded(cluster: MemoryCluster) -> None:
    _web(cluster, 2)
    cluster.create(make_pdb("web", match_labels={"app": "web"}, min_available=1))
    rv, writes = cluster.resource_version, cluster.write_count
    cluster.evict("default", "web-0", reason="try", requested_by="t", dry_run=True)
    assert cluster.try_get("Pod", "web-0", "default") is not None
    assert (cluster.resource_version, cluster.write_count) == (rv, writes)
    assert [(r.name, r.dry_run) for r in cluster.evictions] == [("web-0", True)]
    assert cluster.events == []
    cluster.evict("default", "web-0", reason="real", requested_by="t")
    with pytest.raises(TooManyRequestsError):  # a dry run is refused like the real thing
        cluster.evict("default", "web-1", reason="try", requested_by="t", dry_run=True)


def test_eviction_needs_a_reason_and_a_pod(cluster: MemoryCluster) -> None:
    cluster.create(make_pod("p", node="n1"))
    with pytest.raises(ValueError, match="reason"):
        cluster.evict("default", "p", reason="", requested_by="t")
    with pytest.raises(ValueError, match="reason"):
        cluster.evict("default", "p", reason="   ", requested_by="t")
    with pytest.raises(NotFoundError):
        cluster.evict("default", "ghost", reason="r", requested_by="t")
    assert cluster.evictions == []


def test_evicting_a_pod_replaced_under_the_same_name_is_a_conflict(cluster: MemoryCluster) -> None:
    # The caller decided about the first "p"; a pod re-created under that name since is not it.
    cluster.create(make_pod("p", node="n1", uid="uid-old"))
    cluster.delete("Pod", "p", "default")
    cluster.create(make_pod("p", node="n1", uid="uid-new"))
    with pytest.raises(ConflictError, match="Precondition failed: UID in precondition: uid-old"):
        cluster.evict("default", "p", reason="r", requested_by="t", uid="uid-old")
    assert cluster.try_get("Pod", "p", "default") is not None
    assert cluster.evictions == []
    cluster.evict("default", "p", reason="r", requested_by="t", uid="uid-new")
    assert cluster.try_get("Pod", "p", "default") is None
    assert [(r.name, r.uid) for r in cluster.evictions] == [("p", "uid-new")]
