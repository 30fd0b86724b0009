"""The node's NodeResourceTopology, as Koordinator's koordlet reports it (``states_noderesourcetopology.go``).

koordlet is the only writer of its node's ``topology.node.k8s.io/v1alpha1`` NodeResourceTopology (named
after the node). Every ``nodeTopologySyncInterval`` it works out, from the host (through ``HostPaths``) and
the cluster:

* ``node.koordinator.sh/cpu-topology``: every online CPU with its core, socket and NUMA node (sysfs
  ``devices/system/cpu/cpuN/topology``, ``devices/system/node/nodeM/cpulist``; ``/proc/cpuinfo`` as a
  fallback), core ids machine-wide as lscpu numbers them;
* ``kubelet.koordinator.sh/cpu-manager-policy``: kubelet's CPU manager policy, its options and reserved CPUs;
* ``node.koordinator.sh/pod-cpu-allocs``: with the static policy, the cpusets kubelet gave Guaranteed pods
  that koord does not manage (kubelet's ``cpu_manager_state`` under the kubelet root dir);
* ``node.koordinator.sh/cpu-shared-pools`` / ``be-cpu-shared-pools``: per NUMA node, the CPUs no
  LSE/LSR pod is pinned to (the BE pool also keeps LSR CPUs), less reserved and exclusive system-QoS CPUs;
* ``node.koordinator.sh/cpu-basic-info``: the CPU model, hyper-threading and turbo status, L3 cache bit
  mask and vendor (``/proc/cpuinfo``, sysfs, resctrl; ``koord_framework.koordlet.cpubasicinfo``), which
  koord-manager's CPUNormalization calculator reads;
* ``node.koordinator.sh/reservation`` and ``node.koordinator.sh/system-qos-resource`` copied from the Node;
* ``topologyPolicies``: kubelet's topology-manager policy and scope (``SingleNUMANodePodLevel``, ...);
* one zone ``node-<i>`` of type ``Node`` per NUMA node with cpu (its CPU count), memory (``nodeM/meminfo``
  MemTotal less huge pages) and huge pages, capacity = allocatable = available.

It creates the object when missing (owned by the Node, label ``app.kubernetes.io/managed-by: Koordinator``)
and updates it only when something it manages changed, so an idle node costs no API writes.

Kubelet's own configuration (policy, options, reserved CPUs, topology manager) comes from
``KubeletCPUConfig``: Koordinator asks the kubelet's ``/configz``; koord takes it from the koordlet
configuration, and falls back to the policy named in ``cpu_manager_state``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from koord_framework.api import qos as qoslib
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import KoordError, NotFoundError
from koord_framework.koordlet.cpubasicinfo import ANNOTATION_CPU_BASIC_INFO, CPUBasicInfo, read_cpu_basic_info
from koord_framework.koordlet.cpuset import CPUSetError, format_cpuset, parse_cpuset
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.states import NodeState
from koord_framework.koordlet.system import HostReadError, NodeCPUInfo

__all__ = [
    "ANNOTATION_CPU_BASIC_INFO",
    "ANNOTATION_CPU_TOPOLOGY",
    "ANNOTATION_KUBELET_CPU_MANAGER_POLICY",
    "ANNOTATION_POD_CPU_ALLOCS",
    "KubeletCPUConfig",
    "NodeTopologyReporter",
    "build_node_topology",
    "kubelet_pod_cpu_allocs",
    "read_numa_memory",
    "topology_policy",
]

log = logging.getLogger(__name__)

ANNOTATION_CPU_TOPOLOGY: Final = "node.koordinator.sh/cpu-topology"
ANNOTATION_POD_CPU_ALLOCS: Final = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_CPU_SHARED_POOLS: Final = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_BE_CPU_SHARED_POOLS: Final = "node.koordinator.sh/be-cpu-shared-pools"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY: Final = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_NODE_RESERVATION: Final = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS_RESOURCE: Final = "node.koordinator.sh/system-qos-resource"
ANNOTATION_RESOURCE_STATUS: Final = "scheduling.koordinator.sh/resource-status"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_ENABLE_NUMA_RESERVATION: Final = "node.koordinator.sh/enable-numa-reservation"
MANAGED_ANNOTATIONS: Final = (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_CPU_SHARED_POOLS,
    ANNOTATION_BE_CPU_SHARED_POOLS,
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_POD_CPU_ALLOCS,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_SYSTEM_QOS_RESOURCE,
)
MANAGED_RESOURCES: Final = ("cpu", "memory", "hugepages-2Mi", "hugepages-1Gi")
CPU_MANAGER_STATE: Final = "cpu_manager_state"


@dataclass(frozen=True, slots=True)
class KubeletCPUConfig:
    """What the koordlet knows of kubelet's CPU and topology managers (kubelet's ``KubeletConfiguration``)."""

    cpu_manager_policy: str = ""
    """``static`` or ``none``; "" means: the policy named in ``cpu_manager_state``, else none."""
    cpu_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: str = ""
    """kubelet's ``reservedSystemCPUs`` (Linux CPU list)."""
    topology_manager_policy: str = ""
    """``none``, ``best-effort``, ``restricted`` or ``single-numa-node``."""
    topology_manager_scope: str = "container"


