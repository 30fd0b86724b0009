"""What the koordlet knows about its node from the cluster (Koordinator's ``statesinformer``): the Node,
the pods bound to it with their cgroup dirs, its NodeSLO, NodeResourceTopology annotations and NodeMetric
collect policy.

``StatesInformer`` lists these once and then follows watch events from the cluster port; QoS strategies and
collectors read an immutable ``NodeState`` snapshot taken at the start of each round, so a watch event
arriving mid-round never changes what a strategy sees half-way through a decision.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api import qos as qoslib
from koord_framework.api.objects import ContainerInfo, NodeRecord, PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.cluster.port import ClusterPort, WatchEvent
from koord_framework.errors import KoordError
from koord_framework.koordlet.cgroups import CgroupLayout
from koord_framework.koordlet.nodeslo import NodeSLO

log = logging.getLogger(__name__)

__all__ = ["ContainerMeta", "NodeState", "PodMeta", "StatesInformer"]


@dataclass(frozen=True, slots=True)
class ContainerMeta:
    """A container of a pod on this node, with the cgroup dir its runtime created."""

    name: str
    container_id: str
    """``containerd://<id>``; empty before the container was created."""
    cgroup_dir: str
    """Parent dir relative to a subsystem root; empty when the id is unknown or unparsable."""
    running: bool
    info: ContainerInfo | None
    """The spec side: requests and limits, app/init/sidecar."""


@dataclass(frozen=True, slots=True)
class PodMeta:
    """A pod bound to this node: its slim record, raw QoS label, cgroup dir and containers."""

    pod: PodInfo
    raw_qos: qoslib.QoSClass
    """``koordinator.sh/qosClass`` only (``GetPodQoSClassRaw``): BE strategies act on labelled pods only."""
    cgroup_dir: str
    containers: tuple[ContainerMeta, ...]
    manifest: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def uid(self) -> str:
        return self.pod.uid

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def is_active(self) -> bool:
        """Pending or Running (``!IsPodInactive``)."""
        return self.pod.phase in ("Pending", "Running")

    def container(self, name: str) -> ContainerMeta | None:
        for c in self.containers:
            if c.name == name:
                return c
        return None

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any], layout: CgroupLayout) -> PodMeta:
        pod = PodInfo.from_manifest(obj)
        cgroup_dir = layout.pod_dir(pod.kube_qos, pod.uid)
        specs = {c.name: c for c in pod.containers}
        status = obj.get("status") or {}
        metas: list[ContainerMeta] = []
        for key in ("initContainerStatuses", "containerStatuses"):
            for cs in status.get(key) or ():
                if not isinstance(cs, Mapping):
                    continue
                name = str(cs.get("name") or "")
                cid = str(cs.get("containerID") or "")
                cdir = ""
                if cid:
                    try:
                        cdir = layout.container_dir(cgroup_dir, cid)
                    except ValueError:
                        cdir = ""
                state = cs.get("state") or {}
                running = isinstance(state, Mapping) and state.get("running") is not None
                metas.append(ContainerMeta(name, cid, cdir, running, specs.get(name)))
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return cls(pod, qoslib.qos_class_raw(labels), cgroup_dir, tuple(metas), obj)


@dataclass(frozen=True, slots=True)
class NodeState:
    """One consistent view of the node for one round of collectors and strategies."""

    node_name: str
    node: NodeRecord | None = None
    node_manifest: Mapping[str, Any] | None = None
    pods: tuple[PodMeta, ...] = ()
    node_slo: NodeSLO | None = None
    topology_annotations: Mapping[str, str] = field(default_factory=dict)
    """Annotations of the node's NodeResourceTopology (reservation, system-qos cpuset, kubelet policy)."""
    has_topology: bool = False
    """The node's NodeResourceTopology exists (koordlet creates it; strategies that need it wait for it)."""
    node_metric_spec: Mapping[str, Any] = field(default_factory=dict)

    def pod(self, uid: str) -> PodMeta | None:
        for p in self.pods:
            if p.uid == uid:
                return p
        return None

    @property
    def capacity(self) -> dict[str, int]:
        return _status_list(self.node_manifest, "capacity")

    @property
    def allocatable(self) -> dict[str, int]:
        """``status.allocatable`` exactly as reported (no fallback to capacity)."""
        return _status_list(self.node_manifest, "allocatable")


def _status_list(node: Mapping[str, Any] | None, key: str) -> dict[str, int]:
    if not node:
        return {}
    status = node.get("status") or {}
    return parse_resource_list(status.get(key) or {}, path=f"Node.status.{key}")


