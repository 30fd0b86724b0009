"""The contract of every extension point, checked with fake plugins through the harness."""

from __future__ import annotations

from typing import Any

import pytest

from koord_framework.scheduler.interface import NodeScore, PostFilterResult, PreFilterResult
from koord_framework.scheduler.status import Code, Status
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

OK = Status()


def reject(reason: str) -> Status:
    return Status.unschedulable(reason)


def three_nodes(h: SchedulerHarness) -> None:
    h.add(make_node("n1"), make_node("n2"), make_node("n3"))


# --- Filter ---------------------------------------------------------------------------------------
def test_filter_runs_in_profile_order_and_stops_at_the_first_rejection(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, filter=OK)
    b = fake_plugin("B", log, filter=lambda p, s, pod, node: reject("no n1") if node.name == "n1" else OK)
    c = fake_plugin("C", log, filter=OK)
    h = SchedulerHarness([a, b, c])
    h.add(make_node("n1"), make_node("n2"))
    result = h.schedule_one(make_pod("p"))
    assert result.node == "n2"
    per_node: dict[str, list[str]] = {}
    for entry in log:
        if ".Filter:" in entry:
            plugin, node = entry.split(".Filter:")
            per_node.setdefault(node, []).append(plugin)
    # Per node: profile order, and nothing after the first rejection. (Across nodes the framework may
    # interleave: Filter must not depend on the order nodes are visited.)
    assert per_node == {"n1": ["A", "B"], "n2": ["A", "B", "C"]}
    assert result.filter["n1"].plugin == "B"
    assert result.filter["n1"].reasons == ("no n1",)


