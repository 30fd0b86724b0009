"""The CPUSetAllocator hook: a container's cpuset from the scheduler's decision (``resource-status``), the
node's share pools and the kubelet's CPU manager policy; and no cfs quota for pods bound to a cpuset."""

from __future__ import annotations

from typing import ClassVar

from koord_framework.api.qos import KubeQoS, QoSClass, kube_qos_by_cgroup_parent, qos_class_raw
from koord_framework.koordlet.runtimehooks import (
    ContainerRequest,
    ContainerResponse,
    PodSandboxRequest,
    PodSandboxResponse,
    RuntimeHook,
    RuntimeHookArgs,
    hookimpl,
)
from koord_framework.koordlet.states import NodeState
from koord_plugin_cpusetallocator.rule import CPUSetRule, SharePool, parse_resource_status, parse_rule

__all__ = ["CPUSetAllocator", "CPUSetAllocatorArgs"]

KUBELET_POLICY_STATIC = "static"


class CPUSetAllocatorArgs(RuntimeHookArgs):
    """CPUSetAllocator's args (the pools come from the NodeResourceTopology)."""

    disable_unset_cpu_quota: bool = False
    """Koordinator's ``--disable-unset-cpu-quota``: keep the cfs quota of pods bound to a cpuset."""
    be_cpu_manager: bool = False
    """Koordinator's ``BECPUManager`` gate (default off): NUMA-aware BE pods get the BE share pools."""


def _join(pools: tuple[SharePool, ...], nodes: tuple[int, ...] | None = None) -> str:
    if nodes is None:
        return ",".join(p.cpuset for p in pools)
    return ",".join(p.cpuset for n in nodes for p in pools if p.node == n)


class CPUSetAllocator(RuntimeHook[CPUSetAllocatorArgs]):
    name: ClassVar[str] = "CPUSetAllocator"
    Args = CPUSetAllocatorArgs
    feature_gate: ClassVar[str] = "CPUSetAllocator"

    rule: CPUSetRule | None = None

    @hookimpl
    def update_rule(self, state: NodeState) -> bool:
        if not state.has_topology:
            return False
        new = parse_rule(state.topology_annotations)
        changed = new != self.rule
        self.rule = new
        return changed

    def container_cpuset(self, request: ContainerRequest) -> str | None:
        """Koordinator's ``SetContainerCPUSet``: None leaves the runtime's cpuset alone, ``""`` clears it."""
        status = parse_resource_status(request.pod_annotations)
        if status.cpuset:
            return status.cpuset
        rule = self.rule
        if rule is None:
            return None
        qos = qos_class_raw(request.pod_labels)
        if status.numa_nodes:
            if qos is QoSClass.BE and self.args.be_cpu_manager:
                return _join(rule.be_share_pools, status.all_numa_nodes)
            if qos is not QoSClass.BE:
                return _join(rule.share_pools, status.all_numa_nodes)
        if qos is QoSClass.SYSTEM and rule.system_qos_cpuset:
            return rule.system_qos_cpuset
        if qos is QoSClass.LS:
            return _join(rule.share_pools)
        if kube_qos_by_cgroup_parent(request.cgroup_parent) is KubeQoS.BEST_EFFORT:
            return ""
        if rule.kubelet_policy == KUBELET_POLICY_STATIC:
            return None
        return _join(rule.share_pools)

    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        if not self.args.disable_unset_cpu_quota and parse_resource_status(request.annotations).cpuset:
            response.resources.cpu_quota = -1

    @hookimpl
    def pre_create_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        self._container(request, response)

    @hookimpl
    def pre_update_container_resources(self, request: ContainerRequest, response: ContainerResponse) -> None:
        self._container(request, response)

    def _container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        cpuset = self.container_cpuset(request)
        if cpuset is not None:
            response.resources.cpuset_cpus = cpuset
        if not self.args.disable_unset_cpu_quota and parse_resource_status(request.pod_annotations).cpuset:
            response.resources.cpu_quota = -1
