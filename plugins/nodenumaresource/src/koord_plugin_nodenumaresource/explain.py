"""NodeNUMAResource's section of ``koord explain node``: the node's CPU topology, the free CPUs of each
NUMA zone (CPUs with room for one more reference, reserved CPUs excluded, as ``getAvailableCPUs``), each
zone's free NUMA resources, and the pods holding a cpuset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koord_framework.api.resources import format_resource_list
from koord_framework.explain.hooks import ExplainSection
from koord_framework.koordlet.cpuset import format_cpuset

if TYPE_CHECKING:
    from koord_plugin_nodenumaresource.plugin import NodeNUMAResource

TITLE = "NodeNUMAResource"


def explain_node(plugin: NodeNUMAResource, node_name: str) -> ExplainSection:
    options = plugin.topologies.get(node_name)
    topology = options.cpu_topology
    if topology is None:
        return ExplainSection(
            TITLE, ["no NodeResourceTopology: no cpuset or NUMA allocation on this node"], {}
        )
    if options.error or not topology.is_valid:
        reason = options.error or "the CPU topology is not valid"
        return ExplainSection(TITLE, [f"NodeResourceTopology unusable: {reason}"], {"error": reason})
    free, _ = plugin.resources.available_cpus(node_name)
    with plugin.resources.lock:
        alloc = plugin.resources.node_allocation(node_name)
        pods = sorted(alloc.pods.values(), key=lambda a: (a.namespace, a.name))
        available, _ = alloc.available_numa_resources(options, {}, {})
    policy = options.policy.policy if options.policy is not None else ""
    lines = [
        f"{topology.num_cpus} CPUs, {topology.num_cores} cores, {topology.num_nodes} NUMA nodes,"
        f" {topology.num_sockets} sockets; reserved CPUs: {format_cpuset(options.reserved_cpus) or '-'};"
        f" kubelet CPU manager policy {policy or '-'};"
        f" NUMA topology policy {options.numa_topology_policy or 'None'}"
    ]
    zones: list[dict[str, Any]] = []
    for zone in sorted({info.node for info in topology.details.values()}):
        in_zone = topology.cpus_in_numa_node(zone)
        zone_free = sorted(free & set(in_zone))
        resources = format_resource_list(dict(available.get(zone, {})))
        zones.append(
            {
                "numaNode": zone,
                "cpus": len(in_zone),
                "freeCPUs": format_cpuset(zone_free),
                "freeCount": len(zone_free),
                "freeResources": resources,
            }
        )
        res = ", ".join(f"{k}={v}" for k, v in resources.items()) or "-"
        lines.append(
            f"NUMA node {zone}: {len(zone_free)}/{len(in_zone)} CPUs free"
            f" ({format_cpuset(zone_free) or '-'});"
            f" free resources {res}"
        )
    holders = [
        {
            "pod": f"{a.namespace}/{a.name}",
            "cpuset": format_cpuset(a.cpuset),
            "numaNodes": a.numa_nodes,
            "exclusivePolicy": a.exclusive_policy,
        }
        for a in pods
    ]
    for h in holders:
        lines.append(f"  {h['pod']}: cpuset {h['cpuset'] or '-'} on NUMA {h['numaNodes'] or '-'}")
    return ExplainSection(TITLE, lines, {"numaNodes": zones, "allocations": holders})