def test_unschedulable_pod_gets_kube_scheduler_fit_error_message(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin(
        "A", log, filter=lambda p, s, pod, node: reject("Insufficient cpu") if node.name != "n3" else OK
    )
    b = fake_plugin("B", log, filter=reject("node(s) had untolerated taint"))
    h = SchedulerHarness([a, b])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert result.outcome == "Unschedulable"
    assert result.message == "0/3 nodes are available: 1 node(s) had untolerated taint, 2 Insufficient cpu."
    assert {n: s.plugin for n, s in result.filter.items()} == {"n1": "A", "n2": "A", "n3": "B"}


def test_filter_returning_a_non_rejection_status_is_an_error(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, filter=Status(Code.WAIT, ("?",)))
    h = SchedulerHarness([a])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert result.outcome == "Unschedulable"
    assert result.status.code is Code.ERROR
    assert result.status.plugin == "A"
    # an error aborts the search at the first node
    assert [e for e in log if ".Filter:" in e] == ["A.Filter:n1"]


def test_plugin_exception_becomes_an_error_naming_the_plugin(fake_plugin: Any) -> None:
    def boom(*_: Any) -> Status:
        raise RuntimeError("kaput")

    h = SchedulerHarness([fake_plugin("A", [], filter=boom)])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert result.status.code is Code.ERROR
    assert "kaput" in result.message and "A" in result.message
    # errors go to backoff (no rejecting plugin), not to the unschedulable pods
    assert h.scheduler.queue.where(_uid(h, "p")) == "backoff"


# --- PreFilter ------------------------------------------------------------------------------------
def test_pre_filter_skip_skips_that_plugins_filter(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, pre_filter=Status.skip(), filter=reject("never called"))
    b = fake_plugin("B", log, filter=OK)
    h = SchedulerHarness([a, b])
    three_nodes(h)
    assert h.schedule_one(make_pod("p")).scheduled
    assert not [e for e in log if e.startswith("A.Filter")]
    assert h.filter(make_pod("q"), "n1").is_success


def test_pre_filter_unschedulable_lets_the_other_pre_filters_run(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, pre_filter=reject("quota exceeded"))
    b = fake_plugin("B", log, pre_filter=OK, filter=OK)
    h = SchedulerHarness([a, b])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert log[:2] == ["A.PreFilter", "B.PreFilter"]
    assert not [e for e in log if ".Filter:" in e]
    assert result.message == "0/3 nodes are available: quota exceeded."
    assert result.status.plugin == "A"
    assert h.scheduler.queue.where(_uid(h, "p")) == "unschedulable"


def test_pre_filter_unresolvable_stops_at_once(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, pre_filter=Status.unresolvable("gang not found"))
    b = fake_plugin("B", log, pre_filter=OK)
    h = SchedulerHarness([a, b])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert log == ["A.PreFilter"]
    assert result.outcome == "Unschedulable"


def test_pre_filter_results_narrow_the_nodes_and_intersect(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, pre_filter=(PreFilterResult({"n2", "n3"}), OK))
    b = fake_plugin("B", log, pre_filter=(PreFilterResult({"n3", "n1"}), OK), filter=OK)
    h = SchedulerHarness([a, b])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert result.node == "n3"
    assert [e for e in log if ".Filter:" in e] == ["B.Filter:n3"]
    # nodes outside the result are reported as UnschedulableAndUnresolvable
    assert result.filter["n1"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_pre_filter_results_with_no_common_node_reject_the_pod(fake_plugin: Any) -> None:
    a = fake_plugin("A", [], pre_filter=(PreFilterResult({"n1"}), OK))
    b = fake_plugin("B", [], pre_filter=(PreFilterResult({"n2"}), OK))
    h = SchedulerHarness([a, b])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert result.outcome == "Unschedulable"
    assert "node(s) didn't satisfy plugin(s) [A B] simultaneously" in result.message


# --- PostFilter -----------------------------------------------------------------------------------
def test_post_filter_runs_only_when_nothing_fits_and_nominates(fake_plugin: Any) -> None:
    log: list[str] = []
    seen: dict[str, Any] = {}

    def preempt(p: Any, state: Any, pod: Any, filtered: Any) -> Any:
        seen.update(dict(filtered))
        return PostFilterResult("n2"), Status.unschedulable("preemption: nominated n2")

    a = fake_plugin("A", log, filter=lambda p, s, pod, n: reject("full") if pod.name == "big" else OK)
    pf = fake_plugin("P", log, post_filter=preempt)
    h = SchedulerHarness([a, pf])
    three_nodes(h)
    assert h.schedule_one(make_pod("small")).scheduled
    assert "P.PostFilter" not in log
    result = h.schedule_one(make_pod("big"))
    assert "P.PostFilter" in log
    assert set(seen) == {"n1", "n2", "n3"} and all(s.plugin == "A" for s in seen.values())
    assert result.message == "0/3 nodes are available: 3 full. preemption: nominated n2."
    assert h.scheduler.queue.nominated_node_of(_uid(h, "big")) == "n2"
    assert h.cluster.get("Pod", "big", "default")["status"]["nominatedNodeName"] == "n2"


def test_post_filter_stops_at_the_first_success(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, filter=reject("full"))
    p1 = fake_plugin("P1", log, post_filter=OK)
    p2 = fake_plugin("P2", log, post_filter=OK)
    h = SchedulerHarness([a, p1, p2])
    three_nodes(h)
    h.schedule_one(make_pod("p"))
    assert "P1.PostFilter" in log and "P2.PostFilter" not in log


# --- Score ----------------------------------------------------------------------------------------
def _by_node(values: dict[str, int]) -> Any:
    return lambda p, s, pod, node: values[node.name]


def test_pre_score_skip_skips_that_plugins_score(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, pre_score=Status.skip(), score=_by_node({"n1": 100, "n2": 0, "n3": 0}))
    b = fake_plugin("B", log, score=_by_node({"n1": 0, "n2": 0, "n3": 50}))
    h = SchedulerHarness([a, b])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert result.node == "n3"
    assert not [e for e in log if e.startswith("A.Score")]
    assert set(result.scores["n1"]) == {"B"}


def test_scores_are_normalized_then_weighted_and_summed(fake_plugin: Any) -> None:
    def halve(p: Any, state: Any, pod: Any, scores: list[NodeScore]) -> Status:
        for s in scores:
            s.score //= 2
        return Status()

    a = fake_plugin("A", [], score=_by_node({"n1": 10, "n2": 40, "n3": 100}), normalize=halve)
    b = fake_plugin("B", [], score=_by_node({"n1": 90, "n2": 20, "n3": 0}))
    profile = {"plugins": {"score": {"enabled": [{"name": "A", "weight": 3}, {"name": "B", "weight": 1}]}}}
    h = SchedulerHarness([a, b], profile=profile)
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert result.scores["n1"]["A"] == (10, 5, 15)
    assert result.scores["n3"]["A"] == (100, 50, 150)
    assert result.totals == {"n1": 15 + 90, "n2": 60 + 20, "n3": 150}
    assert result.node == "n3"
    assert h.normalized_scores(make_pod("q"), "A") == {"n1": 5, "n2": 20, "n3": 50}
    assert h.score(make_pod("q"), "n2", "A") == 40


def test_a_score_out_of_range_after_normalize_is_an_error(fake_plugin: Any) -> None:
    a = fake_plugin("A", [], score=_by_node({"n1": 101, "n2": 0, "n3": 0}))
    h = SchedulerHarness([a])
    three_nodes(h)
    result = h.schedule_one(make_pod("p"))
    assert result.status.code is Code.ERROR
    assert "invalid score 101" in result.message


# --- Reserve / Permit / binding -------------------------------------------------------------------
def test_reserve_failure_unreserves_every_plugin_in_reverse_order(fake_plugin: Any) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, reserve=OK)
    b = fake_plugin("B", log, reserve=reject("no room in B's cache"))
    c = fake_plugin("C", log, reserve=OK)
    h = SchedulerHarness([a, b, c])
    h.add(make_node("n1"))
    result = h.schedule_one(make_pod("p"))
    node_calls = [e.split(":")[0] for e in log if "eserve" in e]
    # C.Reserve never ran, but its Unreserve does: Unreserve must be idempotent.
    assert node_calls == ["A.Reserve", "B.Reserve", "C.Unreserve", "B.Unreserve", "A.Unreserve"]
    assert result.outcome == "Unschedulable" and result.status.plugin == "B"
    assert not h.scheduler.cache.is_assumed(_uid(h, "p"))
    assert h.scheduler.cache.pod_count() == 0


@pytest.mark.parametrize("failing", ["permit", "pre_bind", "bind"])
def test_failure_after_reserve_unreserves_in_reverse_and_forgets(fake_plugin: Any, failing: str) -> None:
    log: list[str] = []
    a = fake_plugin("A", log, reserve=OK)
    b = fake_plugin("B", log, reserve=OK)
    failure = reject("nope") if failing == "permit" else Status.as_error("api down")
    f = fake_plugin("F", log, **{failing: failure})
    h = SchedulerHarness([a, b, f])
    h.add(make_node("n1"))
    result = h.schedule_one(make_pod("p"))
    unreserves = [e.split(":")[0] for e in log if "Unreserve" in e]
    assert unreserves == ["B.Unreserve", "A.Unreserve"]
    assert result.outcome == "Unschedulable"
    assert h.scheduler.cache.pod_count() == 0
    assert not h.cluster.get("Pod", "p", "default")["spec"].get("nodeName")


def test_binding_failure_forgets_the_pod_and_retries_it_after_backoff(fake_plugin: Any) -> None:
    attempts: list[float] = []

    def flaky_bind(p: Any, state: Any, pod: Any, node: str) -> Status:
        attempts.append(p.handle.clock.now())
        if len(attempts) == 1:
            return Status.as_error("connection reset")
        p.handle.cluster.bind(pod.namespace, pod.name, node, pod.uid)
        return Status()

    binder = fake_plugin("Binder", [], bind=flaky_bind)
    h = SchedulerHarness([binder])
    h.add(make_node("n1"), make_pod("p"))
    h.run_until_idle()
    assert len(attempts) == 2
    assert attempts[1] - attempts[0] == pytest.approx(1.0)  # podInitialBackoffSeconds
    assert h.cluster.get("Pod", "p", "default")["spec"]["nodeName"] == "n1"
    assert h.result(make_pod("p")).outcome == "Scheduled"
    assert h.scheduler.cache.pod_count() == 1 and not h.scheduler.cache.is_assumed(_uid(h, "p"))


def test_bind_skip_passes_to_the_next_binder_and_all_skipping_is_an_error(fake_plugin: Any) -> None:
    log: list[str] = []
    skip = fake_plugin("Skipper", log, bind=Status.skip())
    h = SchedulerHarness([skip, fake_plugin("Real", log, bind=lambda p, s, pod, n: _bind(p, pod, n))])
    h.add(make_node("n1"))
    assert h.schedule_one(make_pod("p")).scheduled
    assert [e for e in log if ".Bind:" in e] == ["Skipper.Bind:n1", "Real.Bind:n1"]

    only_skip = SchedulerHarness([fake_plugin("Skipper", [], bind=Status.skip())])
    only_skip.add(make_node("n1"))
    result = only_skip.schedule_one(make_pod("p"))
    assert result.status.code is Code.ERROR and "no bind plugin" in result.message


def test_pre_bind_changes_are_applied_as_one_patch_and_reported(fake_plugin: Any) -> None:
    def annotate(key: str, value: str) -> Any:
        def pre_bind(p: Any, state: Any, pod: Any, node: str) -> Status:
            state.pod_mutation.annotations[key] = value
            return Status()

        return pre_bind

    a = fake_plugin("A", [], pre_bind=annotate("example.com/a", "1"))
    b = fake_plugin("B", [], pre_bind=annotate("example.com/b", "2"))
    h = SchedulerHarness([a, b])
    h.add(make_node("n1"))
    writes = h.cluster.write_count
    result = h.schedule_one(make_pod("p"))
    assert result.annotations == {"example.com/a": "1", "example.com/b": "2"}
    pod = h.cluster.get("Pod", "p", "default")
    assert pod["metadata"]["annotations"] == {"example.com/a": "1", "example.com/b": "2"}
    assert h.cluster.write_count - writes == 3  # the pod's creation, one patch, one binding


def test_post_bind_runs_after_a_successful_bind_only(fake_plugin: Any) -> None:
    log: list[str] = []
    h = SchedulerHarness([fake_plugin("A", log, post_bind=None, pre_bind=lambda p, s, pod, n: OK)])
    h.add(make_node("n1"))
    h.schedule_one(make_pod("p"))
    assert log == ["A.PreBind:n1", "A.PostBind:n1"]


# --- Permit: wait, allow, reject, timeout ---------------------------------------------------------
def gang_permit(size: int, timeout: float) -> Any:
    """Wait until ``size`` pods labelled gang=g have reached Permit, then let them all go."""

    def permit(p: Any, state: Any, pod: Any, node: str) -> tuple[Status, float]:
        if pod.labels.get("gang") != "g":
            return Status(), 0.0
        waiting: list[Any] = []
        p.handle.iterate_waiting_pods(
            lambda wp: waiting.append(wp) if wp.pod.labels.get("gang") == "g" else None
        )
        if len(waiting) + 1 >= size:
            for wp in waiting:
                wp.allow(p.name)
            return Status(), 0.0
        return Status.wait("waiting for the gang"), timeout

    return permit


def test_permit_wait_holds_pods_until_the_last_member_allows_them(fake_plugin: Any) -> None:
    log: list[str] = []
    gang = fake_plugin("Gang", log, permit=gang_permit(3, 60), reserve=OK)
    h = SchedulerHarness([gang])
    h.add(make_node("n1"), make_node("n2"))
    first = h.schedule_one(make_pod("g1", labels={"gang": "g"}))
    assert first.outcome == "Waiting"
    assert h.handle.get_waiting_pod(_uid(h, "g1")) is not None
    assert h.scheduler.cache.is_assumed(_uid(h, "g1"))  # resources held while waiting
    assert h.schedule_one(make_pod("g2", labels={"gang": "g"})).outcome == "Waiting"
    assert h.schedule_one(make_pod("g3", labels={"gang": "g"})).scheduled
    for name in ("g1", "g2"):
        assert h.result(make_pod(name)).outcome == "Scheduled"
        assert h.cluster.get("Pod", name, "default")["spec"]["nodeName"]
    assert not [e for e in log if "Unreserve" in e]
    assert len(h.scheduler.waiting) == 0


def test_permit_timeout_on_the_virtual_clock_rejects_and_unreserves(fake_plugin: Any) -> None:
    log: list[str] = []
    gang = fake_plugin("Gang", log, permit=gang_permit(3, 30), reserve=OK)
    h = SchedulerHarness([gang])
    h.add(make_node("n1"), make_pod("g1", labels={"gang": "g"}))
    start = h.clock.now()
    h.run_until_idle()
    result = h.result(make_pod("g1"))
    assert result.outcome == "Unschedulable"
    assert result.message == "rejected due to timeout after waiting 30s at plugin Gang"
    assert h.clock.now() - start >= 30
    assert "Gang.Unreserve:n1" in log
    assert h.scheduler.cache.pod_count() == 0


def test_a_waiting_pod_can_be_rejected_by_another_plugin_call(fake_plugin: Any) -> None:
    log: list[str] = []
    gang = fake_plugin("Gang", log, permit=gang_permit(3, 600), reserve=OK)
    h = SchedulerHarness([gang])
    h.add(make_node("n1"))
    assert h.schedule_one(make_pod("g1", labels={"gang": "g"})).outcome == "Waiting"
    wp = h.handle.get_waiting_pod(_uid(h, "g1"))
    assert wp is not None and wp.pending_plugins() == ["Gang"]
    wp.reject("Gang", "gang member failed")
    h.scheduler._drain_bindings()
    result = h.result(make_pod("g1"))
    assert result.outcome == "Unschedulable" and result.message == "gang member failed"
    assert result.status.plugin == "Gang"
    assert "Gang.Unreserve:n1" in log
    assert h.scheduler.queue.where(_uid(h, "g1")) == "unschedulable"


def test_permit_rejection_unreserves_and_parks_the_pod(fake_plugin: Any) -> None:
    log: list[str] = []
    h = SchedulerHarness([fake_plugin("A", log, reserve=OK, permit=reject("denied"))])
    h.add(make_node("n1"))
    result = h.schedule_one(make_pod("p"))
    assert result.status.plugin == "A" and result.message == "denied"
    assert "A.Unreserve:n1" in log
    assert h.scheduler.queue.where(_uid(h, "p")) == "unschedulable"


# --- PreEnqueue -----------------------------------------------------------------------------------
def test_pre_enqueue_keeps_a_pod_out_until_an_event_lets_it_in(fake_plugin: Any) -> None:
    from koord_framework.scheduler.interface import ClusterEvent

    def gate(p: Any, pod: Any) -> Status:
        n = len(p.handle.node_infos()) if p.handle.snapshot.node_list else 0
        return (
            Status() if pod.annotations.get("ready") == "yes" else Status(Code.PENDING, (f"not ready {n}",))
        )

    g = fake_plugin("Gate", [], pre_enqueue=gate, events=[ClusterEvent("Pod", "Update")])
    h = SchedulerHarness([g])
    h.add(make_node("n1"), make_pod("p"))
    h.run_until_idle()
    assert h.scheduler.queue.gate_of(_uid(h, "p")) == "Gate"
    assert h.result(make_pod("p")).outcome == "Unschedulable"
    h.cluster.patch("Pod", "p", "default", {"metadata": {"annotations": {"ready": "yes"}}})
    h.run_until_idle()
    assert h.cluster.get("Pod", "p", "default")["spec"]["nodeName"] == "n1"


def _bind(p: Any, pod: Any, node: str) -> Status:
    p.handle.cluster.bind(pod.namespace, pod.name, node, pod.uid)
    return Status()


def _uid(h: SchedulerHarness, name: str) -> str:
    return str(h.cluster.get("Pod", name, "default")["metadata"]["uid"])


def test_annotations_are_reported_when_a_pre_bind_plugin_applies_the_patch_itself(fake_plugin: Any) -> None:
    """Koordinator's DefaultPreBind patches the batched changes, then empties the mutation."""
    from koord_framework.scheduler.cycle_state import PodMutation

    def write(p: Any, state: Any, pod: Any, node: str) -> Status:
        state.pod_mutation.annotations["example.com/cpuset"] = "0-3"
        return Status()

    def apply(p: Any, state: Any, pod: Any, node: str) -> Status:
        p.handle.cluster.patch("Pod", pod.name, pod.namespace, state.pod_mutation.as_merge_patch())
        state.pod_mutation = PodMutation()
        return Status()

    h = SchedulerHarness(
        [fake_plugin("Numa", [], pre_bind=write), fake_plugin("DefaultPreBind", [], pre_bind=apply)]
    )
    h.add(make_node("n1"))
    writes = h.cluster.write_count
    result = h.schedule_one(make_pod("p"))
    assert result.annotations == {"example.com/cpuset": "0-3"}
    assert h.cluster.write_count - writes == 3  # created, patched once (not twice), bound


def test_the_harness_fixture_builds_fresh_harnesses(koord_scheduler_harness: Any, fake_plugin: Any) -> None:
    a = koord_scheduler_harness([fake_plugin("A", [], filter=OK)], now="2024-06-01T00:00:00Z")
    b = koord_scheduler_harness([fake_plugin("A", [], filter=OK)])
    assert a.cluster is not b.cluster
    assert a.clock.now() == 1_717_200_000.0 and b.clock.now() == 1_704_067_200.0


def test_a_simulation_ends_with_a_pod_still_waiting_rejected_at_its_permit_deadline(fake_plugin: Any) -> None:
    """When nothing else can happen, the virtual clock jumps to the Permit deadline of a pod still waiting:
    nothing would ever allow it, so its timeout decides, and it is reported rejected, not holding a node."""
    tries: list[int] = []

    def permit(p: Any, state: Any, pod: Any, node: str) -> tuple[Status, float]:
        tries.append(1)
        if len(tries) < 3:
            return Status.as_error("not yet"), 0.0
        return Status.wait("for a partner that never comes"), 600.0

    h = SchedulerHarness([fake_plugin("Lonely", [], permit=permit)])
    h.add(make_node("n1"), make_pod("p"))
    start = h.clock.now()
    h.run_until_idle()
    result = h.result(make_pod("p"))
    assert result.outcome == "Unschedulable" and result.node is None
    assert result.message == "rejected due to timeout after waiting 600s at plugin Lonely"
    assert not h.scheduler.waiting.list()
    # The two backoffs, then the 600 s wait (the pod is stalled: its retries no longer move the clock).
    assert h.clock.now() - start == pytest.approx(603.0)


def test_a_vectorised_form_without_its_extension_point_is_refused() -> None:
    from koord_framework.errors import PluginLoadError
    from koord_framework.scheduler.interface import PreFilterPlugin, SchedulerPlugin, VectorFilter

    class HalfFit(SchedulerPlugin, PreFilterPlugin, VectorFilter):  # forgot FilterPlugin
        name = "HalfFit"

        def pre_filter(self, state: Any, pod: Any, nodes: Any) -> Any:
            return None, Status()

        def filter_all(self, state: Any, pod: Any, table: Any, rows: Any) -> Any:
            return rows < 0

    with pytest.raises(PluginLoadError, match="subclasses VectorFilter but not FilterPlugin"):
        SchedulerHarness([HalfFit])
