"""What a node's NodeResourceTopology tells the scheduler (Koordinator's ``TopologyOptions``).

koordlet writes one ``topology.node.k8s.io/v1alpha1`` NodeResourceTopology per node (named after it): the CPU
topology, the CPUs kubelet's static CPU manager already gave to Guaranteed pods, kubelet's reserved CPUs,
the kubelet topology-manager policy and one zone per NUMA node with its allocatable resources. From it the
plugin keeps:

* ``cpu_topology``; ``reserved_cpus`` = kubelet-managed pods' cpusets ∪ kubelet reserved CPUs ∪ the node
  reservation's CPUs ∪ an exclusive system-QoS cpuset: never handed out;
* ``numa_node_resources`` per NUMA node, sorted by node id, cpu reduced by 1000m per reserved CPU there;
* the kubelet CPU manager policy, the NUMA topology policy, amplification ratios and ``max_ref_count``.

Upstream logs and ignores a malformed annotation; here the options remember the first problem in
``error`` and the topology becomes invalid, so a pod that needs a cpuset is rejected on that node with a
reason naming the NRT and the field, instead of being pinned on half-understood data.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import parse_resource_list
from koord_plugin_nodenumaresource.annotations import (
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_POD_CPU_ALLOCS,
    ANNOTATION_SYSTEM_QOS_RESOURCE,
    AnnotationError,
    KubeletCPUManagerPolicy,
    _cpuset,
    _json,
    _object,
    amplification_ratios,
    kubelet_cpu_manager_policy,
)
from koord_plugin_nodenumaresource.topology import CPUTopology, CPUTopologyBuilder

__all__ = ["TopologyOptions", "TopologyOptionsManager", "topology_options_from_nrt"]


@dataclass(slots=True)
class TopologyOptions:
    cpu_topology: CPUTopology | None = None
    """None: the node has no NodeResourceTopology."""
    reserved_cpus: frozenset[int] = frozenset()
    max_ref_count: int = 1
    policy: KubeletCPUManagerPolicy | None = None
    numa_topology_policy: str = ""
    numa_node_resources: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    """(NUMA node id, allocatable) sorted by id."""
    amplification_ratios: dict[str, float] | None = None
    """From the NRT; None lets the node's own annotation decide (``amplifyNUMANodeResources``)."""
    error: str = ""
    """The first malformed field of the NRT, named (empty when it was read cleanly)."""

    @property
    def valid(self) -> bool:
        return self.cpu_topology is not None and self.cpu_topology.is_valid

    def numa_nodes(self) -> list[int]:
        return [node for node, _ in self.numa_node_resources]


_POLICIES = {
    "BestEffort": "BestEffort",
    "Restricted": "Restricted",
    "SingleNUMANodePodLevel": "SingleNUMANode",
}


def _topology(annotations: Mapping[str, str], owner: str) -> CPUTopology:
    data = _object(annotations, ANNOTATION_CPU_TOPOLOGY, owner)
    builder = CPUTopologyBuilder()
    for i, info in enumerate(data.get("detail") or ()):
        fields = ("socket", "node", "core", "id")
        if not isinstance(info, Mapping) or not all(
            isinstance(info.get(f, 0), int) and not isinstance(info.get(f, 0), bool) and info.get(f, 0) >= 0
            for f in fields
        ):
            raise AnnotationError(
                f"{owner}: annotation {ANNOTATION_CPU_TOPOLOGY}: detail[{i}]: want non-negative integers "
                f"id, core, socket, node; got {info!r}"
            )
        builder.add(
            int(info.get("socket", 0)),
            int(info.get("node", 0)),
            int(info.get("core", 0)),
            int(info.get("id", 0)),
        )
    return builder.result()


def _kubelet_pod_cpus(annotations: Mapping[str, str], owner: str) -> frozenset[int]:
    data = _json(annotations, ANNOTATION_POD_CPU_ALLOCS, owner)
    if data is None:
        return frozenset()
    if not isinstance(data, list):
        raise AnnotationError(f"{owner}: annotation {ANNOTATION_POD_CPU_ALLOCS}: want a JSON list")
    out: set[int] = set()
    for i, alloc in enumerate(data):
        if not isinstance(alloc, Mapping):
            raise AnnotationError(f"{owner}: annotation {ANNOTATION_POD_CPU_ALLOCS}[{i}]: want an object")
        if not alloc.get("managedByKubelet") or not alloc.get("uid") or not alloc.get("cpuset"):
            continue
        out |= _cpuset(alloc.get("cpuset"), f"{owner}: annotation {ANNOTATION_POD_CPU_ALLOCS}[{i}].cpuset")
    return frozenset(out)


