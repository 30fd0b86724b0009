"""Koordinator's unit-test cases the shared vectors lack, bad input, and the PodGroup status controller.

Cases named after Koordinator's tests come from ``core/core_test.go`` (``TestPlugin_PreEnqueue``,
``TestPermit``), ``core/gang_cache_test.go`` and ``controller/podgroup_test.go`` at a7a1b76b.
"""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_coscheduling import Coscheduling, CoschedulingArgs, GangCache, GangManager, next_status
from koord_plugin_coscheduling.gang import MemberPod, parse_gang_groups
from koord_plugin_coscheduling.testing import Fit, member, pod_group
from pydantic import ValidationError

from koord_framework.api.objects import PodInfo
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

LABEL = "pod-group.scheduling.sigs.k8s.io"


def _world() -> tuple[GangCache, GangManager]:
    args = CoschedulingArgs()
    cache = GangCache(args)
    return cache, GangManager(args, cache)


def _pod(name: str, namespace: str, group: str | None = None, **kwargs: Any) -> dict[str, Any]:
    labels = {LABEL: group} if group else None
    return make_pod(name, namespace, labels=labels, uid=name, **kwargs)


# --- PreEnqueue (TestPlugin_PreEnqueue) -------------------------------------------------------------------
def test_pre_enqueue_pod_of_a_pod_group_that_does_not_exist() -> None:
    cache, manager = _world()
    pod = _pod("pod2", "gangA_ns", "wenshiqi222")
    cache.on_pod_add(pod)
    assert (
        manager.pre_enqueue(PodInfo.from_manifest(pod))
        == "gang has not init, gangName: gangA_ns/wenshiqi222, podName: gangA_ns/pod2"
    )


def test_pre_enqueue_pod_count_less_than_min_member() -> None:
    cache, manager = _world()
    cache.on_pod_group_add(pod_group("ganga", 4, "ganga_ns"))
    for name in ("pod3-1", "pod3"):
        cache.on_pod_add(_pod(name, "ganga_ns", "ganga"))
    assert manager.pre_enqueue(PodInfo.from_manifest(_pod("pod3", "ganga_ns", "ganga"))) == (
        "gangGroup [ganga_ns/ganga] basic check: memberGangs [ganga_ns/ganga] child pod not collect enough, "
        "current gang: ganga_ns/ganga, podName: ganga_ns/pod3"
    )


def test_pre_enqueue_second_pod_finds_the_representative() -> None:
    cache, manager = _world()
    cache.on_pod_group_add(
        pod_group("ganga", 4, "ganga_ns", annotations={"gang.scheduling.koordinator.sh/total-number": "5"})
    )
    for k in range(1, 5):
        pod = _pod(f"pod9-{k}", "ganga_ns", "ganga")
        cache.on_pod_add(pod)
        manager.pre_enqueue(PodInfo.from_manifest(pod))
    last = _pod("pod9", "ganga_ns", "ganga")
    cache.on_pod_add(last)
    assert manager.pre_enqueue(PodInfo.from_manifest(last)) == (
        "representative pod ganga_ns/pod9-4 of gangGroupID ganga_ns/ganga already exists"
    )


def test_pre_enqueue_holds_members_not_yet_attempted_while_their_group_is_scheduling() -> None:
    cache, manager = _world()
    cache.on_pod_group_add(pod_group("g", 2))
    pods = [_pod(f"p{k}", "default", "g") for k in range(2)]
    for p in pods:
        cache.on_pod_add(p)
    first, second = (PodInfo.from_manifest(p) for p in pods)
    assert manager.pre_enqueue(first) == ""
    assert manager.before_pre_filter(first) == ""
    assert (
        manager.pre_enqueue(second) == "gangGroup default/g is scheduling and this pod has not been attempted"
    )
    nxt = manager.next_pod()
    assert nxt is not None and nxt.key == "default/p1"
    assert manager.pre_enqueue(second) == ""


