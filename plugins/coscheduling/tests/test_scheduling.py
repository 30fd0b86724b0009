"""Gangs through the whole scheduler (``run_until_idle``, what ``koord simulate`` runs): all or nothing.

The scheduler harness runs the real Scheduler on an in-memory cluster with a virtual clock; ``Fit`` stands in
for NodeResourcesFit. These are the behaviours a user sees: a gang that fits binds entirely, one that does
not binds nothing (and says why), a Permit wait times out on the virtual clock, and adding room lets a
rejected gang bind.
"""

from __future__ import annotations

from typing import Any

from koord_plugin_coscheduling import Coscheduling
from koord_plugin_coscheduling.testing import Fit, Hold, all_or_nothing_violations, member, pod_group

from koord_framework.testing import make_node
from koord_framework.testing.scheduler import SchedulerHarness


def _harness(
    *objects: dict[str, Any], args: dict[str, Any] | None = None, hold: bool = False
) -> SchedulerHarness:
    plugins: list[Any] = [Hold] if hold else []
    plugins += [(Coscheduling, args or {}), Fit]
    h = SchedulerHarness(plugins)
    h.add(*objects)
    return h


def _bound(h: SchedulerHarness, namespace: str = "default") -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in h.cluster.list("Pod")[0]
        if p["metadata"].get("namespace", "default") == namespace and p["spec"].get("nodeName")
    }


def _objects(h: SchedulerHarness) -> list[dict[str, Any]]:
    return [*h.cluster.list("Pod")[0], *h.cluster.list("PodGroup")[0]]


def _plugin(h: SchedulerHarness) -> Coscheduling:
    plugin = h.plugin("Coscheduling")
    assert isinstance(plugin, Coscheduling)
    return plugin


def test_a_gang_that_fits_binds_entirely_with_binding_annotations() -> None:
    h = _harness(
        make_node("n1", cpu="2"),
        make_node("n2", cpu="2"),
        pod_group("job", 3),
        *(member(f"job-{i}", "job") for i in range(3)),
    )
    h.run_until_idle()
    assert sorted(_bound(h)) == ["job-0", "job-1", "job-2"]
    for i in range(3):
        annotations = h.cluster.get("Pod", f"job-{i}", "default")["metadata"]["annotations"]
        assert annotations["internal.scheduling.koordinator.sh/bind-gang-group-id"] == "default/job"
        assert annotations["internal.scheduling.koordinator.sh/bind-gang-member-count"] == "3"
        assert annotations["scheduling.koordinator.sh/bind-gang-member-count"] == "3"
    [report] = _plugin(h).gang_reports()
    assert (report.verdict, report.bound, report.waiting) == ("Satisfied", 3, 0)
    assert h.cluster.get("PodGroup", "job", "default")["status"]["phase"] in ("Scheduled", "Running")


def test_a_gang_with_room_for_two_of_three_binds_none_then_all_once_a_node_is_added() -> None:
    h = _harness(
        make_node("n1", cpu="1"),
        make_node("n2", cpu="1"),
        pod_group("job", 3),
        *(member(f"job-{i}", "job") for i in range(3)),
    )
    h.run_until_idle()
    assert _bound(h) == {}
    assert not h.scheduler.waiting.list(), "no pod of the rejected gang may keep resources"
    for ni in h.scheduler.cache.node_infos():
        assert not ni.pods
    [report] = _plugin(h).gang_reports()
    assert report.verdict == "Rejected"
    assert 'GangGroup "default/job" gets rejected due to member Pod' in report.why
    assert "Insufficient cpu" in report.why
    for i in range(3):
        assert h.scheduler.outcomes[
            h.cluster.get("Pod", f"job-{i}", "default")["metadata"]["uid"]
        ].status == ("Unschedulable")
    h.add(make_node("n3", cpu="1"))
    h.run_until_idle()
    assert sorted(_bound(h)) == ["job-0", "job-1", "job-2"]
    assert all_or_nothing_violations(_objects(h)) == []


def test_a_member_held_back_by_another_plugin_times_out_on_the_virtual_clock() -> None:
    h = _harness(
        make_node("n1", cpu="4"),
        pod_group("job", 3, timeout=30),
        member("job-0", "job"),
        member("job-1", "job"),
        member("job-2", "job", labels={"hold": "true"}),
        hold=True,
    )
    start = h.clock.now()
    h.run_until_idle()
    assert _bound(h) == {}
    assert h.clock.now() - start >= 30, "the clock jumped to the Permit deadline"
    reasons = {
        o.pod.name: o.message for o in h.scheduler.outcomes.values() if o.pod.name in ("job-0", "job-1")
    }
    assert any(
        "rejected due to timeout after waiting 30s at plugin Coscheduling" in m for m in reasons.values()
    )
    assert all(o.status == "Unschedulable" for o in h.scheduler.outcomes.values())
    [report] = _plugin(h).gang_reports()
    assert report.verdict == "Rejected" and report.bound == 0


