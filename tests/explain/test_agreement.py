"""``koord explain pod`` agrees with what the scheduler actually did, pod by pod.

Each bench workload (``bench``'s generated clusters, scaled down to 50 nodes) is scheduled one pod at a time
by a scheduler as ``koord simulate`` runs it. Before each cycle the cluster is copied as ``koord explain``
copies a live one (``read_only_copy``: only lists reach the source), and the pod the scheduler is about to
schedule is explained on the copy; then the scheduler schedules it. The explained node is the scheduler's
(or one tied with it at the best total: the scheduler draws among ties at random), and an unschedulable pod
is unschedulable for the same reasons.

Pods the scheduler holds assumed but not bound (waiting at Permit for their gang) are in its cache only: the
copy gets them bound to their node, the cluster as the scheduler sees it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench import workloads as wl
from bench.__main__ import all_workloads
from bench.scheduler_perf import Workload
from koord_framework.cluster.clock import VirtualClock, parse_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.explain.pod import explain_pod
from koord_framework.explain.source import read_only_copy
from koord_framework.scheduler.frameworkext import ANNOTATION_RESERVATION_ALLOCATED, is_reserve_pod
from koord_framework.scheduler.interface import QueuedPodInfo
from koord_framework.scheduler.scheduler import Scheduler

NODES, INIT, PODS = 50, 20, 12
EXAMPLES = Path(__file__).resolve().parents[2] / "configs" / "examples" / "cluster"
SKIP = {"rss"}
"""``rss`` is ``basic`` at another size (its point is memory): nothing more to agree on."""


def _workloads() -> list[Workload]:
    return [w for name, w in sorted(all_workloads().items()) if name not in SKIP]


def _scheduler_view(cluster: MemoryCluster, sched: Scheduler) -> MemoryCluster:
    copy = read_only_copy(cluster, sched.clock.now())
    for wp in sched.waiting.list():
        pod = wp.pod
        copy.bind(pod.namespace, pod.name, wp.node_name, pod.uid)
    return copy


def _replay(workload: Workload, init: int = INIT) -> list[tuple[str, Any, Any]]:
    scenario = workload.build(NODES, init, PODS)
    cluster = MemoryCluster(VirtualClock(parse_time(wl.NOW)), seed=0)
    for obj in scenario.setup:
        cluster.create(obj)
    for obj in scenario.measured:
        cluster.create(obj)
    return replay(cluster, workload.config(), 2 * PODS)  # a gang's members may come back: a bound


def replay(cluster: MemoryCluster, config: Any, cycles: int) -> list[tuple[str, Any, Any]]:
    """Schedule ``cluster`` one cycle at a time (at most ``cycles``), explaining each pod on a copy of the
    cluster taken just before its cycle: (pod, the scheduler's outcome, the explanation) per cycle."""
    sched = Scheduler.from_config(cluster, config, seed=0, record_outcomes=True)
    popped: list[str] = []
    cycle = sched._scheduling_cycle

    def spy(info: QueuedPodInfo) -> None:
        popped.append(info.pod.uid)
        cycle(info)

    sched._scheduling_cycle = spy  # type: ignore[method-assign]
    sched.start()
    compared: list[tuple[str, Any, Any]] = []
    try:
        for _ in range(cycles):
            view = _scheduler_view(cluster, sched)
            popped.clear()
            if not sched.schedule_one():
                break
            if not popped:
                continue
            uid = popped[0]
            outcome = sched.outcomes.get(uid)
            if outcome is None or is_reserve_pod(outcome.pod):  # skipped; a Reservation (not a pod)
                continue
            explained = explain_pod(view, config, outcome.pod.key)
            compared.append((outcome.pod.key, outcome, explained))
    finally:
        sched.close()
    return compared


def _fit_error(message: str) -> str:
    """The Filter verdicts of an unschedulable pod's message (``0/N nodes are available: ...``), without
    what PostFilter adds: Coscheduling says a gang was rejected earlier in the same round, which lives in
    the running scheduler's memory only, not in the cluster an explanation is built from."""
    return message.split(". ", 1)[0] if message.startswith("0/") else message


GANG_REJECTED = re.compile(r'gets rejected due to member Pod "([^"]+)" is unschedulable')
"""Coscheduling rejects the other members of a gang once one member failed in the scheduler's round (its
own memory, not the cluster's): the one case where the running scheduler knows more than any copy."""


def assert_agree(compared: list[tuple[str, Any, Any]]) -> None:
    assert compared, "no pod was scheduled"
    unschedulable: set[str] = set()
    for key, outcome, ex in compared:
        sibling = GANG_REJECTED.search(outcome.message) if outcome.plugin == "Coscheduling" else None
        if outcome.node is None and sibling is not None:
            assert sibling.group(1) in unschedulable, f"{key}: {outcome.message}"
            continue
        if outcome.node is None:
            unschedulable.add(key)
            assert ex.node is None, f"{key}: scheduler found no node, explain chose {ex.node}"
            assert ex.status == "Unschedulable"
            assert _fit_error(ex.message) == _fit_error(outcome.message), key
        else:
            assert ex.node is not None, f"{key}: scheduler chose {outcome.node}, explain: {ex.message}"
            assert outcome.node in {ex.node, *ex.tied_with}, (
                f"{key}: scheduler chose {outcome.node}, explain {ex.node} (tied: {ex.tied_with})"
            )
            chosen = next(v for v in ex.nodes if v.name == outcome.node)
            assert chosen.feasible and chosen.rank == 1, key


@pytest.mark.parametrize("workload", _workloads(), ids=lambda w: w.name)
def test_explain_agrees_with_the_scheduler(workload: Workload) -> None:
    assert_agree(_replay(workload))


def test_explain_agrees_on_the_example_cluster() -> None:
    from koord_framework.cli.common import newest_metric_time, shipped_config

    paths = [str(EXAMPLES)]
    cluster = MemoryCluster(VirtualClock(newest_metric_time(paths) or 0.0), seed=0)
    cluster.load(paths)
    compared = replay(cluster, shipped_config("scheduler", "explain"), 80)
    assert len(compared) >= 30
    assert any(o.node is None for _, o, _ in compared), "the example has unschedulable pods"
    assert_agree(compared)


def test_explain_agrees_on_a_full_cluster() -> None:
    """``basic`` with the bound pods filling all but 5 pod slots of CPU: the first pods fit where room is
    left, the rest are unschedulable, with the scheduler's own FitError message."""
    per_node = 40  # 4 CPUs / 100m
    compared = _replay(all_workloads()["basic"], init=NODES * per_node - 5)
    assert sum(1 for _, o, _ in compared if o.node is None) >= 5
    for key, outcome, ex in compared:
        if outcome.node is None:
            assert ex.node is None and ex.message == outcome.message, key
            assert {g["plugin"] for g in ex.groups()} == {"NodeResourcesFit"}
        else:
            assert outcome.node in {ex.node, *ex.tied_with}, key


def test_explain_names_the_reservation_the_scheduler_took() -> None:
    """The reservation workload: where the explained node is the scheduler's, Reservation's section names
    the reservation the scheduler's Reserve took (or none when it took none)."""
    compared = _replay(all_workloads()["reservation"])
    took = 0
    for key, outcome, ex in compared:
        if outcome.node is None or ex.node != outcome.node:
            continue  # a tie drawn the other way: another node, another reservation
        allocated = outcome.annotations.get(ANNOTATION_RESERVATION_ALLOCATED)
        sections = [s.section for s in ex.sections if s.plugin == "Reservation" and s.section is not None]
        if allocated is None:
            assert all(s.data["reservation"] is None for s in sections), key
            continue
        took += 1
        assert sections, f"{key}: took {allocated}, explain has no Reservation section"
        assert sections[0].data["reservation"] == json.loads(allocated)["name"], key
        nominated = [c for c in sections[0].data["candidates"] if c["verdict"] == "nominated"]
        assert [c["name"] for c in nominated] == [sections[0].data["reservation"]], key
    assert took > 0, "no pod of the workload took a reservation"
