"""KubeCluster against a real kube-apiserver: reads, watch (resume and relist), writes, CRDs, bind, evict."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.kube import KubeCluster
from koord_framework.cluster.kube.watch import KindWatcher
from koord_framework.cluster.port import EventRecord, WatchEvent
from koord_framework.errors import ConflictError, NotFoundError, TooManyRequestsError
from koord_framework.testing import make_node, make_pdb, make_pod

pytestmark = pytest.mark.e2e


def wait_for(predicate: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Recorder:
    """Collects watch events (thread-safe) and counts concurrent handler calls."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self.lock = threading.Lock()
        self.inside = 0
        self.max_inside = 0

    def __call__(self, event: WatchEvent) -> None:
        with self.lock:
            self.inside += 1
            self.max_inside = max(self.max_inside, self.inside)
        time.sleep(0.001)
        with self.lock:
            self.events.append(event)
            self.inside -= 1

    def names(self, etype: str | None = None, kind: str = "Pod") -> list[str]:
        with self.lock:
            return [
                e.obj["metadata"]["name"]
                for e in self.events
                if e.kind == kind and (etype is None or e.type == etype)
            ]


# --- reads and watch ---------------------------------------------------------------------------------
def test_list_fills_kind_and_pages(kube: KubeCluster, namespace: str) -> None:
    kube.page_size = 3
    for i in range(7):
        kube.create(make_pod(f"p{i}", namespace, cpu="100m"))
    pods, rv = kube.list("Pod", namespace)
    assert sorted(p["metadata"]["name"] for p in pods) == [f"p{i}" for i in range(7)]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in pods)
    assert rv > 0
    got = kube.get("Pod", "p3", namespace)
    assert got["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"
    with pytest.raises(NotFoundError, match="p99"):
        kube.get("Pod", "p99", namespace)


def test_informer_lists_then_follows_the_watch(kube: KubeCluster, namespace: str) -> None:
    kube.create(make_pod("before", namespace))
    informer = SharedInformer(kube)
    added: list[str] = []
    updated: list[tuple[str, str]] = []
    deleted: list[str] = []
    informer.add_handler(
        "Pod",
        on_add=lambda o: added.append(o["metadata"]["name"]),
        on_update=lambda old, new: updated.append((new["metadata"]["name"], new["metadata"]["labels"]["v"])),
        on_delete=lambda o: deleted.append(o["metadata"]["name"]),
    )
    try:
        assert "before" in added
        kube.create(make_pod("after", namespace))
        kube.patch("Pod", "after", namespace, {"metadata": {"labels": {"v": "2"}}})
        kube.delete("Pod", "before", namespace)
        wait_for(lambda: "before" in deleted and ("after", "2") in updated, what="watch events")
        assert "after" in added
        assert informer.get("Pod", "before", namespace) is None
        after = informer.get("Pod", "after", namespace)
        assert after is not None and after["metadata"]["labels"] == {"v": "2"}
    finally:
        informer.stop()


def test_subscribe_serialises_handler_across_kinds(kube: KubeCluster, namespace: str) -> None:
    recorder = Recorder()
    unsubscribe = kube.subscribe(["Pod", "ConfigMap"], recorder)
    assert kube.wait_watching()
    try:
        for i in range(10):
            kube.create(make_pod(f"s{i}", namespace))
            kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"c{i}", "namespace": namespace},
                }
            )
        wait_for(
            lambda: len(recorder.names("ADDED")) >= 10 and len(recorder.names("ADDED", "ConfigMap")) >= 10
        )
        assert recorder.max_inside == 1, "a subscription's handler never runs concurrently with itself"
        assert [e.resource_version for e in recorder.events if e.kind == "Pod"] == sorted(
            e.resource_version for e in recorder.events if e.kind == "Pod"
        )
    finally:
        unsubscribe()


def test_watch_resumes_after_the_server_ends_it(kube: KubeCluster, namespace: str) -> None:
    """The server closes a watch after timeoutSeconds; the watcher resumes from its last version."""
    recorder = Recorder()
    _, rv = kube.list("Pod", namespace)
    watcher = KindWatcher(
        kube.transport, kube.resource("Pod"), recorder, since=str(rv), namespace=namespace, watch_timeout=1
    )
    watcher.start()
    try:
        kube.create(make_pod("w1", namespace))
        wait_for(lambda: "w1" in recorder.names())
        time.sleep(2.5)  # at least two server-side timeouts
        kube.create(make_pod("w2", namespace))
        wait_for(lambda: "w2" in recorder.names())
        assert recorder.names("ADDED") == ["w1", "w2"], "nothing missed, nothing repeated"
        assert watcher.relists == 0
    finally:
        watcher.stop()


