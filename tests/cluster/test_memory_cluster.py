"""MemoryCluster: storage, versions, watch and replay, bind, and the cluster port's error contract."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from koord_framework.cluster.memory import MemoryCluster, ResourceExpiredError
from koord_framework.cluster.port import ClusterPort, EventRecord, WatchEvent
from koord_framework.errors import ClusterError, ConflictError, NotFoundError
from koord_framework.testing import FakeClock, make_node, make_node_metric, make_pod


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cluster(clock: FakeClock) -> MemoryCluster:
    return MemoryCluster(clock, seed=1)


def _bare_pod(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {"containers": [{"name": "c"}]},
    }


# --- create / get / list -------------------------------------------------------------------------


def test_is_a_cluster_port_with_a_virtual_clock_by_default() -> None:
    c = MemoryCluster()
    assert isinstance(c, ClusterPort)
    start = c.clock.now()
    c.clock.sleep(30)
    assert c.clock.now() == start + 30


def test_create_fills_uid_timestamp_version_and_namespace(cluster: MemoryCluster, clock: FakeClock) -> None:
    clock.advance(90)
    out = cluster.create(_bare_pod("p"))
    meta = out["metadata"]
    assert meta["namespace"] == "default"
    assert meta["creationTimestamp"] == "2024-01-01T00:01:30Z"
    assert meta["resourceVersion"] == "1"
    assert len(meta["uid"]) == 36 and meta["uid"][14] == "4"
    assert cluster.get("Pod", "p", "default") == out


def test_create_keeps_a_given_uid_and_timestamp(cluster: MemoryCluster) -> None:
    out = cluster.create(_bare_pod("p", uid="u-1", creationTimestamp="2020-05-05T00:00:00Z"))
    assert out["metadata"]["uid"] == "u-1"
    assert out["metadata"]["creationTimestamp"] == "2020-05-05T00:00:00Z"


def test_cluster_scoped_objects_have_no_namespace(cluster: MemoryCluster) -> None:
    node = make_node("n1")
    node["metadata"]["namespace"] = "ignored"
    out = cluster.create(node)
    assert "namespace" not in out["metadata"]
    assert cluster.get("Node", "n1", "whatever")["metadata"]["name"] == "n1"


def test_seeded_clusters_give_the_same_uids() -> None:
    def uids(seed: int) -> list[str]:
        c = MemoryCluster(FakeClock(), seed=seed)
        return [c.create(_bare_pod(f"p{i}"))["metadata"]["uid"] for i in range(3)]

    assert uids(42) == uids(42)
    assert uids(42) != uids(43)
    assert len(set(uids(42))) == 3


def test_resource_version_is_global_and_monotonic(cluster: MemoryCluster) -> None:
    versions = [
        int(cluster.create(make_node("n1"))["metadata"]["resourceVersion"]),
        int(cluster.create(_bare_pod("p"))["metadata"]["resourceVersion"]),
        int(
            cluster.patch("Node", "n1", "", {"metadata": {"labels": {"a": "b"}}})["metadata"][
                "resourceVersion"
            ]
        ),
    ]
    assert versions == [1, 2, 3]
    _, rv = cluster.list("Pod")
    assert rv == 3 == cluster.resource_version


def test_duplicate_create_conflicts(cluster: MemoryCluster) -> None:
    cluster.create(_bare_pod("p"))
    with pytest.raises(ConflictError, match='pods "default/p" already exists'):
        cluster.create(_bare_pod("p"))
    cluster.create(_bare_pod("p", namespace="other"))  # another namespace is another object


def test_generate_name_is_seeded(cluster: MemoryCluster) -> None:
    pod = _bare_pod("")
    pod["metadata"] = {"generateName": "web-"}
    name = cluster.create(pod)["metadata"]["name"]
    assert name.startswith("web-") and len(name) == len("web-") + 5
    again = MemoryCluster(FakeClock(), seed=1).create(pod)["metadata"]["name"]
    assert again == name


def test_missing_name_and_unknown_kind_are_cluster_errors(cluster: MemoryCluster) -> None:
    with pytest.raises(ClusterError, match=r"metadata\.name: Required value"):
        cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {}})
    with pytest.raises(NotFoundError, match=r"unknown kind 'Gadget'.*NodeMetric"):
        cluster.create({"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "g"}})
    with pytest.raises(NotFoundError):
        cluster.list("Gadget")


def test_returned_objects_are_private_copies(cluster: MemoryCluster) -> None:
    created = cluster.create(make_pod("p", labels={"a": "1"}))
    created["metadata"]["labels"]["a"] = "changed"
    got = cluster.get("Pod", "p", "default")
    got["spec"]["containers"].clear()
    listed, _ = cluster.list("Pod")
    listed[0]["metadata"]["name"] = "renamed"
    fresh = cluster.get("Pod", "p", "default")
    assert fresh["metadata"]["labels"] == {"a": "1"}
    assert fresh["spec"]["containers"][0]["name"] == "main"


def test_list_by_namespace(cluster: MemoryCluster) -> None:
    cluster.create(make_pod("a", namespace="ns1"))
    cluster.create(make_pod("b", namespace="ns2"))
    cluster.create(make_pod("c", namespace="ns1"))
    names = sorted(p["metadata"]["name"] for p in cluster.list("Pod", "ns1")[0])
    assert names == ["a", "c"]
    assert len(cluster.list("Pod")[0]) == 3
    assert cluster.count("Pod") == 3
    assert cluster.try_get("Pod", "a", "ns2") is None


def test_get_missing_is_not_found(cluster: MemoryCluster) -> None:
    with pytest.raises(NotFoundError, match='pods "default/nope" not found'):
        cluster.get("Pod", "nope", "default")


# --- update / delete --------------------------------------------------------------------------------


def test_update_with_stale_resource_version_conflicts(cluster: MemoryCluster) -> None:
    first = cluster.create(make_node("n1"))
    first["metadata"]["labels"]["x"] = "1"
    second = cluster.update(first)
    assert second["metadata"]["labels"]["x"] == "1"
    first["metadata"]["labels"]["x"] = "2"  # still carries the version it was read at
    with pytest.raises(ConflictError):
        cluster.update(first)
    del first["metadata"]["resourceVersion"]  # an unconditional replace
    assert cluster.update(first)["metadata"]["labels"]["x"] == "2"


def test_update_keeps_identity_and_status(cluster: MemoryCluster) -> None:
    created = cluster.create(make_pod("p", node="n1"))
    replacement = make_pod("p", node="n1", labels={"v": "2"}, phase="Failed")
    del replacement["metadata"]["uid"]
    out = cluster.update(replacement)
    assert out["metadata"]["uid"] == created["metadata"]["uid"]
    assert out["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert out["metadata"]["labels"] == {"v": "2"}
    assert out["status"]["phase"] == "Running", "status is a subresource: update leaves it"


def test_update_of_absent_object_is_not_found(cluster: MemoryCluster) -> None:
    with pytest.raises(NotFoundError):
        cluster.update(make_node("ghost"))


def test_delete(cluster: MemoryCluster) -> None:
    cluster.create(make_node("n1"))
    cluster.delete("Node", "n1")
    assert cluster.try_get("Node", "n1") is None
    with pytest.raises(NotFoundError):
        cluster.delete("Node", "n1")


# --- watch ------------------------------------------------------------------------------------------


def test_subscribe_delivers_synchronously_in_order(cluster: MemoryCluster) -> None:
    seen: list[WatchEvent] = []
    cluster.subscribe(["Pod"], seen.append)
    cluster.create(make_node("n1"))  # another kind: not delivered
    cluster.create(make_pod("p"))
    assert [e.type for e in seen] == ["ADDED"]
    cluster.bind("default", "p", "n1")
    cluster.delete("Pod", "p", "default")
    assert [(e.type, e.resource_version) for e in seen] == [("ADDED", 2), ("MODIFIED", 3), ("DELETED", 4)]
    modified, deleted = seen[1], seen[2]
    assert modified.old is not None and "nodeName" not in modified.old["spec"]
    assert modified.obj["spec"]["nodeName"] == "n1"
    assert deleted.obj["metadata"]["resourceVersion"] == "4"
    assert deleted.old is not None and deleted.old["metadata"]["resourceVersion"] == "3"


def test_unsubscribe_stops_delivery(cluster: MemoryCluster) -> None:
    seen: list[WatchEvent] = []
    stop = cluster.subscribe(["Node"], seen.append)
    cluster.create(make_node("a"))
    stop()
    cluster.create(make_node("b"))
    assert [e.obj["metadata"]["name"] for e in seen] == ["a"]


def test_replay_since_a_listed_version(cluster: MemoryCluster) -> None:
    cluster.create(make_node("a"))
    _, rv = cluster.list("Node")
    cluster.create(make_node("b"))
    cluster.create(make_pod("p"))
    cluster.patch("Node", "a", "", {"metadata": {"labels": {"x": "y"}}})
    seen: list[WatchEvent] = []
    cluster.subscribe(["Node"], seen.append, since=rv)
    assert [(e.type, e.obj["metadata"]["name"]) for e in seen] == [("ADDED", "b"), ("MODIFIED", "a")]
    cluster.create(make_node("c"))
    assert [e.resource_version for e in seen] == [2, 4, 5]


def test_replay_from_zero_gives_the_whole_history(cluster: MemoryCluster) -> None:
    for i in range(3):
        cluster.create(make_node(f"n{i}"))
    seen: list[WatchEvent] = []
    cluster.subscribe(["Node"], seen.append, since=0)
    assert [e.resource_version for e in seen] == [1, 2, 3]


def test_replay_older_than_the_log_is_expired(clock: FakeClock) -> None:
    cluster = MemoryCluster(clock, event_log_size=3)
    for i in range(5):
        cluster.create(make_node(f"n{i}"))
    with pytest.raises(ResourceExpiredError, match="too old resource version: 1"):
        cluster.subscribe(["Node"], lambda e: None, since=1)
    seen: list[WatchEvent] = []
    cluster.subscribe(["Node"], seen.append, since=2)  # the log still holds 3, 4 and 5
    assert [e.resource_version for e in seen] == [3, 4, 5]


def test_a_handler_may_write_back(cluster: MemoryCluster) -> None:
    order: list[tuple[str, str]] = []

    def label_new_nodes(event: WatchEvent) -> None:
        order.append((event.type, event.obj["metadata"]["name"]))
        if event.type == "ADDED":
            cluster.patch("Node", event.obj["metadata"]["name"], "", {"metadata": {"labels": {"seen": "1"}}})

    cluster.subscribe(["Node"], label_new_nodes)
    cluster.create(make_node("n1"))
    assert cluster.get("Node", "n1")["metadata"]["labels"]["seen"] == "1"
    assert order == [("ADDED", "n1"), ("MODIFIED", "n1")]


def test_handler_errors_reach_the_writer_after_everyone_got_the_event(cluster: MemoryCluster) -> None:
    seen: list[str] = []

    def broken(event: WatchEvent) -> None:
        raise RuntimeError("handler bug")

    cluster.subscribe(["Node"], broken)
    cluster.subscribe(["Node"], lambda e: seen.append(e.obj["metadata"]["name"]))
    with pytest.raises(RuntimeError, match="handler bug"):
        cluster.create(make_node("n1"))
    assert seen == ["n1"]
    assert cluster.try_get("Node", "n1") is not None, "the write itself happened"


# --- bind -------------------------------------------------------------------------------------------


def test_bind_sets_node_and_pod_scheduled_condition(cluster: MemoryCluster, clock: FakeClock) -> None:
    uid = cluster.create(make_pod("p"))["metadata"]["uid"]
    clock.advance(12)
    cluster.bind("default", "p", "n1", uid=uid)
    pod = cluster.get("Pod", "p", "default")
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["status"]["conditions"] == [
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": "2024-01-01T00:00:12Z",
        }
    ]
    assert cluster.bind_count == 1


def test_bind_replaces_a_false_pod_scheduled_condition(cluster: MemoryCluster, clock: FakeClock) -> None:
    pod = make_pod("p")
    pod["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "lastTransitionTime": "2023-01-01T00:00:00Z",
        }
    ]
    cluster.create(pod)
    cluster.bind("default", "p", "n1")
    (cond,) = cluster.get("Pod", "p", "default")["status"]["conditions"]
    assert cond["status"] == "True" and "reason" not in cond
    assert cond["lastTransitionTime"] == "2024-01-01T00:00:00Z"


def test_second_bind_conflicts(cluster: MemoryCluster) -> None:
    cluster.create(make_pod("p"))
    cluster.bind("default", "p", "n1")
    with pytest.raises(ConflictError, match="already assigned to node 'n1'"):
        cluster.bind("default", "p", "n2")
    with pytest.raises(ConflictError):
        cluster.bind("default", "p", "n1")
    assert cluster.get("Pod", "p", "default")["spec"]["nodeName"] == "n1"
    assert cluster.bind_count == 1


def test_bind_with_wrong_uid_conflicts(cluster: MemoryCluster) -> None:
    cluster.create(make_pod("p"))
    with pytest.raises(ConflictError, match="uid"):
        cluster.bind("default", "p", "n1", uid="not-the-uid")
    assert "nodeName" not in cluster.get("Pod", "p", "default")["spec"]


def test_bind_missing_pod_is_not_found(cluster: MemoryCluster) -> None:
    with pytest.raises(NotFoundError):
        cluster.bind("default", "ghost", "n1")


def test_bind_of_terminating_pod_conflicts(cluster: MemoryCluster) -> None:
    cluster.create(make_pod("p", metadata={"deletionTimestamp": "2024-01-01T00:00:00Z"}))
    with pytest.raises(ConflictError, match="being deleted"):
        cluster.bind("default", "p", "n1")


def test_concurrent_binds_of_one_pod_exactly_one_wins(cluster: MemoryCluster) -> None:
    cluster.create(make_pod("p"))
    threads = 8
    barrier = threading.Barrier(threads)
    results: list[str] = []
    results_lock = threading.Lock()

    def bind(i: int) -> None:
        barrier.wait()
        try:
            cluster.bind("default", "p", f"n{i}")
            outcome = f"won:n{i}"
        except ConflictError:
            outcome = "conflict"
        with results_lock:
            results.append(outcome)

    workers = [threading.Thread(target=bind, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    winners = [r for r in results if r.startswith("won")]
    assert len(winners) == 1
    assert results.count("conflict") == threads - 1
    assert cluster.get("Pod", "p", "default")["spec"]["nodeName"] == winners[0].split(":")[1]
    assert cluster.bind_count == 1


def test_concurrent_writers_deliver_every_event_once_in_order(cluster: MemoryCluster) -> None:
    seen: list[int] = []
    cluster.subscribe(["Pod"], lambda e: seen.append(e.resource_version))

    def writer(t: int) -> None:
        for i in range(50):
            cluster.create(make_pod(f"p-{t}-{i}"))

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert seen == list(range(1, 201))


# --- events and counters ---------------------------------------------------------------------------


def test_record_event_and_write_count(cluster: MemoryCluster) -> None:
    cluster.create(make_node("n1"))
    cluster.create(make_node_metric("n1", cpu="1"))
    cluster.delete("NodeMetric", "n1")
    assert cluster.write_count == 3
    event = EventRecord(kind="Pod", namespace="default", name="p", reason="Scheduled", message="to n1")
    cluster.record_event(event)
    assert cluster.events == [event]


def test_repr_counts_objects(cluster: MemoryCluster) -> None:
    cluster.create(make_node("n1"))
    cluster.create(make_pod("p"))
    assert repr(cluster) == "MemoryCluster(rv=2, Node=1, Pod=1)"
