"""The annotations and labels NodeNUMAResource reads and writes (Koordinator's ``apis/extension``).

Every reader raises ``AnnotationError`` naming the object, the annotation and what is wrong, so that a
malformed value becomes a clear rejection instead of a half-understood allocation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import format_resource_list, parse_resource_list
from koord_framework.koordlet.cpuset import CPUSetError, format_cpuset, parse_cpuset

__all__ = [
    "ANNOTATION_CPU_TOPOLOGY",
    "ANNOTATION_KUBELET_CPU_MANAGER_POLICY",
    "ANNOTATION_NODE_RESERVATION",
    "ANNOTATION_NUMA_TOPOLOGY_SPEC",
    "ANNOTATION_POD_CPU_ALLOCS",
    "ANNOTATION_RESOURCE_AMPLIFICATION_RATIO",
    "ANNOTATION_RESOURCE_SPEC",
    "ANNOTATION_RESOURCE_STATUS",
    "ANNOTATION_SYSTEM_QOS_RESOURCE",
    "CPU_BIND_POLICIES",
    "CPU_EXCLUSIVE_POLICIES",
    "LABEL_CPU_BIND_POLICY",
    "LABEL_NUMA_ALLOCATE_STRATEGY",
    "LABEL_NUMA_TOPOLOGY_POLICY",
    "AnnotationError",
    "KubeletCPUManagerPolicy",
    "NUMATopologySpec",
    "ResourceSpec",
    "ResourceStatus",
    "amplification_ratios",
    "amplify",
    "amplify_resources",
    "node_cpu_bind_policy",
    "numa_topology_spec",
    "resource_spec",
    "resource_status",
]

ANNOTATION_RESOURCE_SPEC: Final = "scheduling.koordinator.sh/resource-spec"
ANNOTATION_RESOURCE_STATUS: Final = "scheduling.koordinator.sh/resource-status"
ANNOTATION_NUMA_TOPOLOGY_SPEC: Final = "scheduling.koordinator.sh/numa-topology-spec"
ANNOTATION_CPU_TOPOLOGY: Final = "node.koordinator.sh/cpu-topology"
ANNOTATION_POD_CPU_ALLOCS: Final = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY: Final = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_NODE_RESERVATION: Final = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS_RESOURCE: Final = "node.koordinator.sh/system-qos-resource"
ANNOTATION_RESOURCE_AMPLIFICATION_RATIO: Final = "node.koordinator.sh/resource-amplification-ratio"
LABEL_CPU_BIND_POLICY: Final = "node.koordinator.sh/cpu-bind-policy"
LABEL_NUMA_ALLOCATE_STRATEGY: Final = "node.koordinator.sh/numa-allocate-strategy"
LABEL_NUMA_TOPOLOGY_POLICY: Final = "node.koordinator.sh/numa-topology-policy"

CPU_BIND_POLICIES: Final = frozenset({"", "Default", "FullPCPUs", "SpreadByPCPUs", "ConstrainedBurst"})
CPU_EXCLUSIVE_POLICIES: Final = frozenset({"", "None", "PCPULevel", "NUMANodeLevel"})
NUMA_TOPOLOGY_POLICIES: Final = frozenset({"", "BestEffort", "Restricted", "SingleNUMANode"})
NUMA_EXCLUSIVES: Final = frozenset({"", "Required", "Preferred"})

NODE_FULL_PCPUS_ONLY: Final = "FullPCPUsOnly"
NODE_SPREAD_BY_PCPUS: Final = "SpreadByPCPUs"
NODE_BIND_NONE: Final = "None"


class AnnotationError(ValueError):
    """A malformed annotation; the message names the object, the annotation and the field."""


def _json(annotations: Mapping[str, str], key: str, owner: str) -> Any:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError) as err:
        raise AnnotationError(f"{owner}: annotation {key}: invalid JSON: {err}") from err


def _object(annotations: Mapping[str, str], key: str, owner: str) -> Mapping[str, Any]:
    data = _json(annotations, key, owner)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise AnnotationError(f"{owner}: annotation {key}: want a JSON object, got {type(data).__name__}")
    return data


def _string(data: Mapping[str, Any], name: str, key: str, owner: str, allowed: frozenset[str]) -> str:
    value = data.get(name, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise AnnotationError(f"{owner}: annotation {key}: {name}: want a string, got {value!r}")
    if value not in allowed:
        choices = ", ".join(sorted(v for v in allowed if v))
        raise AnnotationError(
            f"{owner}: annotation {key}: {name}: unknown value {value!r} (one of {choices})"
        )
    return value


def _cpuset(text: Any, where: str) -> frozenset[int]:
    if text is None or text == "":
        return frozenset()
    if not isinstance(text, str):
        raise AnnotationError(f"{where}: want a Linux CPU list string, got {text!r}")
    try:
        return parse_cpuset(text)
    except CPUSetError as err:
        raise AnnotationError(f"{where}: {err}") from err


# --- pod ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """``scheduling.koordinator.sh/resource-spec``."""

    required_cpu_bind_policy: str = ""
    preferred_cpu_bind_policy: str = ""
    preferred_cpu_exclusive_policy: str = ""

    def to_json(self) -> str:
        out: dict[str, str] = {}
        if self.required_cpu_bind_policy:
            out["requiredCPUBindPolicy"] = self.required_cpu_bind_policy
        if self.preferred_cpu_bind_policy:
            out["preferredCPUBindPolicy"] = self.preferred_cpu_bind_policy
        if self.preferred_cpu_exclusive_policy:
            out["preferredCPUExclusivePolicy"] = self.preferred_cpu_exclusive_policy
        return json.dumps(out, separators=(",", ":"))


_SPEC_MEMO: dict[str, ResourceSpec] = {}
"""Parsed resource-specs by annotation text: replicas share a handful of texts (bounded; immutable values)."""


def resource_spec(annotations: Mapping[str, str], owner: str) -> ResourceSpec:
    key = ANNOTATION_RESOURCE_SPEC
    raw = annotations.get(key)
    if raw is None:
        return _NO_SPEC
    found = _SPEC_MEMO.get(raw)
    if found is not None:
        return found
    data = _object(annotations, key, owner)
    spec = ResourceSpec(
        _string(data, "requiredCPUBindPolicy", key, owner, CPU_BIND_POLICIES),
        _string(data, "preferredCPUBindPolicy", key, owner, CPU_BIND_POLICIES),
        _string(data, "preferredCPUExclusivePolicy", key, owner, CPU_EXCLUSIVE_POLICIES),
    )
    if len(_SPEC_MEMO) >= 1024:
        _SPEC_MEMO.clear()
    _SPEC_MEMO[raw] = spec
    return spec


_NO_SPEC = ResourceSpec()


@dataclass(frozen=True, slots=True)
class NUMATopologySpec:
    """``scheduling.koordinator.sh/numa-topology-spec``."""

    numa_topology_policy: str = ""
    single_numa_node_exclusive: str = ""


def numa_topology_spec(annotations: Mapping[str, str], owner: str) -> NUMATopologySpec:
    key = ANNOTATION_NUMA_TOPOLOGY_SPEC
    data = _object(annotations, key, owner)
    return NUMATopologySpec(
        _string(data, "numaTopologyPolicy", key, owner, NUMA_TOPOLOGY_POLICIES),
        _string(data, "singleNUMANodeExclusive", key, owner, NUMA_EXCLUSIVES),
    )


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """``scheduling.koordinator.sh/resource-status``: the cpuset and per-NUMA-node resources of a pod."""

    cpuset: frozenset[int] = frozenset()
    numa_node_resources: tuple[tuple[int, Mapping[str, int]], ...] = ()

    def to_json(self) -> str:
        out: dict[str, Any] = {}
        if self.cpuset:
            out["cpuset"] = format_cpuset(self.cpuset)
        if self.numa_node_resources:
            out["numaNodeResources"] = [
                {"node": node, "resources": format_resource_list(res)} if res else {"node": node}
                for node, res in self.numa_node_resources
            ]
        return json.dumps(out, separators=(",", ":"))


def resource_status(annotations: Mapping[str, str], owner: str) -> ResourceStatus:
    key = ANNOTATION_RESOURCE_STATUS
    data = _object(annotations, key, owner)
    cpus = _cpuset(data.get("cpuset"), f"{owner}: annotation {key}: cpuset")
    numa: list[tuple[int, Mapping[str, int]]] = []
    for i, entry in enumerate(data.get("numaNodeResources") or ()):
        where = f"{owner}: annotation {key}: numaNodeResources[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("node"), int):
            raise AnnotationError(f"{where}: want {{'node': <int>, 'resources': {{...}}}}, got {entry!r}")
        try:
            res = parse_resource_list(entry.get("resources") or {}, path="resources")
        except QuantityError as err:
            raise AnnotationError(f"{where}: {err}") from err
        numa.append((int(entry["node"]), res))
    return ResourceStatus(cpus, tuple(numa))


# --- node / NRT ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KubeletCPUManagerPolicy:
    """``kubelet.koordinator.sh/cpu-manager-policy`` on the NRT."""

    policy: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: frozenset[int] = frozenset()


def kubelet_cpu_manager_policy(annotations: Mapping[str, str], owner: str) -> KubeletCPUManagerPolicy:
    key = ANNOTATION_KUBELET_CPU_MANAGER_POLICY
    data = _object(annotations, key, owner)
    options = data.get("options") or {}
    if not isinstance(options, Mapping):
        raise AnnotationError(f"{owner}: annotation {key}: options: want an object, got {options!r}")
    policy = data.get("policy") or ""
    if not isinstance(policy, str):
        raise AnnotationError(f"{owner}: annotation {key}: policy: want a string, got {policy!r}")
    reserved = _cpuset(data.get("reservedCPUs"), f"{owner}: annotation {key}: reservedCPUs")
    return KubeletCPUManagerPolicy(policy, {str(k): str(v) for k, v in options.items()}, reserved)


def node_cpu_bind_policy(labels: Mapping[str, str], kubelet: KubeletCPUManagerPolicy | None) -> str:
    """``GetNodeCPUBindPolicy``: the node label, or kubelet's static policy with ``full-pcpus-only``."""
    label = labels.get(LABEL_CPU_BIND_POLICY, "")
    if label == NODE_FULL_PCPUS_ONLY or (
        kubelet is not None
        and kubelet.policy == "static"
        and kubelet.options.get("full-pcpus-only") == "true"
    ):
        return NODE_FULL_PCPUS_ONLY
    if label == NODE_SPREAD_BY_PCPUS:
        return NODE_SPREAD_BY_PCPUS
    return NODE_BIND_NONE


def amplification_ratios(annotations: Mapping[str, str], owner: str) -> dict[str, float]:
    """``node.koordinator.sh/resource-amplification-ratio``: resource -> ratio (absent: {})."""
    key = ANNOTATION_RESOURCE_AMPLIFICATION_RATIO
    data = _object(annotations, key, owner)
    out: dict[str, float] = {}
    for name, ratio in data.items():
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not math.isfinite(ratio):
            raise AnnotationError(f"{owner}: annotation {key}: {name}: want a number, got {ratio!r}")
        out[str(name)] = float(ratio)
    return out


def amplify(value: int, ratio: float) -> int:
    """``extension.Amplify``: ceil(value × ratio) when the ratio is above 1, else the value."""
    if ratio <= 1:
        return value
    return math.ceil(float(value) * ratio)


def amplify_resources(
    resources: Mapping[str, int], ratios: Mapping[str, float], only: str | None = None
) -> dict[str, int]:
    """``AmplifyResourceList``: every resource (or only ``only``) scaled by its ratio."""
    out = dict(resources)
    for name, value in resources.items():
        if only is not None and name != only:
            continue
        ratio = ratios.get(name, 0.0)
        if ratio > 1 and value != 0:
            out[name] = amplify(value, ratio)
    return out