def test_non_strict_gang_keeps_nothing_either_when_every_member_was_tried() -> None:
    h = _harness(
        make_node("n1", cpu="1"),
        pod_group("job", 2, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"}),
        member("job-0", "job"),
        member("job-1", "job"),
    )
    h.run_until_idle()
    assert _bound(h) == {}
    assert not h.scheduler.waiting.list()


def test_lightweight_annotation_gang_and_gang_group() -> None:
    ann_a = {
        "gang.scheduling.koordinator.sh/name": "a",
        "gang.scheduling.koordinator.sh/min-available": "2",
        "gang.scheduling.koordinator.sh/groups": '["default/a", "default/b"]',
    }
    ann_b = {
        **ann_a,
        "gang.scheduling.koordinator.sh/name": "b",
        "gang.scheduling.koordinator.sh/min-available": "1",
    }
    from koord_framework.testing import make_pod

    pods = [make_pod(f"a-{i}", cpu="1", annotations=ann_a) for i in range(2)]
    pods.append(make_pod("b-0", cpu="1", annotations=ann_b))
    h = _harness(make_node("n1", cpu="3"), *pods)
    h.run_until_idle()
    assert sorted(_bound(h)) == ["a-0", "a-1", "b-0"]
    annotations = h.cluster.get("Pod", "b-0", "default")["metadata"]["annotations"]
    assert annotations["internal.scheduling.koordinator.sh/bind-gang-group-id"] == "default/a,default/b"
    assert annotations["internal.scheduling.koordinator.sh/bind-gang-member-count"] == "3"


def test_gang_group_binds_nothing_when_one_gang_cannot_fit() -> None:
    groups = {"gang.scheduling.koordinator.sh/groups": '["default/a", "default/b"]'}
    h = _harness(
        make_node("n1", cpu="3"),
        pod_group("a", 2, annotations=groups),
        pod_group("b", 2, annotations=groups),
        *(member(f"a-{i}", "a") for i in range(2)),
        *(member(f"b-{i}", "b") for i in range(2)),
    )
    h.run_until_idle()
    assert _bound(h) == {}


def test_members_beyond_the_minimum_bind_after_the_gang_is_satisfied() -> None:
    h = _harness(
        make_node("n1", cpu="5"),
        pod_group("job", 2, annotations={"gang.scheduling.koordinator.sh/total-number": "4"}),
        *(member(f"job-{i}", "job") for i in range(4)),
    )
    h.run_until_idle()
    assert sorted(_bound(h)) == ["job-0", "job-1", "job-2", "job-3"]


def test_two_gangs_competing_for_the_same_nodes_do_not_deadlock() -> None:
    # Room for one gang of 3, not two: exactly one of them binds, the other binds nothing, nothing waits.
    h = _harness(
        make_node("n1", cpu="2"),
        make_node("n2", cpu="2"),
        pod_group("x", 3),
        pod_group("y", 3),
        *(member(f"x-{i}", "x") for i in range(3)),
        *(member(f"y-{i}", "y") for i in range(3)),
    )
    h.run_until_idle()
    bound = _bound(h)
    assert len(bound) == 3 and len({name[0] for name in bound}) == 1
    assert not h.scheduler.waiting.list()
    assert all_or_nothing_violations(_objects(h)) == []


def test_pod_group_created_after_its_pods_admits_them() -> None:
    h = _harness(make_node("n1", cpu="4"), *(member(f"job-{i}", "job") for i in range(2)))
    h.run_until_idle()
    assert _bound(h) == {}
    # job-0 reached PreEnqueue before the gang cache had seen any member ("can't find gang"); job-1 found the
    # gang that job-0 created, not initialised without a PodGroup or gang annotations.
    second = next(o for o in h.scheduler.outcomes.values() if o.pod.name == "job-1")
    assert second.message == "gang has not init, gangName: default/job, podName: default/job-1"
    h.add(pod_group("job", 2))
    h.run_until_idle()
    assert sorted(_bound(h)) == ["job-0", "job-1"]
