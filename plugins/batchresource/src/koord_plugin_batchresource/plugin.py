"""``BatchResource``: what a node can lend to batch (BE) pods, ``kubernetes.io/batch-cpu`` and
``kubernetes.io/batch-memory`` (Koordinator's ``noderesource/plugins/batchresource``).

    batch = capacity - safetyMargin - max(systemUsed, nodeReserved) - HP pods' used   (policy "usage")

with ``safetyMargin = capacity * (100 - reclaimThresholdPercent) / 100``, HP ("high priority") pods those
whose priority class is neither batch nor free, and the NodeMetric's pod usages standing for "used". The
``request`` policy (memory) subtracts the node reservation and HP requests instead; ``maxUsageRequest``
subtracts each HP pod's larger of request and usage. A NodeMetric that is missing, has no ``updateTime``,
or is older than ``degradeTimeMinutes`` resets the resources (degradation).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from koord_framework.api.constants import ANNOTATION_NODE_RESERVATION as _RESERVATION
from koord_framework.api.qos import (
    PriorityClass,
    QoSClass,
    default_priority_value,
)
from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY, parse_resource_list
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import ConflictError, NotFoundError, TooManyRequestsError
from koord_framework.explain.hooks import ExplainSection, NodeResourceExplainer
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.manager.noderesource import (
    ColocationStrategy,
    NodeResourcePlugin,
    PodRecord,
    ResourceItem,
    ResourceMetrics,
)
from koord_framework.plugin import NoArgs
from koord_plugin_batchresource.topology import NRTSyncTimes, update_zone_list, zones_copy
from koord_plugin_batchresource.zones import CHECKED_RESOURCES, nrt_resources_created, zone_batch_resources

__all__ = ["BatchResource", "BatchResourceArgs", "Calculation", "PodRecords"]

log = logging.getLogger("koord.manager.batchresource")

ANNOTATION_CPU_NORMALIZATION_RATIO: Final = "node.koordinator.sh/cpu-normalization-ratio"
CPU: Final = "cpu"
MEMORY: Final = "memory"
GIGA: Final = 10**9
DEGRADE_MESSAGE: Final = (
    "degrade node resource because of abnormal nodeMetric, reason: degradedByBatchResource"
)
LOW_PRIORITY: Final = frozenset({PriorityClass.BATCH, PriorityClass.FREE})


class BatchResourceArgs(NoArgs):
    """BatchResource takes no args: its settings are the node's colocation strategy
    (``slo-controller-config`` ``colocation-config``)."""


Resources = dict[str, int]


def _cm(d: Mapping[str, int]) -> Resources:
    return {CPU: int(d.get(CPU, 0)), MEMORY: int(d.get(MEMORY, 0))}


def _add(a: Resources, b: Mapping[str, int]) -> Resources:
    return {k: a[k] + int(b.get(k, 0)) for k in (CPU, MEMORY)}


def _sub(a: Resources, b: Mapping[str, int]) -> Resources:
    return {k: a[k] - int(b.get(k, 0)) for k in (CPU, MEMORY)}


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {k: max(int(a.get(k, 0)), int(b.get(k, 0))) for k in (CPU, MEMORY)}


def _nonneg(a: Resources) -> Resources:
    return {k: max(v, 0) for k, v in a.items()}


def _usage(entry: Mapping[str, Any], key: str, where: str) -> Resources:
    usage = entry.get(key) or {}
    return _cm(parse_resource_list((usage.get("resources") or {}), path=f"{where}.{key}.resources"))


_ACTIVE_PHASES: Final = frozenset({"Running", "Pending"})
_CPU_MEMORY: Final = frozenset({CPU, MEMORY})


def _usage_pair(entry: Mapping[str, Any], key: str, metric_name: str, pod: str) -> tuple[int, int]:
    """A pod metric's (cpu milli-cores, memory bytes), as ``_usage`` gives them; the common case of a
    list of cpu and memory only is read directly, anything else (and any error) goes the full way."""
    usage = entry.get(key) or {}
    res = usage.get("resources") or {}
    if isinstance(res, dict) and res.keys() <= _CPU_MEMORY:
        cpu, memory = res.get(CPU), res.get(MEMORY)
        try:
            return (
                Quantity.parse(cpu).milli_value() if cpu is not None else 0,
                Quantity.parse(memory).value() if memory is not None else 0,
            )
        except QuantityError:
            pass  # the full parse below names the field
    used = _usage(entry, key, f"{metric_name} podsMetric {pod}")
    return used[CPU], used[MEMORY]


def _giga(value: int) -> int:
    """``Quantity.ScaledValue(resource.Giga)``: rounded up."""
    return -((-value) // GIGA)


def _ratio_str(value: float) -> str:
    """Go's ``%v`` of a float64."""
    return str(int(value)) if value == int(value) else repr(value)


