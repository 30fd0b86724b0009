"""Cases of Koordinator's own reservation unit tests that the shared vectors leave out.

From ``scoring_test.go`` (TestScore, TestScoreWithOrder), ``plugin_test.go`` (TestIsResourceIgnored,
TestFitsNodeWithIgnoredResources, TestFitsReservationWithIgnoredResources, TestPreFilter,
TestFilterNominateReservation, TestPreBind, TestBind) and ``pkg/util/reservation`` (NewReservePod), each
re-stated with the same inputs and expectations.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.fit import fits_node, fits_reservation, is_ignored
from koord_plugin_reservation.model import info_from_object, parse_reservation, reserve_pod
from koord_plugin_reservation.plugin import (
    ERR_REASON_RESERVATION_AFFINITY,
    STATE_KEY,
    NodeState,
    PodState,
)

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import (
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVE_POD,
    LABEL_RESERVATION_ORDER,
)
from koord_framework.scheduler.status import Code
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

NOW = "2024-01-01T00:00:00Z"


def reservation(
    name: str,
    cpu: str,
    memory: str,
    node: str = "test-node",
    *,
    labels: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
    available: bool = True,
    **spec: Any,
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {
            "template": {"spec": {"containers": [{"name": "main", "resources": {"requests": requests}}]}},
            "owners": [{"labelSelector": {"matchLabels": {"app": "test"}}}],
            "ttl": "1h",
            **spec,
        },
    }
    if available:
        obj["status"] = {"phase": "Available", "nodeName": node, "allocatable": requests}
    return obj


def pod(cpu: str | None = None, memory: str | None = None, **kwargs: Any) -> PodInfo:
    return PodInfo.from_manifest(make_pod("test-pod", "test-ns", cpu=cpu, memory=memory, **kwargs))


def harness_with(*nodes: dict[str, Any]) -> tuple[SchedulerHarness, Reservation]:
    h = SchedulerHarness([Reservation], now=NOW)
    h.add(*nodes)
    h._refresh()
    plugin = h.plugin("Reservation")
    assert isinstance(plugin, Reservation)
    return h, plugin


def matched_state(
    p: PodInfo, by_node: dict[str, list[dict[str, Any]]], allocated: dict[str, Any] | None = None
) -> tuple[CycleState, PodState]:
    state = CycleState()
    ps = PodState(pod_requests=dict(p.requests))
    for node, objs in by_node.items():
        infos = [
            info_from_object(
                o, allocated=parse_resource_list((allocated or {}).get(o["metadata"]["name"]) or {})
            )
            for o in objs
        ]
        ps.nodes[node] = NodeState(matched=infos)
    state.write(STATE_KEY, ps)
    return state, ps


# --- TestIsResourceIgnored ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "ignored", "groups", "want"),
    [
        ("example.com/gpu", (), (), False),
        ("example.com/gpu", {"example.com/gpu"}, (), True),
        ("example.com/gpu", (), {"example.com"}, True),
        ("example.com/gpu", {"example.com/gpu"}, {"example.com"}, True),
        ("vendor.io/foo/bar", (), {"vendor.io"}, True),
        ("example.com/gpu", {"other.io/fpga"}, {"other.io"}, False),
        ("cpu", {"cpu"}, (), True),
        ("cpu", (), {"cpu"}, False),
        ("/gpu", (), {""}, False),
    ],
)
def test_is_resource_ignored(name: str, ignored: Any, groups: Any, want: bool) -> None:
    assert is_ignored(name, ignored, groups) is want


# --- TestFitsNodeWithIgnoredResources / TestFitsReservationWithIgnoredResources (the group cases) ------
def test_fits_node_extended_ignored_by_group() -> None:
    got = fits_node(
        parse_resource_list({"cpu": "1", "example.com/gpu": "2"}),
        parse_resource_list({"cpu": "8", "memory": "16Gi", "pods": "100", "example.com/gpu": "1"}),
        parse_resource_list({"cpu": "4"}),
        None,
        None,
        0,
        1,
        None,
        (),
        {"example.com"},
    )
    assert got == []


def test_fits_node_only_the_matching_group_is_ignored() -> None:
    got = fits_node(
        parse_resource_list({"cpu": "1", "example.com/gpu": "2", "other.io/fpga": "2"}),
        parse_resource_list(
            {"cpu": "8", "memory": "16Gi", "pods": "100", "example.com/gpu": "1", "other.io/fpga": "1"}
        ),
        parse_resource_list({"cpu": "4"}),
        None,
        None,
        0,
        1,
        None,
        (),
        {"example.com"},
    )
    assert got == ["other.io/fpga"]


def test_fits_reservation_ignored_by_group() -> None:
    r = reservation("test-r", "4", "0", available=False, extra={"example.com/gpu": "2"})
    del r["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"]
    info = info_from_object(r)
    request = parse_resource_list({"cpu": "1", "example.com/gpu": "4"})
    assert fits_reservation(request, info, None, False, (), {"example.com"}) == []
    assert fits_reservation(request, info, None, False, (), ()) == [
        "Reservation(s) Insufficient example.com/gpu"
    ]


def test_fits_reservation_detailed_reasons_name_the_amounts() -> None:
    info = info_from_object(reservation("r", "4", "8Gi"), allocated={"cpu": 3000})
    request = parse_resource_list({"cpu": "2", "memory": "1Gi"})
    assert fits_reservation(request, info, None, True) == [
        "Reservation(s) Insufficient cpu, requested: 2000, used: 3000, capacity: 4000"
    ]


# --- TestScore / TestScoreWithOrder ---------------------------------------------------------------------
R4C8G = reservation("reservation4C8G", "4", "8Gi")
R2C4G = reservation("reservation2C4G", "2", "4Gi")


@pytest.mark.parametrize(
    ("reservations", "want"),
    [
        ([], 0),  # no reservation matched on the node
        ([R4C8G], 50),  # reservation matched and pod has part empty resource requests
        ([R4C8G, R2C4G], 100),  # multi reservations matched: the fullest fitting one is nominated
    ],
)
def test_score(reservations: list[dict[str, Any]], want: int) -> None:
    h, plugin = harness_with(make_node("test-node", cpu="16", memory="128Gi"))
    p = pod(cpu="2", memory="4Gi")
    state, _ = matched_state(p, {"test-node": reservations} if reservations else {})
    ni = h.handle.node_info("test-node")
    assert ni is not None
    s = plugin.pre_score(state, p, [ni])
    assert s.is_success or s.is_skip
    score, s = plugin.score(state, p, ni)
    assert s.is_success
    assert score == want


def test_score_with_order_prefers_the_ordered_reservations_node() -> None:
    nodes = [make_node(f"test-node-{i}") for i in range(1, 5)]
    h, plugin = harness_with(*nodes)
    p = pod(cpu="4", memory="8Gi")
    by_node = {
        f"test-node-{i}": [
            reservation(
                f"test-reservation-{i}",
                "4",
                "8Gi",
                f"test-node-{i}",
                labels={LABEL_RESERVATION_ORDER: "123456"} if i == 4 else None,
            )
        ]
        for i in range(1, 5)
    }
    state, ps = matched_state(p, by_node)
    infos = [h.handle.node_info(f"test-node-{i}") for i in range(1, 5)]
    assert all(ni is not None for ni in infos)
    assert plugin.pre_score(state, p, infos).is_success  # type: ignore[arg-type]
    assert ps.preferred_node == "test-node-4"
    scores = [plugin.score(state, p, ni)[0] for ni in infos]  # type: ignore[arg-type]
    assert scores == [100, 100, 100, 1000]
    from koord_framework.scheduler.interface import NodeScore

    listed = [NodeScore(f"test-node-{i}", s) for i, s in zip(range(1, 5), scores, strict=True)]
    assert plugin.normalize_score(state, p, listed).is_success
    assert [s.score for s in listed] == [10, 10, 10, 100]


# --- TestPreFilter ---------------------------------------------------------------------------------------
def test_pre_filter_skips_without_matched_reservations_and_affinity() -> None:
    _, plugin = harness_with(make_node("test-node", cpu="16", memory="128Gi"))
    p = pod(cpu="1")
    state = CycleState()
    restore, s = plugin.before_pre_filter(state, p)
    assert s.is_success and restore is None
    _, s = plugin.pre_filter(state, p, [])
    assert s.code is Code.SKIP


def test_pre_filter_rejects_required_affinity_without_matches() -> None:
    _, plugin = harness_with(make_node("test-node", cpu="16", memory="128Gi"))
    p = pod(
        cpu="1", annotations={"scheduling.koordinator.sh/reservation-affinity": json.dumps({"name": "x"})}
    )
    state = CycleState()
    _, s = plugin.before_pre_filter(state, p)
    assert s.is_success
    _, s = plugin.pre_filter(state, p, [])
    assert s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.reasons == (ERR_REASON_RESERVATION_AFFINITY,)


def test_pre_filter_of_a_reserve_pod_without_its_reservation_fails() -> None:
    _, plugin = harness_with(make_node("test-node", cpu="16", memory="128Gi"))
    p = pod(annotations={ANNOTATION_RESERVE_POD: "true", ANNOTATION_RESERVATION_NAME: "missing"})
    state = CycleState()
    plugin.before_pre_filter(state, p)
    _, s = plugin.pre_filter(state, p, [])
    assert not s.is_success
    assert "missing" in s.message


# --- TestFilterNominateReservation -----------------------------------------------------------------------
def test_filter_nominate_refuses_a_used_allocate_once_reservation() -> None:
    _, plugin = harness_with(make_node("test-node", cpu="16", memory="128Gi"))
    p = pod(cpu="1", memory="1Gi")
    state, _ = matched_state(p, {"test-node": [R4C8G]})
    used = info_from_object(R4C8G, allocated={"cpu": 1000}, allocated_pods={"u": "ns/owner"})
    s = plugin.filter_nominate_reservation(state, p, used, "test-node")
    assert s.code is Code.UNSCHEDULABLE
    assert s.reasons == ("reservation has allocateOnce enabled and has already been allocated",)
    fresh = info_from_object(R4C8G)
    assert plugin.filter_nominate_reservation(state, p, fresh, "test-node").is_success


def test_filter_nominate_restricted_reports_reservation_reasons() -> None:
    _, plugin = harness_with(make_node("test-node", cpu="16", memory="128Gi"))
    p = pod(cpu="6", memory="1Gi")
    restricted = reservation("restricted", "4", "8Gi", allocatePolicy="Restricted")
    state, _ = matched_state(p, {"test-node": [restricted]})
    s = plugin.filter_nominate_reservation(state, p, info_from_object(restricted), "test-node")
    assert s.code is Code.UNSCHEDULABLE
    assert s.reasons == ("Reservation(s) Insufficient cpu",)


# --- TestPreBind / TestBind --------------------------------------------------------------------------------
def test_pre_bind_writes_reservation_allocated() -> None:
    _, plugin = harness_with(make_node("test-node", cpu="16", memory="128Gi"))
    p = pod(cpu="1")
    state = CycleState()
    ps = PodState(pod_requests=dict(p.requests))
    ps.assumed = info_from_object(R4C8G)
    state.write(STATE_KEY, ps)
    assert plugin.pre_bind(state, p, "test-node").is_success
    value = json.loads(state.pod_mutation.annotations[ANNOTATION_RESERVATION_ALLOCATED])
    assert value == {"name": "reservation4C8G", "uid": "uid-reservation4C8G"}


def test_bind_makes_the_reservation_available() -> None:
    h, plugin = harness_with(make_node("test-node", cpu="16", memory="128Gi"))
    pending = reservation("r", "2", "4Gi", available=False)
    h.add(pending)
    rp = reserve_pod(parse_reservation(h.cluster.get("Reservation", "r")))
    assert plugin.bind(CycleState(), rp, "test-node").is_success
    status = h.cluster.get("Reservation", "r")["status"]
    assert status["phase"] == "Available"
    assert status["nodeName"] == "test-node"
    assert status["allocatable"] == {"cpu": "2", "memory": "4Gi"}
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Scheduled", "True", "Scheduled"),
        ("Ready", "True", "Available"),
    ]
    assert plugin.bind(CycleState(), pod(), "test-node").code is Code.SKIP


# --- NewReservePod --------------------------------------------------------------------------------------
def test_reserve_pod_shape() -> None:
    obj = reservation("r", "2", "4Gi", available=False, labels={"koordinator.sh/priority": "7"})
    obj["spec"]["template"]["spec"]["nodeName"] = "wanted"
    rp = reserve_pod(parse_reservation(obj))
    assert rp.uid == "uid-r" and rp.name == "uid-r" and rp.namespace == "default"
    assert rp.annotations[ANNOTATION_RESERVE_POD] == "true"
    assert rp.annotations[ANNOTATION_RESERVATION_NAME] == "r"
    assert rp.annotations["scheduling.koordinator.sh/reservation-node"] == "wanted"
    assert rp.node_name == ""
    assert rp.priority == 7
    assert rp.requests == {"cpu": 2000, "memory": 4 * 1024**3}
    no_priority = reserve_pod(parse_reservation(reservation("q", "1", "1Gi", available=False)))
    assert no_priority.priority == 2**31 - 1