# --- Permit (TestPermit) -----------------------------------------------------------------------------------
def test_permit_pod_of_a_missing_pod_group_waits_with_timeout_zero() -> None:
    cache, manager = _world()
    pod = _pod("pod2", "gangA_ns", "gangB")
    cache.on_pod_add(pod)
    assert manager.permit(PodInfo.from_manifest(pod)) == (0.0, "Wait")


def test_permit_a_pod_without_gang_in_the_cache_is_not_found() -> None:
    _, manager = _world()
    assert manager.permit(PodInfo.from_manifest(_pod("p", "ns", "ghost"))) == (0.0, "PodGroup not found")


def test_permit_third_member_completes_the_gang() -> None:
    cache, manager = _world()
    cache.on_pod_group_add(pod_group("gangB", 3, "gangA_ns"))
    for name in ("pod4-1", "pod4-2"):
        pod = _pod(name, "gangA_ns", "gangB")
        cache.on_pod_add(pod)
        assert manager.permit(PodInfo.from_manifest(pod)) == (10.0, "Wait")
    pod = _pod("pod4", "gangA_ns", "gangB")
    cache.on_pod_add(pod)
    assert manager.permit(PodInfo.from_manifest(pod)) == (0.0, "Success")


def test_permit_gang_group_succeeds_when_every_gang_has_enough() -> None:
    cache, manager = _world()
    group = {"gang.scheduling.koordinator.sh/groups": '["gangE_ns/gangE","gangF_ns/gangF"]'}
    cache.on_pod_group_add(pod_group("gangE", 2, "gangE_ns", annotations=group))
    cache.on_pod_group_add(pod_group("gangF", 3, "gangF_ns", annotations=group))
    for name, ns, g in [
        ("pod6-1", "gangE_ns", "gangE"),
        *((f"pod6-{k}", "gangF_ns", "gangF") for k in (2, 3, 4)),
    ]:
        pod = _pod(name, ns, g)
        cache.on_pod_add(pod)
        assert manager.permit(PodInfo.from_manifest(pod))[1] == "Wait"
    pod = _pod("pod6", "gangE_ns", "gangE")
    cache.on_pod_add(pod)
    assert manager.permit(PodInfo.from_manifest(pod)) == (0.0, "Success")