def node_reservation(node: Mapping[str, Any]) -> Resources | None:
    """The ``node.koordinator.sh/reservation`` annotation's resources (``reservedCPUs`` counted as whole
    CPUs); ``None`` when absent. A malformed annotation is an error naming it."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(_RESERVATION)
    if not text:
        return None
    where = f"node {(node.get('metadata') or {}).get('name', '')}: annotation {_RESERVATION}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: must be an object")
    reserved = parse_resource_list(data.get("resources") or {}, path=f"{where}.resources")
    if data.get("reservedCPUs"):
        try:
            reserved[CPU] = len(parse_cpuset(str(data["reservedCPUs"]))) * 1000
        except ValueError as exc:
            raise ValueError(f"{where}.reservedCPUs: {exc}") from exc
    return _cm(reserved)


class Calculation:
    """The inputs of one node's calculation, summed (kept for the messages and the tests)."""

    def __init__(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        node_metric: Mapping[str, Any],
        pod_infos: Sequence[PodRecord] | None = None,
    ) -> None:
        """``pod_infos``, when given, are ``pods`` already parsed (the same order)."""
        name = (node.get("metadata") or {}).get("name", "")
        status = node.get("status") or {}
        self.capacity = _cm(
            parse_resource_list(status.get("capacity") or {}, path=f"node {name}.status.capacity")
        )
        allocatable = _cm(
            parse_resource_list(status.get("allocatable") or {}, path=f"node {name}.status.allocatable")
        )
        self.safety_margin = {
            CPU: int(self.capacity[CPU] * ((100 - strategy.cpu_reclaim_threshold_percent) / 100)),
            MEMORY: int(self.capacity[MEMORY] * ((100 - strategy.memory_reclaim_threshold_percent) / 100)),
        }
        kubelet_reserved = _nonneg(_sub(self.capacity, allocatable))
        self.node_reserved = _max(kubelet_reserved, node_reservation(node) or {})
        m_status = node_metric.get("status") or {}
        metric_name = f"NodeMetric {name}"
        pod_metrics: dict[str, Mapping[str, Any]] = {}
        for pm in m_status.get("podsMetric") or ():
            pod_metrics[f"{pm.get('namespace', '')}/{pm.get('name', '')}"] = pm
        dangling = dict(pod_metrics)
        # Kept for the NUMA-level split: HP pods' metric usage by key, unlisted HP pods' usage.
        self.hp_pod_usage: dict[str, tuple[int, int]] = {}
        self.dangling_hp_used: list[tuple[int, int]] = []
        # Scalars, not resource dicts: this loop runs for every pod of every node on each pass.
        req_cpu = req_mem = used_cpu = used_mem = max_cpu = max_mem = 0
        infos = pod_infos if pod_infos is not None else [PodRecord.from_manifest(p) for p in pods]
        for info in infos:
            if info.phase not in _ACTIVE_PHASES:
                continue
            key = info.key
            metric = pod_metrics.get(key)
            if metric is not None:
                dangling.pop(key, None)
            if info.priority_class in LOW_PRIORITY:
                continue
            r_cpu, r_mem = info.requests.get(CPU, 0), info.requests.get(MEMORY, 0)
            req_cpu += r_cpu
            req_mem += r_mem
            if metric is None:
                used_cpu += r_cpu
                used_mem += r_mem
                continue
            u_cpu, u_mem = _usage_pair(metric, "podUsage", metric_name, key)
            self.hp_pod_usage[key] = (u_cpu, u_mem)
            # LSE pods never give back their CPU
            used_cpu += r_cpu if info.qos_class == QoSClass.LSE else u_cpu
            used_mem += u_mem
            max_cpu += max(r_cpu, u_cpu)
            max_mem += max(r_mem, u_mem)
        for key, pm in dangling.items():
            if pm.get("priority") in (PriorityClass.BATCH.value, PriorityClass.FREE.value):
                continue
            u_cpu, u_mem = _usage_pair(pm, "podUsage", metric_name, key)
            self.dangling_hp_used.append((u_cpu, u_mem))
            used_cpu += u_cpu
            used_mem += u_mem
            max_cpu += u_cpu
            max_mem += u_mem
        self.hp_request = {CPU: req_cpu, MEMORY: req_mem}
        self.hp_used = {CPU: used_cpu, MEMORY: used_mem}
        self.hp_max_used_req = {CPU: max_cpu, MEMORY: max_mem}
        host_app_used = _cm({})
        batch_priority = default_priority_value(PriorityClass.BATCH)
        for app in m_status.get("hostApplicationMetric") or ():
            if _priority_value(app.get("priority")) <= batch_priority:
                continue
            host_app_used = _add(host_app_used, _usage(app, "usage", f"{metric_name} hostApplicationMetric"))
        system = _usage(m_status.get("nodeMetric") or {}, "systemUsage", f"{metric_name} nodeMetric")
        self.system_and_host_apps = _add(system, host_app_used)
        self.system_used = _max(self.system_and_host_apps, self.node_reserved)


