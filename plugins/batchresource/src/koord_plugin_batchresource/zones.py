"""NUMA-level batch resources (``calculateOnNUMALevel`` of Koordinator's batchresource plugin).

The NodeMetric has no NUMA-level usage, so the node-level terms are spread over the NodeResourceTopology's
zones the way Koordinator approximates them: each zone's capacity is the zone's own cpu / memory
``allocatable``, the safety margin is taken of that, system usage and node reservation are split evenly,
a pod's request and usage go to the NUMA nodes of its ``scheduling.koordinator.sh/resource-status``
(evenly over all zones when it names none) and the usage of pods that are not listed is split evenly.

Every term is kept in milli-units (milli-cores, milli-bytes) because the even splits round up at that
precision (``DivideResourceList``), as Koordinator's quantities do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from koord_framework.api.constants import ANNOTATION_RESOURCE_STATUS
from koord_framework.api.qos import PriorityClass, QoSClass
from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.manager.noderesource import ColocationStrategy, PodRecord

__all__ = ["CHECKED_RESOURCES", "ZoneTotals", "nrt_resources_created", "zone_batch_resources"]

CPU: Final = "cpu"
MEMORY: Final = "memory"
CHECKED_RESOURCES: Final = frozenset({CPU, MEMORY})
"""The zone resources whose presence means the NRT is filled in (``checkedNRTResourceSet``)."""

Milli = dict[str, int]


def _zero() -> Milli:
    return {CPU: 0, MEMORY: 0}


def _add(a: Milli, b: Mapping[str, int]) -> None:
    for k in (CPU, MEMORY):
        a[k] += b.get(k, 0)


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> Milli:
    return {k: max(a.get(k, 0), b.get(k, 0)) for k in (CPU, MEMORY)}


def _divide(a: Mapping[str, int], n: int) -> Milli:
    """``DivideResourceList``: each milli value divided, rounded up."""
    return {k: -(-a.get(k, 0) // n) for k in (CPU, MEMORY)}


def _milli(cpu_milli: int, memory_bytes: int) -> Milli:
    """The node-level terms (milli-cores, bytes) in milli-units."""
    return {CPU: cpu_milli, MEMORY: memory_bytes * 1000}


def _bytes(milli: int) -> int:
    """``Quantity.Value()`` of a milli value: rounded up."""
    return -(-milli // 1000)


def nrt_resources_created(nrt: Mapping[str, Any]) -> bool:
    """``isNRTResourcesCreated``: some zone reports cpu or memory."""
    return any(
        isinstance(r, Mapping) and r.get("name") in CHECKED_RESOURCES
        for zone in nrt.get("zones") or ()
        if isinstance(zone, Mapping)
        for r in zone.get("resources") or ()
    )


def _zone_allocatable(nrt: Mapping[str, Any], owner: str) -> list[tuple[str, Milli]]:
    out: list[tuple[str, Milli]] = []
    for i, zone in enumerate(nrt.get("zones") or ()):
        if not isinstance(zone, Mapping):
            raise ValueError(f"{owner}: zones[{i}] must be an object")
        alloc: Milli = {}
        for j, r in enumerate(zone.get("resources") or ()):
            if not isinstance(r, Mapping) or r.get("name") not in CHECKED_RESOURCES:
                continue
            try:
                alloc[str(r["name"])] = Quantity.parse(r.get("allocatable", 0)).milli_value()
            except QuantityError as exc:
                raise ValueError(f"{owner}: zones[{i}].resources[{j}].allocatable: {exc}") from exc
        out.append((str(zone.get("name") or ""), alloc))
    return out


def pod_numa_nodes(info: PodRecord, zones: int) -> tuple[frozenset[int], int]:
    """The NUMA nodes of the pod's resource-status that exist on the node and how many entries name them
    (Koordinator divides by the entries, a node named twice counting twice); none: it shares all zones.
    An unreadable annotation counts as none (the pod is treated as LS), as Koordinator does."""
    text = info.annotations.get(ANNOTATION_RESOURCE_STATUS)
    if not text:
        return frozenset(), 0
    try:
        data = json.loads(text)
        entries = data.get("numaNodeResources") or () if isinstance(data, Mapping) else ()
        nodes = [int(e.get("node", 0)) for e in entries if isinstance(e, Mapping)]
    except (ValueError, TypeError, AttributeError):
        return frozenset(), 0
    valid = [n for n in nodes if 0 <= n < zones]
    return frozenset(valid), len(valid)


def _split(value: Mapping[str, int], numa: tuple[frozenset[int], int], zones: int) -> list[Milli]:
    """``GetPodNUMARequestAndUsage`` for one list: evenly over the pod's NUMA nodes, or over all zones."""
    nodes, count = numa
    if count <= 0:
        share = _divide(value, zones)
        return [dict(share) for _ in range(zones)]
    share = _divide(value, count)
    return [dict(share) if i in nodes else _zero() for i in range(zones)]


