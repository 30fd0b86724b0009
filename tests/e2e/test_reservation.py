"""Reservation on a real kube-apiserver: a reservation is scheduled (status written through the status
subresource), a matching pod consumes it, a pod that does not match cannot use its capacity; a
pre-allocating reservation takes over a running owner pod (PreBindReservation patches
``reservation-allocated`` onto that Pod through the API) and keeps its resources for owners once it is gone;
taking over an LSR pod, it takes over exactly its cpuset (NodeNUMAResource's pre-allocation restore hook).

The scheduler runs in-process on the ``KubeCluster`` adapter (live loop, real clock) with the Reservation
plugin and the core plugins it needs; a scheduler name and a node label of this test keep it apart from the
other tests' nodes and pods.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.nodeaffinity import NodeAffinity
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.testing import nrt
from koord_plugin_reservation import Reservation

from koord_framework.cluster.kube import KubeCluster
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.scheduler.framework import PluginLayout
from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler

pytestmark = pytest.mark.e2e
SCHEDULER = "koord-e2e-reservation"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _node(name: str, label: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"e2e-reservation": label, "kubernetes.io/hostname": name}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(name: str, namespace: str, cpu: str, label: str, app: str, qos: str = "") -> dict[str, Any]:
    labels = {"app": app, **({"koordinator.sh/qosClass": qos} if qos else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "schedulerName": SCHEDULER,
            "nodeSelector": {"e2e-reservation": label},
            "containers": [
                {"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
            ],
        },
    }


def _reservation(
    name: str, label: str, cpu: str, owner_app: str, template_meta: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """A Reservation of ``cpu`` cores and 1Gi on the test's node, for pods labelled ``app: owner_app``;
    ``spec`` adds fields (``allocateOnce``, ``preAllocation``, ...)."""
    template: dict[str, Any] = {
        "spec": {
            "schedulerName": SCHEDULER,
            "nodeSelector": {"e2e-reservation": label},
            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        }
    }
    if template_meta is not None:
        template["metadata"] = template_meta
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {
            "ttl": "1h",
            **spec,
            "owners": [{"labelSelector": {"matchLabels": {"app": owner_app}}}],
            "template": template,
        },
    }


def _status(kube: KubeCluster, reservation: str) -> dict[str, Any]:
    return dict(kube.get("Reservation", reservation).get("status") or {})


def _bound(kube: KubeCluster, pod: str, namespace: str) -> str:
    return str((kube.get("Pod", pod, namespace).get("spec") or {}).get("nodeName") or "")


@pytest.fixture
def scheduler(kube: KubeCluster, koord_crds: list[str]) -> Iterator[Scheduler]:
    # NodeNUMAResource's Reserve before Reservation's, as in Koordinator's shipped profile.
    classes = [NodeNUMAResource, Reservation, NodeAffinity, NodeResourcesFit, DefaultPreBind, DefaultBinder]
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


def test_reservation_is_scheduled_and_only_its_owner_consumes_it(
    kube: KubeCluster, namespace: str, scheduler: Scheduler
) -> None:
    label = namespace
    node = f"{namespace}-node"
    kube.create(_node(node, label))
    name = f"{namespace}-r"
    kube.create(_reservation(name, label, "3", "owner", {"namespace": namespace}))

    def status() -> dict[str, Any]:
        return _status(kube, name)

    wait_for(lambda: status().get("phase") == "Available", what="the reservation to become Available")
    assert status()["nodeName"] == node
    assert status()["allocatable"] == {"cpu": "3", "memory": "1Gi"}

    # Not an owner: only 1 of the 4 cores is free for it.
    kube.create(_pod("intruder", namespace, "2", label, "someone-else"))
    # The owner gets the reserved cores.
    kube.create(_pod("owner", namespace, "2", label, "owner"))

    def bound(pod: str) -> str:
        return _bound(kube, pod, namespace)

    wait_for(lambda: bound("owner") == node, what="the owner to be bound")
    annotations = kube.get("Pod", "owner", namespace)["metadata"].get("annotations") or {}
    assert json.loads(annotations[ALLOCATED])["name"] == name
    wait_for(lambda: status().get("phase") == "Succeeded", what="the allocateOnce reservation to complete")
    assert [o["name"] for o in status()["currentOwners"]] == ["owner"]
    # Once the reservation completed, what it still held is free: the intruder fits beside the owner.
    wait_for(lambda: bound("intruder") == node, what="the other pod to use the released capacity")


def test_non_owner_cannot_use_reserved_capacity(
    kube: KubeCluster, namespace: str, scheduler: Scheduler
) -> None:
    label = namespace
    node = f"{namespace}-node"
    kube.create(_node(node, label))
    name = f"{namespace}-held"
    kube.create(_reservation(name, label, "3", "nobody-yet", allocateOnce=False))
    wait_for(
        lambda: _status(kube, name).get("phase") == "Available", what="the reservation to become Available"
    )
    kube.create(_pod("intruder", namespace, "2", label, "someone-else"))
    # Give the scheduler several attempts; the pod must stay pending with an Insufficient cpu verdict.
    time.sleep(3)
    assert not _bound(kube, "intruder", namespace)
    outcome = [o for o in scheduler.outcomes.values() if o.pod.name == "intruder"]
    assert not outcome or "Insufficient cpu" in outcome[-1].message


def test_reservation_pre_allocates_a_running_owner(
    kube: KubeCluster, namespace: str, scheduler: Scheduler
) -> None:
    label = namespace
    node = f"{namespace}-node"
    kube.create(_node(node, label))

    def bound(pod: str) -> str:
        return _bound(kube, pod, namespace)

    kube.create(_pod("old", namespace, "3", label, "owner"))
    wait_for(lambda: bound("old") == node, what="the first owner to be bound")
    name = f"{namespace}-r"
    kube.create(
        _reservation(
            name,
            label,
            "3",
            "owner",
            {"namespace": namespace},
            allocateOnce=False,
            allocatePolicy="Restricted",
            preAllocation=True,
        )
    )

    def status() -> dict[str, Any]:
        return _status(kube, name)

    # Only 1 core is free: the reservation is placed by taking over the running owner.
    wait_for(lambda: status().get("phase") == "Available", what="the reservation to become Available")
    assert status()["nodeName"] == node
    annotations = kube.get("Pod", "old", namespace)["metadata"].get("annotations") or {}
    assert json.loads(annotations[ALLOCATED])["name"] == name
    wait_for(lambda: bool(status().get("currentOwners")), what="the controller to record the owner")
    assert [o["name"] for o in status()["currentOwners"]] == ["old"]

    # The pod goes; the reservation keeps its 3 cores for owners only.
    kube.delete("Pod", "old", namespace)
    kube.create(_pod("stranger", namespace, "2", label, "someone-else"))
    kube.create(_pod("heir", namespace, "2", label, "owner"))
    wait_for(lambda: bound("heir") == node, what="the next owner to use the reservation")
    time.sleep(2)
    assert not bound("stranger")


def test_pre_allocation_takes_over_the_pods_cpuset(
    kube: KubeCluster, namespace: str, scheduler: Scheduler
) -> None:
    label = namespace
    node = f"{namespace}-numa"
    kube.create(_node(node, label))
    topology = nrt(node, 1, 1, 2, 2)  # 4 CPUs: 2 cores x 2 threads
    topology["metadata"].pop("uid", None)
    kube.create(topology)

    def pod(name: str) -> dict[str, Any]:
        return kube.get("Pod", name, namespace)

    def cpus(obj: dict[str, Any]) -> frozenset[int]:
        raw = (obj["metadata"].get("annotations") or {}).get("scheduling.koordinator.sh/resource-status")
        return frozenset(parse_cpuset(json.loads(raw)["cpuset"])) if raw else frozenset()

    def bound(name: str) -> str:
        return _bound(kube, name, namespace)

    kube.create(_pod("old", namespace, "2", label, "owner", qos="LSR"))
    wait_for(lambda: bound("old") == node and bool(cpus(pod("old"))), what="the LSR owner pinned")
    kube.create(_pod("filler", namespace, "2", label, "someone-else", qos="LSR"))
    wait_for(lambda: bound("filler") == node, what="the node filled")
    old_cpus = cpus(pod("old"))
    name = f"{namespace}-numa-r"
    kube.create(
        _reservation(
            name,
            label,
            "2",
            "owner",
            {"namespace": namespace, "labels": {"koordinator.sh/qosClass": "LSR"}},
            allocateOnce=False,
            allocatePolicy="Restricted",
            preAllocation=True,
        )
    )
    wait_for(
        lambda: _status(kube, name).get("phase") == "Available", what="the reservation to become Available"
    )
    assert cpus(kube.get("Reservation", name)) == old_cpus
    kube.delete("Pod", "old", namespace)
    kube.create(_pod("heir", namespace, "2", label, "owner", qos="LSR"))
    wait_for(lambda: bound("heir") == node, what="the next owner to use the reservation")
    assert cpus(pod("heir")) == old_cpus