# --- gang cache (TestGangCache_*) -----------------------------------------------------------------------
def test_pod_group_update_reinitialises_and_delete_forgets() -> None:
    cache, _ = _world()
    pg = pod_group("g", 2, timeout=20)
    cache.on_pod_group_add(pg)
    gang = cache.gangs["default/g"]
    assert (gang.min_required, gang.wait_time, gang.gang_from) == (2, 20.0, "GangFromPodGroupCrd")
    newer = pod_group("g", 3, timeout=None, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"})
    cache.on_pod_group_update(pg, newer)
    assert (gang.min_required, gang.wait_time, gang.mode) == (3, 600.0, "NonStrict")
    cache.on_pod_group_delete(newer)
    assert "default/g" not in cache.gangs and "default/g" not in cache.group_infos


def test_annotation_gang_is_dropped_with_its_last_pod() -> None:
    cache, _ = _world()
    ann = {"gang.scheduling.koordinator.sh/name": "a", "gang.scheduling.koordinator.sh/min-available": "2"}
    pods = [make_pod(f"p{k}", annotations=ann, uid=f"p{k}") for k in range(2)]
    for p in pods:
        cache.on_pod_add(p)
    assert len(cache.gangs["default/a"].children) == 2
    for p in pods:
        cache.on_pod_delete(p)
    assert cache.gangs == {} and cache.group_infos == {}


def test_legacy_lightweight_labels_define_a_gang() -> None:
    cache, _ = _world()
    labels = {
        "pod-group.scheduling.sigs.k8s.io/name": "old",
        "pod-group.scheduling.sigs.k8s.io/min-available": "3",
    }
    cache.on_pod_add(make_pod("p", labels=labels, uid="p"))
    gang = cache.gangs["default/old"]
    assert gang.has_gang_init and gang.min_required == 3 and gang.total_children == 3


# --- bad input: Koordinator's fallbacks, with the reason recorded ----------------------------------------
@pytest.mark.parametrize(
    ("annotations", "field", "check"),
    [
        (
            {"gang.scheduling.koordinator.sh/waiting-time": "ten minutes"},
            "waiting-time",
            ("wait_time", 600.0),
        ),
        ({"gang.scheduling.koordinator.sh/waiting-time": "-5s"}, "waiting-time", ("wait_time", 600.0)),
        (
            {"gang.scheduling.koordinator.sh/groups": "default/a,default/b"},
            "groups",
            ("gang_group", ["default/a"]),
        ),
        ({"gang.scheduling.koordinator.sh/groups": '{"a": 1}'}, "groups", ("gang_group", ["default/a"])),
        ({"gang.scheduling.koordinator.sh/total-number": "many"}, "total-number", ("total_children", 2)),
        ({"gang.scheduling.koordinator.sh/total-number": "1"}, "total-number", ("total_children", 2)),
        ({"gang.scheduling.koordinator.sh/mode": "Lenient"}, "mode", ("mode", "Strict")),
        (
            {"gang.scheduling.koordinator.sh/match-policy": "sometimes"},
            "match-policy",
            ("match_policy", "once-satisfied"),
        ),
    ],
)
def test_bad_gang_annotations_fall_back_as_koordinator_does(
    annotations: dict[str, str], field: str, check: tuple[str, Any]
) -> None:
    cache, _ = _world()
    ann = {
        "gang.scheduling.koordinator.sh/name": "a",
        "gang.scheduling.koordinator.sh/min-available": "2",
        **annotations,
    }
    cache.on_pod_add(make_pod("p0", annotations=ann, uid="p0"))
    gang = cache.gangs["default/a"]
    assert gang.has_gang_init
    attr, want = check
    assert getattr(gang, attr) == want
    [problem] = gang.problems
    assert problem.startswith("pod default/p0: annotation gang.scheduling.koordinator.sh/" + field)


def test_min_available_that_is_not_a_number_leaves_the_gang_uninitialised_with_a_reason() -> None:
    h = SchedulerHarness([Coscheduling, Fit])
    ann = {"gang.scheduling.koordinator.sh/name": "a", "gang.scheduling.koordinator.sh/min-available": "two"}
    h.add(make_node("n1"), make_pod("p0", cpu="1", annotations=ann))
    h.run_until_idle()
    outcome = next(iter(h.scheduler.outcomes.values()))
    assert outcome.status == "Unschedulable"
    assert "gang has not init, gangName: default/a, podName: default/p0" in outcome.message
    assert (
        "pod default/p0: annotation gang.scheduling.koordinator.sh/min-available 'two' "
        "is not a 32-bit integer" in (outcome.message)
    )


def test_groups_annotation_reads_like_go_json() -> None:
    assert parse_gang_groups("") == ([], "")
    assert parse_gang_groups("null") == ([], "")
    assert parse_gang_groups('["a/x", "b/y"]') == (["a/x", "b/y"], "")
    assert parse_gang_groups('["a/x", 3]') == (["a/x", ""], "has a non-string element")
    assert parse_gang_groups("[oops")[0] == []


def test_pod_group_with_min_member_zero_never_holds_its_pods() -> None:
    h = SchedulerHarness([Coscheduling, Fit])
    h.add(make_node("n1", cpu="1"), pod_group("z", 0), member("z-0", "z"), member("z-1", "z"))
    h.run_until_idle()
    bound = [p for p in h.cluster.list("Pod")[0] if p["spec"].get("nodeName")]
    assert len(bound) == 1  # room for one; nothing gang-related holds either pod back
    plugin = h.plugin("Coscheduling")
    assert isinstance(plugin, Coscheduling)
    gang = plugin.cache.gangs["default/z"]
    assert gang.problems == ["PodGroup default/z: spec.minMember is 0, so the gang never holds its pods back"]


def test_pod_group_with_min_member_not_an_integer_is_named() -> None:
    cache, _ = _world()
    pg = pod_group("bad", 2)
    pg["spec"]["minMember"] = "three"
    cache.on_pod_group_add(pg)
    assert (
        cache.gangs["default/bad"].problems[0]
        == "PodGroup default/bad: spec.minMember 'three' is not an integer; using 0"
    )


@pytest.mark.parametrize(
    "raw",
    [
        {"defaultTimeout": "-1s"},
        {"defaultTimeout": 600},
        {"controllerWorkers": 0},
        {"defaultMatchPolicy": "always"},
        {"enablePreemption": True},
        {"awareNetworkTopology": True},
        {"unknownField": 1},
    ],
)
def test_bad_args_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CoschedulingArgs.model_validate(raw)


def test_args_defaults_are_koordinators() -> None:
    args = CoschedulingArgs()
    assert float(args.default_timeout) == 600.0
    assert (args.controller_workers, args.skip_check_schedule_cycle) == (1, False)
    assert (args.enable_preemption, args.aware_network_topology) == (False, False)
    assert args.default_match_policy == "once-satisfied"


# --- the PodGroup controller (controller/podgroup_test.go) ----------------------------------------------
def _members(n: int, phase: str) -> list[MemberPod]:
    return [MemberPod("default", f"p{k}", f"p{k}", "n1", phase) for k in range(n)]


@pytest.mark.parametrize(
    ("previous", "phase", "scheduled", "want"),
    [
        ("Scheduled", "Running", 2, "Running"),
        ("Scheduled", "Failed", 2, "Failed"),
        ("Scheduled", "Succeeded", 2, "Finished"),
        ("Scheduling", "Pending", 2, "Scheduled"),
        ("Scheduling", "Succeeded", 2, "Finished"),
        ("Scheduling", "Pending", 1, "Scheduling"),
        ("PreScheduling", "Pending", 0, "Scheduling"),
        ("Pending", "Pending", 0, "PreScheduling"),
        ("", "Pending", 0, "Pending"),
    ],
)
def test_pod_group_phase(previous: str, phase: str, scheduled: int, want: str) -> None:
    pg = pod_group("pg1", 2)
    pg["status"] = {"phase": previous}
    status = next_status(pg, _members(2, phase), scheduled, 1_704_067_200.0)
    assert status["phase"] == want
    if previous not in ("", "Pending"):
        assert status["scheduled"] == scheduled


def test_pod_group_without_pods_goes_back_to_pending_and_pre_scheduling_records_owners() -> None:
    pg = pod_group("pg1", 2)
    pg["status"] = {"phase": "Scheduling"}
    assert next_status(pg, [], 0, 0.0)["phase"] == "Pending"
    pg["status"] = {"phase": "Pending"}
    pods = [MemberPod("default", f"p{k}", f"p{k}", "", "Pending", ("job-b", "job-a")) for k in range(2)]
    status = next_status(pg, pods, 0, 0.0)
    assert status == {"phase": "PreScheduling", "occupiedBy": "default/job-a,default/job-b"}


def test_controller_writes_pod_group_status_as_the_gang_binds() -> None:
    h = SchedulerHarness([Coscheduling, Fit])
    h.add(make_node("n1", cpu="4"), pod_group("g", 2), member("g-0", "g"), member("g-1", "g"))
    h.run_until_idle()
    status = h.cluster.get("PodGroup", "g", "default")["status"]
    # Bound, not yet running (nothing runs containers in the embedded cluster).
    assert status["phase"] == "Scheduled" and status["scheduled"] == 2 and status["running"] == 0


def test_decisions_of_gangs_that_are_gone_are_forgotten() -> None:
    cache, manager = _world()
    for g in range(40):
        ann = {
            "gang.scheduling.koordinator.sh/name": f"g{g}",
            "gang.scheduling.koordinator.sh/min-available": "1",
        }
        pod = make_pod(f"p{g}", annotations=ann, uid=f"p{g}")
        cache.on_pod_add(pod)
        manager.record(PodInfo.from_manifest(pod), "Wait", "waiting")
        cache.on_pod_delete(pod)
    assert len(manager.decisions) <= 2 * len(cache.gangs) + 17
