"""The cpuset rule (from the NodeResourceTopology's annotations) and the pod's ``resource-status``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.constants import ANNOTATION_RESOURCE_STATUS
from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.koordlet.cpuset import CPUSetError, parse_cpuset
from koord_framework.koordlet.helpers import (
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_SYSTEM_QOS_RESOURCE,
)
from koord_framework.koordlet.runtimehooks import HookError

__all__ = [
    "ANNOTATION_BE_CPU_SHARED_POOLS",
    "ANNOTATION_CPU_SHARED_POOLS",
    "CPUSetRule",
    "ResourceStatus",
    "SharePool",
    "parse_resource_status",
    "parse_rule",
]

ANNOTATION_CPU_SHARED_POOLS = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_BE_CPU_SHARED_POOLS = "node.koordinator.sh/be-cpu-shared-pools"
BATCH_CPU = "kubernetes.io/batch-cpu"


@dataclass(frozen=True, slots=True)
class SharePool:
    socket: int
    node: int
    cpuset: str


@dataclass(frozen=True, slots=True)
class CPUSetRule:
    share_pools: tuple[SharePool, ...] = ()
    be_share_pools: tuple[SharePool, ...] = ()
    kubelet_policy: str = ""
    system_qos_cpuset: str = ""


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """The scheduler's decision for the pod: its cpuset (LSE/LSR) and the NUMA nodes it uses."""

    cpuset: str = ""
    numa_nodes: tuple[int, ...] = ()
    """NUMA nodes whose allocation names a non-zero ``cpu`` or positive ``batch-cpu``, in annotation order."""
    all_numa_nodes: tuple[int, ...] = field(default=())


def _json(annotations: Mapping[str, str], key: str) -> Any:
    raw = annotations.get(key)
    if raw is None or raw == "":
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError) as err:
        raise HookError(f"annotation {key} is not JSON: {err}") from None


def _pools(annotations: Mapping[str, str], key: str) -> tuple[SharePool, ...]:
    data = _json(annotations, key)
    if data is None:
        return ()
    if not isinstance(data, list):
        raise HookError(f"annotation {key} must be a list of pools")
    pools = []
    for i, p in enumerate(data):
        if not isinstance(p, Mapping):
            raise HookError(f"annotation {key}[{i}] must be an object")
        pools.append(SharePool(int(p.get("socket", 0)), int(p.get("node", 0)), str(p.get("cpuset") or "")))
    return tuple(pools)


def parse_rule(annotations: Mapping[str, str]) -> CPUSetRule:
    """Koordinator's ``cpusetPlugin.parseRule`` over the NodeResourceTopology's annotations."""
    policy = _json(annotations, ANNOTATION_KUBELET_CPU_MANAGER_POLICY)
    if policy is not None and not isinstance(policy, Mapping):
        raise HookError(f"annotation {ANNOTATION_KUBELET_CPU_MANAGER_POLICY} must be an object")
    system = _json(annotations, ANNOTATION_SYSTEM_QOS_RESOURCE)
    system_cpuset = ""
    if system is not None:
        if not isinstance(system, Mapping):
            raise HookError(f"annotation {ANNOTATION_SYSTEM_QOS_RESOURCE} must be an object")
        system_cpuset = str(system.get("cpuset") or "")
        if system_cpuset:
            try:
                parse_cpuset(system_cpuset)
            except CPUSetError as err:
                raise HookError(f"annotation {ANNOTATION_SYSTEM_QOS_RESOURCE}: cpuset: {err}") from None
    return CPUSetRule(
        _pools(annotations, ANNOTATION_CPU_SHARED_POOLS),
        _pools(annotations, ANNOTATION_BE_CPU_SHARED_POOLS),
        str((policy or {}).get("policy") or ""),
        system_cpuset,
    )


def _positive(resources: Mapping[str, Any], name: str, where: str) -> bool:
    if name not in resources:
        return False
    try:
        return Quantity(str(resources[name])).milli_value() > 0
    except QuantityError as err:
        raise HookError(f"annotation {ANNOTATION_RESOURCE_STATUS}: {where}.{name}: {err}") from None


def parse_resource_status(annotations: Mapping[str, str]) -> ResourceStatus:
    """The pod's ``scheduling.koordinator.sh/resource-status`` (empty when absent); malformed is an error
    naming the field."""
    data = _json(annotations, ANNOTATION_RESOURCE_STATUS)
    if data is None:
        return ResourceStatus()
    if not isinstance(data, Mapping):
        raise HookError(f"annotation {ANNOTATION_RESOURCE_STATUS} must be an object")
    cpuset = data.get("cpuset") or ""
    if not isinstance(cpuset, str):
        raise HookError(f"annotation {ANNOTATION_RESOURCE_STATUS}: cpuset must be a string")
    if cpuset:
        try:
            parse_cpuset(cpuset)
        except CPUSetError as err:
            raise HookError(f"annotation {ANNOTATION_RESOURCE_STATUS}: cpuset: {err}") from None
    numa = data.get("numaNodeResources") or []
    if not isinstance(numa, list):
        raise HookError(f"annotation {ANNOTATION_RESOURCE_STATUS}: numaNodeResources must be a list")
    aware: list[int] = []
    nodes: list[int] = []
    for i, n in enumerate(numa):
        where = f"numaNodeResources[{i}]"
        if not isinstance(n, Mapping) or not isinstance(n.get("node", 0), int):
            raise HookError(
                f"annotation {ANNOTATION_RESOURCE_STATUS}: {where} must be an object with an integer node"
            )
        node = int(n.get("node", 0))
        nodes.append(node)
        res = n.get("resources")
        if res is None:
            continue
        if not isinstance(res, Mapping):
            raise HookError(f"annotation {ANNOTATION_RESOURCE_STATUS}: {where}.resources must be an object")
        if _positive(res, "cpu", f"{where}.resources") or _positive(res, BATCH_CPU, f"{where}.resources"):
            aware.append(node)
    return ResourceStatus(cpuset, tuple(aware), tuple(nodes))
