"""MigrationController's ReservationFirst on a real kube-apiserver: the job creates a Reservation for the
pod (owned by its ReplicaSet, away from its node), the scheduler's Reservation plugin places it, and only
then is the pod evicted through the Eviction API.

The descheduler and the scheduler run in-process on the ``KubeCluster`` adapter (real clock); a scheduler
name and a node label of this test keep them apart from the other tests' nodes and pods. Without a kubelet
nothing recreates the pod, so the test stops at the eviction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.nodeaffinity import NodeAffinity
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_migration import MigrationController
from koord_plugin_reservation import Reservation

from koord_framework.cluster.kube import KubeCluster
from koord_framework.descheduler.interface import EvictOptions
from koord_framework.scheduler.framework import PluginLayout
from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler
from koord_framework.testing.descheduler import DeschedulerHarness

pytestmark = pytest.mark.e2e
SCHEDULER = "koord-e2e-migration"
LABEL = "e2e-migration"


def _node(name: str, label: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {LABEL: label, "kubernetes.io/hostname": name}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


@pytest.fixture
def scheduler(kube: KubeCluster, koord_crds: list[str]) -> Iterator[Scheduler]:
    classes = [Reservation, NodeAffinity, NodeResourcesFit, DefaultPreBind, DefaultBinder]
    spec = ProfileSpec(SCHEDULER, PluginLayout.every_point(classes), {})
    sched = Scheduler(kube, [spec], pod_initial_backoff_seconds=0.2, pod_max_backoff_seconds=1.0)
    stop = threading.Event()
    thread = threading.Thread(target=sched.run, args=(stop,), kwargs={"poll": 0.1}, daemon=True)
    thread.start()
    try:
        yield sched
    finally:
        stop.set()
        thread.join(timeout=10)
        sched.close()


def test_reservation_first_reserves_on_another_node_then_evicts(
    kube: KubeCluster, namespace: str, scheduler: Scheduler
) -> None:
    hot, cold = f"{namespace}-hot", f"{namespace}-cold"
    for node in (hot, cold):
        kube.create(_node(node, namespace))
    rs = kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
                },
            },
        }
    )
    rs_uid = rs["metadata"]["uid"]
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-0",
                "namespace": namespace,
                "labels": {"app": "web"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web",
                        "uid": rs_uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "nodeName": hot,
                "nodeSelector": {LABEL: namespace},
                "containers": [
                    {
                        "name": "main",
                        "image": "pause",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    }
                ],
            },
        }
    )
    kube.patch(
        "Pod",
        "web-0",
        namespace,
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        status=True,
    )

    args = {
        "schedulerNames": [SCHEDULER],
        "skipEvictionGates": ["ExpectedReplicas", "MaxMigratingPerWorkload", "MaxUnavailablePerWorkload"],
    }
    harness = DeschedulerHarness([], evictor=(MigrationController, args), cluster=kube)  # type: ignore[arg-type]
    descheduler = harness.descheduler
    try:

        def run_until(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                descheduler.tick()
                if predicate():
                    return
                time.sleep(0.1)
            raise AssertionError(f"timed out waiting for {what}")

        run_until(
            lambda: descheduler.services.cache.pod(namespace, "web-0") is not None, "the pod in the cache"
        )
        plugin = harness.plugin("MigrationController")
        pod = descheduler.services.cache.pod(namespace, "web-0")
        assert pod is not None
        assert plugin.evict(pod, EvictOptions("LowNodeLoad", "node is overutilized"))

        def job() -> dict[str, Any]:
            found = [
                j
                for j in kube.list("PodMigrationJob")[0]
                if j["spec"]["podRef"].get("namespace") == namespace
            ]
            return found[0] if found else {}

        def evicted() -> bool:
            pod = kube.try_get("Pod", "web-0", namespace)
            return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

        run_until(evicted, "the pod evicted after its reservation was placed")
        ref = job()["spec"]["reservationOptions"]["reservationRef"]
        reservation = kube.get("Reservation", ref["name"])
        try:
            assert reservation["status"]["nodeName"] == cold
            assert reservation["spec"]["owners"][0]["controller"]["uid"] == rs_uid
            assert reservation["spec"]["allocateOnce"] is True
            terms = reservation["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
            assert terms == [
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": [hot]}]}
            ]
            status = job()["status"]
            assert status["phase"] == "Running" and status["nodeName"] == cold
            conds = {c["type"]: c for c in status["conditions"]}
            assert conds["ReservationCreated"]["status"] == "True"
            assert conds["ReservationScheduled"]["status"] == "True"
            assert conds["Eviction"]["reason"] in ("Evicting", "EvictComplete")
        finally:
            kube.delete("PodMigrationJob", job()["metadata"]["name"])
        # Deleting the job deletes its reservation.
        run_until(lambda: kube.try_get("Reservation", ref["name"]) is None, "the reservation deleted")
    finally:
        descheduler.close()