def build_state(
    node_name: str,
    layout: CgroupLayout,
    *,
    node: Mapping[str, Any] | None,
    pods: Iterable[Mapping[str, Any]],
    node_slo: Mapping[str, Any] | None,
    topology: Mapping[str, Any] | None = None,
    node_metric: Mapping[str, Any] | None = None,
    on_error: Callable[[str, Exception], None] | None = None,
) -> NodeState:
    """A ``NodeState`` from manifests. A pod or NodeSLO that cannot be read is reported through
    ``on_error`` and left out (one bad object must not stop the agent on its node)."""
    metas: list[PodMeta] = []
    for obj in pods:
        try:
            metas.append(PodMeta.from_manifest(obj, layout))
        except (KoordError, ValueError) as err:
            name = (obj.get("metadata") or {}).get("name", "?")
            if on_error is not None:
                on_error(f"Pod {name}", err)
    slo: NodeSLO | None = None
    if node_slo is not None:
        try:
            slo = NodeSLO.from_manifest(node_slo)
        except KoordError as err:
            if on_error is not None:
                on_error(f"NodeSLO {node_name}", err)
    record = NodeRecord.from_manifest(node) if node is not None else None
    topo_meta = (topology or {}).get("metadata") or {}
    return NodeState(
        node_name=node_name,
        node=record,
        node_manifest=node,
        pods=tuple(sorted(metas, key=lambda m: (m.pod.namespace, m.pod.name))),
        node_slo=slo,
        topology_annotations=dict(topo_meta.get("annotations") or {}),
        has_topology=topology is not None,
        node_metric_spec=dict((node_metric or {}).get("spec") or {}),
    )


_KINDS = ("Node", "Pod", "NodeSLO", "NodeResourceTopology", "NodeMetric")
_REQUIRED = frozenset({"Node", "Pod"})


class StatesInformer:
    """Keeps this node's objects from the cluster current: one list, then watch events.

    Thread-safe: the real cluster adapter delivers events from its watch threads, the agent reads
    ``snapshot()`` from its own loop. A snapshot is rebuilt only after something changed.
    """

    def __init__(self, cluster: ClusterPort, node_name: str, layout: CgroupLayout) -> None:
        self.cluster = cluster
        self.node_name = node_name
        self.layout = layout
        self._lock = threading.Lock()
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in _KINDS}
        self._snapshot: NodeState | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self.errors: list[str] = []

    def start(self, *, watch: bool = True) -> None:
        """List every kind, then (``watch``) follow each from the version it was listed at. A Koordinator
        kind that cannot be listed (a CRD not installed) is logged and left empty; the agent still runs.
        Node and Pod cannot be done without: their errors propagate (the agent cannot do its job)."""
        for kind in _KINDS:
            try:
                objs, rv = self.cluster.list(kind)
            except KoordError as err:
                if kind in _REQUIRED:
                    raise
                log.warning("cannot list %s: %s", kind, err)
                self.errors.append(f"list {kind}: {err}")
                continue
            with self._lock:
                for obj in objs:
                    if self._mine(kind, obj):
                        self._objects[kind][_key(obj)] = obj
            if watch:
                try:
                    self._unsubscribe.append(self.cluster.subscribe([kind], self._on_event, since=rv))
                except KoordError as err:
                    log.warning("cannot watch %s: %s", kind, err)

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()

    def _mine(self, kind: str, obj: Mapping[str, Any]) -> bool:
        if kind == "Pod":
            return str((obj.get("spec") or {}).get("nodeName") or "") == self.node_name
        return str((obj.get("metadata") or {}).get("name") or "") == self.node_name

    def _on_event(self, event: WatchEvent) -> None:
        with self._lock:
            store = self._objects.get(event.kind)
            if store is None:
                return
            key = _key(event.obj)
            if event.type == "DELETED" or not self._mine(event.kind, event.obj):
                if store.pop(key, None) is None:
                    return
            else:
                store[key] = event.obj
            self._snapshot = None

    def snapshot(self) -> NodeState:
        with self._lock:
            if self._snapshot is None:
                self.errors = []

                def record(what: str, err: Exception) -> None:
                    self.errors.append(f"{what}: {err}")
                    log.warning("ignoring %s: %s", what, err)

                def one(kind: str) -> dict[str, Any] | None:
                    return next(iter(self._objects[kind].values()), None)

                self._snapshot = build_state(
                    self.node_name,
                    self.layout,
                    node=one("Node"),
                    pods=list(self._objects["Pod"].values()),
                    node_slo=one("NodeSLO"),
                    topology=one("NodeResourceTopology"),
                    node_metric=one("NodeMetric"),
                    on_error=record,
                )
            return self._snapshot


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