def topology_policy(policy: str, scope: str) -> str:
    """``getTopologyPolicy``: kubelet's topology-manager policy and scope as the NRT's policy name."""
    if not policy:
        return "None"
    container = scope == "container"
    names = {
        "single-numa-node": "SingleNUMANode",
        "restricted": "Restricted",
        "best-effort": "BestEffort",
    }
    base = names.get(policy)
    if base is None:
        return "None"
    return f"{base}{'ContainerLevel' if container else 'PodLevel'}"


# --- host reads ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NUMAMemory:
    total: int
    """MemTotal of the NUMA node, bytes."""
    hugepages_2m: int = 0
    hugepages_1g: int = 0


def _hugepages(node_dir: Path, size_kb: int) -> int:
    path = node_dir / "hugepages" / f"hugepages-{size_kb}kB" / "nr_hugepages"
    try:
        return int(path.read_text().strip()) * size_kb * 1024
    except (OSError, ValueError):
        return 0


def read_numa_memory(paths: HostPaths) -> dict[int, NUMAMemory]:
    """Per NUMA node, MemTotal (``devices/system/node/nodeM/meminfo``) and huge pages; empty when sysfs has
    no NUMA nodes (a container without sysfs: the caller falls back to one node with all memory)."""
    out: dict[int, NUMAMemory] = {}
    root = paths.sys_file("devices", "system", "node")
    if not root.is_dir():
        return out
    for entry in sorted(root.iterdir()):
        m = re.fullmatch(r"node(\d+)", entry.name)
        if not m:
            continue
        try:
            text = (entry / "meminfo").read_text()
        except OSError:
            continue
        total = re.search(r"MemTotal:\s+(\d+)\s*kB", text)
        if total is None:
            raise HostReadError(entry / "meminfo", "no MemTotal line")
        out[int(m.group(1))] = NUMAMemory(
            int(total.group(1)) * 1024, _hugepages(entry, 2048), _hugepages(entry, 1048576)
        )
    return out


def _read_meminfo_total(paths: HostPaths) -> int:
    try:
        text = paths.proc_file("meminfo").read_text()
    except OSError as err:
        raise HostReadError(paths.proc_file("meminfo"), str(err)) from err
    total = re.search(r"MemTotal:\s+(\d+)\s*kB", text)
    if total is None:
        raise HostReadError(paths.proc_file("meminfo"), "no MemTotal line")
    return int(total.group(1)) * 1024


@dataclass(frozen=True, slots=True)
class CPUManagerState:
    policy_name: str
    entries: Mapping[str, Mapping[str, str]]
    """pod uid -> container -> cpuset."""


def read_cpu_manager_state(kubelet_root: Path) -> CPUManagerState | None:
    """kubelet's checkpoint (``<root>/cpu_manager_state``); None when absent or empty, as upstream."""
    path = kubelet_root / CPU_MANAGER_STATE
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise HostReadError(path, str(err)) from err
    if not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except ValueError as err:
        raise HostReadError(path, f"invalid JSON: {err}") from err
    entries = data.get("entries") or {}
    if not isinstance(entries, Mapping):
        raise HostReadError(path, "entries: want an object")
    return CPUManagerState(str(data.get("policyName") or ""), entries)