def _priority_value(name: Any) -> int:
    try:
        return default_priority_value(PriorityClass(name))
    except ValueError:
        return default_priority_value(PriorityClass.NONE)


class PodRecords:
    """Each node's pods as parsed records, reused while a pod's ``resourceVersion`` stays the same.

    For callers that give ``calculate`` no ``ResourceMetrics.pod_records`` (the manager's controller does,
    keeping them per pod version itself): the controller recalculates every node whenever its NodeMetric is
    reported (each minute by default), and parsing a pod costs more than the arithmetic it feeds; pods
    change far less often. Each call keeps only the pods it was given, so deleted pods are forgotten with
    the node's next calculation. A pod without a ``resourceVersion`` (a hand-made manifest) is parsed every
    time.
    """

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, tuple[str, PodRecord]]] = {}
        self._lock = threading.Lock()

    def parse(self, node: str, pods: Sequence[Mapping[str, Any]]) -> list[PodRecord]:
        with self._lock:
            seen = self._by_node.get(node, {})
        kept: dict[str, tuple[str, PodRecord]] = {}
        out: list[PodRecord] = []
        for pod in pods:
            meta = pod.get("metadata") or {}
            version = str(meta.get("resourceVersion") or "")
            key = (
                str(meta.get("uid") or "") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
            )
            hit = seen.get(key)
            info = (
                hit[1] if version and hit is not None and hit[0] == version else PodRecord.from_manifest(pod)
            )
            if version:
                kept[key] = (version, info)
            out.append(info)
        with self._lock:
            self._by_node[node] = kept
        return out

    def forget(self, node: str | None = None) -> None:
        with self._lock:
            if node is None:
                self._by_node.clear()
            else:
                self._by_node.pop(node, None)


