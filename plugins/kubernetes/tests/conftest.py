"""A small hand-built scheduler world for plugin tests: NodeInfos, a NodeTable and a Handle over them.

The scheduler harness of ``koord_framework.testing`` runs whole profiles; these tests call one plugin's
extension points directly (as kube-scheduler's own plugin tests do), so they build the snapshot by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import Handle, NodeInfo, NodeTable, SchedulerPlugin, WaitingPod
from koord_framework.scheduler.nodeinfo import non_zero_requests
from koord_framework.scheduler.status import Status
from koord_framework.testing import MemoryCluster


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    extra: dict[str, str] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(
    name: str,
    node_name: str = "",
    requests: dict[str, str] | None = None,
    containers: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    priority: int | None = None,
    start: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    conts = containers if containers is not None else [requests or {}]
    body: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "resources": {"requests": r} if r else {}} for i, r in enumerate(conts)
        ],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    if priority is not None:
        body["priority"] = priority
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    if start:
        status["startTime"] = start
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": labels or {},
        },
        "spec": body,
        "status": status,
    }


class World(Handle):
    """A Handle over hand-made NodeInfos (and a MemoryCluster for the plugins that read or write objects)."""

    profile_name = "default-scheduler"

    def __init__(
        self,
        nodes: Sequence[dict[str, Any]] = (),
        pods: Sequence[dict[str, Any]] = (),
        with_cluster: bool = True,
    ) -> None:
        self._clock = VirtualClock()
        self._cluster = MemoryCluster(self._clock) if with_cluster else None
        self._table = NodeTable()
        self.infos: dict[str, NodeInfo] = {}
        self.filter_plugins: list[Any] = []
        for n in nodes:
            self.add_node(n)
        for p in pods:
            self.add_pod(p)

    # --- building -------------------------------------------------------------------------------------
    def add_node(self, manifest: dict[str, Any]) -> NodeInfo:
        manifest = {"apiVersion": "v1", "kind": "Node", **manifest}
        if self._cluster is not None:
            self._cluster.create(manifest)
            manifest = self._cluster.get("Node", manifest["metadata"]["name"])
        rec = NodeRecord.from_manifest(manifest)
        row = self._table.add_node(rec.name, rec.allocatable)
        info = NodeInfo(rec, row=row)
        self.infos[rec.name] = info
        return info

    def update_node(self, manifest: dict[str, Any]) -> None:
        manifest = {"apiVersion": "v1", "kind": "Node", **manifest}
        if self._cluster is not None:
            manifest = self._cluster.update(manifest)
        rec = NodeRecord.from_manifest(manifest)
        info = self.infos[rec.name]
        info.node = rec
        self._table.set_allocatable(info.row, rec.allocatable)

    def add_pod(self, manifest: dict[str, Any]) -> PodInfo:
        manifest = {"apiVersion": "v1", "kind": "Pod", **manifest}
        if self._cluster is not None:
            manifest = self._cluster.create(manifest)
        p = PodInfo.from_manifest(manifest)
        if p.node_name:
            info = self.infos[p.node_name]
            info.add_pod(p)
            self._table.add_requests(info.row, p.requests, non_zero_requests(p), 1)
        return p

    # --- Handle ---------------------------------------------------------------------------------------
    @property
    def cluster(self) -> Any:
        if self._cluster is None:
            raise RuntimeError("no cluster in this world")
        return self._cluster

    @property
    def clock(self) -> Any:
        return self._clock

    @property
    def informer(self) -> Any:
        raise NotImplementedError

    @property
    def metrics(self) -> Any:
        from prometheus_client import CollectorRegistry

        if not hasattr(self, "_registry"):
            self._registry = CollectorRegistry()
        return self._registry

    def node_infos(self) -> list[NodeInfo]:
        return list(self.infos.values())

    def node_info(self, name: str) -> NodeInfo | None:
        return self.infos.get(name)

    @property
    def table(self) -> NodeTable:
        return self._table

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return None

    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        return None

    def run_filter_with_nominated_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        for pl in self.filter_plugins:
            if pl.name in state.skip_filter:
                continue
            st: Status = pl.filter(state, pod, node)
            if not st.is_success:
                return st.with_plugin(pl.name)
        return Status.success()

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> Status:
        for pl in self.filter_plugins:
            ext = pl.pre_filter_extensions() if hasattr(pl, "pre_filter_extensions") else None
            if ext is not None and pl.name not in state.skip_filter:
                st: Status = ext.add_pod(state, pod, to_add, node)
                if not st.is_success:
                    return st
        return Status.success()

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        for pl in self.filter_plugins:
            ext = pl.pre_filter_extensions() if hasattr(pl, "pre_filter_extensions") else None
            if ext is not None and pl.name not in state.skip_filter:
                st: Status = ext.remove_pod(state, pod, to_remove, node)
                if not st.is_success:
                    return st
        return Status.success()

    # --- conveniences for tests -------------------------------------------------------------------------
    def plugin(self, cls: type[SchedulerPlugin], args: dict[str, Any] | None = None) -> Any:
        return cls(cls.parse_args(args), self)

    def rows(self) -> Any:
        import numpy as np

        return np.array([i.row for i in self.infos.values()], dtype=np.int64)


def run_pre_filter(pl: Any, state: CycleState, p: PodInfo, world: World) -> Status:
    st: Status = pl.pre_filter(state, p, world.node_infos())[1]
    if st.is_skip:
        state.skip_filter.add(pl.name)
    return st


@pytest.fixture
def world_factory() -> Callable[..., World]:
    return World


@pytest.fixture
def k() -> Any:
    """Builders and the World class (tests import nothing from conftest under --import-mode=importlib)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        node=node, pod=pod, World=World, run_pre_filter=run_pre_filter, CycleState=CycleState
    )
