"""``MidResource``: what a node can lend to mid-priority pods, ``kubernetes.io/mid-cpu`` (milli-cores) and
``kubernetes.io/mid-memory`` (bytes) (Koordinator's ``noderesource/plugins/midresource``).

Default mode, from what prod pods reserved but do not use (the NodeMetric's prod-reclaimable resources):

    reclaimable = min(prodReclaimable, capacity - nodeUsage) + unallocated * midUnallocatedPercent / 100
    mid         = min(reclaimable, capacity * midThresholdPercent / 100)
    unallocated = max(capacity - max(systemUsed + prod host apps, nodeReserved) - prod pods' requests, 0)

``midReclaimMode: static`` takes a fixed share of capacity instead:

    mid = min(capacity * midStaticReservedPercent / 100, capacity * midThresholdPercent / 100)

A NodeMetric that is missing, has no ``updateTime`` or is older than ``degradeTimeMinutes`` resets both
resources (degradation); one without prod-reclaimable resources counts them as zero.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from koord_framework.api.constants import ANNOTATION_NODE_RESERVATION
from koord_framework.api.qos import PriorityClass, default_priority_value
from koord_framework.api.resources import MID_CPU, MID_MEMORY, parse_resource_list
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.manager.noderesource import (
    ColocationStrategy,
    NodeResourcePlugin,
    PodRecord,
    ResourceItem,
    ResourceMetrics,
)
from koord_framework.plugin import NoArgs

__all__ = ["DEGRADE_MESSAGE", "MidResource", "MidResourceArgs"]

log = logging.getLogger("koord.manager.midresource")

CPU: Final = "cpu"
MEMORY: Final = "memory"
GIGA: Final = 10**9
DEGRADE_MESSAGE: Final = (
    "degrade node Mid resource because of abnormal nodeMetric, reason: degradedByMidResource"
)
NEED_SYNC_MESSAGE: Final = "mid resource diff is big than threshold"
LOW_PRIORITY: Final = frozenset({PriorityClass.MID, PriorityClass.BATCH, PriorityClass.FREE})
"""Pods of these classes are not "high priority": their requests are not subtracted from unallocated."""
STATIC: Final = "static"
_ACTIVE_PHASES: Final = frozenset({"Running", "Pending"})

Resources = dict[str, int]


class MidResourceArgs(NoArgs):
    """MidResource takes no args: its settings are the node's colocation strategy (``slo-controller-config``
    ``colocation-config``: ``midReclaimMode``, ``midCPUThresholdPercent``, ``midMemoryThresholdPercent``,
    ``midUnallocatedPercent``, ``midStaticCPUReservedPercent``, ``midStaticMemoryReservedPercent``,
    ``degradeTimeMinutes``, ``resourceDiffThreshold``)."""


def _cm(d: Mapping[str, int]) -> Resources:
    return {CPU: int(d.get(CPU, 0)), MEMORY: int(d.get(MEMORY, 0))}


def _giga(value: int) -> int:
    """``Quantity.ScaledValue(resource.Giga)``: rounded up."""
    return -((-value) // GIGA)


def _ratio_str(value: float) -> str:
    """Go's ``%v`` of a float64."""
    return str(int(value)) if value == int(value) else repr(value)


def _percent(value: int | None, default: int) -> float:
    """``getPercentFromStrategy``: the strategy's percent (Koordinator's default when unset) as a ratio."""
    return (default if value is None else value) / 100


def _usage(entry: Mapping[str, Any] | None, key: str, where: str) -> Resources | None:
    """The cpu/memory of ``entry[key].resources``; ``None`` when the list is absent (Go's nil list)."""
    usage = (entry or {}).get(key)
    if not isinstance(usage, Mapping) or usage.get("resources") is None:
        return None
    return _cm(parse_resource_list(usage.get("resources") or {}, path=f"{where}.{key}.resources"))


def _node_reservation(node: Mapping[str, Any]) -> Resources:
    """``GetNodeReservationFromAnnotation``: the ``node.koordinator.sh/reservation`` resources,
    ``reservedCPUs`` counted as whole CPUs. Koordinator logs a malformed annotation and ignores it;
    so does this."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_NODE_RESERVATION)
    if not text:
        return {}
    name = (node.get("metadata") or {}).get("name", "")
    try:
        data = json.loads(text)
        if not isinstance(data, Mapping):
            raise ValueError("must be an object")
        reserved = parse_resource_list(data.get("resources") or {}, path="resources")
        if data.get("reservedCPUs"):
            reserved[CPU] = len(parse_cpuset(str(data["reservedCPUs"]))) * 1000
    except ValueError as exc:  # json.JSONDecodeError and QuantityError are ValueErrors
        log.warning("node %s: ignoring annotation %s: %s", name, ANNOTATION_NODE_RESERVATION, exc)
        return {}
    return {k: v for k, v in reserved.items() if k in (CPU, MEMORY)}


def _max_lists(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``quotav1.Max``: every key of either list, the larger value."""
    return {
        k: max(a.get(k, 0), b.get(k, 0)) if k in a and k in b else a.get(k, b.get(k, 0)) for k in {*a, *b}
    }


