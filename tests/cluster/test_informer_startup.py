"""Start-up of the informer: lists of several kinds in flight at once, records shared with plugins, and
no scheduler before every initial list is in (issue 22, gap 4)."""

from __future__ import annotations

import threading
from typing import Any, TypeVar

import pytest

from koord_framework.cluster.informer import NodeCache, PodCache, SharedInformer
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.testing import FakeClock, make_node, make_pod


class _SlowLists(MemoryCluster):
    """A cluster whose lists wait until ``release`` is set (a slow API server), counting them."""

    def __init__(self) -> None:
        super().__init__(FakeClock(), seed=1)
        self.release = threading.Event()
        self.listing: set[str] = set()
        self.both_listing = threading.Event()
        self.lists: list[str] = []

    def list_shared(self, kind: str, namespace: str | None = None) -> tuple[list[Any], int]:
        self.lists.append(kind)
        self.listing.add(kind)
        if {"Pod", "Node"} <= self.listing:
            self.both_listing.set()
        assert self.release.wait(10), "the test never released the lists"
        return super().list_shared(kind)


C = TypeVar("C", bound=MemoryCluster)


def _populated(cluster: C) -> C:
    for i in range(3):
        cluster.create(make_node(f"n{i}"))
    cluster.create(make_pod("bound", node="n0"))
    cluster.create(make_pod("pending"))
    return cluster


def test_pod_and_node_lists_are_in_flight_at_once() -> None:
    cluster = _populated(_SlowLists())
    informer = SharedInformer(cluster)
    done = threading.Thread(target=informer.ensure_all, args=(("Pod", "Node"),))
    done.start()
    try:
        assert cluster.both_listing.wait(10), "the Node list waited for the Pod list"
        assert not informer.has_synced("Pod") and not informer.has_synced("Node")
    finally:
        cluster.release.set()
        done.join(10)
    assert informer.has_synced("Pod") and informer.has_synced("Node")
    assert sorted(cluster.lists) == ["Node", "Pod"], "each kind listed once"
    cluster.create(make_pod("late"))
    assert informer.get("Pod", "late") is not None, "both are followed once listed"


def test_ensure_all_raises_a_failed_list() -> None:
    cluster = _populated(MemoryCluster(FakeClock(), seed=1))
    informer = SharedInformer(cluster)
    with pytest.raises(ValueError, match="NoSuchKind"):
        informer.ensure_all(("Pod", "NoSuchKind"))


def test_stopped_during_a_list_starts_no_watch() -> None:
    cluster = _populated(_SlowLists())
    informer = SharedInformer(cluster)
    listing = threading.Thread(target=informer.ensure, args=("Pod",))
    listing.start()
    while "Pod" not in cluster.listing:
        threading.Event().wait(0.01)
    informer.stop()
    cluster.release.set()
    listing.join(10)
    assert len(informer.list("Pod")) == 2, "what was listed stays readable"
    seen: list[str] = []
    informer.add_handler("Pod", on_add=lambda o: seen.append(o["metadata"]["name"]))
    seen.clear()
    cluster.create(make_pod("late"))
    assert seen == [], "no watch was started after stop"
    assert cluster.lists == ["Pod"], "and no second list"


def test_record_of_is_the_cached_record_of_that_version() -> None:
    cluster = _populated(MemoryCluster(FakeClock(), seed=1))
    informer = SharedInformer(cluster)
    pods, nodes = PodCache(informer), NodeCache(informer)
    obj = informer.get("Pod", "pending")
    assert obj is not None
    assert pods.record_of(obj) is pods.get("default", "pending")
    stale = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}
    assert pods.record_of(stale) is None, "another version is parsed by the caller"
    assert pods.record_of({"metadata": {"name": "pending", "namespace": "default"}}) is None
    node = informer.get("Node", "n1")
    assert node is not None and nodes.record_of(node) is nodes.get("n1")


def test_the_scheduler_exists_only_once_every_initial_list_is_in() -> None:
    """No cycle before the caches the scheduler decides on are complete: a pod bound on a node whose
    assigned pods are not known yet could overcommit it."""
    from koord_framework.testing.scheduler import SchedulerHarness

    cluster = _populated(_SlowLists())
    built: list[SchedulerHarness] = []
    builder = threading.Thread(target=lambda: built.append(SchedulerHarness([], cluster=cluster)))
    builder.start()
    try:
        assert cluster.both_listing.wait(10), "the lists run at once"
        builder.join(0.2)
        assert not built, "the scheduler is not built while a list is in flight"
    finally:
        cluster.release.set()
        builder.join(10)
    scheduler = built[0].scheduler
    assert sorted(n.name for n in scheduler.node_cache.all()) == ["n0", "n1", "n2"]
    assert scheduler.cache.get_pod(scheduler.pod_cache.get("default", "bound").uid) is not None  # type: ignore[union-attr]
    assert [info.pod.name for _, info in scheduler.pending_pods()] == ["pending"]
