"""``NodeInfo``: a node with the pods the scheduler counts on it (bound and assumed), as in kube-scheduler.

Aggregates are maintained incrementally: adding or removing a pod touches only its own resources.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koord_framework.api.objects import ContainerInfo, HostPort, NodeRecord, PodInfo, pod_requests

DEFAULT_MILLI_CPU_REQUEST = 100
"""kube-scheduler's non-zero default for a container without a cpu request (used only for scoring)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""kube-scheduler's non-zero default for a container without a memory request (200 MiB)."""


def non_zero_requests(pod: PodInfo) -> tuple[int, int]:
    """(milli-cpu, memory) with kube-scheduler's defaults for containers that request nothing.

    As ``PodRequests`` with ``NonMissingContainerRequests``: a container whose request is *absent* gets the
    default; an explicit zero stays zero. Init containers, sidecars and overhead follow the usual rules.
    Scoring plugins use these so that many request-less pods do not all land on one node. Cached on the
    record: a pod's containers never change.
    """
    cached = pod.non_zero
    if cached is not None:
        return cached
    # Replicas share their parsed containers (``PodInfo.from_manifest`` caches them by content), so the
    # answer is kept per containers object too; the entry holds the objects, so their ids stay theirs.
    key = (id(pod.containers), id(pod.overhead))
    hit = _NON_ZERO.get(key)
    if hit is not None and hit[0] is pod.containers and hit[1] is pod.overhead:
        pod.non_zero = hit[2]
        return hit[2]
    defaulted = tuple(
        ContainerInfo(
            c.name,
            {
                "cpu": c.requests.get("cpu", DEFAULT_MILLI_CPU_REQUEST),
                "memory": c.requests.get("memory", DEFAULT_MEMORY_REQUEST),
            },
            {},
            c.kind,
        )
        for c in pod.containers
    )
    reqs = pod_requests(defaulted, pod.overhead)
    value = (reqs.get("cpu", 0), reqs.get("memory", 0))
    if len(_NON_ZERO) >= 4096:
        _NON_ZERO.clear()
    _NON_ZERO[key] = (pod.containers, pod.overhead, value)
    pod.non_zero = value
    return value


_NON_ZERO: dict[tuple[int, int], tuple[Any, Any, tuple[int, int]]] = {}


def has_affinity(pod: PodInfo) -> bool:
    aff = pod.affinity or {}
    return bool(aff.get("podAffinity") or aff.get("podAntiAffinity"))


def has_required_anti_affinity(pod: PodInfo) -> bool:
    anti = (pod.affinity or {}).get("podAntiAffinity") or {}
    return bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))


class NodeInfo:
    """One node and the pods on it. ``row`` is the node's row in the scheduler's ``NodeTable``."""

    __slots__ = (
        "generation",
        "node",
        "non_zero_cpu",
        "non_zero_memory",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "requested",
        "row",
        "used_ports",
    )

    def __init__(self, node: NodeRecord, pods: Iterable[PodInfo] = (), row: int = -1) -> None:
        self.node = node
        self.row = row
        self.pods: dict[str, PodInfo] = {}
        """Pods by uid, in the order they were added."""
        self.requested: dict[str, int] = {}
        self.non_zero_cpu = 0
        self.non_zero_memory = 0
        self.used_ports: dict[tuple[str, int], set[str]] = {}
        """(protocol, port) -> host IPs in use."""
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        self.generation = 0
        for p in pods:
            self.add_pod(p)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def allocatable(self) -> Mapping[str, int]:
        return self.node.allocatable

    def add_pod(self, pod: PodInfo) -> None:
        if pod.uid in self.pods:
            raise ValueError(f"pod {pod.key} ({pod.uid}) is already counted on node {self.name}")
        self.pods[pod.uid] = pod
        req = self.requested
        for k, v in pod.requests.items():
            req[k] = req.get(k, 0) + v
        cpu, mem = non_zero_requests(pod)
        self.non_zero_cpu += cpu
        self.non_zero_memory += mem
        for hp in pod.host_ports:
            self.used_ports.setdefault((hp.protocol, hp.port), set()).add(hp.ip)
        if has_affinity(pod):
            self.pods_with_affinity[pod.uid] = pod
        if has_required_anti_affinity(pod):
            self.pods_with_required_anti_affinity[pod.uid] = pod
        self.generation += 1

    def remove_pod(self, pod: PodInfo) -> None:
        old = self.pods.pop(pod.uid, None)
        if old is None:
            raise KeyError(f"pod {pod.key} ({pod.uid}) is not on node {self.name}")
        req = self.requested
        for k, v in old.requests.items():
            req[k] = req.get(k, 0) - v
        cpu, mem = non_zero_requests(old)
        self.non_zero_cpu -= cpu
        self.non_zero_memory -= mem
        for hp in old.host_ports:
            ips = self.used_ports.get((hp.protocol, hp.port))
            if ips is not None:
                ips.discard(hp.ip)
                if not ips:
                    del self.used_ports[(hp.protocol, hp.port)]
        self.pods_with_affinity.pop(old.uid, None)
        self.pods_with_required_anti_affinity.pop(old.uid, None)
        self.generation += 1

    def port_conflict(self, ports: Iterable[HostPort]) -> bool:
        """Kubernetes' host-port rule: 0.0.0.0 conflicts with every IP of the same protocol and port."""
        for hp in ports:
            ips = self.used_ports.get((hp.protocol, hp.port))
            if not ips:
                continue
            if hp.ip == "0.0.0.0" or "0.0.0.0" in ips or hp.ip in ips:
                return True
        return False

    def clone(self) -> NodeInfo:
        other = NodeInfo.__new__(NodeInfo)
        other.node = self.node
        other.row = self.row
        other.pods = dict(self.pods)
        other.requested = dict(self.requested)
        other.non_zero_cpu = self.non_zero_cpu
        other.non_zero_memory = self.non_zero_memory
        other.used_ports = {k: set(v) for k, v in self.used_ports.items()}
        other.pods_with_affinity = dict(self.pods_with_affinity)
        other.pods_with_required_anti_affinity = dict(self.pods_with_required_anti_affinity)
        other.generation = self.generation
        return other

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}, pods={len(self.pods)}, requested={self.requested})"

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "pods": len(self.pods), "requested": dict(self.requested)}