def test_relist_on_410_reports_the_difference(kube: KubeCluster, namespace: str, kube_apiserver: Any) -> None:
    """After etcd compacted the history a watch resumes from, the server answers 410 Gone: the watcher relists
    and delivers what changed, including deletions of objects the subscriber held that are gone now."""

    def configmap(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}

    for name in ("kept", "changed", "gone"):
        kube.create(configmap(name))
    listed, rv = kube.list("ConfigMap", namespace)
    known: dict[tuple[str, str], Any] = {
        (namespace, o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in listed
    }
    kube.delete("ConfigMap", "gone", namespace)
    kube.patch("ConfigMap", "changed", namespace, {"data": {"v": "2"}})
    kube.create(configmap("new"))
    kube_apiserver.compact_etcd()
    recorder = Recorder()
    watcher = KindWatcher(
        kube.transport, kube.resource("ConfigMap"), recorder, since=str(rv), known=known, namespace=namespace
    )
    watcher.start()
    try:
        wait_for(lambda: watcher.relists >= 1 and len(recorder.events) >= 3, what="relist")
        got = {(e.type, e.obj["metadata"]["name"]) for e in recorder.events}
        assert got == {("DELETED", "gone"), ("MODIFIED", "changed"), ("ADDED", "new")}, "kept is unchanged"
        [deleted] = [e for e in recorder.events if e.type == "DELETED"]
        assert deleted.obj["kind"] == "ConfigMap" and deleted.old is None, "a stub: only its key was known"
        kube.create(configmap("later"))
        wait_for(lambda: "later" in recorder.names("ADDED", "ConfigMap"), what="watch after relist")
        assert watcher.relists == 1
    finally:
        watcher.stop()


def test_informer_relist_after_compaction_changes_nothing(
    kube: KubeCluster, namespace: str, kube_apiserver: Any
) -> None:
    """SharedInformer over the adapter: it lists, then subscribes from the list's version; the adapter seeds
    the watcher with what was listed, so a 410 and relist later report no spurious changes."""

    def configmap(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}

    kube.create(configmap("a"))
    kube.create(configmap("b"))
    kube.watch_timeout = 1  # reconnect every second, so the compaction is met quickly
    informer = SharedInformer(kube)
    calls: list[tuple[str, str]] = []
    informer.add_handler(
        "ConfigMap",
        on_update=lambda old, new: calls.append(("update", new["metadata"]["name"])),
        on_delete=lambda o: calls.append(("delete", o["metadata"]["name"])),
    )
    try:
        [watcher] = [w for w in kube.watchers() if w.resource.kind == "ConfigMap"]
        assert (namespace, "a") in watcher.known, "seeded from the informer's list"
        for i in range(3):  # move etcd's revision well past the watcher's
            kube.create(make_pod(f"bump{i}", namespace))
        kube_apiserver.compact_etcd()
        wait_for(lambda: watcher.relists >= 1, timeout=15, what="relist after compaction")
        assert calls == [], "nothing changed, so the relist reports nothing"
        kube.delete("ConfigMap", "a", namespace)
        wait_for(lambda: ("delete", "a") in calls, what="delete after the relist")
        assert informer.get("ConfigMap", "b", namespace) is not None
    finally:
        informer.stop()


# --- writes ------------------------------------------------------------------------------------------
def test_update_is_conditional_on_resource_version(kube: KubeCluster, namespace: str) -> None:
    cm = kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": namespace},
            "data": {"a": "1"},
        }
    )
    with pytest.raises(ConflictError, match="already exists"):
        kube.create(cm)
    fresh = dict(cm, data={"a": "2"})
    updated = kube.update(fresh)
    stale = dict(cm, data={"a": "3"})
    with pytest.raises(ConflictError):
        kube.update(stale)
    unconditional = {k: v for k, v in cm.items() if k != "metadata"} | {
        "metadata": {"name": "cfg", "namespace": namespace},
        "data": {"a": "4"},
    }
    assert kube.update(unconditional)["data"] == {"a": "4"}, "no resourceVersion: last write wins"
    assert int(updated["metadata"]["resourceVersion"]) > int(cm["metadata"]["resourceVersion"])


