"""Gang scheduling against a real kube-apiserver: a ``koord scheduler`` process with Koordinator's shipped
profile (Coscheduling included), a PodGroup of 3 and room for 2.

All or nothing: while only two members fit, none is bound (not even for a moment); once a node is added,
all three are bound, with the gang binding annotations, and the PodGroup's status says so.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.kube import KubeCluster
from koord_framework.cluster.port import WatchEvent
from koord_framework.testing import make_node, make_pod

pytestmark = pytest.mark.e2e


def _components() -> Any:
    # --import-mode=importlib: load the sibling test module (Component, scheduler_config, wait_for) by path.
    name = "koord_e2e_components"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("test_components.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


c = _components()
components = c.components  # the fixture, re-exported so that pytest finds it here


def _member(name: str, namespace: str) -> dict[str, Any]:
    pod = make_pod(
        name,
        namespace,
        cpu="1",
        memory="256Mi",
        scheduler_name="koord-scheduler",
        labels={"pod-group.scheduling.sigs.k8s.io": "trainer"},
    )
    pod["spec"]["nodeSelector"] = {"e2e": namespace}  # only this test's nodes
    return pod


def test_gang_of_three_with_room_for_two_binds_none_then_all_once_a_node_is_added(
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    koord_crds: list[str],
    components: list[Any],
    tmp_path: Path,
    kube_apiserver: Any,
    e2e_harness: Any,
) -> None:
    for i in range(2):
        kube.create(make_node(f"{namespace}-n{i}", cpu="1", memory="4Gi", labels={"e2e": namespace}))
    kube.create(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "trainer", "namespace": namespace},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 10},
        }
    )
    for i in range(3):
        kube.create(_member(f"worker-{i}", namespace))

    ever_bound: list[str] = []

    def watch(event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        if meta.get("namespace") == namespace and (event.obj.get("spec") or {}).get("nodeName"):
            ever_bound.append(meta.get("name", ""))

    _, rv = kube.list("Pod", namespace)
    unsubscribe = kube.subscribe(["Pod"], watch, since=rv)
    try:
        scheduler = c.Component(
            tmp_path,
            "scheduler",
            c.scheduler_config(tmp_path, f"g-{namespace}"),
            kube_apiserver.kubeconfig,
            e2e_harness,
        )
        components.append(scheduler)
        c.wait_for(scheduler.ready, 30, "scheduler ready")
        # Long enough for several attempts of the gang (backoff 1 s doubling) and for a Permit timeout (10 s).
        time.sleep(15)
        assert c.bound(kube, namespace) == {f"worker-{i}": "" for i in range(3)}
        assert ever_bound == [], "a member of a gang that cannot fit was bound"

        kube.create(make_node(f"{namespace}-n2", cpu="1", memory="4Gi", labels={"e2e": namespace}))
        c.wait_for(lambda: all(c.bound(kube, namespace).values()), 90, "all three members bound")
    finally:
        unsubscribe()
    placement = c.bound(kube, namespace)
    assert sorted(placement.values()) == [f"{namespace}-n{i}" for i in range(3)]
    for i in range(3):
        annotations = kube.get("Pod", f"worker-{i}", namespace)["metadata"].get("annotations") or {}
        assert (
            annotations.get("internal.scheduling.koordinator.sh/bind-gang-group-id") == f"{namespace}/trainer"
        )
        assert annotations.get("internal.scheduling.koordinator.sh/bind-gang-member-count") == "3"

    def scheduled() -> bool:
        status = kube.get("PodGroup", "trainer", namespace).get("status") or {}
        return status.get("phase") == "Scheduled" and status.get("scheduled") == 3

    c.wait_for(scheduled, 30, "PodGroup status Scheduled with 3 scheduled")
