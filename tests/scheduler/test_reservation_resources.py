"""Reservations holding fine-grained resources, through the whole scheduler: Reservation + NodeNUMAResource
(+ DeviceShare) on NRT nodes with Device objects.

A reserve pod gets a real cpuset (written on the Reservation); an owner pod then gets exactly those CPUs, a
pod that does not own the reservation never does, and no CPU is given to two pods.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from koord_plugin_deviceshare import DeviceShare
from koord_plugin_deviceshare.builders import device_pod, gpu_node_allocatable, make_device
from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.testing import lsr_pod, node, nrt
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.testing import make_reservation

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.framework import PluginLayout
from koord_framework.scheduler.frameworkext import ReservationInfo, ReservationScorePlugin
from koord_framework.scheduler.interface import SchedulerPlugin
from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler
from koord_framework.scheduler.status import Status
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort, SchedulerHarness

STATUS = "scheduling.koordinator.sh/resource-status"
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def _lsr_reservation(name: str, cpu: str, **kw: Any) -> dict[str, Any]:
    r = make_reservation(name, cpu, "1Gi", **kw)
    r["spec"]["template"]["metadata"] = {"namespace": "default", "labels": {"koordinator.sh/qosClass": "LSR"}}
    r["spec"]["template"]["spec"]["priority"] = 9000
    r["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    return r


def _owner(name: str, cpu: str, owner_of: str) -> dict[str, Any]:
    pod = lsr_pod(name, cpu)
    pod["metadata"]["labels"]["app"] = owner_of
    return pod


def _scheduler(*objects: dict[str, Any], plugins: list[Any] | None = None) -> Scheduler:
    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    for o in objects:
        cluster.create(o)
    layout = PluginLayout.every_point(
        [Reservation, NodeNUMAResource, NodeResourcesFit, *(plugins or []), HarnessQueueSort, HarnessBinder]
    )
    return Scheduler(cluster, [ProfileSpec("default-scheduler", layout)], record_outcomes=True)


def _cpus(cluster: MemoryCluster, kind: str, name: str) -> frozenset[int]:
    obj = cluster.get(kind, name, "default" if kind == "Pod" else None)
    raw = ((obj or {}).get("metadata", {}).get("annotations") or {}).get(STATUS)
    return frozenset(parse_cpuset(json.loads(raw)["cpuset"])) if raw else frozenset()


def _node_of(cluster: MemoryCluster, name: str) -> str:
    obj = cluster.get("Pod", name, "default")
    return str(((obj or {}).get("spec") or {}).get("nodeName") or "")


def test_reserved_cpuset_goes_to_the_owner_only() -> None:
    s = _scheduler(node("n1", 8), nrt("n1", 1, 1, 4, 2), _lsr_reservation("r", "4"))
    s.run_until_idle()
    cluster = s.cluster
    assert isinstance(cluster, MemoryCluster)
    reserved = _cpus(cluster, "Reservation", "r")
    assert len(reserved) == 4, cluster.get("Reservation", "r", None)
    # A pod that does not own the reservation sees only the 4 unreserved CPUs.
    cluster.create(lsr_pod("big", "6"))
    cluster.create(lsr_pod("other", "4"))
    s.run_until_idle()
    assert _node_of(cluster, "big") == ""
    assert _node_of(cluster, "other") == "n1"
    assert not _cpus(cluster, "Pod", "other") & reserved
    # The owner gets exactly the reserved CPUs.
    cluster.create(_owner("owner", "4", "r"))
    s.run_until_idle()
    assert _node_of(cluster, "owner") == "n1"
    assert _cpus(cluster, "Pod", "owner") == reserved


def test_no_cpu_is_given_twice_with_several_reservations() -> None:
    objs = [node("n1", 16), nrt("n1", 1, 1, 8, 2), node("n2", 16), nrt("n2", 1, 1, 8, 2)]
    objs += [_lsr_reservation(f"r{i}", "4", allocate_once=False) for i in range(4)]
    s = _scheduler(*objs)
    s.run_until_idle()
    cluster = s.cluster
    assert isinstance(cluster, MemoryCluster)
    pods = [_owner(f"o{i}", "2", f"r{i % 4}") for i in range(8)] + [lsr_pod(f"x{i}", "2") for i in range(8)]
    for p in pods:
        cluster.create(p)
    s.run_until_idle()
    per_node: dict[str, list[frozenset[int]]] = {}
    for i in range(4):
        r = cluster.get("Reservation", f"r{i}", None)
        assert r is not None and r["status"]["phase"] == "Available"
    owners_inside = 0
    for p in pods:
        name = p["metadata"]["name"]
        where = _node_of(cluster, name)
        if not where:
            continue
        cpus = _cpus(cluster, "Pod", name)
        per_node.setdefault(where, []).append(cpus)
        if name.startswith("o"):
            r = cluster.get("Reservation", f"r{int(name[1:]) % 4}", None)
            assert r is not None
            if r["status"]["nodeName"] == where:
                owners_inside += cpus <= _cpus(cluster, "Reservation", r["metadata"]["name"])
        else:
            # A non-owner never lands on reserved CPUs.
            for i in range(4):
                r = cluster.get("Reservation", f"r{i}", None)
                assert r is not None
                if r["status"]["nodeName"] == where:
                    assert not cpus & _cpus(cluster, "Reservation", f"r{i}")
    for sets in per_node.values():
        seen: set[int] = set()
        for cpus in sets:
            assert not cpus & seen
            seen |= cpus
    assert owners_inside == 8


# --- devices ------------------------------------------------------------------------------------------------
def _gpu_node(name: str, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    obj = node(name, 16, labels=labels)
    for key in ("capacity", "allocatable"):
        obj["status"][key].update(gpu_node_allocatable(gpus, 0))
    return obj


def _gpus(cluster: MemoryCluster, kind: str, name: str) -> list[int]:
    obj = cluster.get(kind, name, "default" if kind == "Pod" else None)
    raw = ((obj or {}).get("metadata", {}).get("annotations") or {}).get(DEVICE_ALLOCATED)
    return sorted(a["minor"] for a in json.loads(raw).get("gpu", [])) if raw else []


def _gpu_pod(name: str, gpus: int, owner_of: str | None = None) -> dict[str, Any]:
    pod = device_pod(name, {"cpu": "1", "nvidia.com/gpu": str(gpus)})
    pod["spec"]["schedulerName"] = "default-scheduler"
    if owner_of:
        pod["metadata"]["labels"] = {"app": owner_of}
    return pod


def test_reserved_gpus_go_to_the_owner_only() -> None:
    r = make_reservation("rg", "1", "1Gi", extra_requests={"nvidia.com/gpu": "2"})
    r["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    s = _scheduler(_gpu_node("n1", 4), make_device("n1", 4, 0), r, plugins=[DeviceShare])
    s.run_until_idle()
    cluster = s.cluster
    assert isinstance(cluster, MemoryCluster)
    reserved = _gpus(cluster, "Reservation", "rg")
    assert len(reserved) == 2, cluster.get("Reservation", "rg", None)
    for p in (_gpu_pod("big", 3), _gpu_pod("other", 2)):
        cluster.create(p)
    s.run_until_idle()
    assert _node_of(cluster, "big") == ""
    other = _gpus(cluster, "Pod", "other")
    assert len(other) == 2 and not set(other) & set(reserved)
    cluster.create(_gpu_pod("owner", 2, owner_of="rg"))
    cluster.create(_gpu_pod("late", 1))
    s.run_until_idle()
    assert _gpus(cluster, "Pod", "owner") == reserved
    assert _node_of(cluster, "late") == ""


def test_single_numa_node_pod_gets_cpus_and_gpus_on_one_numa_node() -> None:
    labels = {"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"}
    s = _scheduler(
        _gpu_node("n1", 4, labels), nrt("n1", 1, 2, 4, 2), make_device("n1", 4, 0), plugins=[DeviceShare]
    )
    cluster = s.cluster
    assert isinstance(cluster, MemoryCluster)
    # A pinned pod fills most of one NUMA node's CPUs, then a GPU pod takes the GPUs of one NUMA node. The
    # CPU hints alone would send the next pod's CPUs wherever CPUs are tightest; only DeviceShare's hints
    # tell the topology manager where two GPUs are still free (without them the pod does not fit at all).
    cluster.create(lsr_pod("hog", "6"))
    cluster.create(_gpu_pod("g", 2))
    s.run_until_idle()
    assert len(_cpus(cluster, "Pod", "hog")) == 6
    taken = _gpus(cluster, "Pod", "g")
    assert len(taken) == 2 and len({m // 2 for m in taken}) == 1
    pinned = lsr_pod("pinned", "2")
    pinned["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"
    cluster.create(pinned)
    s.run_until_idle()
    gpus = _gpus(cluster, "Pod", "pinned")
    cpus = _cpus(cluster, "Pod", "pinned")
    assert len(gpus) == 2 and not set(gpus) & set(taken)
    gpu_numa = {m // 2 for m in gpus}
    cpu_numa = {c // 8 for c in cpus}
    assert len(cpus) == 2 and gpu_numa == cpu_numa and len(cpu_numa) == 1
    assert not cpus & _cpus(cluster, "Pod", "hog")
    # No NUMA node has 2 free GPUs left: another such pod cannot be placed.
    again = lsr_pod("again", "2")
    again["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    cluster.create(again)
    s.run_until_idle()
    assert _node_of(cluster, "again") == ""


def test_reservations_already_available_hold_their_cpus_and_gpus() -> None:
    """A scheduler that starts with Available reservations reads their ``resource-status`` and
    ``device-allocated``: those CPUs and GPUs go to owners only."""
    r = _lsr_reservation("old", "4", node="n1", extra_requests={"nvidia.com/gpu": "1"})
    r["metadata"]["annotations"] = {
        STATUS: json.dumps({"cpuset": "0-3"}),
        DEVICE_ALLOCATED: json.dumps(
            {"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "100"}}]}
        ),
    }
    s = _scheduler(
        _gpu_node("n1", 2), nrt("n1", 1, 1, 4, 2), make_device("n1", 2, 0), r, plugins=[DeviceShare]
    )
    cluster = s.cluster
    assert isinstance(cluster, MemoryCluster)
    other = lsr_pod("other", "4")
    other["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    cluster.create(other)
    s.run_until_idle()
    assert _cpus(cluster, "Pod", "other") == {4, 5, 6, 7}
    assert _gpus(cluster, "Pod", "other") == [1]
    owner = _owner("owner", "4", "old")
    owner["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    cluster.create(owner)
    s.run_until_idle()
    assert _cpus(cluster, "Pod", "owner") == {0, 1, 2, 3}
    assert _gpus(cluster, "Pod", "owner") == [0]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reservations=st.lists(
        st.tuples(st.sampled_from([2, 4]), st.sampled_from([0, 1])), min_size=1, max_size=4
    ),
    pods=st.lists(
        st.tuples(st.sampled_from([2, 4]), st.sampled_from([0, 1]), st.integers(-1, 3)),
        min_size=1,
        max_size=10,
    ),
    restricted=st.booleans(),
)
def test_random_reservations_never_give_a_cpu_or_gpu_twice(
    reservations: list[tuple[int, int]], pods: list[tuple[int, int, int]], restricted: bool
) -> None:
    """Random reservations (cpus, gpus) and pods (cpus, gpus, owner of reservation i or -1): no CPU or GPU
    of a node is held by two pods, and a pod never holds what a reservation it does not own reserves."""
    objs: list[dict[str, Any]] = []
    for name in ("n1", "n2"):
        objs += [_gpu_node(name, 2), nrt(name, 1, 1, 4, 2), make_device(name, 2, 0)]
    for i, (cpu, gpu) in enumerate(reservations):
        extra = {"nvidia.com/gpu": str(gpu)} if gpu else None
        r = _lsr_reservation(
            f"r{i}",
            str(cpu),
            allocate_once=False,
            allocate_policy="Restricted" if restricted else None,
            extra_requests=extra,
        )
        objs.append(r)
    s = _scheduler(*objs, plugins=[DeviceShare])
    s.run_until_idle()
    cluster = s.cluster
    assert isinstance(cluster, MemoryCluster)
    names = []
    for j, (cpu, gpu, owner) in enumerate(pods):
        pod = (
            _owner(f"p{j}", str(cpu), f"r{owner}")
            if 0 <= owner < len(reservations)
            else lsr_pod(f"p{j}", str(cpu))
        )
        if gpu:
            pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(gpu)
        cluster.create(pod)
        names.append((f"p{j}", owner if 0 <= owner < len(reservations) else -1))
    s.run_until_idle()
    placed = sum(1 for name, _ in names if _node_of(cluster, name))
    event(f"{placed} of {len(names)} pods placed")
    held: dict[str, list[tuple[str, frozenset[int], frozenset[int]]]] = {}
    for i in range(len(reservations)):
        r = cluster.get("Reservation", f"r{i}", None)
        assert r is not None
        where = (r.get("status") or {}).get("nodeName")
        if where and r["status"].get("phase") == "Available":
            held.setdefault(where, []).append(
                (
                    f"r{i}",
                    _cpus(cluster, "Reservation", f"r{i}"),
                    frozenset(_gpus(cluster, "Reservation", f"r{i}")),
                )
            )
    taken: dict[str, tuple[set[int], set[int]]] = {}
    for name, owner in names:
        where = _node_of(cluster, name)
        if not where:
            continue
        cpus, gpus = _cpus(cluster, "Pod", name), frozenset(_gpus(cluster, "Pod", name))
        used_cpus, used_gpus = taken.setdefault(where, (set(), set()))
        assert not cpus & used_cpus and not gpus & used_gpus, (name, cpus, gpus, taken)
        used_cpus |= cpus
        used_gpus |= gpus
        for rname, rcpus, rgpus in held.get(where, []):
            if rname != f"r{owner}":
                assert not cpus & rcpus and not gpus & rgpus, (name, rname)


class RawScores(SchedulerPlugin, ReservationScorePlugin):
    """Raw reservation scores above 100 (``r-b`` best), brought into range by its normalisation."""

    name: ClassVar[str] = "RawScores"

    def score_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> tuple[int, Status]:
        return (300 if reservation.name == "r-b" else 150), Status()

    def normalize_reservation_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> Status:
        top = max(scores)
        scores[:] = [100 * v // top for v in scores]
        return Status()


def test_reservation_scores_are_normalised_before_the_range_check() -> None:
    h = SchedulerHarness(
        [Reservation, NodeResourcesFit, RawScores, DefaultBinder], now="2024-01-01T00:00:00Z"
    )
    h.add(make_node("n1", cpu="16", memory="32Gi"))
    for name in ("r-a", "r-b"):
        h.add(make_reservation(name, cpu="2", owner_labels={"app": "x"}, node="n1", allocate_once=False))
    h.add(make_pod("x", cpu="1", memory="1Gi", labels={"app": "x"}))
    h.run_until_idle()
    assert '"r-b"' in h.result(make_pod("x")).annotations["scheduling.koordinator.sh/reservation-allocated"]


def test_a_high_priority_pinned_pod_preempts_a_pinned_victim_and_gets_its_cpus() -> None:
    """NodeNUMAResource's AddPod/RemovePod: DefaultPreemption's what-if sees the victim's cpuset free, so the
    preemptor evicts exactly one low-priority pod and lands on its CPUs once it is gone."""
    from koord_plugin_kubernetes.defaultpreemption import DefaultPreemption
    from koord_plugin_kubernetes.queuesort import PrioritySort

    def bound(name: str, cpus: str, priority: int) -> dict[str, Any]:
        pod = lsr_pod(name, "4")
        pod["spec"].update(nodeName="n1", priority=priority)
        pod["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"] = json.dumps(
            {"cpuset": cpus}
        )
        return pod

    h = SchedulerHarness([PrioritySort, NodeResourcesFit, NodeNUMAResource, DefaultPreemption, DefaultBinder])
    h.add(node("n1", 8), nrt("n1", 1, 1, 4, 2), bound("low-a", "0-3", 10), bound("low-b", "4-7", 20))
    high = lsr_pod("high", "4", spec={"requiredCPUBindPolicy": "FullPCPUs"})
    high["spec"]["priority"] = 1000
    first = h.schedule_one(high)
    assert first.node is None
    assert h.cluster.get("Pod", "high", "default")["status"].get("nominatedNodeName") == "n1"
    remaining = {p["metadata"]["name"] for p in h.cluster.list("Pod")[0]}
    assert remaining == {"low-b", "high"}  # the lowest priority victim only
    second = h.schedule_one(high)
    assert second.node == "n1", second
    stored = h.cluster.get("Pod", "high", "default")["metadata"]["annotations"]
    assert parse_cpuset(json.loads(stored["scheduling.koordinator.sh/resource-status"])["cpuset"]) == set(
        range(4)
    )