def kubelet_pod_cpu_allocs(state: CPUManagerState, node: NodeState) -> list[dict[str, Any]]:
    """``calGuaranteedCpu``: the cpusets kubelet pinned for pods koord does not manage (LS/BE pods and pods
    with a koord cpuset are koord's), sorted by uid."""
    pods = {meta.uid: meta for meta in node.pods}
    managed = set()
    for meta in node.pods:
        if meta.raw_qos in (qoslib.QoSClass.LS, qoslib.QoSClass.BE):
            managed.add(meta.uid)
            continue
        if _status_cpus(meta.pod.annotations):
            managed.add(meta.uid)
    out: list[dict[str, Any]] = []
    for uid, containers in state.entries.items():
        if uid in managed or not isinstance(containers, Mapping):
            continue
        cpus: set[int] = set()
        for container, text in containers.items():
            try:
                cpus |= parse_cpuset(str(text))
            except CPUSetError:
                log.warning("cpu_manager_state: pod %s container %s: bad cpuset %r", uid, container, text)
        if not cpus:
            continue
        alloc: dict[str, Any] = {}
        owner = pods.get(uid)
        if owner is not None:
            alloc["namespace"] = owner.pod.namespace
            alloc["name"] = owner.pod.name
        alloc.update({"uid": uid, "cpuset": format_cpuset(cpus), "managedByKubelet": True})
        out.append(alloc)
    out.sort(key=lambda a: str(a["uid"]))
    return out


def _status_cpus(annotations: Mapping[str, str]) -> frozenset[int]:
    raw = annotations.get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return frozenset()
    try:
        data = json.loads(raw)
        return parse_cpuset(str(data.get("cpuset") or "")) if isinstance(data, Mapping) else frozenset()
    except (ValueError, CPUSetError):
        return frozenset()


def _json_annotation(annotations: Mapping[str, str], key: str) -> dict[str, Any] | None:
    raw = annotations.get(key)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        log.warning("Node annotation %s is not JSON; not copied to the NodeResourceTopology", key)
        return None
    return data if isinstance(data, dict) else None


def _shared_pools(cpu_info: NodeCPUInfo, cpus: Iterable[int]) -> list[dict[str, Any]]:
    """``covertCPUsToSharePool``: per (socket, NUMA node), the CPUs left, sorted by socket then node."""
    by_node: dict[tuple[int, int], list[int]] = {}
    info = {p.cpu_id: p for p in cpu_info.processors}
    for cpu in cpus:
        p = info[cpu]
        by_node.setdefault((p.socket_id, p.node_id), []).append(cpu)
    return [
        {"socket": socket, "node": node, "cpuset": format_cpuset(ids)}
        for (socket, node), ids in sorted(by_node.items())
    ]


def _quantity_bytes(value: int) -> str:
    from koord_framework.api.quantity import format_bytes

    return format_bytes(value)


