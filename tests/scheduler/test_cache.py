"""The scheduler cache: assume/forget/confirm/expire, and the incremental snapshot with its NodeTable."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.scheduler.cache import SchedulerCache, Snapshot
from koord_framework.testing import make_node, make_pod


def node(name: str, cpu: str = "4") -> NodeRecord:
    return NodeRecord.from_manifest(make_node(name, cpu=cpu))


def pod(name: str, cpu: str = "1", on: str = "") -> PodInfo:
    return PodInfo.from_manifest(make_pod(name, cpu=cpu, node=on or None))


@pytest.fixture
def cache() -> SchedulerCache:
    c = SchedulerCache(VirtualClock(0.0), ttl=30.0)
    for n in ("n1", "n2", "n3"):
        c.add_node(node(n))
    return c


def requested_cpu(snap: Snapshot, name: str) -> int:
    row = snap.table.index[name]
    return int(snap.table.requested_of("cpu")[row])


def test_snapshot_copies_only_changed_nodes(cache: SchedulerCache) -> None:
    snap = Snapshot()
    assert cache.update_snapshot(snap) == 3
    assert [ni.name for ni in snap.node_list] == ["n1", "n2", "n3"]
    assert cache.update_snapshot(snap) == 0
    cache.add_pod(pod("a", on="n2"))
    before_n1 = snap.get("n1")
    assert cache.update_snapshot(snap) == 1
    assert snap.get("n1") is before_n1  # untouched nodes are not copied again
    assert requested_cpu(snap, "n2") == 1000 and snap.table.pod_count[snap.table.index["n2"]] == 1


def test_snapshot_is_isolated_from_later_cache_changes(cache: SchedulerCache) -> None:
    snap = Snapshot()
    cache.update_snapshot(snap)
    cache.assume_pod(dataclasses.replace(pod("a"), node_name="n1"))
    assert requested_cpu(snap, "n1") == 0 and not snap.get("n1").pods  # type: ignore[union-attr]
    cache.update_snapshot(snap)
    assert requested_cpu(snap, "n1") == 1000


def test_assume_forget_and_confirm(cache: SchedulerCache) -> None:
    p = dataclasses.replace(pod("a"), node_name="n1")
    cache.assume_pod(p)
    assert cache.is_assumed(p.uid)
    with pytest.raises(ValueError):
        cache.assume_pod(p)
    assert cache.forget_pod(p)
    assert cache.pod_count() == 0
    cache.assume_pod(p)
    bound = dataclasses.replace(p)
    cache.add_pod(bound)  # the informer confirms the binding
    assert not cache.is_assumed(p.uid) and cache.pod_count() == 1
    assert not cache.forget_pod(p)  # a confirmed pod is not forgotten


def test_confirmation_on_another_node_moves_the_pod(cache: SchedulerCache) -> None:
    snap = Snapshot()
    p = dataclasses.replace(pod("a"), node_name="n1")
    cache.assume_pod(p)
    cache.add_pod(dataclasses.replace(p, node_name="n3"))
    cache.update_snapshot(snap)
    assert requested_cpu(snap, "n1") == 0 and requested_cpu(snap, "n3") == 1000


def test_unconfirmed_assumptions_expire_after_the_ttl(cache: SchedulerCache) -> None:
    clock = cache._clock
    assert isinstance(clock, VirtualClock)
    p = dataclasses.replace(pod("a"), node_name="n1")
    cache.assume_pod(p)
    assert cache.cleanup_expired() == []  # binding not finished: never expires
    cache.finish_binding(p)
    clock.advance(29)
    assert cache.cleanup_expired() == []
    clock.advance(1)
    assert [x.uid for x in cache.cleanup_expired()] == [p.uid]
    assert cache.pod_count() == 0


def test_removed_nodes_leave_the_snapshot_and_pods_keep_a_placeholder(cache: SchedulerCache) -> None:
    snap = Snapshot()
    cache.add_pod(pod("a", on="n2"))
    cache.update_snapshot(snap)
    cache.remove_node("n2")
    cache.update_snapshot(snap)
    assert [ni.name for ni in snap.node_list] == ["n1", "n3"]
    assert list(snap.rows) == [snap.table.index["n1"], snap.table.index["n3"]]
    assert not snap.table.present[snap.table.index["n2"]]
    cache.add_node(node("n2", cpu="8"))
    cache.update_snapshot(snap)
    row = snap.table.index["n2"]
    assert snap.table.present[row] and int(snap.table.allocatable_of("cpu")[row]) == 8000
    assert requested_cpu(snap, "n2") == 1000  # the pod survived its node's absence


def test_pods_may_arrive_before_their_node(cache: SchedulerCache) -> None:
    snap = Snapshot()
    cache.add_pod(pod("a", on="late"))
    cache.update_snapshot(snap)
    assert snap.get("late") is None and cache.node_count() == 3
    cache.add_node(node("late"))
    cache.update_snapshot(snap)
    ni = snap.get("late")
    assert ni is not None and len(ni.pods) == 1


def test_table_rows_match_node_infos_under_random_churn(cache: SchedulerCache) -> None:
    rng = np.random.default_rng(7)
    snap = Snapshot()
    live: list[PodInfo] = []
    for i in range(300):
        if live and rng.random() < 0.4:
            cache.remove_pod(live.pop(int(rng.integers(len(live)))))
        else:
            p = pod(f"p{i}", cpu=f"{int(rng.integers(1, 900))}m", on=f"n{int(rng.integers(1, 4))}")
            cache.add_pod(p)
            live.append(p)
        if i % 7 == 0:
            cache.update_snapshot(snap)
            for ni in snap.node_list:
                assert requested_cpu(snap, ni.name) == ni.requested.get("cpu", 0)
                assert snap.table.pod_count[ni.row] == len(ni.pods)
                assert snap.table.non_zero_cpu[ni.row] == ni.non_zero_cpu
