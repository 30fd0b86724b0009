"""Shared eviction: release accounting across tasks, no pod evicted twice, refusals reported."""

from __future__ import annotations

from typing import Any

import pytest

from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY, CPU, MEMORY, MID_CPU
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.eviction import (
    Evictor,
    EvictTask,
    PodEvictInfo,
    ReleaseTarget,
    eviction_policy_allowed,
    kill_and_evict_pods,
    pod_eviction_priority,
    pod_priority_label,
    request_type_and_value,
    sort_by_eviction_order,
    task_remaining,
)
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.states import PodMeta
from koord_framework.testing import make_pdb
from koord_framework.testing.hosttree import make_running_pod

LAYOUT = CgroupLayout(HostPaths.under("/nonexistent"), CgroupVersion.V1, CgroupDriver.SYSTEMD)


def world(*pods: dict[str, Any]) -> tuple[MemoryCluster, Evictor, list[PodMeta]]:
    cluster = MemoryCluster(VirtualClock(1000.0))
    for p in pods:
        cluster.create(p)
    return cluster, Evictor(cluster, clock=cluster.clock), [PodMeta.from_manifest(p, LAYOUT) for p in pods]


def info(meta: PodMeta, used: int) -> PodEvictInfo:
    return PodEvictInfo(pod=meta, memory_used=used)


def used_fn(i: PodEvictInfo) -> dict[str, int]:
    return {MEMORY: i.memory_used}


def test_release_accumulates_across_tasks_and_nobody_is_evicted_twice() -> None:
    cluster, evictor, (a, b, c) = world(make_running_pod("a"), make_running_pod("b"), make_running_pod("c"))
    t1 = EvictTask("first", [info(a, 5), info(b, 5)], ReleaseTarget.RESOURCE_USED, {MEMORY: 8}, used_fn)
    t2 = EvictTask("second", [info(b, 5), info(c, 5)], ReleaseTarget.RESOURCE_USED, {MEMORY: 12}, used_fn)
    released, newly = kill_and_evict_pods(evictor, [t1, t2])
    # t1 evicts a and b (10 >= 8); t2 still needs 2 more: b is done already, so c
    assert newly and released[ReleaseTarget.RESOURCE_USED] == {MEMORY: 15}
    assert [e.name for e in cluster.evictions] == ["a", "b", "c"]
    assert cluster.evictions[0].reason == "first, kill pod: a"
    assert task_remaining(t2.to_release, released[ReleaseTarget.RESOURCE_USED]) == {}


def test_one_pod_releases_the_max_of_what_tasks_attribute_to_it() -> None:
    _, evictor, (a,) = world(make_running_pod("a"))
    t1 = EvictTask("x", [info(a, 0)], ReleaseTarget.RESOURCE_USED, {MEMORY: 1}, lambda i: {MEMORY: 3})
    t2 = EvictTask("y", [], ReleaseTarget.RESOURCE_USED, {MEMORY: 1}, lambda i: {MEMORY: 7})
    released, _ = kill_and_evict_pods(evictor, [t1, t2])
    assert released[ReleaseTarget.RESOURCE_USED] == {MEMORY: 7}


def test_pods_evicted_earlier_count_as_released() -> None:
    cluster, evictor, (a, b) = world(make_running_pod("a"), make_running_pod("b"))
    assert evictor.evict(a, "earlier round")
    task = EvictTask("now", [info(a, 5), info(b, 5)], ReleaseTarget.RESOURCE_USED, {MEMORY: 4}, used_fn)
    released, newly = kill_and_evict_pods(evictor, [task])
    assert not newly and released[ReleaseTarget.RESOURCE_USED] == {MEMORY: 5}
    assert [e.name for e in cluster.evictions] == ["a"]


def test_evictor_never_evicts_twice_and_reports_refusals() -> None:
    pod = make_running_pod("db", labels={"app": "db"})
    cluster, evictor, (db,) = world(pod)
    cluster.create(make_pdb("db", match_labels={"app": "db"}, min_available=1))
    assert evictor.evict(db, "memory pressure") is False  # the budget refuses
    assert cluster.evictions == []
    (record,) = evictor.records
    assert not record.ok and record.error
    cluster.delete("PodDisruptionBudget", "db", "default")
    assert evictor.evict(db, "memory pressure") is True
    assert evictor.evict(db, "memory pressure") is True  # already evicted: no second call
    assert len(cluster.evictions) == 1 and cluster.evictions[0].requested_by == "koordlet"
    evictor.forget_gone([])
    assert not evictor.is_evicted(db)