class MidResource(NodeResourcePlugin[MidResourceArgs]):
    """Mid-cpu and mid-memory of a node from its NodeMetric's prod-reclaimable resources."""

    name = "MidResource"
    Args = MidResourceArgs
    resource_names: ClassVar[Sequence[str]] = (MID_CPU, MID_MEMORY)
    need_sync_message: ClassVar[str] = NEED_SYNC_MESSAGE

    def __init__(self, args: MidResourceArgs | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self._pods: dict[str, dict[str, tuple[str, Resources | None]]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def degraded(strategy: ColocationStrategy, metrics: ResourceMetrics) -> bool:
        """``isDegradeNeeded``: a NodeMetric missing, without ``updateTime`` or older than
        ``degradeTimeMinutes``. No prod-reclaimable resources is not a degradation (they count as zero)."""
        return metrics.degraded(strategy)

    def calculate(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
    ) -> list[ResourceItem]:
        name = str((node.get("metadata") or {}).get("name") or "")
        status = node.get("status") or {}
        if status.get("allocatable") is None:
            raise ValueError(f"node {name}: status.allocatable is missing")
        if self.degraded(strategy, metrics) or metrics.node_metric is None:
            with self._lock:
                self._pods.pop(name, None)
            return self.reset(node, DEGRADE_MESSAGE)
        capacity = _cm(parse_resource_list(status.get("capacity") or {}, path=f"node {name}.status.capacity"))
        if strategy.mid_reclaim_mode == STATIC:
            cpu, memory, cpu_msg, mem_msg = self._static(strategy, capacity)
        else:
            cpu, memory, cpu_msg, mem_msg = self._by_policy(
                strategy, node, pods, metrics, metrics.node_metric, capacity
            )
        return [
            ResourceItem(MID_CPU, quantity=cpu, message=cpu_msg),
            ResourceItem(MID_MEMORY, quantity=memory, message=mem_msg),
        ]

    # --- static mode ------------------------------------------------------------------------------------
    @staticmethod
    def _static(strategy: ColocationStrategy, capacity: Resources) -> tuple[int, int, str, str]:
        """``CalculateMidResourceByStaticMode``."""
        cpu_pct = _percent(strategy.mid_static_cpu_reserved_percent, 0)
        mem_pct = _percent(strategy.mid_static_memory_reserved_percent, 0)
        cpu = int(capacity[CPU] * cpu_pct)
        memory = int(capacity[MEMORY] * mem_pct)
        cpu_ratio = _percent(strategy.mid_cpu_threshold_percent, 100)
        mem_ratio = _percent(strategy.mid_memory_threshold_percent, 100)
        cpu = min(cpu, int(capacity[CPU] * cpu_ratio))
        memory = min(memory, int(capacity[MEMORY] * mem_ratio))
        cpu_msg = (
            f"midAllocatable[CPU(milli-core)]:{cpu} = min(nodeCapacity:{capacity[CPU]} * "
            f"staticReservedPercent:{_ratio_str(cpu_pct)}, nodeCapacity:{capacity[CPU]} * "
            f"thresholdRatio:{_ratio_str(cpu_ratio)})"
        )
        mem_msg = (
            f"midAllocatable[Memory(GB)]:{_giga(memory)} = min(nodeCapacity:{_giga(capacity[MEMORY])} * "
            f"staticReservedPercent:{_ratio_str(mem_pct)}, nodeCapacity:{_giga(capacity[MEMORY])} * "
            f"thresholdRatio:{_ratio_str(mem_ratio)})"
        )
        return cpu, memory, cpu_msg, mem_msg

    # --- default mode -----------------------------------------------------------------------------------
    def _by_policy(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
        node_metric: Mapping[str, Any],
        capacity: Resources,
    ) -> tuple[int, int, str, str]:
        """``calculate`` + ``CalculateMidResourceByPolicy``."""
        name = str((node.get("metadata") or {}).get("name") or "")
        where = f"NodeMetric {name}"
        m_status = node_metric.get("status") or {}
        reclaimable = _usage(
            m_status.get("prodReclaimableMetric"), "resource", f"{where} prodReclaimableMetric"
        )
        prod_reclaimable = reclaimable if reclaimable is not None else _cm({})
        info = m_status.get("nodeMetric")
        system_used = _usage(info, "systemUsage", f"{where} nodeMetric") or _cm({})
        # Host applications of higher priority than mid use the node's reserved resources, as system does.
        mid_priority = default_priority_value(PriorityClass.MID)
        for app in m_status.get("hostApplicationMetric") or ():
            if _priority_value(app.get("priority")) <= mid_priority:
                continue
            used = _usage(app, "usage", f"{where} hostApplicationMetric") or _cm({})
            system_used = {k: system_used[k] + used[k] for k in (CPU, MEMORY)}
        allocatable = _cm(
            parse_resource_list(
                (node.get("status") or {}).get("allocatable") or {}, path=f"node {name}.status"
            )
        )
        kubelet_reserved = {k: max(capacity[k] - allocatable[k], 0) for k in (CPU, MEMORY)}
        node_reserved = _max_lists(kubelet_reserved, _node_reservation(node))
        node_reserved = _cm(_max_lists(system_used, node_reserved))
        unallocated = self._unallocated(name, pods, metrics.pod_records, capacity, node_reserved)
        unused = self._unused(capacity, info, where)
        cpu = min(prod_reclaimable[CPU], unused[CPU])
        memory = min(prod_reclaimable[MEMORY], unused[MEMORY])
        cpu, memory = max(cpu, 0), max(memory, 0)
        unallocated_ratio = _percent(strategy.mid_unallocated_percent, 0)
        cpu += int(unallocated[CPU] * unallocated_ratio)
        memory += int(unallocated[MEMORY] * unallocated_ratio)
        cpu_ratio = _percent(strategy.mid_cpu_threshold_percent, 100)
        mem_ratio = _percent(strategy.mid_memory_threshold_percent, 100)
        cpu = min(cpu, int(capacity[CPU] * cpu_ratio))
        memory = min(memory, int(capacity[MEMORY] * mem_ratio))
        cpu_msg = (
            f"midAllocatable[CPU(milli-core)]:{cpu} = min(min(ProdReclaimable:{prod_reclaimable[CPU]}, "
            f"NodeUnused:{unused[CPU]}) + Unallocated:{unallocated[CPU]} * "
            f"midUnallocatedRatio:{_ratio_str(unallocated_ratio)}, NodeCapacity:{capacity[CPU]} * "
            f"thresholdRatio:{_ratio_str(cpu_ratio)})"
        )
        mem_msg = (
            f"midAllocatable[Memory(GB)]:{_giga(memory)} = min(min(ProdReclaimable:"
            f"{_giga(prod_reclaimable[MEMORY])}, NodeUnused:{_giga(unused[MEMORY])}) + Unallocated:"
            f"{_giga(unallocated[MEMORY])} * midUnallocatedRatio:{_ratio_str(unallocated_ratio)}, "
            f"NodeCapacity:{_giga(capacity[MEMORY])} * thresholdRatio:{_ratio_str(mem_ratio)})"
        )
        return cpu, memory, cpu_msg, mem_msg

    def _unallocated(
        self,
        node: str,
        pods: Sequence[Mapping[str, Any]],
        records: Sequence[PodRecord] | None,
        capacity: Resources,
        node_reserved: Resources,
    ) -> Resources:
        """``getUnallocated``: ``max(capacity - nodeReserved - Running/Pending prod pods' requests, 0)``;
        a pod neither mid, batch nor free counts as prod. ``records``: the controller's parsed pods."""
        cpu = memory = 0
        if records is not None:
            with self._lock:
                self._pods.pop(node, None)  # the controller keeps the parsed pods
            for r in records:
                if r.priority_class not in LOW_PRIORITY and r.phase in _ACTIVE_PHASES:
                    cpu += r.requests.get(CPU, 0)
                    memory += r.requests.get(MEMORY, 0)
        else:
            for request in self._prod_requests(node, pods):
                cpu += request[CPU]
                memory += request[MEMORY]
        allocated = {CPU: cpu, MEMORY: memory}
        return {k: max(capacity[k] - node_reserved[k] - allocated[k], 0) for k in (CPU, MEMORY)}

    def _prod_requests(self, node: str, pods: Sequence[Mapping[str, Any]]) -> list[Resources]:
        """The requests of the node's Running / Pending prod pods. A pod is parsed again only when its
        ``resourceVersion`` moved (every node is recalculated at each NodeMetric report; pods change far less
        often); pods not given are forgotten."""
        with self._lock:
            seen = self._pods.get(node, {})
        kept: dict[str, tuple[str, Resources | None]] = {}
        out: list[Resources] = []
        for pod in pods:
            meta = pod.get("metadata") or {}
            version = str(meta.get("resourceVersion") or "")
            key = (
                str(meta.get("uid") or "") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
            )
            hit = seen.get(key)
            if version and hit is not None and hit[0] == version:
                request = hit[1]
            else:
                info = PodRecord.from_manifest(pod)
                low = info.priority_class in LOW_PRIORITY or info.phase not in _ACTIVE_PHASES
                request = None if low else _cm(info.requests)
            if version:
                kept[key] = (version, request)
            if request is not None:
                out.append(request)
        with self._lock:
            self._pods[node] = kept
        return out

    @staticmethod
    def _unused(capacity: Resources, info: Mapping[str, Any] | None, where: str) -> Resources:
        """``getNodeUnused``: ``capacity - nodeUsage`` (may be negative); zero when the node usage lacks cpu
        or memory, so that mid resources stay strict."""
        usage = ((info or {}).get("nodeUsage") or {}).get("resources")
        if not isinstance(usage, Mapping) or CPU not in usage or MEMORY not in usage:
            return _cm({})
        used = _cm(parse_resource_list(usage, path=f"{where} nodeMetric.nodeUsage.resources"))
        return {k: capacity[k] - used[k] for k in (CPU, MEMORY)}


def _priority_value(name: Any) -> int:
    try:
        return default_priority_value(PriorityClass(name))
    except ValueError:
        return default_priority_value(PriorityClass.NONE)
