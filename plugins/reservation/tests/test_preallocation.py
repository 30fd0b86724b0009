"""Pre-allocation end to end: a reservation placed by taking over what running pods hold (Default and
Cluster mode, single and multiple), the required label, bad input, restart; plus Koordinator's
``Test_filterWithPreAllocatablePods`` cases on the pure filter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.model import info_from_object
from koord_plugin_reservation.preallocation import (
    ERR_REASON_CLUSTER_MODE_DISABLED,
    ERR_REASON_NO_PODS_MEET_PRE_ALLOCATION,
    ERR_REASON_PRE_ALLOCATION_REQUIRED,
    ERR_REASON_PRE_ALLOCATION_UNSUPPORTED,
    filter_with_pre_allocatable,
)
from koord_plugin_reservation.testing import make_reservation

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.scheduler.frameworkext import ANNOTATION_RESERVATION_ALLOCATED
from koord_framework.scheduler.status import Code, Status
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

NOW = "2024-01-01T00:00:00Z"
PLUGINS: list[Any] = [Reservation, NodeResourcesFit, DefaultPreBind, DefaultBinder]
GI = 1024**3


def harness(*objects: dict[str, Any], args: dict[str, Any] | None = None) -> SchedulerHarness:
    plugins: list[Any] = [(Reservation, args), *PLUGINS[1:]] if args else PLUGINS
    h = SchedulerHarness(plugins, now=NOW)
    h.add(*objects)
    return h


def pre_allocating(name: str, cpu: str = "3", memory: str = "3Gi", **kwargs: Any) -> dict[str, Any]:
    policy = kwargs.pop("policy", None)
    labels = kwargs.pop("labels", None)
    obj = make_reservation(
        name,
        cpu=cpu,
        memory=memory,
        allocate_policy=kwargs.pop("allocate_policy", "Restricted"),
        allocate_once=kwargs.pop("allocate_once", False),
        labels=labels,
        **kwargs,
    )
    obj["spec"]["preAllocation"] = True
    if policy is not None:
        obj["spec"]["preAllocationPolicy"] = policy
    return obj


def status_of(h: SchedulerHarness, name: str) -> dict[str, Any]:
    return dict(h.cluster.get("Reservation", name).get("status") or {})


def outcome(h: SchedulerHarness, name: str) -> Any:
    uid = h.cluster.get("Reservation", name)["metadata"]["uid"]
    return h.scheduler.outcomes[uid]


def allocated_to(h: SchedulerHarness, pod: str, namespace: str = "default") -> str | None:
    obj = h.cluster.get("Pod", pod, namespace)
    raw = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_RESERVATION_ALLOCATED)
    return json.loads(raw)["name"] if raw else None


def node_requested(h: SchedulerHarness, node: str) -> dict[str, int]:
    for ni in h.scheduler.cache.node_infos():
        if ni.name == node:
            return {k: v for k, v in ni.requested.items() if v}
    raise KeyError(node)


def running(name: str, node: str, cpu: str, memory: str = "1Gi", **kwargs: Any) -> dict[str, Any]:
    return make_pod(name, cpu=cpu, memory=memory, node=node, phase="Running", **kwargs)


# --- end to end ---------------------------------------------------------------------------------------
def test_reservation_takes_over_a_running_owner_and_keeps_its_resources_after() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("old", "n1", cpu="3", memory="3Gi", labels={"app": "a"}),
        pre_allocating("r1", cpu="3", memory="3Gi", owner_labels={"app": "a"}),
    )
    h.run_until_idle()
    st = status_of(h, "r1")
    assert (st["phase"], st["nodeName"]) == ("Available", "n1")
    assert allocated_to(h, "old") == "r1"
    assert st["allocated"] == {"cpu": "3", "memory": "3Gi"}
    assert [o["name"] for o in st["currentOwners"]] == ["old"]
    # Nothing counted twice: the running pod holds the 3 cores, the reservation nothing more.
    assert node_requested(h, "n1") == {"cpu": 3000, "memory": 3 * GI}
    # The pod finishes: the reservation keeps its resources for its owners.
    h.cluster.delete("Pod", "old", "default")
    h.run_until_idle()
    assert node_requested(h, "n1") == {"cpu": 3000, "memory": 3 * GI}
    h.add(make_pod("stranger", cpu="2", memory="1Gi"))
    h.add(make_pod("heir", cpu="2", memory="1Gi", labels={"app": "a"}))
    h.run_until_idle()
    assert h.result(make_pod("stranger")).node is None
    assert h.result(make_pod("heir")).node == "n1"
    assert allocated_to(h, "heir") == "r1"


def test_explain_names_the_pre_allocated_pods() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("old", "n1", cpu="3", memory="3Gi", labels={"app": "a"}),
        pre_allocating("r1", cpu="3", memory="3Gi", owner_labels={"app": "a"}),
    )
    h.scheduler.explain = True
    h.run_until_idle()
    uid = h.cluster.get("Reservation", "r1")["metadata"]["uid"]
    assert "Reservation: pre-allocates default/old on node n1" in h.scheduler.outcomes[uid].notes


def test_without_pre_allocation_the_reservation_does_not_fit() -> None:
    r = pre_allocating("r1", owner_labels={"app": "a"})
    del r["spec"]["preAllocation"]
    h = harness(make_node("n1", cpu="4", memory="8Gi"), running("old", "n1", cpu="3", labels={"app": "a"}), r)
    h.run_until_idle()
    assert status_of(h, "r1").get("phase") in (None, "", "Pending")
    assert "Insufficient cpu" in outcome(h, "r1").message
    assert allocated_to(h, "old") is None


def test_free_capacity_is_preferred_only_when_configured() -> None:
    objects = [
        make_node("n1", cpu="8", memory="8Gi"),
        running("old", "n1", cpu="2", memory="1Gi", labels={"app": "a"}),
        pre_allocating("r1", cpu="2", memory="1Gi", owner_labels={"app": "a"}),
    ]
    h = harness(*objects)
    h.run_until_idle()
    assert allocated_to(h, "old") == "r1"  # Koordinator's default: a fitting candidate is taken
    h = harness(*objects, args={"preAllocationConfig": {"preferNoPreAllocatedPods": True}})
    h.run_until_idle()
    assert status_of(h, "r1")["phase"] == "Available"
    assert allocated_to(h, "old") is None
    assert node_requested(h, "n1") == {"cpu": 4000, "memory": 2 * GI}


def test_a_candidate_larger_than_the_restricted_reservation_is_not_taken() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("big", "n1", cpu="3", memory="1Gi", labels={"app": "a"}),
        pre_allocating("r1", cpu="2", memory="1Gi", owner_labels={"app": "a"}),
    )
    h.run_until_idle()
    assert status_of(h, "r1").get("phase") in (None, "", "Pending")
    assert allocated_to(h, "big") is None
    assert "Insufficient cpu by node" in outcome(h, "r1").message


def test_the_best_scored_candidate_is_nominated_and_others_stay_free() -> None:
    # Two candidates fit the 4-core reservation; the one filling it most (most-allocated) is taken.
    h = harness(
        make_node("n1", cpu="6", memory="8Gi"),
        running("small", "n1", cpu="2", memory="1Gi", labels={"app": "a"}),
        running("large", "n1", cpu="3", memory="1Gi", labels={"app": "a"}),
        pre_allocating("r1", cpu="4", memory="2Gi", owner_labels={"app": "a"}),
    )
    h.run_until_idle()
    assert allocated_to(h, "large") == "r1"
    assert allocated_to(h, "small") is None
    assert node_requested(h, "n1") == {"cpu": 6000, "memory": 3 * GI}


def test_multiple_pods_make_up_the_reservation() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("a1", "n1", cpu="2", memory="1Gi", labels={"app": "a"}),
        running("a2", "n1", cpu="2", memory="1Gi", labels={"app": "a"}),
        pre_allocating(
            "r1", cpu="4", memory="2Gi", owner_labels={"app": "a"}, policy={"enableMultiple": True}
        ),
    )
    h.run_until_idle()
    assert status_of(h, "r1")["phase"] == "Available"
    assert {allocated_to(h, "a1"), allocated_to(h, "a2")} == {"r1"}
    assert status_of(h, "r1")["allocated"] == {"cpu": "4", "memory": "2Gi"}
    assert node_requested(h, "n1") == {"cpu": 4000, "memory": 2 * GI}


def test_single_mode_cannot_combine_pods() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("a1", "n1", cpu="2", memory="1Gi", labels={"app": "a"}),
        running("a2", "n1", cpu="2", memory="1Gi", labels={"app": "a"}),
        pre_allocating("r1", cpu="4", memory="2Gi", owner_labels={"app": "a"}),
    )
    h.run_until_idle()
    assert status_of(h, "r1").get("phase") in (None, "", "Pending")
    assert allocated_to(h, "a1") is None and allocated_to(h, "a2") is None


def test_cluster_mode_takes_labelled_pods_by_priority() -> None:
    label = {"pod.koordinator.sh/is-pre-allocatable": "true"}

    def prio(v: str) -> dict[str, str]:
        return {"pod.koordinator.sh/pre-allocatable-priority": v}

    objects = [
        make_node("n1", cpu="4", memory="8Gi"),
        running("low", "n1", cpu="2", memory="1Gi", labels=label, annotations=prio("1")),
        running("high", "n1", cpu="2", memory="1Gi", labels=label, annotations=prio("10")),
        running("mid", "n1", cpu="2", memory="1Gi", labels=label, annotations=prio("5")),
        running("unlabelled", "n1", cpu="1", memory="1Gi", annotations=prio("99")),
    ]
    r = pre_allocating(
        "r1",
        cpu="4",
        memory="2Gi",
        owner_labels={"app": "x"},
        policy={"mode": "Cluster", "enableMultiple": True},
    )
    # Disabled by default: named.
    h = harness(make_node("n0", cpu="1", memory="1Gi"), r)
    h.run_until_idle()
    assert ERR_REASON_CLUSTER_MODE_DISABLED in outcome(h, "r1").message
    objects[0] = make_node("n1", cpu="7", memory="8Gi")  # 0 free of the 7 cores
    h = harness(*objects, r, args={"preAllocationConfig": {"enableClusterMode": True}})
    h.run_until_idle()
    assert status_of(h, "r1")["phase"] == "Available"
    taken = {n for n in ("low", "high", "mid", "unlabelled") if allocated_to(h, n) == "r1"}
    assert taken == {"high", "mid"}


def test_cluster_mode_custom_keys_and_malformed_priority() -> None:
    h = harness(
        make_node("n1", cpu="2", memory="8Gi"),
        running("p1", "n1", cpu="2", memory="1Gi", labels={"spot": "true"}, annotations={"rank": "high"}),
        pre_allocating("r1", cpu="2", memory="1Gi", owner_labels={"app": "x"}, policy={"mode": "Cluster"}),
        args={
            "preAllocationConfig": {
                "enableClusterMode": True,
                "clusterLabelKey": "spot",
                "clusterPriorityAnnotationKey": "rank",
            }
        },
    )
    h.run_until_idle()
    # A malformed priority counts as 0 (Koordinator); the pod is still a candidate.
    assert allocated_to(h, "p1") == "r1"


def test_pre_allocation_needs_the_restricted_policy() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("old", "n1", cpu="3", labels={"app": "a"}),
        pre_allocating("r1", owner_labels={"app": "a"}, allocate_policy="Aligned"),
    )
    h.run_until_idle()
    assert ERR_REASON_PRE_ALLOCATION_UNSUPPORTED in outcome(h, "r1").message


def test_pre_allocation_required_label() -> None:
    required = {"scheduling.koordinator.sh/pre-allocation-required": "true"}
    # No candidate anywhere: unresolvable, even though the node is empty.
    h = harness(
        make_node("n1", cpu="8", memory="8Gi"),
        pre_allocating("r1", owner_labels={"app": "a"}, labels=required),
    )
    h.run_until_idle()
    assert ERR_REASON_PRE_ALLOCATION_REQUIRED in outcome(h, "r1").message
    # With a candidate on another node, it goes there and takes it, though n1 is free.
    h = harness(
        make_node("n1", cpu="8", memory="8Gi"),
        make_node("n2", cpu="8", memory="8Gi"),
        running("old", "n2", cpu="1", memory="1Gi", labels={"app": "a"}),
        pre_allocating("r1", owner_labels={"app": "a"}, labels=required),
    )
    h.run_until_idle()
    assert status_of(h, "r1")["nodeName"] == "n2"
    assert allocated_to(h, "old") == "r1"


def test_candidates_respect_their_reservation_affinity_and_other_reservations() -> None:
    affinity = {"scheduling.koordinator.sh/reservation-affinity": json.dumps({"name": "elsewhere"})}
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("picky", "n1", cpu="3", memory="1Gi", labels={"app": "a"}, annotations=affinity),
        pre_allocating("r1", owner_labels={"app": "a"}),
    )
    h.run_until_idle()
    assert allocated_to(h, "picky") is None
    assert status_of(h, "r1").get("phase") in (None, "", "Pending")
    # Two pre-allocating reservations and one running pod: only one of them gets it.
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("old", "n1", cpu="3", memory="1Gi", labels={"app": "a"}),
        pre_allocating("r1", memory="1Gi", owner_labels={"app": "a"}),
        pre_allocating("r2", memory="1Gi", owner_labels={"app": "a"}),
    )
    h.run_until_idle()
    phases = sorted(str(status_of(h, n).get("phase") or "Pending") for n in ("r1", "r2"))
    assert phases == ["Available", "Pending"]
    assert node_requested(h, "n1")["cpu"] <= 4000


def test_candidates_only_on_nodes_the_reservation_may_go_to() -> None:
    r = pre_allocating("r1", cpu="3", memory="1Gi", owner_labels={"app": "a"})
    r["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
                ]
            }
        }
    }
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        make_node("n2", cpu="4", memory="8Gi"),
        running("on-n1", "n1", cpu="3", memory="1Gi", labels={"app": "a"}),
        running("on-n2", "n2", cpu="3", memory="1Gi", labels={"app": "a"}),
        r,
    )
    h.run_until_idle()  # no NodeAffinity filter in this profile: only the candidate listing keeps n1 out
    assert status_of(h, "r1")["nodeName"] == "n2"
    assert (allocated_to(h, "on-n1"), allocated_to(h, "on-n2")) == (None, "r1")


def test_restart_rebuilds_pre_allocated_owners() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        running("old", "n1", cpu="3", memory="3Gi", labels={"app": "a"}),
        pre_allocating("r1", cpu="3", memory="3Gi", owner_labels={"app": "a"}),
    )
    h.run_until_idle()
    again = SchedulerHarness(PLUGINS, cluster=h.cluster)
    again.run_until_idle()
    assert node_requested(again, "n1") == {"cpu": 3000, "memory": 3 * GI}
    again.add(make_pod("stranger", cpu="2", memory="1Gi"))
    again.run_until_idle()
    assert again.result(make_pod("stranger")).node is None


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"preAllocation": "yes"}, "spec.preAllocation"),
        ({"preAllocationPolicy": {"mode": "Everywhere"}}, "spec.preAllocationPolicy.mode"),
        ({"preAllocationPolicy": {"enableMultiple": "sure"}}, "spec.preAllocationPolicy.enableMultiple"),
        ({"preAllocationPolicy": ["Cluster"]}, "spec.preAllocationPolicy"),
    ],
)
def test_malformed_pre_allocation_fields_are_named(patch: dict[str, Any], field: str) -> None:
    bad = pre_allocating("bad", owner_labels={"app": "a"})
    bad["spec"].update(patch)
    h = harness(make_node("n1", cpu="4", memory="8Gi"), bad, make_reservation("good", cpu="1"))
    h.run_until_idle()
    plugin = h.plugin("Reservation")
    assert isinstance(plugin, Reservation)
    error = str(plugin.cache.errors["bad"])
    assert "reservation bad" in error and field in error
    assert status_of(h, "good")["phase"] == "Available"


def test_bad_pre_allocation_config_is_refused() -> None:
    from koord_plugin_reservation.args import ReservationArgs

    with pytest.raises(ValueError, match="enableClusterMod"):
        ReservationArgs.model_validate({"preAllocationConfig": {"enableClusterMod": True}})


# --- Koordinator's Test_filterWithPreAllocatablePods -------------------------------------------------
def _res(cpu: str, memory: str) -> dict[str, int]:
    return parse_resource_list({"cpu": cpu, "memory": memory})


def _candidate(name: str, cpu: str, memory: str) -> PodInfo:
    return PodInfo.from_manifest(
        make_pod(name, namespace="test-ns", cpu=cpu, memory=memory, node="test-node")
    )


CASES = [
    ("not required, no candidates", False, ("12", "16Gi"), [], None, Status()),
    (
        "required, no candidates",
        True,
        ("12", "16Gi"),
        [],
        None,
        Status(Code.UNSCHEDULABLE, (ERR_REASON_NO_PODS_MEET_PRE_ALLOCATION,)),
    ),
    ("not required, full node, no candidates", False, ("30", "16Gi"), [], None, Status()),
    (
        "not required, full node, small candidate",
        False,
        ("30", "16Gi"),
        [("pod1", "1", "1Gi")],
        None,
        Status(Code.UNSCHEDULABLE, ("Insufficient cpu by node",)),
    ),
    (
        "required, unfit then fitting candidate",
        True,
        ("32", "32Gi"),
        [("test-unfit-pod", "8", "32Gi"), ("test-pre-allocation-pod", "4", "16Gi")],
        None,
        Status(),
    ),
    (
        "required, preemptible",
        True,
        ("32", "16Gi"),
        [("test-unfit-pod", "8", "8Gi"), ("test-pre-allocation-pod", "2", "8Gi")],
        ("2", "4Gi"),
        Status(),
    ),
    (
        "required, negative preemptible",
        True,
        ("32", "16Gi"),
        [("test-unfit-pod", "8", "8Gi"), ("test-pre-allocation-pod", "4", "8Gi")],
        ("-4", "-4Gi"),
        Status(Code.UNSCHEDULABLE, ("Insufficient cpu by node", "Reservation(s) Insufficient cpu")),
    ),
]


@pytest.mark.parametrize(("name", "required", "requested", "pods", "preemptible", "want"), CASES)
def test_koordinator_filter_with_pre_allocatable_pods(
    name: str,
    required: bool,
    requested: tuple[str, str],
    pods: list[tuple[str, str, str]],
    preemptible: tuple[str, str] | None,
    want: Status,
) -> None:
    r = pre_allocating(
        "test-pre-allocation-reservation", cpu="4", memory="16Gi", owner_labels={"test-reservation": "true"}
    )
    info = info_from_object(r)
    allocatable = {**_res("32", "32Gi"), "pods": 100}
    _, got = filter_with_pre_allocatable(
        reservation_requests=_res("4", "16Gi"),
        info=info,
        allocatable=allocatable,
        requested=_res(*requested),
        pods=0,
        candidates=[_candidate(*p) for p in pods],
        required=required,
        multiple=False,
        prefer_free=False,
        hook=lambda _p: Status(),
        preemptible=_res(*preemptible) if preemptible else None,
    )
    assert (got.code, got.reasons) == (want.code, want.reasons), name


# --- Koordinator's TestNominatePreAllocation ---------------------------------------------------------
def _pod(name: str, requests: dict[str, str]) -> PodInfo:
    return PodInfo.from_manifest(make_pod(name, requests=requests, node="test-node", uid=name))


PREFERRED = ("preferred-pod", {"cpu": "2", "memory": "4Gi"})
NORMAL = ("normal-pod", {"cpu": "1", "memory": "1Gi"})


@pytest.mark.parametrize(
    ("candidates", "want"),
    [
        ([], None),
        ([PREFERRED, NORMAL], "preferred-pod"),
        ([NORMAL, PREFERRED], "preferred-pod"),
        ([("test-pod", {"cpu": "6", "memory": "6Gi"}), ("normal-pod", {"memory": "8Gi"})], None),
    ],
    ids=[
        "node without pre-allocatable",
        "preferred pre-allocatable",
        "preferred pre-allocatable 1",
        "no pre-allocatable to nominate",
    ],
)
def test_koordinator_nominate_pre_allocation(
    candidates: list[tuple[str, dict[str, str]]], want: str | None
) -> None:
    from koord_plugin_reservation.plugin import STATE_KEY, PodState
    from koord_plugin_reservation.preallocation import PreAllocation

    from koord_framework.scheduler.cycle_state import CycleState

    r = pre_allocating("test-reservation", cpu="2", memory="4Gi", owner_labels={"app": "x"})
    h = harness(make_node("test-node", cpu="8", memory="16Gi"))
    plugin = h.plugin("Reservation")
    assert isinstance(plugin, Reservation)
    pods = [_pod(n, req) for n, req in candidates]
    pa = PreAllocation(info=info_from_object(r), multiple=False, required=False)
    pa.candidates["test-node"] = pods
    pa.selected["test-node"] = pods
    h.node_info("test-node")  # the handle answers from the scheduler's snapshot
    ps = PodState(reserve_pod=True, pod_requests=_res("2", "4Gi"), pre_allocation=pa)
    state = CycleState()
    state.write(STATE_KEY, ps)
    nominated, status = plugin._nominate_pre_allocation(state, ps, pa, "test-node")
    assert status.is_success
    assert [p.name for p in nominated] == ([want] if want else [])
