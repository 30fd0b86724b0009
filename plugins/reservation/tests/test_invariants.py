"""Invariants over random clusters with reservations (hypothesis), checked on the cluster's objects.

* No pod uses capacity reserved for another owner, and no node is overcommitted counting reservations:
  on every node, the requests of the bound pods plus what every Available reservation still holds
  (its allocatable minus its owners' requests, at least 0) stay within the node's allocatable; and every
  pod that says it consumes a reservation is one of that reservation's owners.
* An allocateOnce reservation is consumed at most once.
* A reservation that expired frees its capacity: it turns Failed, the scheduler no longer counts it, and
  a pod that needs that capacity then fits.

Pods labelled ``reservation-ignored`` are left out on purpose: ignoring reservations is exactly the right
to use reserved capacity.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.model import parse_reservation
from koord_plugin_reservation.testing import make_reservation

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.frameworkext import ANNOTATION_RESERVATION_ALLOCATED
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

NOW = "2024-01-01T00:00:00Z"
TTL_SECONDS = 600
TEAMS = ["t0", "t1", "t2"]

nodes_st = st.lists(st.sampled_from([2, 4, 6, 8]), min_size=1, max_size=4)
reservations_st = st.lists(
    st.tuples(
        st.sampled_from(TEAMS),
        st.integers(1, 4),
        st.booleans(),
        st.sampled_from(["", "Aligned", "Restricted"]),
    ),
    max_size=6,
)
pods_st = st.lists(st.tuples(st.sampled_from([*TEAMS, None]), st.integers(1, 3)), max_size=12)


def build(nodes: list[int], reservations: list[Any], pods: list[Any]) -> SchedulerHarness:
    h = SchedulerHarness([Reservation, NodeResourcesFit, DefaultPreBind, DefaultBinder], now=NOW)
    h.add(*[make_node(f"n{i}", cpu=str(cpu), memory="64Gi") for i, cpu in enumerate(nodes)])
    for i, (team, cpu, once, policy) in enumerate(reservations):
        h.add(
            make_reservation(
                f"r{i}",
                cpu=str(cpu),
                memory="1Gi",
                owner_labels={"team": team},
                allocate_once=once,
                allocate_policy=policy or None,
                ttl=f"{TTL_SECONDS}s",
            )
        )
    h.run_until_idle()
    for i, (team, cpu) in enumerate(pods):
        h.add(make_pod(f"p{i}", cpu=str(cpu), memory="512Mi", labels={"team": team} if team else None))
    h.run_until_idle()
    return h


def bound_pods(h: SchedulerHarness) -> list[PodInfo]:
    objs, _ = h.cluster.list("Pod")
    return [p for p in map(PodInfo.from_manifest, objs) if p.node_name and not p.is_terminal]


def consumed(pod: PodInfo) -> str | None:
    raw = pod.annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
    return str(json.loads(raw)["uid"]) if raw else None


def check_invariants(h: SchedulerHarness) -> None:
    pods = bound_pods(h)
    objs, _ = h.cluster.list("Reservation")
    reservations = {str(o["metadata"]["uid"]): parse_reservation(o) for o in objs}
    owners: dict[str, list[PodInfo]] = {}
    for p in pods:
        uid = consumed(p)
        if uid is not None:
            owners.setdefault(uid, []).append(p)
            r = reservations.get(uid)
            assert r is not None, f"pod {p.key} consumes a reservation that does not exist"
            assert any(m.matches(p) for m in r.owners), f"pod {p.key} is not an owner of {r.name}"
    for uid, r in reservations.items():
        if r.allocate_once:
            assert len(owners.get(uid, [])) <= 1, f"allocateOnce reservation {r.name} consumed twice"
    nodes, _ = h.cluster.list("Node")
    for node in nodes:
        name = node["metadata"]["name"]
        allocatable = {"cpu": int(node["status"]["allocatable"]["cpu"]) * 1000}
        used = sum(p.requests.get("cpu", 0) for p in pods if p.node_name == name)
        for uid, r in reservations.items():
            if r.is_available and r.node_name == name:
                given_away = sum(p.requests.get("cpu", 0) for p in owners.get(uid, []))
                used += max(r.allocatable.get("cpu", 0) - given_away, 0)
        assert used <= allocatable["cpu"], f"node {name} overcommitted counting reservations: {used}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, reservations_st, pods_st)
def test_reservations_hold_their_invariants(
    nodes: list[int], reservations: list[Any], pods: list[Any]
) -> None:
    h = build(nodes, reservations, pods)
    check_invariants(h)
    # Owners leaving give capacity back; the invariants still hold after the cluster settles again.
    for p in bound_pods(h)[::2]:
        h.cluster.delete("Pod", p.name, p.namespace)
    h.run_until_idle()
    check_invariants(h)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, reservations_st)
def test_an_expired_reservation_frees_its_capacity(nodes: list[int], reservations: list[Any]) -> None:
    h = build(nodes, reservations, [])
    held = {
        str(o["metadata"]["uid"]): o
        for o in h.cluster.list("Reservation")[0]
        if (o.get("status") or {}).get("phase") == "Available"
    }
    h.clock.advance(TTL_SECONDS + 1)
    # Any scheduling cycle runs the controller; this pod asks for nothing reserved.
    h.add(make_pod("tick", cpu="1m", memory="1Mi"))
    h.run_until_idle()
    for uid, obj in held.items():
        now = h.cluster.get("Reservation", obj["metadata"]["name"])
        assert now["status"]["phase"] == "Failed"
        assert h.scheduler.cache.get_pod(uid) is None, "an expired reservation is still counted"
    check_invariants(h)
    # Everything a reservation held is free again: the scheduler counts only the bound pods, and a pod as
    # large as the largest gap left fits.
    pods = bound_pods(h)
    free: dict[str, int] = {}
    for ni in h.scheduler.cache.node_infos():
        bound = sum(p.requests.get("cpu", 0) for p in pods if p.node_name == ni.name)
        assert ni.requested.get("cpu", 0) == bound, f"node {ni.name} still counts reserved capacity"
        free[ni.name] = ni.allocatable.get("cpu", 0) - bound
    gap = max(free.values())
    h.add(make_pod("probe", cpu=f"{gap}m", memory="1Mi"))
    h.run_until_idle()
    assert h.result(make_pod("probe")).node is not None


# --- pre-allocation -----------------------------------------------------------------------------------
PRE_ALLOCATABLE = "pod.koordinator.sh/is-pre-allocatable"
running_st = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from([*TEAMS, None]), st.integers(1, 3), st.booleans()),
    max_size=10,
)
pre_allocating_st = st.lists(
    st.tuples(
        st.sampled_from(TEAMS),
        st.integers(1, 4),
        st.sampled_from(["Default", "Cluster"]),
        st.booleans(),  # enableMultiple
        st.booleans(),  # pre-allocation-required
        st.booleans(),  # allocateOnce
    ),
    max_size=5,
)


def build_pre_allocation(
    nodes: list[int], running: list[Any], reservations: list[Any], pre: list[Any], pods: list[Any]
) -> SchedulerHarness:
    h = SchedulerHarness(
        [
            (Reservation, {"preAllocationConfig": {"enableClusterMode": True}}),
            NodeResourcesFit,
            DefaultPreBind,
            DefaultBinder,
        ],
        now=NOW,
    )
    h.add(*[make_node(f"n{i}", cpu=str(cpu), memory=f"{cpu}Gi") for i, cpu in enumerate(nodes)])
    left = {f"n{i}": cpu for i, cpu in enumerate(nodes)}
    for i, (at, team, cpu, labelled) in enumerate(running):
        node = f"n{at % len(nodes)}"
        if left[node] < cpu:
            continue  # the cluster starts within its capacity
        left[node] -= cpu
        labels = {"team": team} if team else {}
        if labelled:
            labels[PRE_ALLOCATABLE] = "true"
        h.add(
            make_pod(
                f"run{i}", cpu=str(cpu), memory=f"{cpu}Gi", node=node, phase="Running", labels=labels or None
            )
        )
    for i, (team, cpu, once, policy) in enumerate(reservations):
        h.add(
            make_reservation(
                f"r{i}",
                cpu=str(cpu),
                memory="1Gi",
                owner_labels={"team": team},
                allocate_once=once,
                allocate_policy=policy or None,
            )
        )
    for i, (team, cpu, mode, multiple, required, once) in enumerate(pre):
        r = make_reservation(
            f"pre{i}",
            cpu=str(cpu),
            memory=f"{cpu}Gi",
            owner_labels={"team": team},
            allocate_once=once,
            allocate_policy="Restricted",
            labels={"scheduling.koordinator.sh/pre-allocation-required": "true"} if required else None,
        )
        r["spec"]["preAllocation"] = True
        r["spec"]["preAllocationPolicy"] = {"mode": mode, "enableMultiple": multiple}
        h.add(r)
    h.run_until_idle()
    for i, (team, cpu) in enumerate(pods):
        h.add(make_pod(f"p{i}", cpu=str(cpu), memory="512Mi", labels={"team": team} if team else None))
    h.run_until_idle()
    return h


def check_no_overcommit(h: SchedulerHarness) -> None:
    """cpu and memory: bound pods plus what Available reservations still hold fit every node; a pod
    consumes a reservation on its own node only."""
    pods = bound_pods(h)
    objs, _ = h.cluster.list("Reservation")
    reservations = {str(o["metadata"]["uid"]): parse_reservation(o) for o in objs}
    owners: dict[str, list[PodInfo]] = {}
    for p in pods:
        uid = consumed(p)
        if uid is not None:
            r = reservations.get(uid)
            assert r is not None, f"pod {p.key} consumes a reservation that does not exist"
            assert r.node_name == p.node_name, f"pod {p.key} consumes {r.name} on another node"
            owners.setdefault(uid, []).append(p)
    for node in h.cluster.list("Node")[0]:
        name = node["metadata"]["name"]
        info = h.node_info(name)
        for resource in ("cpu", "memory"):
            used = sum(p.requests.get(resource, 0) for p in pods if p.node_name == name)
            for uid, r in reservations.items():
                if r.is_available and r.node_name == name:
                    given_away = sum(p.requests.get(resource, 0) for p in owners.get(uid, []))
                    used += max(r.allocatable.get(resource, 0) - given_away, 0)
            assert used <= info.allocatable[resource], f"node {name} overcommits {resource}: {used}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes_st, running_st, reservations_st, pre_allocating_st, pods_st)
def test_pre_allocation_never_gives_a_resource_twice(
    nodes: list[int], running: list[Any], reservations: list[Any], pre: list[Any], pods: list[Any]
) -> None:
    h = build_pre_allocation(nodes, running, reservations, pre, pods)
    check_no_overcommit(h)
    # Pre-allocated pods finishing leave their resources to the reservation; still nothing twice.
    for p in bound_pods(h)[::2]:
        h.cluster.delete("Pod", p.name, p.namespace)
    h.add(make_pod("late", cpu="2", memory="1Gi", labels={"team": "t0"}))
    h.run_until_idle()
    check_no_overcommit(h)
