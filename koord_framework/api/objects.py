"""Slim records of pods and nodes, built once from manifests and kept by every cache.

A client ``V1Pod`` costs tens of KiB; the scheduler must hold 150,000 pods in well under a GiB. These records
keep only what the platform reads, with quantities already parsed into integers (cpu in milli-cores, the
rest by ``Value()``; see ``koord_framework.api.resources``). Raw sub-structures that are read rarely
(affinity, topology spread constraints) stay as the manifest's dicts and are parsed by the plugin that needs
them, once per pod, into its own cycle state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api import qos as qoslib
from koord_framework.api.resources import add, max_each, parse_resource_list
from koord_framework.cluster.clock import parse_time

_EMPTY: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """One ``metadata.ownerReferences`` entry."""

    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True, slots=True)
class Taint:
    """One ``spec.taints`` entry of a node."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """A container's name, parsed requests and limits, and kind (app, init, sidecar)."""

    name: str
    requests: Mapping[str, int]
    limits: Mapping[str, int]
    kind: str = "app"
    """``app``, ``init`` (a regular init container) or ``sidecar`` (restartPolicy Always init container)."""
    container_id: str = ""
    """From ``status.containerStatuses``, e.g. ``containerd://<id>``; empty before the container runs."""


@dataclass(frozen=True, slots=True)
class HostPort:
    """A host port a container asks for (``ports[].hostPort``)."""

    protocol: str
    ip: str
    port: int


def _containers(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[ContainerInfo, ...]:
    ids: dict[str, str] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            if isinstance(cs, Mapping) and cs.get("name"):
                ids[str(cs["name"])] = str(cs.get("containerID") or "")
    out: list[ContainerInfo] = []
    for key, default_kind in (("initContainers", "init"), ("containers", "app")):
        for i, c in enumerate(spec.get(key) or ()):
            res = c.get("resources") or {}
            limits = parse_resource_list(res.get("limits") or {}, path=f"spec.{key}[{i}].resources.limits")
            requests = parse_resource_list(
                res.get("requests") or {}, path=f"spec.{key}[{i}].resources.requests"
            )
            # The API server defaults a missing request to its limit (SetDefaults_Pod); manifests given to
            # the embedded cluster never went through it, so the record applies that default itself.
            for name, value in limits.items():
                requests.setdefault(name, value)
            kind = default_kind
            if default_kind == "init" and c.get("restartPolicy") == "Always":
                kind = "sidecar"
            out.append(
                ContainerInfo(str(c.get("name") or ""), requests, limits, kind, ids.get(c.get("name"), ""))
            )
    return tuple(out)


def pod_requests(containers: tuple[ContainerInfo, ...], overhead: Mapping[str, int]) -> dict[str, int]:
    """Kubernetes ``PodRequests``: max(app + sidecars, each init + sidecars started before it) + overhead."""
    reqs: dict[str, int] = {}
    for c in containers:
        if c.kind == "app":
            reqs = add(reqs, c.requests)
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in containers:
        if c.kind == "sidecar":
            reqs = add(reqs, c.requests)
            sidecars = add(sidecars, c.requests)
            init_max = max_each(init_max, sidecars)
        elif c.kind == "init":
            init_max = max_each(init_max, add(c.requests, sidecars))
    reqs = max_each(reqs, init_max)
    if overhead:
        reqs = add(reqs, overhead)
    return reqs


def pod_limits(containers: tuple[ContainerInfo, ...], overhead: Mapping[str, int]) -> dict[str, int]:
    """Kubernetes ``PodLimits`` with the same init/sidecar rules as requests."""
    lim: dict[str, int] = {}
    for c in containers:
        if c.kind in ("app", "sidecar"):
            lim = add(lim, c.limits)
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in containers:
        if c.kind == "sidecar":
            sidecars = add(sidecars, c.limits)
        elif c.kind == "init":
            init_max = max_each(init_max, add(c.limits, sidecars))
    lim = max_each(lim, init_max)
    if overhead and lim:
        lim = add(lim, {k: v for k, v in overhead.items() if k in lim})
    return lim


@dataclass(frozen=True, slots=True)
class _ParsedResources:
    """What a pod's containers (and overhead) parse into, shared by every pod with the same containers."""

    containers: tuple[ContainerInfo, ...]
    overhead: Mapping[str, int]
    requests: dict[str, int]
    limits: dict[str, int]
    kube_qos: qoslib.KubeQoS | None
    """Computed from the containers; None until a pod without a recorded ``status.qosClass`` needed it."""


class _ResourceCache:
    """Parsed container resources by the containers' exact content.

    Replicas of one workload have identical containers, and parsing quantities and deriving the Kubernetes
    QoS was most of the cost of building a record (150,000 of them when a scheduler starts on a large
    cluster). The key is the ``repr`` of the parts parsed: equal reprs of JSON values mean equal values.
    Pods whose status names containers (container ids are per pod) are parsed in full. The records share
    the parsed dicts, which every reader treats as read-only. Bounded: cleared when full.
    """

    MAX_ENTRIES = 4096

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str], _ParsedResources] = {}

    def lookup(
        self, spec: Mapping[str, Any], status: Mapping[str, Any]
    ) -> tuple[_ParsedResources | None, tuple[str, str, str] | None]:
        if status.get("containerStatuses") or status.get("initContainerStatuses"):
            return None, None
        key = (
            _resources_key(spec.get("containers")),
            _resources_key(spec.get("initContainers")),
            repr(spec.get("overhead")),
        )
        return self._entries.get(key), key

    def store(self, key: tuple[str, str, str] | None, parsed: _ParsedResources) -> None:
        if key is None:
            return
        if len(self._entries) >= self.MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = parsed


