"""SharedInformer, PodCache and NodeCache over the MemoryCluster."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.informer import NodeCache, PodCache, SharedInformer
from koord_framework.cluster.memory import MemoryCluster, ResourceExpiredError
from koord_framework.testing import FakeClock, make_node, make_pod


@pytest.fixture
def cluster() -> MemoryCluster:
    c = MemoryCluster(FakeClock(), seed=5)
    c.create(make_node("n1"))
    c.create(make_pod("early", cpu="500m", node="n1"))
    return c


def test_lists_then_follows_the_watch(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    assert [o["metadata"]["name"] for o in informer.list("Pod")] == ["early"]
    cluster.create(make_pod("late", namespace="ns2"))
    assert informer.get("Pod", "late", "ns2") is not None
    assert informer.get("Pod", "late") is None, "namespaced kinds default to namespace default"
    assert [o["metadata"]["name"] for o in informer.list("Pod", "ns2")] == ["late"]
    cluster.delete("Pod", "early", "default")
    assert informer.get("Pod", "early") is None
    assert informer.has_synced("Pod") and not informer.has_synced("Node")


def test_informer_shares_the_watch_objects(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    informer.ensure("Node")
    seen: list[dict[str, Any]] = []
    cluster.subscribe(["Node"], lambda e: seen.append(e.obj))
    cluster.patch("Node", "n1", "", {"metadata": {"labels": {"a": "b"}}})
    assert informer.get("Node", "n1") is seen[-1], "no copy per consumer"


def test_handlers_get_adds_updates_deletes_and_replay(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    calls: list[tuple[str, str]] = []
    informer.add_handler(
        "Pod",
        on_add=lambda o: calls.append(("add", o["metadata"]["name"])),
        on_update=lambda old, new: calls.append(
            ("update", f"{old['metadata']['resourceVersion']}->{new['metadata']['resourceVersion']}")
        ),
        on_delete=lambda o: calls.append(("delete", o["metadata"]["name"])),
    )
    assert calls == [("add", "early")], "existing objects are replayed to a new handler"
    cluster.create(make_pod("p"))
    cluster.bind("default", "p", "n1")
    cluster.delete("Pod", "p", "default")
    assert calls[1:] == [("add", "p"), ("update", "3->4"), ("delete", "p")]


def test_removed_handler_is_not_called(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    calls: list[str] = []
    remove = informer.add_handler("Node", on_add=lambda o: calls.append(o["metadata"]["name"]))
    remove()
    cluster.create(make_node("n2"))
    assert calls == ["n1"]


def test_stop_ends_the_watch(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    informer.ensure("Node")
    informer.stop()
    cluster.create(make_node("n2"))
    with informer._store_lock:
        assert list(informer._objects["Node"]) == [("", "n1")]


def test_pod_cache_indexes_by_node(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    pods = PodCache(informer)
    cluster.create(make_pod("pending", cpu="1"))
    assert [p.name for p in pods.on_node("n1")] == ["early"]
    assert [p.name for p in pods.unassigned()] == ["pending"]
    cluster.bind("default", "pending", "n1")
    assert sorted(p.name for p in pods.on_node("n1")) == ["early", "pending"]
    assert pods.unassigned() == []
    info = pods.get("default", "pending")
    assert info is not None and info.requests == {"cpu": 1000} and info.node_name == "n1"
    assert info.scheduled_time == FakeClock().now()
    cluster.delete("Pod", "early", "default")
    assert [p.name for p in pods.on_node("n1")] == ["pending"]
    assert len(pods) == 1 and pods.node_names() == ["n1"]


def test_pod_records_are_built_once_per_version(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    pods = PodCache(informer)
    first = pods.get("default", "early")
    # a second informer delivering the same version must not rebuild the record
    pods._on_update(cluster.get("Pod", "early", "default"), cluster.get("Pod", "early", "default"))
    assert pods.get("default", "early") is first
    cluster.patch("Pod", "early", "default", {"metadata": {"labels": {"v": "2"}}})
    second = pods.get("default", "early")
    assert second is not first and second is not None and second.labels == {"v": "2"}


def test_pod_cache_listeners_see_typed_records(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    pods = PodCache(informer)
    events: list[tuple[str, str, str]] = []
    pods.add_listener(
        on_add=lambda p: events.append(("add", p.name, p.node_name)),
        on_update=lambda old, new: events.append(("update", old.node_name or "-", new.node_name)),
        on_delete=lambda p: events.append(("delete", p.name, p.node_name)),
    )
    cluster.create(make_pod("x"))
    cluster.bind("default", "x", "n1")
    cluster.evict("default", "x", reason="test", requested_by="test")
    assert events == [("add", "x", ""), ("update", "-", "n1"), ("delete", "x", "n1")]
    assert all(isinstance(p, PodInfo) for p in pods.all())


def test_bad_pod_is_left_out_with_a_warning(cluster: MemoryCluster, caplog: pytest.LogCaptureFixture) -> None:
    informer = SharedInformer(cluster)
    pods = PodCache(informer)
    bad = make_pod("bad", cpu="lots")
    with caplog.at_level(logging.WARNING):
        cluster.create(bad)
    assert pods.get("default", "bad") is None
    assert "Pod default/bad is left out of the cache" in caplog.text


def test_node_cache(cluster: MemoryCluster) -> None:
    informer = SharedInformer(cluster)
    nodes = NodeCache(informer)
    names: list[str] = []
    nodes.add_listener(on_delete=lambda r: names.append(r.name))
    record = nodes.get("n1")
    assert record is not None and record.allocatable["cpu"] == 4000 and record.ready
    cluster.create(make_node("n2", cpu="8", allocatable={"cpu": "7500m"}))
    n2 = nodes.get("n2")
    assert n2 is not None and n2.allocatable["cpu"] == 7500 and n2.capacity["cpu"] == 8000
    cluster.patch("Node", "n2", "", {"spec": {"unschedulable": True}})
    n2b = nodes.get("n2")
    assert n2b is not None and n2b.unschedulable
    cluster.delete("Node", "n1")
    assert nodes.names() == ["n2"] and len(nodes) == 1
    assert names == ["n1"]
    assert [r.name for r in nodes.all()] == ["n2"]


def test_unknown_kind_is_refused(cluster: MemoryCluster) -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        SharedInformer(cluster).ensure("Gadget")


def test_initial_list_shares_the_stored_objects(cluster: MemoryCluster) -> None:
    shared, rv = cluster.list_shared("Pod")
    again, _ = cluster.list_shared("Pod")
    assert shared[0] is again[0] and rv == cluster.resource_version
    copies, _ = cluster.list("Pod")
    assert copies[0] == shared[0] and copies[0] is not shared[0]
    informer = SharedInformer(cluster)
    assert informer.get("Pod", "early") is shared[0]


def test_lists_again_when_the_watch_window_expired() -> None:
    class Flaky(MemoryCluster):
        expired_once = False

        def subscribe(self, kinds: Any, handler: Any, since: int | None = None) -> Any:
            if not self.expired_once:
                self.expired_once = True
                self.create(make_node("written-in-between"))
                raise ResourceExpiredError("too old resource version")
            return super().subscribe(kinds, handler, since)

    cluster = Flaky(FakeClock())
    informer = SharedInformer(cluster)
    assert [o["metadata"]["name"] for o in informer.list("Node")] == ["written-in-between"]
    cluster.create(make_node("later"))
    assert informer.get("Node", "later") is not None