def test_without_a_cluster_nothing_is_evicted() -> None:
    _, _, (a,) = world(make_running_pod("a"))
    ev = Evictor(None)
    assert ev.evict(a, "x") is False and not ev.is_evicted(a)


def test_pod_helpers() -> None:
    batch = PodMeta.from_manifest(
        make_running_pod("b", qos="BE", requests={BATCH_CPU: "2000", BATCH_MEMORY: "1Gi"}, priority=5500),
        LAYOUT,
    )
    mid = PodMeta.from_manifest(make_running_pod("m", requests={MID_CPU: "1000"}, priority=7500), LAYOUT)
    prod = PodMeta.from_manifest(make_running_pod("p", qos="LS", requests={CPU: "1500m"}), LAYOUT)
    assert request_type_and_value(batch, CPU) == (BATCH_CPU, 2000)
    assert request_type_and_value(batch, MEMORY) == (BATCH_MEMORY, 1024**3)
    assert request_type_and_value(mid, CPU) == (MID_CPU, 1000)
    assert request_type_and_value(prod, CPU) == (CPU, 1500)
    annotated = PodMeta.from_manifest(
        make_running_pod(
            "x",
            labels={"koordinator.sh/priority": "7"},
            annotations={
                "koordinator.sh/eviction-priority": "oops",
                "koordinator.sh/eviction-policy": "not json",
            },
        ),
        LAYOUT,
    )
    assert pod_eviction_priority(annotated.pod) == 0
    assert pod_priority_label(annotated.pod, 3) == 7
    assert pod_priority_label(prod.pod, 3) == 3
    assert eviction_policy_allowed("BEMemoryEvict", annotated.pod) is False
    assert eviction_policy_allowed("BEMemoryEvict", prod.pod) is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5", 5),
        ("-3", -3),
        ("+4", 4),
        ("2147483647", 2**31 - 1),
        ("2147483648", 0),
        (" 5", 0),
        ("5 ", 0),
        ("1_0", 0),
        ("\uff15", 0),
        ("", 0),
        ("0x10", 0),
    ],
)
def test_eviction_priority_parses_as_go_parse_int_32(text: str, expected: int) -> None:
    pod = make_running_pod("x", annotations={"koordinator.sh/eviction-priority": text})
    assert pod_eviction_priority(PodMeta.from_manifest(pod, LAYOUT).pod) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("7", 7), ("-7", -7), (" 7", 3), ("7_0", 3), ("\u0667", 3), (str(2**63), 3)]
)
def test_priority_label_parses_as_go_atoi(text: str, expected: int) -> None:
    pod = make_running_pod("x", labels={"koordinator.sh/priority": text})
    assert pod_priority_label(PodMeta.from_manifest(pod, LAYOUT).pod, 3) == expected


@pytest.mark.parametrize(
    ("annotation", "allowed"),
    [
        ('["BEMemoryEvict"]', True),
        ('["CPUEvict"]', False),
        ("[]", False),
        ('[1, "BEMemoryEvict"]', False),
        ('"BEMemoryEvict"', False),
        ("null", False),
    ],
)
def test_eviction_policy_decodes_as_a_list_of_strings(annotation: str, allowed: bool) -> None:
    pod = make_running_pod("x", annotations={"koordinator.sh/eviction-policy": annotation})
    assert eviction_policy_allowed("BEMemoryEvict", PodMeta.from_manifest(pod, LAYOUT).pod) is allowed


def test_priority_order() -> None:
    metas = [PodMeta.from_manifest(make_running_pod(n), LAYOUT) for n in "abcd"]
    infos = [
        PodEvictInfo(metas[0], eviction_priority=1, priority=1, memory_used=1),
        PodEvictInfo(metas[1], eviction_priority=0, priority=9, memory_used=1),
        PodEvictInfo(metas[2], eviction_priority=0, priority=5, memory_used=1),
        PodEvictInfo(metas[3], eviction_priority=0, priority=5, memory_used=9),
    ]
    ordered = sort_by_eviction_order(infos, lambda a, b: a.memory_used > b.memory_used)
    assert [i.pod.pod.name for i in ordered] == ["d", "c", "b", "a"]
