"""The scheduler as a whole: vectorised and per-node paths agree, node sampling, profiles, seeds, async
binding, events, termination of simulations, metrics."""

from __future__ import annotations

import itertools
import random
import threading
from typing import Any, ClassVar

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import KoordError
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.framework import PluginLayout
from koord_framework.scheduler.interface import (
    BindPlugin,
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    SchedulerPlugin,
    ScorePlugin,
    VectorFilter,
    VectorScore,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.scheduler import (
    STALL_ATTEMPTS,
    ProfileSpec,
    Scheduler,
    num_feasible_nodes_to_find,
)
from koord_framework.scheduler.status import Code, Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort, SchedulerHarness

RESOURCES = ("cpu", "memory")


# --- a resource-fit plugin in both forms ----------------------------------------------------------
class FitPerNode(SchedulerPlugin, FilterPlugin, ScorePlugin, EnqueueExtensions):
    """Requests must fit; score = LeastAllocated over cpu and memory (integer arithmetic)."""

    name: ClassVar[str] = "Fit"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        for r in RESOURCES:
            want = pod.requests.get(r, 0)
            if want and node.requested.get(r, 0) + want > node.allocatable.get(r, 0):
                return Status.unschedulable(f"Insufficient {r}")
        return Status()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        total = 0
        for r in RESOURCES:
            alloc = node.allocatable.get(r, 0)
            used = node.requested.get(r, 0) + pod.requests.get(r, 0)
            total += (alloc - used) * 100 // alloc if alloc and used <= alloc else 0
        return total // len(RESOURCES), Status()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "*")]


class FitVector(FitPerNode, VectorFilter, VectorScore):
    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        ok = np.ones(rows.size, dtype=bool)
        for r in RESOURCES:
            want = pod.requests.get(r, 0)
            if want:
                ok &= table.requested_of(r)[rows] + want <= table.allocatable_of(r)[rows]
        return ok

    def score_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> Int64Array:
        total = np.zeros(rows.size, dtype=np.int64)
        for r in RESOURCES:
            alloc = table.allocatable_of(r)[rows]
            used = table.requested_of(r)[rows] + pod.requests.get(r, 0)
            safe = np.where(alloc > 0, alloc, 1)
            total += np.where((alloc > 0) & (used <= alloc), (alloc - used) * 100 // safe, 0)
        return total // len(RESOURCES)


class ZoneFilter(SchedulerPlugin, FilterPlugin):
    """Per-node only: pods labelled zone=X fit only nodes labelled zone=X."""

    name: ClassVar[str] = "Zone"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        want = pod.labels.get("zone")
        if want and node.node.labels.get("zone") != want:
            return Status.unresolvable("node(s) didn't match zone")
        return Status()


def random_cluster(
    seed: int, nodes: int = 40, pods: int = 120
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    node_objs = [
        make_node(
            f"n{i:03d}",
            cpu=str(rng.choice([2, 4, 8])),
            memory=f"{rng.choice([4, 8, 16])}Gi",
            labels={"zone": rng.choice("ab")},
        )
        for i in range(nodes)
    ]
    bound = [
        make_pod(
            f"bound-{i}",
            cpu=f"{rng.randrange(100, 900)}m",
            memory=f"{rng.randrange(64, 900)}Mi",
            node=f"n{rng.randrange(nodes):03d}",
        )
        for i in range(nodes)
    ]
    pending = []
    for i in range(pods):
        labels = {"zone": rng.choice("ab")} if rng.random() < 0.3 else {}
        pending.append(
            make_pod(
                f"p{i:03d}",
                cpu=f"{rng.randrange(100, 3000)}m",
                memory=f"{rng.randrange(64, 4096)}Mi",
                labels=labels,
            )
        )
    return node_objs + bound, pending


def run_cluster(
    plugins: list[Any], seed: int, *, sched_seed: int = 0, explain: bool = False, pct: int = 0
) -> Scheduler:
    objs, pending = random_cluster(seed)
    cluster = MemoryCluster(VirtualClock(0.0), seed=seed)
    for o in objs + pending:
        cluster.create(o)
    layout = PluginLayout.every_point([*plugins, HarnessQueueSort, HarnessBinder])
    s = Scheduler(
        cluster,
        [ProfileSpec("default-scheduler", layout)],
        seed=sched_seed,
        explain=explain,
        record_outcomes=True,
        percentage_of_nodes_to_score=pct,
    )
    s.run_until_idle()
    return s


def placements(s: Scheduler) -> dict[str, Any]:
    return {o.pod.name: (o.status, o.node, o.message) for o in s.outcomes.values()}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_vectorised_and_per_node_plugins_give_identical_results(seed: int) -> None:
    vec = run_cluster([FitVector, ZoneFilter], seed, explain=True)
    per = run_cluster([FitPerNode, ZoneFilter], seed, explain=True)
    assert placements(vec) == placements(per)
    for uid, o in vec.outcomes.items():
        other = per.outcomes[uid]
        assert o.scores == other.scores and o.totals == other.totals
        assert {n: (s.code, s.plugin, s.reasons) for n, s in (o.filter or {}).items()} == {
            n: (s.code, s.plugin, s.reasons) for n, s in (other.filter or {}).items()
        }
    assert any(o.status == "Unschedulable" for o in vec.outcomes.values())  # the rejection paths ran too


def test_find_feasible_agrees_on_random_tables() -> None:
    rng = random.Random(11)
    for trial in range(20):
        objs, pending = random_cluster(100 + trial, nodes=rng.randrange(5, 60), pods=3)
        start, k = rng.randrange(100), rng.randrange(1, 40)
        results = []
        for fit in (FitVector, FitPerNode):
            h = SchedulerHarness([fit, ZoneFilter])
            h.add(*objs)
            h.scheduler.cache.update_snapshot(h.scheduler.snapshot)
            snap = h.scheduler.snapshot
            pod = PodInfo.from_manifest(pending[0])
            out = h.framework.find_feasible(
                CycleState(), pod, snap.rows, start=start, num_to_find=k, want_reasons=True
            )
            statuses = {n: (s.plugin, s.reasons) for n, s in out.statuses.items()}
            results.append((out.feasible.tolist(), out.processed, statuses))
        assert results[0] == results[1]


# --- node sampling --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (0, 50, 50),
        (0, 100, 100),
        (0, 1000, 420),
        (0, 5000, 500),
        (0, 10000, 500),
        (30, 1000, 300),
        (5, 1000, 100),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


class CountingFilter(SchedulerPlugin, FilterPlugin):
    name: ClassVar[str] = "Counting"
    seen: ClassVar[list[str]] = []

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        CountingFilter.seen.append(node.name)
        return Status()


@pytest.mark.parametrize(("pct", "examined"), [(0, 420), (20, 200)])
def test_percentage_of_nodes_to_score_limits_the_search_and_rotates(pct: int, examined: int) -> None:
    CountingFilter.seen = []
    h = SchedulerHarness([CountingFilter], percentage_of_nodes_to_score=pct)
    h.scheduler.explain = False  # explain searches every node
    h.add(*[make_node(f"n{i:04d}") for i in range(1000)])
    h.schedule_one(make_pod("a"))
    first = list(CountingFilter.seen)
    assert len(first) == examined == len(set(first))
    assert first[0] == "n0000"
    CountingFilter.seen = []
    h.schedule_one(make_pod("b"))
    assert CountingFilter.seen[0] == f"n{examined:04d}"  # the next search starts where this one stopped


def test_explain_searches_and_scores_every_feasible_node() -> None:
    CountingFilter.seen = []
    h = SchedulerHarness([CountingFilter, FitVector])
    h.add(*[make_node(f"n{i:04d}") for i in range(300)])
    result = h.schedule_one(make_pod("a", cpu="1"))
    assert len(CountingFilter.seen) == 300 and len(result.scores) == 300


def test_explain_scores_a_single_feasible_node() -> None:
    h = SchedulerHarness([FitVector])
    h.add(make_node("small", cpu="1"), make_node("big", cpu="8"))
    result = h.schedule_one(make_pod("a", cpu="4"))
    assert result.node == "big" and set(result.scores) == {"big"}
    assert result.scores["big"]["Fit"].raw == result.totals["big"]


# --- profiles and seeds ---------------------------------------------------------------------------
def test_pods_go_to_the_profile_their_scheduler_name_names() -> None:
    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    cluster.create(make_node("a", labels={"zone": "a"}))
    cluster.create(make_node("b", labels={"zone": "b"}))
    only_a = type(
        "OnlyA",
        (SchedulerPlugin, FilterPlugin),
        {
            "name": "OnlyA",
            "filter": lambda self, st, pod, node: (
                Status() if node.name == "a" else Status.unschedulable("not a")
            ),
        },
    )
    profiles = [
        ProfileSpec("sched-a", PluginLayout.every_point([only_a, HarnessQueueSort, HarnessBinder])),
        ProfileSpec("sched-any", PluginLayout.every_point([HarnessQueueSort, HarnessBinder])),
    ]
    for i in range(4):
        cluster.create(make_pod(f"pa{i}", scheduler_name="sched-a"))
    cluster.create(make_pod("other", scheduler_name="someone-else"))
    s = Scheduler(cluster, profiles, record_outcomes=True)
    s.run_until_idle()
    for i in range(4):
        assert cluster.get("Pod", f"pa{i}", "default")["spec"]["nodeName"] == "a"
    assert "nodeName" not in cluster.get("Pod", "other", "default")["spec"]
    assert {o.profile for o in s.outcomes.values()} == {"sched-a"}
    assert "pa0" in {o.pod.name for o in s.outcomes.values()}


def test_one_seed_one_output_and_seeds_break_ties_differently() -> None:
    first = placements(run_cluster([FitVector], 5, sched_seed=42))
    again = placements(run_cluster([FitVector], 5, sched_seed=42))
    assert first == again
    # identical empty nodes: every pod's choice is a tie among all of them
    runs = []
    for seed in (1, 2):
        h = SchedulerHarness([HarnessQueueSort], seed=seed)
        h.add(*[make_node(f"n{i}") for i in range(20)], *[make_pod(f"p{i}") for i in range(10)])
        h.run_until_idle()
        runs.append(
            {p: h.cluster.get("Pod", p, "default")["spec"]["nodeName"] for p in (f"p{i}" for i in range(10))}
        )
    assert runs[0] != runs[1]


# --- asynchronous binding -------------------------------------------------------------------------
class GatedBinder(SchedulerPlugin, BindPlugin):
    """Binds through the cluster, but the pod named ``hold`` waits until the test opens the gate."""

    name: ClassVar[str] = "GatedBinder"
    gate: ClassVar[threading.Event] = threading.Event()
    entered: ClassVar[threading.Event] = threading.Event()

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        if pod.name == "hold":
            GatedBinder.entered.set()
            GatedBinder.gate.wait(10)
        try:
            self.handle.cluster.bind(pod.namespace, pod.name, node_name, pod.uid)
        except KoordError as exc:
            return Status.as_error(exc)
        return Status()


def test_binding_runs_concurrently_with_the_next_scheduling_cycle_and_never_double_binds() -> None:
    GatedBinder.gate = threading.Event()
    GatedBinder.entered = threading.Event()
    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    for name in ("n1", "n2"):
        cluster.create(make_node(name, cpu="2"))
    layout = PluginLayout.every_point([FitVector, HarnessQueueSort, GatedBinder])
    s = Scheduler(
        cluster, [ProfileSpec("default-scheduler", layout)], async_binding=True, record_outcomes=True
    )
    s.start()
    try:
        cluster.create(make_pod("hold", cpu="1"))
        assert s.schedule_one()
        assert GatedBinder.entered.wait(5)
        held_on = s.outcomes[cluster.get("Pod", "hold", "default")["metadata"]["uid"]].node
        # While "hold" is stuck in Bind, the next pod is scheduled and bound, counting "hold" as assumed.
        cluster.create(make_pod("next", cpu="1"))
        assert s.schedule_one()
        s.wait_for_bindings(timeout=0)  # does not wait for the stuck one
        # Meanwhile somebody else binds "hold" to the other node.
        other = "n2" if held_on == "n1" else "n1"
        cluster.bind("default", "hold", other)
        GatedBinder.gate.set()
        assert s.wait_for_bindings(timeout=10)
    finally:
        GatedBinder.gate.set()
        s.close()
    hold = cluster.get("Pod", "hold", "default")
    assert hold["spec"]["nodeName"] == other  # the scheduler's bind got a ConflictError, not a second binding
    assert cluster.bind_count == 2
    uid = hold["metadata"]["uid"]
    assert not s.cache.is_assumed(uid)
    assert s.cache.get_pod(uid).node_name == other  # type: ignore[union-attr]
    assert s.queue.where(uid) == ""  # bound by someone else: not requeued
    per_node = {ni.name: len(ni.pods) for ni in s.cache.node_infos()}
    assert sum(per_node.values()) == 2


# --- events and termination -----------------------------------------------------------------------
def test_a_deleted_pod_frees_room_for_a_parked_one() -> None:
    h = SchedulerHarness([FitVector])
    h.add(make_node("n1", cpu="2"), make_pod("old", cpu="2", node="n1"), make_pod("new", cpu="2"))
    h.run_until_idle()
    assert h.result(make_pod("new")).outcome == "Unschedulable"
    h.cluster.delete("Pod", "old", "default")
    h.run_until_idle()
    assert h.cluster.get("Pod", "new", "default")["spec"]["nodeName"] == "n1"


def test_run_until_idle_stops_when_retrying_cannot_help() -> None:
    calls: list[float] = []

    class Broken(SchedulerPlugin, FilterPlugin):
        name: ClassVar[str] = "Broken"

        def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
            calls.append(self.handle.clock.now())
            return Status(Code.ERROR, ("backend unavailable",))

    h = SchedulerHarness([Broken])
    h.add(make_node("n1"), make_pod("p"))
    h.run_until_idle()
    assert len(calls) == STALL_ATTEMPTS
    assert [round(b - a, 6) for a, b in itertools.pairwise(calls)] == [1.0, 2.0]
    assert h.result(make_pod("p")).outcome == "Unschedulable"


def test_scheduler_metrics_go_to_the_given_registry() -> None:
    registry = CollectorRegistry()
    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    cluster.create(make_node("n1", cpu="64"))
    for i in range(20):
        cluster.create(make_pod(f"p{i}", cpu="1"))
    cluster.create(make_pod("huge", cpu="100"))
    layout = PluginLayout.every_point([FitVector, HarnessQueueSort, HarnessBinder])
    s = Scheduler(cluster, [ProfileSpec("default-scheduler", layout)], metrics_registry=registry)
    s.run_until_idle()
    labels = {"result": "scheduled", "profile": "default-scheduler"}
    assert registry.get_sample_value("koord_scheduler_schedule_attempts_total", labels) == 20
    assert (
        registry.get_sample_value(
            "koord_scheduler_schedule_attempts_total",
            {"result": "unschedulable", "profile": "default-scheduler"},
        )
        == 1
    )
    sampled = registry.get_sample_value(
        "koord_scheduler_plugin_duration_seconds_count",
        {"plugin": "Fit", "extension_point": "Filter", "status": "Success"},
    )
    assert sampled == 2  # 21 cycles, every 10th sampled
    assert registry.get_sample_value("koord_scheduler_pending_pods", {"queue": "unschedulable"}) == 1


def test_the_live_loop_schedules_pods_as_they_arrive_on_the_wall_clock() -> None:
    from koord_framework.cluster.clock import WallClock

    cluster = MemoryCluster(WallClock(), seed=0)
    cluster.create(make_node("n1"))
    layout = PluginLayout.every_point([FitVector, HarnessQueueSort, HarnessBinder])
    s = Scheduler(cluster, [ProfileSpec("default-scheduler", layout)], async_binding=True)
    stop = threading.Event()
    loop = threading.Thread(target=s.run, args=(stop,), kwargs={"poll": 0.05})
    loop.start()
    try:
        for i in range(5):
            cluster.create(make_pod(f"p{i}", cpu="100m"))
        deadline = threading.Event()
        for _ in range(200):
            if all(cluster.get("Pod", f"p{i}", "default")["spec"].get("nodeName") for i in range(5)):
                break
            deadline.wait(0.05)
    finally:
        stop.set()
        loop.join(5)
        s.close()
    assert not loop.is_alive()
    assert all(cluster.get("Pod", f"p{i}", "default")["spec"].get("nodeName") == "n1" for i in range(5))


def test_a_concurrent_controller_blocked_in_its_tick_does_not_hold_up_the_live_loop() -> None:
    """A status writer waiting behind the rate limit (here: on an Event) must not stop the scheduling loop;
    ``close`` waits for the tick in flight, so its write lands before the caller lets the Lease go."""
    from koord_framework.cluster.clock import WallClock
    from koord_framework.scheduler.interface import BackgroundController, ControllerProvider

    release, entered = threading.Event(), threading.Event()
    ticks: list[str] = []

    class SlowWriter(BackgroundController):
        concurrent = True

        def tick(self, now: float) -> float | None:
            entered.set()
            release.wait(10)
            ticks.append(threading.current_thread().name)
            return now + 0.05

    class WithController(FitVector, ControllerProvider):
        def new_controllers(self) -> list[BackgroundController]:
            return [SlowWriter()]

    cluster = MemoryCluster(WallClock(), seed=0)
    cluster.create(make_node("n1"))
    layout = PluginLayout.every_point([WithController, HarnessQueueSort, HarnessBinder])
    s = Scheduler(cluster, [ProfileSpec("default-scheduler", layout)], async_binding=True)
    stop = threading.Event()
    loop = threading.Thread(target=s.run, args=(stop,), kwargs={"poll": 0.05})
    loop.start()
    try:
        assert entered.wait(10), "the controller never ticked"
        for i in range(3):
            cluster.create(make_pod(f"p{i}", cpu="100m"))
        bound = threading.Event()
        for _ in range(200):  # while the controller is still blocked
            if all(cluster.get("Pod", f"p{i}", "default")["spec"].get("nodeName") for i in range(3)):
                bound.set()
                break
            stop.wait(0.05)
        assert bound.is_set() and not ticks, "scheduling waited for the controller"
    finally:
        release.set()
        stop.set()
        loop.join(5)
        s.close()
    assert not loop.is_alive()
    assert ticks and all(name == "controller-SlowWriter" for name in ticks)
    assert not any(t.is_alive() for t in threading.enumerate() if t.name == "controller-SlowWriter")


def test_preemption_nominates_evicts_and_the_pod_lands_on_its_nominated_node() -> None:
    from koord_framework.scheduler.interface import PostFilterPlugin, PostFilterResult

    class Evict(SchedulerPlugin, PostFilterPlugin):
        """Deletes the lower-priority pods on the first node and nominates it."""

        name: ClassVar[str] = "Evict"

        def post_filter(self, state: CycleState, pod: PodInfo, filtered: Any) -> Any:
            node = self.handle.node_info("n2")
            assert node is not None
            victims = [p for p in node.pods.values() if p.priority_value < pod.priority_value]
            if not victims:
                return None, Status.unschedulable("preemption: no victims")
            for v in victims:
                self.handle.cluster.delete("Pod", v.name, v.namespace)
            return PostFilterResult("n2"), Status()

    h = SchedulerHarness([FitVector, Evict])
    h.scheduler.explain = False
    h.add(
        make_node("n1", cpu="2"),
        make_node("n2", cpu="2"),
        make_pod("keep", cpu="2", node="n1", priority=100),
        make_pod("victim", cpu="2", node="n2", priority=1),
        make_pod("vip", cpu="2", priority=50),
    )
    h.run_until_idle()
    assert h.cluster.try_get("Pod", "victim", "default") is None
    vip = h.cluster.get("Pod", "vip", "default")
    assert vip["spec"]["nodeName"] == "n2" and vip["status"]["nominatedNodeName"] == "n2"
    assert h.scheduler.queue.nominated_node_of(vip["metadata"]["uid"]) == ""  # cleared once placed
