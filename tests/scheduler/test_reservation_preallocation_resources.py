"""Pre-allocation with fine-grained resources, through the whole scheduler: a reservation that takes over a
running pod (``spec.preAllocation``) gets exactly that pod's cpuset (NodeNUMAResource) and GPUs
(DeviceShare), and no CPU or GPU is ever held by two pods that could run at once: not while the taken-over
pod runs inside the reservation, not after it finishes, not after the reservation is deleted.

The resource plugins run their Reserve *before* Reservation's, as in Koordinator's shipped profile: they
read the nomination the Reservation plugin makes on their first question (``nominated_pre_allocation``).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from koord_plugin_deviceshare import DeviceShare
from koord_plugin_deviceshare.builders import gpu_node_allocatable, make_device
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.testing import lsr_pod, node, nrt
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.testing import make_reservation

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import NotFoundError
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.scheduler.framework import PluginLayout
from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler
from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort

STATUS = "scheduling.koordinator.sh/resource-status"
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
SCHEDULER = "default-scheduler"


def _scheduler(*objects: dict[str, Any]) -> tuple[Scheduler, MemoryCluster]:
    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    for o in objects:
        cluster.create(o)
    layout = PluginLayout.every_point(
        [NodeNUMAResource, DeviceShare, Reservation, NodeResourcesFit, HarnessQueueSort, HarnessBinder]
    )
    return Scheduler(cluster, [ProfileSpec(SCHEDULER, layout)], record_outcomes=True), cluster


def _gpu_node(name: str, cpus: int, gpus: int) -> dict[str, Any]:
    obj = node(name, cpus)
    for key in ("capacity", "allocatable"):
        obj["status"][key].update(gpu_node_allocatable(gpus, 0))
    return obj


def _pod(name: str, cpu: int, gpus: int = 0, app: str = "") -> dict[str, Any]:
    pod = lsr_pod(name, str(cpu))
    if gpus:
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
    if app:
        pod["metadata"]["labels"]["app"] = app
    return pod


def _pre_allocating(
    name: str, cpu: int, gpus: int = 0, multiple: bool = False, memory: str = "1Gi"
) -> dict[str, Any]:
    extra = {"nvidia.com/gpu": str(gpus)} if gpus else None
    r = make_reservation(
        name, str(cpu), memory, allocate_once=False, allocate_policy="Restricted", extra_requests=extra
    )
    r["spec"]["template"]["metadata"] = {"namespace": "default", "labels": {"koordinator.sh/qosClass": "LSR"}}
    r["spec"]["template"]["spec"]["priority"] = 9000
    r["spec"]["template"]["spec"]["schedulerName"] = SCHEDULER
    r["spec"]["preAllocation"] = True
    if multiple:
        r["spec"]["preAllocationPolicy"] = {"enableMultiple": True}
    return r


def _find(cluster: MemoryCluster, kind: str, name: str) -> dict[str, Any] | None:
    try:
        return cluster.get(kind, name, "default" if kind == "Pod" else "")
    except NotFoundError:
        return None


def _annotation(cluster: MemoryCluster, kind: str, name: str, key: str) -> str:
    obj = _find(cluster, kind, name)
    return str(((obj or {}).get("metadata", {}).get("annotations") or {}).get(key) or "")


def _cpus(cluster: MemoryCluster, kind: str, name: str) -> frozenset[int]:
    raw = _annotation(cluster, kind, name, STATUS)
    return frozenset(parse_cpuset(json.loads(raw).get("cpuset", ""))) if raw else frozenset()


def _gpus(cluster: MemoryCluster, kind: str, name: str) -> frozenset[int]:
    raw = _annotation(cluster, kind, name, DEVICE_ALLOCATED)
    return frozenset(a["minor"] for a in json.loads(raw).get("gpu", [])) if raw else frozenset()


def _node_of(cluster: MemoryCluster, name: str) -> str:
    obj = cluster.get("Pod", name, "default")
    return str(((obj or {}).get("spec") or {}).get("nodeName") or "")


def _owner_of(cluster: MemoryCluster, name: str) -> str:
    raw = _annotation(cluster, "Pod", name, ALLOCATED)
    return str(json.loads(raw)["name"]) if raw else ""


def _finish(cluster: MemoryCluster, name: str) -> None:
    cluster.patch("Pod", name, "default", {"status": {"phase": "Succeeded"}}, status=True)


def test_the_reservation_gets_exactly_the_taken_over_pods_cpus_and_gpus() -> None:
    s, cluster = _scheduler(_gpu_node("n1", 8, 2), nrt("n1", 1, 1, 4, 2), make_device("n1", 2, 0))
    cluster.create(_pod("old", 4, gpus=1, app="r"))
    cluster.create(_pod("filler", 4, gpus=1))
    s.run_until_idle()
    old_cpus, old_gpus = _cpus(cluster, "Pod", "old"), _gpus(cluster, "Pod", "old")
    assert len(old_cpus) == 4 and len(old_gpus) == 1
    # The node is full: only taking "old" over lets the reservation on.
    cluster.create(_pre_allocating("r", 4, gpus=1))
    s.run_until_idle()
    r = cluster.get("Reservation", "r", None)
    assert r is not None and r["status"]["phase"] == "Available", r
    assert _owner_of(cluster, "old") == "r"
    assert _cpus(cluster, "Reservation", "r") == old_cpus
    assert _gpus(cluster, "Reservation", "r") == old_gpus
    # While "old" runs inside the reservation, nothing of it is free: not for an owner, not for others.
    cluster.create(_pod("heir", 4, gpus=1, app="r"))
    cluster.create(_pod("stranger", 2))
    s.run_until_idle()
    assert _node_of(cluster, "heir") == "" and _node_of(cluster, "stranger") == ""
    # "old" finishes: its CPUs and GPU stay the reservation's, for its owner only.
    _finish(cluster, "old")
    s.run_until_idle()
    assert _node_of(cluster, "heir") == "n1"
    assert _cpus(cluster, "Pod", "heir") == old_cpus and _gpus(cluster, "Pod", "heir") == old_gpus
    assert _node_of(cluster, "stranger") == ""


def test_a_free_cpuset_when_the_candidate_holds_none() -> None:
    """A candidate without a cpuset (an LS pod) is still taken over; the reservation's cpuset then comes
    from the free CPUs, never from another pod's."""
    s, cluster = _scheduler(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    ls = lsr_pod("old", "4", qos="LS")
    ls["metadata"]["labels"]["app"] = "r"
    cluster.create(ls)
    cluster.create(_pod("pinned", 2))
    s.run_until_idle()
    assert _node_of(cluster, "old") == "n1" and not _cpus(cluster, "Pod", "old")
    cluster.create(_pre_allocating("r", 4))
    s.run_until_idle()
    assert _owner_of(cluster, "old") == "r"
    reserved = _cpus(cluster, "Reservation", "r")
    assert len(reserved) == 4 and not reserved & _cpus(cluster, "Pod", "pinned")


def test_multiple_pods_give_the_reservation_all_their_cpus() -> None:
    s, cluster = _scheduler(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    cluster.create(_pod("a1", 2, app="r"))
    cluster.create(_pod("a2", 2, app="r"))
    cluster.create(_pod("filler", 4))
    s.run_until_idle()
    taken = _cpus(cluster, "Pod", "a1") | _cpus(cluster, "Pod", "a2")
    cluster.create(_pre_allocating("r", 4, multiple=True, memory="2Gi"))
    s.run_until_idle()
    assert {_owner_of(cluster, "a1"), _owner_of(cluster, "a2")} == {"r"}
    assert _cpus(cluster, "Reservation", "r") == taken


def test_deleting_the_reservation_leaves_the_running_pod_its_cpus_only() -> None:
    s, cluster = _scheduler(node("n1", 8), nrt("n1", 1, 1, 4, 2))
    cluster.create(_pod("old", 4, app="r"))
    s.run_until_idle()
    old_cpus = _cpus(cluster, "Pod", "old")
    cluster.create(_pod("filler", 4))
    s.run_until_idle()
    cluster.create(_pre_allocating("r", 4))
    s.run_until_idle()
    assert _cpus(cluster, "Reservation", "r") == old_cpus
    cluster.delete("Reservation", "r")
    cluster.create(_pod("late", 2))
    s.run_until_idle()
    assert _node_of(cluster, "late") == ""  # "old" still holds its CPUs, "filler" the others
    _finish(cluster, "old")
    s.run_until_idle()
    assert _node_of(cluster, "late") == "n1" and _cpus(cluster, "Pod", "late") <= old_cpus


# --- randomised: no CPU or GPU given twice ---------------------------------------------------------------
def _holders(cluster: MemoryCluster) -> dict[str, list[tuple[str, frozenset[int], frozenset[int]]]]:
    """Node -> (holder, cpus, gpus) of every running pod and every Available reservation's *free part*:
    a reservation's CPUs and GPUs held by its running owners count once, as the owner's."""
    out: dict[str, list[tuple[str, frozenset[int], frozenset[int]]]] = {}
    inside: dict[str, tuple[set[int], set[int]]] = {}
    for pod in cluster.list("Pod")[0]:
        meta = pod["metadata"]
        where = str((pod.get("spec") or {}).get("nodeName") or "")
        if not where or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        name = meta["name"]
        cpus, gpus = _cpus(cluster, "Pod", name), _gpus(cluster, "Pod", name)
        out.setdefault(where, []).append((f"pod {name}", cpus, gpus))
        owner = _owner_of(cluster, name)
        if owner:
            used = inside.setdefault(owner, (set(), set()))
            used[0].update(cpus)
            used[1].update(gpus)
    for r in cluster.list("Reservation")[0]:
        status = r.get("status") or {}
        if status.get("phase") != "Available" or not status.get("nodeName"):
            continue
        name = r["metadata"]["name"]
        used_cpus, used_gpus = inside.get(name, (set(), set()))
        cpus, gpus = _cpus(cluster, "Reservation", name), _gpus(cluster, "Reservation", name)
        # An owner inside the reservation uses its CPUs / GPUs; a GPU shared out of the reservation may
        # be partly used, but no *other* holder may have it.
        out.setdefault(status["nodeName"], []).append(
            (f"reservation {name}", cpus - used_cpus, gpus - used_gpus)
        )
    return out


def _assert_nothing_given_twice(cluster: MemoryCluster) -> None:
    for where, holders in _holders(cluster).items():
        seen_cpus: dict[int, str] = {}
        seen_gpus: dict[int, str] = {}
        for who, cpus, gpus in holders:
            for c in cpus:
                assert c not in seen_cpus, f"{where}: cpu {c} held by {seen_cpus[c]} and {who}"
                seen_cpus[c] = who
            for g in gpus:
                assert g not in seen_gpus, f"{where}: gpu {g} held by {seen_gpus[g]} and {who}"
                seen_gpus[g] = who


_STEP = st.one_of(
    st.tuples(st.just("pod"), st.sampled_from([2, 4]), st.sampled_from([0, 1]), st.integers(-1, 2)),
    st.tuples(st.just("reservation"), st.sampled_from([2, 4]), st.sampled_from([0, 1]), st.booleans()),
    st.tuples(st.just("finish"), st.integers(0, 20), st.just(0), st.just(False)),
    st.tuples(st.just("delete"), st.integers(0, 5), st.just(0), st.just(False)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_STEP, min_size=3, max_size=14))
def test_random_pre_allocation_never_gives_a_cpu_or_gpu_twice(steps: list[tuple[str, int, int, Any]]) -> None:
    """Random pods (some owners of pre-allocating reservations), pre-allocating reservations (single or
    multiple), pods finishing and reservations deleted, in any order, on two small nodes: after every step
    no CPU or GPU is held twice (a reservation's part its running owners use counts as theirs), and a
    reservation that took pods over holds every CPU and GPU they hold."""
    s, cluster = _scheduler(
        _gpu_node("n1", 8, 2),
        nrt("n1", 1, 1, 4, 2),
        make_device("n1", 2, 0),
        _gpu_node("n2", 8, 2),
        nrt("n2", 1, 1, 4, 2),
        make_device("n2", 2, 0),
    )
    pods: list[str] = []
    reservations: list[str] = []
    for i, (kind, size, gpus, extra) in enumerate(steps):
        if kind == "pod":
            app = f"r{extra}" if extra >= 0 else ""
            cluster.create(_pod(f"p{i}", size, gpus=gpus, app=app))
            pods.append(f"p{i}")
        elif kind == "reservation":
            name = f"r{len(reservations)}"
            memory = f"{size // 2}Gi" if extra else "1Gi"  # two 1Gi pods make up a multiple one
            cluster.create(_pre_allocating(name, size, gpus=gpus, multiple=bool(extra), memory=memory))
            reservations.append(name)
        elif kind == "finish" and pods:
            _finish(cluster, pods[size % len(pods)])
        elif kind == "delete" and reservations:
            name = reservations[size % len(reservations)]
            if _find(cluster, "Reservation", name) is not None:
                cluster.delete("Reservation", name)
        s.run_until_idle()
        _assert_nothing_given_twice(cluster)
    taken_over = 0
    for name in reservations:
        r = _find(cluster, "Reservation", name)
        if r is None or (r.get("status") or {}).get("phase") != "Available":
            continue
        requests = r["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        for p in pods:
            phase = ((_find(cluster, "Pod", p) or {}).get("status") or {}).get("phase")
            if _owner_of(cluster, p) != name or phase in ("Succeeded", "Failed"):
                continue
            taken_over += 1
            assert _cpus(cluster, "Pod", p) <= _cpus(cluster, "Reservation", name), (p, name)
            if "nvidia.com/gpu" in requests:  # a reservation without GPUs leaves an owner's GPU its own
                assert _gpus(cluster, "Pod", p) <= _gpus(cluster, "Reservation", name), (p, name)
    event(f"{taken_over} running pods inside reservations")