class ZoneTotals:
    """One zone's terms for ``CalculateBatchResourceByPolicy``, in milli-units."""

    def __init__(self, allocatable: Milli) -> None:
        self.capacity = allocatable
        self.safety_margin: Milli = _zero()
        self.system_used: Milli = _zero()
        self.system_reserved: Milli = _zero()
        self.hp_request = _zero()
        self.hp_used = _zero()
        self.hp_max_used_req = _zero()

    def batch(self, strategy: ColocationStrategy) -> tuple[int, int]:
        """(batch-cpu milli-cores, batch-memory bytes) of the zone under the strategy's policies."""
        cap, margin = self.capacity, self.safety_margin
        system = _max(self.system_used, self.system_reserved)

        def left(k: str, minus: Mapping[str, int], hp: Mapping[str, int]) -> int:
            return max(cap.get(k, 0) - margin[k] - minus[k] - hp[k], 0)

        if strategy.cpu_calculate_policy == "maxUsageRequest":
            cpu = left(CPU, system, self.hp_max_used_req)
        else:
            cpu = left(CPU, system, self.hp_used)
        if strategy.batch_cpu_threshold_percent is not None:
            cpu = min(cpu, int(cap.get(CPU, 0) * (strategy.batch_cpu_threshold_percent / 100)))
        policy = strategy.memory_calculate_policy
        if policy == "request":
            memory = left(MEMORY, self.system_reserved, self.hp_request)
        elif policy == "maxUsageRequest":
            memory = left(MEMORY, system, self.hp_max_used_req)
        else:
            memory = left(MEMORY, system, self.hp_used)
        if strategy.batch_memory_threshold_percent is not None:
            ratio = strategy.batch_memory_threshold_percent / 100
            memory = min(memory, int(_bytes(cap.get(MEMORY, 0)) * ratio) * 1000)
        return cpu, _bytes(memory)


def zone_batch_resources(
    strategy: ColocationStrategy,
    nrt: Mapping[str, Any],
    infos: Sequence[PodRecord],
    pod_usage: Mapping[str, tuple[int, int]],
    dangling_hp_usage: Sequence[tuple[int, int]],
    system_used: tuple[int, int],
    node_reserved: tuple[int, int],
    owner: str,
) -> tuple[dict[str, int], dict[str, int]]:
    """Batch-cpu and batch-memory of each zone of ``nrt`` (zone name -> milli-cores / bytes); empty when
    the NRT reports no cpu or memory yet.

    ``pod_usage`` maps ``namespace/name`` to the (milli-cores, bytes) usage of the NodeMetric's pods,
    ``dangling_hp_usage`` are the usages of metrics of unlisted pods that are neither batch nor free,
    ``system_used`` the NodeMetric's system usage plus prod host applications, ``node_reserved`` the
    larger of the kubelet's and the annotation's reservation (both in milli-cores and bytes).
    """
    if not nrt_resources_created(nrt):
        return {}, {}
    zones = _zone_allocatable(nrt, owner)
    n = len(zones)
    cpu_ratio = (100 - strategy.cpu_reclaim_threshold_percent) / 100
    mem_ratio = (100 - strategy.memory_reclaim_threshold_percent) / 100
    system = _divide(_milli(*system_used), n)
    reserved = _divide(_milli(*node_reserved), n)
    totals: list[ZoneTotals] = []
    for _, alloc in zones:
        t = ZoneTotals(alloc)
        t.safety_margin = {
            CPU: int(alloc.get(CPU, 0) * cpu_ratio),
            MEMORY: int(_bytes(alloc.get(MEMORY, 0)) * mem_ratio) * 1000,
        }
        t.system_used, t.system_reserved = dict(system), dict(reserved)
        totals.append(t)
    for info in infos:
        if info.phase not in ("Running", "Pending"):
            continue
        request = _milli(info.requests.get(CPU, 0), info.requests.get(MEMORY, 0))
        usage_pair = pod_usage.get(info.key)
        usage = _milli(*usage_pair) if usage_pair is not None else request
        numa = pod_numa_nodes(info, n)
        zone_req, zone_usage = _split(request, numa, n), _split(usage, numa, n)
        if info.priority_class in (PriorityClass.BATCH, PriorityClass.FREE):
            continue
        for i, t in enumerate(totals):
            _add(t.hp_request, zone_req[i])
            if usage_pair is None:
                _add(t.hp_used, zone_req[i])
                _add(t.hp_max_used_req, zone_req[i])
                continue
            if info.qos_class == QoSClass.LSE:  # LSE pods never give back their CPU
                _add(t.hp_used, {CPU: zone_req[i][CPU], MEMORY: zone_usage[i][MEMORY]})
            else:
                _add(t.hp_used, zone_usage[i])
            _add(t.hp_max_used_req, _max(zone_usage[i], zone_req[i]))
    for used in dangling_hp_usage:
        share = _divide(_milli(*used), n)
        for t in totals:
            _add(t.hp_used, share)
            _add(t.hp_max_used_req, share)
    cpu_out: dict[str, int] = {}
    mem_out: dict[str, int] = {}
    for (name, _), t in zip(zones, totals, strict=True):
        cpu_out[name], mem_out[name] = t.batch(strategy)
    return cpu_out, mem_out