def test_crd_object_create_patch_and_status(kube: KubeCluster, koord_crds: list[str]) -> None:
    metric = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": "crd-node"},
        "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 60, "reportIntervalSeconds": 60}},
    }
    created = kube.create(metric)
    assert created["metadata"]["uid"]
    kube.patch("NodeMetric", "crd-node", "", {"metadata": {"annotations": {"a": "b"}}, "status": {"x": 1}})
    assert "status" not in kube.get("NodeMetric", "crd-node"), (
        "status is a subresource: a plain patch skips it"
    )
    usage = {
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1500m", "memory": "2Gi"}}},
        "updateTime": "2024-01-01T00:00:00Z",
    }
    patched = kube.patch("NodeMetric", "crd-node", "", {"status": usage}, status=True)
    assert patched["status"] == usage
    assert patched["metadata"]["annotations"] == {"a": "b"}
    assert patched["spec"] == metric["spec"]
    with pytest.raises(ConflictError):
        kube.patch(
            "NodeMetric",
            "crd-node",
            "",
            {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "spec": {}},
        )


def test_status_of_crds_without_subresource(kube: KubeCluster, koord_crds: list[str], namespace: str) -> None:
    """Koordinator's ElasticQuota has no status subresource: the adapter gives it the same semantics."""
    assert not kube.resource("ElasticQuota").has_status
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "q", "namespace": namespace},
        "spec": {"max": {"cpu": "10"}, "min": {"cpu": "2"}},
    }
    kube.create(quota)
    kube.patch("ElasticQuota", "q", namespace, {"status": {"used": {"cpu": "1"}}}, status=True)
    current = kube.get("ElasticQuota", "q", namespace)
    assert current["status"] == {"used": {"cpu": "1"}}
    kube.update(
        dict(current, spec={"max": {"cpu": "20"}, "min": {"cpu": "2"}}, status={"used": {"cpu": "9"}})
    )
    again = kube.get("ElasticQuota", "q", namespace)
    assert again["spec"]["max"] == {"cpu": "20"}
    assert again["status"] == {"used": {"cpu": "1"}}, "an update keeps the stored status"


def test_pdb_falls_back_to_the_served_version(kube: KubeCluster, namespace: str) -> None:
    pdb = kube.create(make_pdb("budget", namespace, {"app": "x"}, min_available=1))
    assert pdb["apiVersion"] in ("policy/v1", "policy/v1beta1")
    assert kube.resource("PodDisruptionBudget").api_version == pdb["apiVersion"]
    assert kube.get("PodDisruptionBudget", "budget", namespace)["spec"]["minAvailable"] == 1


# --- bind --------------------------------------------------------------------------------------------
def test_bind_once_then_conflict(kube: KubeCluster, namespace: str, kube_apiserver: Any) -> None:
    node = f"{namespace}-n1"
    kube.create(make_node(node))
    pod = kube.create(make_pod("b", namespace, cpu="100m", scheduler_name="koord-scheduler"))
    uid = pod["metadata"]["uid"]
    _, version = kube_apiserver.request("GET", "/version")
    if int(str(version["minor"]).rstrip("+")) >= 23:
        # pods/binding honours metadata.uid from Kubernetes 1.23 (kubernetes#105913)
        with pytest.raises(ConflictError):
            kube.bind(namespace, "b", node, uid="00000000-0000-0000-0000-000000000000")
    kube.bind(namespace, "b", node, uid=uid)
    bound = kube.get("Pod", "b", namespace)
    assert bound["spec"]["nodeName"] == node
    conditions = {c["type"]: c["status"] for c in bound["status"]["conditions"]}
    assert conditions["PodScheduled"] == "True"
    with pytest.raises(ConflictError, match="already"):
        kube.bind(namespace, "b", node, uid=uid)
    with pytest.raises(NotFoundError):
        kube.bind(namespace, "missing", node)