def _resources_key(containers: Any) -> str:
    """What ``_containers`` reads of a container list (names, resources, restart policies), as text."""
    if not containers:
        return repr(containers)
    try:
        return repr([(c.get("name"), c.get("resources"), c.get("restartPolicy")) for c in containers])
    except AttributeError:  # not a list of objects: let the full parse report it
        return repr(containers)


_RESOURCES = _ResourceCache()


class _TimeCache:
    """``parse_time`` of the timestamps records read, memoised: a cluster's pods share a few thousand
    distinct creation seconds, and parsing one costs more than the rest of a record's fields."""

    MAX_ENTRIES = 8192

    def __init__(self) -> None:
        self._entries: dict[Any, float | None] = {}

    def __call__(self, value: Any) -> float | None:
        if not isinstance(value, str):
            return parse_time(value)
        found = self._entries.get(value, _MISSING)
        if found is _MISSING:
            found = parse_time(value)
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries.clear()
            self._entries[value] = found
        return found  # type: ignore[return-value]


_MISSING = object()
_parse_time = _TimeCache()


def condition_times(status: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """``lastTransitionTime`` of the pod's PodScheduled=True and Initialized=True conditions."""
    scheduled = initialized = None
    for cond in status.get("conditions") or ():
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "PodScheduled":
            scheduled = _parse_time(cond.get("lastTransitionTime"))
        elif cond.get("type") == "Initialized":
            initialized = _parse_time(cond.get("lastTransitionTime"))
    return scheduled, initialized


@dataclass(slots=True, eq=False)
class PodInfo:
    """A pod as every cache keeps it. Identity is ``uid``; ``key`` is ``namespace/name``."""

    uid: str
    namespace: str
    name: str
    node_name: str
    scheduler_name: str
    priority: int | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    containers: tuple[ContainerInfo, ...]
    requests: dict[str, int]
    limits: dict[str, int]
    kube_qos: qoslib.KubeQoS
    qos_class: qoslib.QoSClass
    priority_class: qoslib.PriorityClass
    phase: str = "Pending"
    creation_time: float | None = None
    deletion_time: float | None = None
    start_time: float | None = None
    scheduled_time: float | None = None
    """``lastTransitionTime`` of the PodScheduled=True condition (LoadAware estimates young pods)."""
    initialized_time: float | None = None
    owner_refs: tuple[OwnerRef, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    topology_spread: tuple[Mapping[str, Any], ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    preemption_policy: str = "PreemptLowerPriority"
    volumes: tuple[Mapping[str, Any], ...] = ()
    nominated_node: str = ""
    resource_version: str = ""
    overhead: Mapping[str, int] = field(default_factory=dict)
    non_zero: tuple[int, int] | None = None
    """Cache of the scheduler's non-zero (cpu, memory) requests; see ``scheduler.nodeinfo``."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def priority_value(self) -> int:
        return self.priority or 0

    @property
    def is_terminating(self) -> bool:
        return self.deletion_time is not None

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def controller_ref(self) -> OwnerRef | None:
        for ref in self.owner_refs:
            if ref.controller:
                return ref
        return None

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any]) -> PodInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        parsed, key = _RESOURCES.lookup(spec, status)
        if parsed is not None:
            containers, overhead = parsed.containers, parsed.overhead
        else:
            containers = _containers(spec, status)
            overhead = parse_resource_list(spec.get("overhead") or {}, path="spec.overhead")
        scheduled, initialized = condition_times(status)
        ports: list[HostPort] = []
        for c in spec.get("containers") or ():
            for p in c.get("ports") or ():
                hp = int(p.get("hostPort") or 0)
                if hp > 0:
                    ports.append(
                        HostPort(str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "0.0.0.0"), hp)
                    )
        labels = dict(meta.get("labels") or {})
        if status.get("qosClass") is not None:
            kube_qos = qoslib.kube_qos(obj)  # a recorded class wins over the containers
        elif parsed is not None and parsed.kube_qos is not None:
            kube_qos = parsed.kube_qos
        else:
            kube_qos = qoslib.compute_kube_qos(obj)
            if parsed is not None:
                parsed = dataclasses.replace(parsed, kube_qos=kube_qos)
                _RESOURCES.store(key, parsed)
        if parsed is None:
            computed = None if status.get("qosClass") is not None else kube_qos
            requests, limits = pod_requests(containers, overhead), pod_limits(containers, overhead)
            parsed = _ParsedResources(containers, overhead, requests, limits, computed)
            _RESOURCES.store(key, parsed)
        priority = spec.get("priority")
        priority = int(priority) if priority is not None else None
        qos_class, priority_class = qoslib.classes_of(labels, priority, kube_qos)
        return cls(
            uid=str(meta.get("uid") or ""),
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            node_name=str(spec.get("nodeName") or ""),
            scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
            priority=priority,
            labels=labels,
            annotations=dict(meta.get("annotations") or {}),
            containers=containers,
            requests=parsed.requests,
            limits=parsed.limits,
            kube_qos=kube_qos,
            qos_class=qos_class,
            priority_class=priority_class,
            phase=str(status.get("phase") or "Pending"),
            creation_time=_parse_time(meta.get("creationTimestamp")),
            deletion_time=_parse_time(meta.get("deletionTimestamp")),
            start_time=_parse_time(status.get("startTime")),
            scheduled_time=scheduled,
            initialized_time=initialized,
            owner_refs=tuple(
                OwnerRef(
                    str(r.get("kind", "")),
                    str(r.get("name", "")),
                    str(r.get("uid", "")),
                    bool(r.get("controller")),
                )
                for r in meta.get("ownerReferences") or ()
            ),
            node_selector=dict(spec.get("nodeSelector") or {}),
            affinity=spec.get("affinity") or None,
            tolerations=tuple(spec.get("tolerations") or ()),
            topology_spread=tuple(spec.get("topologySpreadConstraints") or ()),
            host_ports=tuple(ports),
            scheduling_gates=tuple(str(g.get("name", "")) for g in spec.get("schedulingGates") or ()),
            preemption_policy=str(spec.get("preemptionPolicy") or "PreemptLowerPriority"),
            volumes=tuple(spec.get("volumes") or ()),
            nominated_node=str(status.get("nominatedNodeName") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            overhead=overhead,
        )


def _make_shallow_copy(cls: type) -> Any:
    """A function that copies every slot of a ``cls`` instance into a new one.

    The scheduler copies a pod record twice per placement (assume it on its node; rebuild it from the bind
    event): ``dataclasses.replace`` re-runs ``__init__`` and a loop of ``setattr`` costs a call per slot,
    while straight-line attribute assignments — generated here from ``__slots__``, as ``dataclasses``
    generates ``__init__`` — are about six times cheaper.
    """
    slots: tuple[str, ...] = getattr(cls, "__slots__")  # noqa: B009 (mypy does not know type has it)
    body = "".join(f"    c.{name} = src.{name}\n" for name in slots)
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    exec(f"def copy(src):\n    c = _new(_cls)\n{body}    return c\n", namespace)
    return namespace["copy"]


copy_pod_info: Callable[[PodInfo], PodInfo] = _make_shallow_copy(PodInfo)
"""A new ``PodInfo`` with the same field values (shallow), to modify before it is shared."""


@dataclass(slots=True, eq=False)
class NodeRecord:
    """A node as every cache keeps it."""

    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    allocatable: dict[str, int]
    capacity: dict[str, int]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    creation_time: float | None = None
    resource_version: str = ""

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any]) -> NodeRecord:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        capacity = parse_resource_list(status.get("capacity") or {}, path="status.capacity")
        allocatable = parse_resource_list(status.get("allocatable") or {}, path="status.allocatable")
        # Kubernetes falls back to capacity where allocatable is not reported.
        for k, v in capacity.items():
            allocatable.setdefault(k, v)
        ready = True
        for cond in status.get("conditions") or ():
            if cond.get("type") == "Ready":
                ready = cond.get("status") == "True"
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            allocatable=allocatable,
            capacity=capacity,
            taints=tuple(
                Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
                for t in spec.get("taints") or ()
            ),
            unschedulable=bool(spec.get("unschedulable", False)),
            ready=ready,
            creation_time=parse_time(meta.get("creationTimestamp")),
            resource_version=str(meta.get("resourceVersion") or ""),
        )