def build_node_topology(
    node_name: str,
    cpu_info: NodeCPUInfo,
    numa_memory: Mapping[int, NUMAMemory],
    kubelet: KubeletCPUConfig,
    cpu_manager: CPUManagerState | None,
    state: NodeState,
    cpu_basic_info: CPUBasicInfo | None = None,
) -> tuple[dict[str, str], dict[str, str], str, list[dict[str, Any]]]:
    """``calcNodeTopo``: (annotations, labels, topology policy, zones) the NRT must carry
    (``cpu_basic_info``: the host's, left out of the annotations when ``None``)."""
    processors = sorted(cpu_info.processors, key=lambda p: p.cpu_id)
    detail = [
        {"id": p.cpu_id, "core": p.core_id, "socket": p.socket_id, "node": p.node_id} for p in processors
    ]
    policy = kubelet.cpu_manager_policy or (cpu_manager.policy_name if cpu_manager is not None else "")
    manager: dict[str, Any] = {}
    if policy:
        manager["policy"] = policy
    if kubelet.cpu_manager_policy_options:
        manager["options"] = dict(kubelet.cpu_manager_policy_options)
    pod_allocs: list[dict[str, Any]] = []
    if policy == "static":
        if kubelet.reserved_cpus:
            manager["reservedCPUs"] = format_cpuset(parse_cpuset(kubelet.reserved_cpus))
        if cpu_manager is not None:
            pod_allocs = kubelet_pod_cpu_allocs(cpu_manager, state)
    node_annotations = state.node.annotations if state.node is not None else {}
    reservation = _json_annotation(node_annotations, ANNOTATION_NODE_RESERVATION) or {}
    reserved_text = str(reservation.get("reservedCPUs") or "")
    reserved = parse_cpuset(reserved_text) if reserved_text else frozenset()
    if reserved_text:
        reservation["reservedCPUs"] = format_cpuset(reserved)
    system_qos = _json_annotation(node_annotations, ANNOTATION_SYSTEM_QOS_RESOURCE) or {}
    system_qos_cpus = (
        parse_cpuset(str(system_qos.get("cpuset") or ""))
        if system_qos.get("cpusetExclusive", True) is not False
        else frozenset()
    )
    # Shared pools: CPUs no koord-pinned pod holds (LSE pods take theirs out of the BE pool as well), less
    # the node-reserved and exclusive system-QoS CPUs.
    ls_pool = {p.cpu_id for p in processors}
    be_pool = set(ls_pool)
    for meta in state.pods:
        cpus = _status_cpus(meta.pod.annotations)
        ls_pool -= cpus
        if meta.raw_qos is qoslib.QoSClass.LSE:
            be_pool -= cpus
    for alloc in pod_allocs:
        taken = parse_cpuset(alloc["cpuset"])
        ls_pool -= taken
        be_pool -= taken
    ls_pool -= reserved | system_qos_cpus
    be_pool -= reserved | system_qos_cpus
    annotations = {
        ANNOTATION_CPU_TOPOLOGY: json.dumps({"detail": detail}, separators=(",", ":")),
        ANNOTATION_CPU_SHARED_POOLS: json.dumps(_shared_pools(cpu_info, ls_pool), separators=(",", ":")),
        ANNOTATION_BE_CPU_SHARED_POOLS: json.dumps(_shared_pools(cpu_info, be_pool), separators=(",", ":")),
        ANNOTATION_KUBELET_CPU_MANAGER_POLICY: json.dumps(manager, separators=(",", ":")),
        ANNOTATION_POD_CPU_ALLOCS: json.dumps(pod_allocs or None, separators=(",", ":")),
        ANNOTATION_NODE_RESERVATION: json.dumps(reservation, separators=(",", ":")),
        ANNOTATION_SYSTEM_QOS_RESOURCE: json.dumps(system_qos, separators=(",", ":")),
    }
    if cpu_basic_info is not None:
        annotations[ANNOTATION_CPU_BASIC_INFO] = cpu_basic_info.to_json()
    labels: dict[str, str] = {}
    node_labels = state.node.labels if state.node is not None else {}
    if node_labels.get(LABEL_ENABLE_NUMA_RESERVATION):
        labels[LABEL_ENABLE_NUMA_RESERVATION] = node_labels[LABEL_ENABLE_NUMA_RESERVATION]
    cpus_per_node: dict[int, int] = {}
    for p in processors:
        cpus_per_node[p.node_id] = cpus_per_node.get(p.node_id, 0) + 1
    zones: list[dict[str, Any]] = []
    for numa in sorted(set(numa_memory) | set(cpus_per_node)):
        mem = numa_memory.get(numa, NUMAMemory(0))
        values = {
            "cpu": str(cpus_per_node.get(numa, 0)),
            "hugepages-1Gi": _quantity_bytes(0),
            "hugepages-2Mi": _quantity_bytes(0),
            "memory": _quantity_bytes(max(mem.total - mem.hugepages_2m - mem.hugepages_1g, 0)),
        }
        zones.append(
            {
                "name": f"node-{numa}",
                "type": "Node",
                "resources": [
                    {"name": name, "capacity": v, "allocatable": v, "available": v}
                    for name, v in sorted(values.items())
                ],
            }
        )
    policy_name = topology_policy(kubelet.topology_manager_policy, kubelet.topology_manager_scope)
    return annotations, labels, policy_name, zones