def test_binds_reuse_connections(kube: KubeCluster, namespace: str) -> None:
    """Every response is read, so connections return to the pool: 50 binds well under 41 ms each."""
    node = f"{namespace}-fast"
    kube.create(make_node(node))
    for i in range(50):
        kube.create(make_pod(f"f{i}", namespace))
    start = time.perf_counter()
    for i in range(50):
        kube.bind(namespace, f"f{i}", node)
    per_bind = (time.perf_counter() - start) / 50
    assert per_bind < 0.025, f"{per_bind * 1000:.1f} ms per bind"


# --- evict -------------------------------------------------------------------------------------------
def test_evict_respects_pdb_then_succeeds(kube: KubeCluster, namespace: str, kube_apiserver: Any) -> None:
    node = f"{namespace}-n"
    kube.create(make_node(node))
    kube.create(make_pod("victim", namespace, labels={"app": "web"}))
    kube.bind(namespace, "victim", node)
    # Without a kubelet the pod stays Pending, and Pending pods skip the PDB check: mark it Running.
    kube.patch("Pod", "victim", namespace, {"status": {"phase": "Running"}}, status=True)
    pdb = kube.create(make_pdb("web", namespace, {"app": "web"}, min_available=1))
    with pytest.raises(TooManyRequestsError, match="disruption budget"):
        kube.evict(namespace, "victim", reason="node overloaded", requested_by="koord-descheduler")
    assert kube.get("Pod", "victim", namespace), "a refused eviction never deletes"
    # No disruption controller here: publish the budget's status as it would.
    generation = kube.get("PodDisruptionBudget", "web", namespace)["metadata"]["generation"]
    kube.patch(
        "PodDisruptionBudget",
        "web",
        namespace,
        {
            "status": {
                "observedGeneration": generation,
                "disruptionsAllowed": 1,
                "currentHealthy": 2,
                "desiredHealthy": 1,
                "expectedPods": 2,
            }
        },
        status=True,
    )
    kube.evict(namespace, "victim", reason="node overloaded", requested_by="koord-descheduler", dry_run=True)
    assert kube.get("Pod", "victim", namespace), "a dry run deletes nothing"
    with pytest.raises(ConflictError, match="Precondition failed"):
        kube.evict(namespace, "victim", reason="r", requested_by="koord-descheduler", uid="not-this-pod")
    assert kube.get("Pod", "victim", namespace), "an eviction of another pod's uid deletes nothing"
    kube.evict(namespace, "victim", reason="node overloaded", requested_by="koord-descheduler")
    with pytest.raises(NotFoundError):
        kube.get("Pod", "victim", namespace)
    record = kube.evictions[-1]
    assert (record.name, record.node, record.reason, record.dry_run) == (
        "victim",
        node,
        "node overloaded",
        False,
    )
    assert kube.flush_events()
    events, _ = kube.list("Event", namespace)
    evicted = [e for e in events if e["reason"] == "Evicted"]
    assert len(evicted) == 1
    assert evicted[0]["involvedObject"]["name"] == "victim"
    assert evicted[0]["message"] == f"evicted from node {node} by koord-descheduler: node overloaded"
    assert pdb["metadata"]["name"] == "web"


# --- events ------------------------------------------------------------------------------------------
def test_events_for_pods_and_nodes(kube: KubeCluster, namespace: str) -> None:
    kube.record_event(
        EventRecord(
            kind="Pod",
            namespace=namespace,
            name="unschedulable",
            reason="FailedScheduling",
            message="0/3 nodes are available: 3 Insufficient cpu.",
            type="Warning",
            component="koord-scheduler",
        )
    )
    kube.record_event(
        EventRecord(
            kind="Node", namespace="", name=f"{namespace}-node", reason="Overloaded", message="cpu 95%"
        )
    )
    assert kube.flush_events()
    pod_events, _ = kube.list("Event", namespace)
    [failed] = [e for e in pod_events if e["reason"] == "FailedScheduling"]
    assert failed["type"] == "Warning"
    assert failed["source"]["component"] == "koord-scheduler"
    assert failed["involvedObject"] == {
        "kind": "Pod",
        "name": "unschedulable",
        "namespace": namespace,
        "apiVersion": "v1",
    }
    node_events, _ = kube.list("Event", "default")
    assert any(
        e["involvedObject"]["name"] == f"{namespace}-node" and e["reason"] == "Overloaded"
        for e in node_events
    )
    assert kube.events.stats.created >= 2 and kube.events.stats.failed == 0
