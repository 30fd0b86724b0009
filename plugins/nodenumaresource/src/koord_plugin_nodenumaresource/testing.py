"""Builders for NodeNUMAResource tests, examples and benchmarks: NRTs shaped like what koordlet writes,
nodes and LSR pods, and Koordinator's test topologies (importable without pytest)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from koord_framework.api.resources import parse_resource_list
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_plugin_nodenumaresource.annotations import KubeletCPUManagerPolicy
from koord_plugin_nodenumaresource.topology import CPUTopology, build_cpu_topology_for_test
from koord_plugin_nodenumaresource.topology_options import TopologyOptions


def topology_of(spec: Mapping[str, Any] | None) -> CPUTopology | None:
    if spec is None:
        return None
    if spec.get("builder") == "buildCPUTopologyForTest":
        return build_cpu_topology_for_test(
            spec["numSockets"], spec["nodesPerSocket"], spec["coresPerNode"], spec["cpusPerCore"]
        )
    assert not spec.get("cpuDetails"), "only empty explicit topologies appear in the vectors"
    return CPUTopology()


def options_of(spec: Mapping[str, Any] | None) -> TopologyOptions | None:
    """A vector's ``topologyOptions`` (None: the node has no NRT)."""
    if not spec:
        return None
    topology = topology_of(spec.get("cpuTopology"))
    zones = [
        (int(z["node"]), parse_resource_list(z.get("resources") or {}))
        for z in spec.get("numaNodeResources") or ()
    ]
    policy = spec.get("policy")
    kubelet = (
        KubeletCPUManagerPolicy(
            policy.get("policy", ""),
            dict(policy.get("options") or {}),
            parse_cpuset(policy.get("reservedCPUs") or ""),
        )
        if policy
        else None
    )
    return TopologyOptions(
        cpu_topology=topology,
        reserved_cpus=parse_cpuset(spec.get("reservedCPUs") or ""),
        max_ref_count=int(spec.get("maxRefCount") or 1),
        policy=kubelet,
        numa_topology_policy=str(spec.get("numaTopologyPolicy") or ""),
        numa_node_resources=sorted(zones),
    )


def nrt(
    name: str,
    sockets: int,
    nodes_per_socket: int,
    cores_per_node: int,
    threads: int,
    *,
    memory_per_numa: str = "64Gi",
    policies: Sequence[str] = (),
    kubelet: Mapping[str, Any] | None = None,
    offline: Sequence[int] = (),
) -> dict[str, Any]:
    """A NodeResourceTopology as koordlet writes it, for a machine built like Koordinator's test builder
    (core ids per socket, as the kernel numbers them)."""
    detail = []
    cpu = 0
    per_socket_core = 0
    node = 0
    for socket in range(sockets):
        per_socket_core = 0
        for _ in range(nodes_per_socket):
            for _ in range(cores_per_node):
                for _ in range(threads):
                    if cpu not in offline:
                        detail.append({"id": cpu, "core": per_socket_core, "socket": socket, "node": node})
                    cpu += 1
                per_socket_core += 1
            node += 1
    zones = []
    for n in range(node):
        cpus = sum(1 for d in detail if d["node"] == n)
        zones.append(
            {
                "name": f"node-{n}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "capacity": str(cpus), "allocatable": str(cpus), "available": str(cpus)},
                    {
                        "name": "memory",
                        "capacity": memory_per_numa,
                        "allocatable": memory_per_numa,
                        "available": memory_per_numa,
                    },
                ],
            }
        )
    annotations = {"node.koordinator.sh/cpu-topology": json.dumps({"detail": detail})}
    if kubelet is not None:
        annotations["kubelet.koordinator.sh/cpu-manager-policy"] = json.dumps(kubelet)
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name, "annotations": annotations},
        "topologyPolicies": list(policies) or ["None"],
        "zones": zones,
    }


def node(
    name: str, cpu: int, memory: str = "256Gi", labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {
            "capacity": {"cpu": str(cpu), "memory": memory, "pods": "250"},
            "allocatable": {"cpu": str(cpu), "memory": memory, "pods": "250"},
        },
    }


def lsr_pod(
    name: str,
    cpu: str,
    memory: str = "1Gi",
    *,
    spec: Mapping[str, str] | None = None,
    numa: Mapping[str, str] | None = None,
    qos: str = "LSR",
) -> dict[str, Any]:
    annotations = {}
    if spec is not None:
        annotations["scheduling.koordinator.sh/resource-spec"] = json.dumps(spec)
    if numa is not None:
        annotations["scheduling.koordinator.sh/numa-topology-spec"] = json.dumps(numa)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": {"koordinator.sh/qosClass": qos},
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "priority": 9000,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
    }