class BatchResource(NodeResourcePlugin[BatchResourceArgs], NodeResourceExplainer):
    """Batch-cpu and batch-memory of a node from its NodeMetric and its pods."""

    name = "BatchResource"
    Args = BatchResourceArgs
    resource_names: ClassVar[Sequence[str]] = (BATCH_CPU, BATCH_MEMORY)

    watches: ClassVar[Sequence[str]] = ("NodeResourceTopology",)
    """Read through the manager's cache; its events re-calculate the node where the manager follows them."""

    def __init__(self, args: BatchResourceArgs | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.records = PodRecords()
        self.nrt_synced = NRTSyncTimes()

    def explain_resources(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
    ) -> ExplainSection:
        """``koord explain node``: the formula with this node's numbers."""
        from koord_plugin_batchresource.explain import explain_resources

        return explain_resources(self, strategy, node, pods, metrics)

    def degraded(self, strategy: ColocationStrategy, metrics: ResourceMetrics) -> bool:
        """A NodeMetric missing, without ``updateTime`` or older than ``degradeTimeMinutes``."""
        return metrics.degraded(strategy)

    def calculate(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
    ) -> list[ResourceItem]:
        node_name = str((node.get("metadata") or {}).get("name") or "")
        if self.degraded(strategy, metrics) or metrics.node_metric is None:
            self.records.forget(node_name)
            return self.reset(node, DEGRADE_MESSAGE)
        if metrics.pod_records is not None:
            infos: Sequence[PodRecord] = metrics.pod_records
            self.records.forget(node_name)  # the controller keeps them
        else:
            infos = self.records.parse(node_name, pods)
        c = Calculation(strategy, node, pods, metrics.node_metric, pod_infos=infos)
        cpu, cpu_msg = self._cpu(strategy, c)
        memory, mem_msg = self._memory(strategy, c)
        zone_cpu, zone_memory = self._zones(strategy, node_name, c, infos, metrics.node_resource_topology)
        return [
            ResourceItem(BATCH_CPU, quantity=cpu, zone_quantity=zone_cpu, message=cpu_msg),
            ResourceItem(BATCH_MEMORY, quantity=memory, zone_quantity=zone_memory, message=mem_msg),
        ]

    @staticmethod
    def _zones(
        strategy: ColocationStrategy,
        node_name: str,
        c: Calculation,
        infos: Sequence[PodRecord],
        nrt: Mapping[str, Any] | None,
    ) -> tuple[dict[str, int], dict[str, int]]:
        """Per-zone values when the node has a NodeResourceTopology with cpu/memory zones; a malformed one
        is logged and gives none (the node's own values are still written, as Koordinator does)."""
        if nrt is None:
            return {}, {}
        try:
            return zone_batch_resources(
                strategy,
                nrt,
                infos,
                c.hp_pod_usage,
                c.dangling_hp_used,
                (c.system_and_host_apps[CPU], c.system_and_host_apps[MEMORY]),
                (c.node_reserved[CPU], c.node_reserved[MEMORY]),
                owner=f"NodeResourceTopology {node_name}",
            )
        except ValueError as exc:
            log.warning("BatchResource: no NUMA-level batch resources for node %s: %s", node_name, exc)
            return {}, {}

    def pre_update(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        items: Sequence[ResourceItem],
        cluster: ClusterPort,
    ) -> None:
        """Write the zones' batch resources into the node's NodeResourceTopology
        (``prepareForNodeResourceTopology``): only when some zone value was calculated and the NRT exists
        with cpu/memory zones; then when an entry moved by more than ``resourceDiffThreshold`` or the NRT
        was not synced for ``updateTimeThresholdSeconds``."""
        zone_resources: dict[str, dict[str, int]] = {}
        for item in items:
            for zone, value in item.zone_quantity.items():
                zone_resources.setdefault(zone, {})[item.name] = value
        if not zone_resources:
            return
        name = str((node.get("metadata") or {}).get("name") or "")
        ratio = _cpu_normalization_ratio(items)
        for attempt in range(NRT_UPDATE_ATTEMPTS):  # RetryOnConflictOrTooManyRequests
            try:
                self._update_nrt(strategy, name, zone_resources, ratio, cluster)
                break
            except (ConflictError, TooManyRequestsError):
                if attempt == NRT_UPDATE_ATTEMPTS - 1:
                    raise
        # As Koordinator, the sync time is taken whenever no error came back, written or not.
        self.nrt_synced.store(name, cluster.clock.now())

    def _update_nrt(
        self,
        strategy: ColocationStrategy,
        name: str,
        zone_resources: Mapping[str, Mapping[str, int]],
        ratio: float,
        cluster: ClusterPort,
    ) -> None:
        try:
            nrt = cluster.get("NodeResourceTopology", name)
        except NotFoundError:
            return
        if not nrt_resources_created(nrt):
            return
        new = zones_copy(nrt)
        owner = f"NodeResourceTopology {name}"
        changed = update_zone_list(
            new["zones"], zone_resources, strategy.resource_diff_threshold, ratio, owner
        )
        if not changed:
            last = self.nrt_synced.get(name)
            if last is not None and cluster.clock.now() - last <= strategy.update_time_threshold_seconds:
                return
        cluster.update(new)
        log.info("BatchResource: NodeResourceTopology %s zones updated", name)

    def wants_event(self, kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
        """A NodeResourceTopology event re-calculates its node when it was created with cpu/memory zones or
        those changed (``NRTHandler``); a deletion forgets its sync time."""
        if kind != "NodeResourceTopology":
            return True
        if new is None:
            if old is not None:
                self.nrt_synced.delete(str((old.get("metadata") or {}).get("name") or ""))
            return False
        if old is None:
            return nrt_resources_created(new)
        if _resource_version(old) == _resource_version(new) and _resource_version(new):
            return False
        return zone_checked_resources(old) != zone_checked_resources(new)

    @staticmethod
    def _cpu(strategy: ColocationStrategy, c: Calculation) -> tuple[int, str]:
        base = c.capacity[CPU] - c.safety_margin[CPU] - c.system_used[CPU]
        if strategy.cpu_calculate_policy == "maxUsageRequest":
            value, hp_label, hp = (
                max(base - c.hp_max_used_req[CPU], 0),
                "podHPMaxUsedRequest",
                c.hp_max_used_req,
            )
        else:
            value, hp_label, hp = max(base - c.hp_used[CPU], 0), "podHPUsed", c.hp_used
        terms = (
            f"nodeCapacity:{c.capacity[CPU]} - nodeSafetyMargin:{c.safety_margin[CPU]} - "
            f"systemUsageOrNodeReserved:{c.system_used[CPU]} - {hp_label}:{hp[CPU]}"
        )
        if strategy.batch_cpu_threshold_percent is None:
            return value, f"batchAllocatable[CPU(Milli-Core)]:{value} = {terms}"
        ratio = strategy.batch_cpu_threshold_percent / 100
        value = min(value, int(c.capacity[CPU] * ratio))
        return value, (
            f"batchAllocatable[CPU(Milli-Core)]:{value} = min(nodeCapacity:{c.capacity[CPU]} * "
            f"thresholdRatio:{_ratio_str(ratio)}, {terms})"
        )

    @staticmethod
    def _memory(strategy: ColocationStrategy, c: Calculation) -> tuple[int, str]:
        cap, margin = c.capacity[MEMORY], c.safety_margin[MEMORY]
        policy = strategy.memory_calculate_policy
        if policy == "request":
            value = max(cap - margin - c.node_reserved[MEMORY] - c.hp_request[MEMORY], 0)
            terms = (
                f"nodeCapacity:{_giga(cap)} - nodeSafetyMargin:{_giga(margin)} - "
                f"nodeReserved:{_giga(c.node_reserved[MEMORY])} - podHPRequest:{_giga(c.hp_request[MEMORY])}"
            )
        else:
            label, hp = (
                ("podHPMaxUsedRequest", c.hp_max_used_req)
                if policy == "maxUsageRequest"
                else ("podHPUsed", c.hp_used)
            )
            value = max(cap - margin - c.system_used[MEMORY] - hp[MEMORY], 0)
            terms = (
                f"nodeCapacity:{_giga(cap)} - nodeSafetyMargin:{_giga(margin)} - "
                f"systemUsage:{_giga(c.system_used[MEMORY])} - {label}:{_giga(hp[MEMORY])}"
            )
        if strategy.batch_memory_threshold_percent is None:
            return value, f"batchAllocatable[Mem(GB)]:{_giga(value)} = {terms}"
        ratio = strategy.batch_memory_threshold_percent / 100
        value = min(value, int(cap * ratio))
        return value, (
            f"batchAllocatable[Mem(GB)]:{_giga(value)} = min(nodeCapacity:{_giga(cap)} * "
            f"thresholdRatio:{_ratio_str(ratio)}, {terms})"
        )


NRT_UPDATE_ATTEMPTS: Final = 5


def _resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def zone_checked_resources(nrt: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Zone name -> cpu/memory allocatable text (``IsZoneListResourceEqual`` over cpu and memory)."""
    out: dict[str, dict[str, str]] = {}
    for zone in nrt.get("zones") or ():
        if not isinstance(zone, Mapping):
            continue
        res = out.setdefault(str(zone.get("name") or ""), {})
        for r in zone.get("resources") or ():
            if isinstance(r, Mapping) and r.get("name") in CHECKED_RESOURCES:
                res[str(r["name"])] = str(r.get("allocatable"))
    return out


def _cpu_normalization_ratio(items: Sequence[ResourceItem]) -> float:
    """The ratio a cpu-normalization calculator decided (``getCPUNormalizationRatio``): -1 when none.

    Items carry node annotations once the framework's ``ResourceItem`` has them (the cpu-normalization
    calculator's work); until then no item has one and batch-cpu is written as calculated.
    """
    for item in items:
        annotations: Mapping[str, str] = getattr(item, "annotations", None) or {}
        text = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
        if text is not None:
            try:
                return float(text)
            except ValueError:
                log.warning("BatchResource: unreadable %s %r", ANNOTATION_CPU_NORMALIZATION_RATIO, text)
                return -1.0
    return -1.0