def _zones(nrt: Mapping[str, Any], owner: str) -> list[tuple[int, dict[str, int]]]:
    out: list[tuple[int, dict[str, int]]] = []
    for i, zone in enumerate(nrt.get("zones") or ()):
        if not isinstance(zone, Mapping) or zone.get("type") != "Node":
            continue
        name = str(zone.get("name") or "")
        prefix, sep, number = name.partition("node-")
        if prefix or not sep or not number.isdigit():
            continue
        resources: dict[str, Any] = {}
        for r in zone.get("resources") or ():
            if isinstance(r, Mapping) and r.get("name"):
                resources[str(r["name"])] = r.get("allocatable", 0)
        try:
            parsed = parse_resource_list(resources, path=f"zones[{i}].resources")
        except QuantityError as err:
            raise AnnotationError(f"{owner}: {err}") from err
        out.append((int(number), parsed))
    out.sort(key=lambda item: item[0])
    return out


def topology_options_from_nrt(
    nrt: Mapping[str, Any], shared: dict[str, CPUTopology] | None = None
) -> TopologyOptions:
    """``NewTopologyOptions``: read one NRT manifest.

    ``shared`` maps cpu-topology annotation texts to topologies already built: nodes of one machine type
    then share one ``CPUTopology`` (never modified once built), with its lazily built indexes, instead of
    a thousand copies."""
    meta = nrt.get("metadata") or {}
    owner = f"NodeResourceTopology {meta.get('name') or ''}"
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    options = TopologyOptions()
    try:
        raw = annotations.get(ANNOTATION_CPU_TOPOLOGY)
        topology = shared.get(raw) if shared is not None and raw is not None else None
        if topology is None:
            topology = _topology(annotations, owner)
            if shared is not None and raw is not None and topology.is_valid:
                if len(shared) >= 256:
                    shared.clear()
                shared[raw] = topology
        kubelet = kubelet_cpu_manager_policy(annotations, owner)
        reserved = set(_kubelet_pod_cpus(annotations, owner)) | kubelet.reserved_cpus
        node_reservation = _object(annotations, ANNOTATION_NODE_RESERVATION, owner)
        reserved |= _cpuset(
            node_reservation.get("reservedCPUs"),
            f"{owner}: annotation {ANNOTATION_NODE_RESERVATION}: reservedCPUs",
        )
        system_qos = _object(annotations, ANNOTATION_SYSTEM_QOS_RESOURCE, owner)
        if system_qos.get("cpusetExclusive", True) is not False:
            reserved |= _cpuset(
                system_qos.get("cpuset"), f"{owner}: annotation {ANNOTATION_SYSTEM_QOS_RESOURCE}: cpuset"
            )
        unknown = reserved - set(topology.details)
        if topology.is_valid and unknown:
            raise AnnotationError(
                f"{owner}: reserved CPUs {sorted(unknown)} are not in annotation {ANNOTATION_CPU_TOPOLOGY}"
            )
        options.cpu_topology = topology
        options.policy = kubelet
        options.reserved_cpus = frozenset(reserved)
        options.amplification_ratios = amplification_ratios(annotations, owner) or None
        zones = _zones(nrt, owner)
    except AnnotationError as err:
        options.cpu_topology = CPUTopology()
        options.error = str(err)
        return options
    for policy in nrt.get("topologyPolicies") or ():
        if policy in _POLICIES:
            options.numa_topology_policy = _POLICIES[policy]
            break
    for node, resources in zones:
        cpu = resources.get("cpu", 0)
        if cpu:
            pinned = sum(1 for c in options.reserved_cpus if topology.details[c].node == node)
            resources["cpu"] = cpu - pinned * 1000
    options.numa_node_resources = zones
    return options


class TopologyOptionsManager:
    """Topology options per node, replaced whole on every NRT event (readers never see half an update)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, TopologyOptions] = {}
        self.shared_topologies: dict[str, CPUTopology] = {}
        """Topologies by cpu-topology annotation text (see ``topology_options_from_nrt``)."""
        self.version = 0
        """Bumped on every change, so per-node caches know when to look again."""

    def get(self, node: str) -> TopologyOptions:
        return self._by_node.get(node) or _NO_NRT

    def set(self, node: str, options: TopologyOptions) -> None:
        if options.max_ref_count == 0:
            options.max_ref_count = 1
        with self._lock:
            self._by_node[node] = options
            self.version += 1

    def delete(self, node: str) -> None:
        with self._lock:
            self._by_node.pop(node, None)
            self.version += 1


_NO_NRT = TopologyOptions()