def _same_json(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return a == b


class NodeTopologyReporter:
    """Creates and updates the node's NodeResourceTopology through the cluster port."""

    def __init__(self, host: HostPaths, kubelet: KubeletCPUConfig | None = None) -> None:
        self.host = host
        self.kubelet = kubelet or KubeletCPUConfig()

    def desired(
        self, state: NodeState, cpu_info: NodeCPUInfo
    ) -> tuple[dict[str, str], dict[str, str], str, list[dict[str, Any]]]:
        numa = read_numa_memory(self.host)
        if not numa:
            numa = {0: NUMAMemory(_read_meminfo_total(self.host))}
        manager = read_cpu_manager_state(self.host.kubelet_root)
        basic = read_cpu_basic_info(self.host, cpu_info)
        return build_node_topology(state.node_name, cpu_info, numa, self.kubelet, manager, state, basic)

    def report(self, cluster: ClusterPort, state: NodeState, cpu_info: NodeCPUInfo) -> dict[str, Any] | None:
        """Create or update the NRT; returns the object written, or None when nothing changed."""
        annotations, labels, policy, zones = self.desired(state, cpu_info)
        name = state.node_name
        try:
            current: dict[str, Any] | None = cluster.get("NodeResourceTopology", name)
        except NotFoundError:
            current = None
        if current is None:
            obj = self._new(state)
            self._apply(obj, annotations, labels, policy, zones)
            return cluster.create(obj)
        if not self._changed(current, annotations, labels, policy, zones):
            return None
        obj = json.loads(json.dumps(current))
        self._apply(obj, annotations, labels, policy, zones)
        return cluster.update(obj)

    @staticmethod
    def _new(state: NodeState) -> dict[str, Any]:
        owner = {
            "apiVersion": "v1",
            "kind": "Node",
            "name": state.node_name,
            "uid": state.node.uid if state.node is not None else "",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        return {
            "apiVersion": "topology.node.k8s.io/v1alpha1",
            "kind": "NodeResourceTopology",
            "metadata": {
                "name": state.node_name,
                "labels": {LABEL_MANAGED_BY: "Koordinator"},
                "ownerReferences": [owner],
            },
            "topologyPolicies": ["None"],
            "zones": [],
        }

    @staticmethod
    def _apply(
        obj: dict[str, Any],
        annotations: Mapping[str, str],
        labels: Mapping[str, str],
        policy: str,
        zones: Sequence[Mapping[str, Any]],
    ) -> None:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("annotations", {}).update(annotations)
        meta.setdefault("labels", {}).update(labels)
        obj["topologyPolicies"] = [policy]
        # Zones koordlet does not manage (another agent's) are kept; its own are replaced, but a resource
        # someone else put on one of them survives (koord-manager's NUMA-level batch-cpu / batch-memory):
        # Koordinator's koordlet merges the zone lists (``MergeZoneList``) for the same reason.
        ours = {z["name"] for z in zones}
        current = list(obj.get("zones") or ())
        kept = [z for z in current if z.get("name") not in ours and z.get("type") != "Node"]
        previous = {z.get("name"): z for z in current if z.get("name") in ours}
        merged = []
        for zone in zones:
            old = previous.get(zone["name"])
            resources = list(zone.get("resources") or ())
            names = {r.get("name") for r in resources}
            extra = [
                r
                for r in (old or {}).get("resources") or ()
                if r.get("name") not in names and r.get("name") not in MANAGED_RESOURCES
            ]
            if extra:
                zone = {**zone, "resources": sorted([*resources, *extra], key=lambda r: str(r.get("name")))}
            merged.append(zone)
        obj["zones"] = [*kept, *merged]

    @staticmethod
    def _changed(
        current: Mapping[str, Any],
        annotations: Mapping[str, str],
        labels: Mapping[str, str],
        policy: str,
        zones: Sequence[Mapping[str, Any]],
    ) -> bool:
        meta = current.get("metadata") or {}
        have = meta.get("annotations") or {}
        if not have or list(current.get("topologyPolicies") or ()) != [policy]:
            return True
        if any(not _same_json(have.get(k), annotations.get(k)) for k in MANAGED_ANNOTATIONS):
            return True
        if (meta.get("labels") or {}).get(LABEL_ENABLE_NUMA_RESERVATION) != labels.get(
            LABEL_ENABLE_NUMA_RESERVATION
        ):
            return True
        mine = [z for z in current.get("zones") or () if z.get("type") == "Node"]
        return _zone_key(mine) != _zone_key(zones)


def _zone_key(zones: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    from koord_framework.api.resources import to_int

    out = []
    for z in zones:
        res = []
        for r in z.get("resources") or ():
            if r.get("name") in MANAGED_RESOURCES:
                try:
                    value = to_int(str(r["name"]), r.get("allocatable", "0"))
                except (KoordError, ValueError):
                    value = -1
                res.append((str(r["name"]), str(value)))
        out.append((str(z.get("name")), str(z.get("type")), sorted(res)))
    return sorted(out)
