"""The arithmetic of BE CPU suppression, exactly as Koordinator's ``cpusuppress`` plugin computes it.

Pure functions of their inputs, so the vectors of Koordinator's unit tests check them directly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from koord_framework.api.resources import CPU, parse_resource_list
from koord_framework.koordlet.cgroups import CFS_BASE_PERIOD
from koord_framework.koordlet.helpers import (
    calculate_filter_pods_used,
    node_reserved,
    non_be_host_app_filter,
    non_be_pod_filter,
)
from koord_framework.koordlet.nodeslo import HostApplicationSpec
from koord_framework.koordlet.states import PodMeta
from koord_framework.koordlet.system import ProcessorInfo

BE_MIN_CPUSET_CORES: Final = 2
"""Never suppress BE below two CPUs with the cpuset policy."""
BE_MIN_QUOTA: Final = 2000
"""Never suppress BE below 2 ms per 100 ms period (0.02 core) with the cfs quota policy."""
BE_MAX_INCREASE_CPU_PERCENT: Final = 0.1
"""Scale BE up by at most 10 % of the node per round (scale down at once)."""
SUPPRESS_BYPASS_QUOTA_DELTA_RATIO: Final = 0.01
"""Skip a quota change smaller than 1 % of the node, unless it is the floor."""


def node_capacity_milli(node: Mapping[str, Any] | None) -> int:
    status = (node or {}).get("status") or {}
    return parse_resource_list(status.get("capacity") or {}, path="Node.status.capacity").get(CPU, 0)


def calculate_be_suppress_cpu(
    node: Mapping[str, Any] | None,
    node_used_cores: float,
    pod_used_cores: Mapping[str, float],
    pods: Sequence[PodMeta],
    host_apps: Sequence[HostApplicationSpec],
    host_app_used_cores: Mapping[str, float],
    threshold_percent: int,
    min_percent: int | None,
) -> int:
    """Milli-cores BE may use (``calculateBESuppressCPU``)::

        suppress = capacity x threshold% - non-BE pods used - non-BE host apps used
                   - max(node used - all pods - all host apps, node reserved)

    floored at ``capacity x min%`` when a minimum is configured. May be negative.
    """
    reserved_cores = node_reserved(node).get(CPU, 0) / 1000
    pods_non_be, apps_non_be, system = calculate_filter_pods_used(
        node_used_cores,
        reserved_cores,
        pods,
        pod_used_cores,
        host_apps,
        host_app_used_cores,
        non_be_pod_filter,
        non_be_host_app_filter,
    )
    capacity = node_capacity_milli(node)
    suppress = capacity * threshold_percent // 100
    suppress -= int(pods_non_be * 1000)
    suppress -= int(apps_non_be * 1000)
    suppress -= int(system * 1000)
    if min_percent is not None:
        suppress = max(suppress, capacity * min_percent // 100)
    return suppress


def cfs_quota_target(suppress_milli: int, current_quota: int, capacity_cores: int) -> int | None:
    """The BE dir's next ``cpu.cfs_quota_us`` or None to leave it (``adjustByCfsQuota``).

    ``new = max(suppress x period / 1000, 2000)``; skipped when it moves less than 1 % of the node (unless it
    is the floor); rising by more than 10 % of the node per round is capped, except from unlimited (-1).
    """
    new = max(suppress_milli * CFS_BASE_PERIOD // 1000, BE_MIN_QUOTA)
    min_delta = capacity_cores * CFS_BASE_PERIOD * SUPPRESS_BYPASS_QUOTA_DELTA_RATIO
    if abs(new - current_quota) < min_delta and new != BE_MIN_QUOTA:
        return None
    max_increase = capacity_cores * CFS_BASE_PERIOD * BE_MAX_INCREASE_CPU_PERCENT
    if new - current_quota > max_increase and current_quota != -1:
        new = current_quota + int(max_increase)
    return new


def cpuset_size(suppress_milli: int, old_size: int, num_processors: int) -> int:
    """How many CPUs BE gets: ``max(ceil(suppress / 1000), 2)``, growing by at most ceil(10 % of the node)."""
    cpus = max(math.ceil(suppress_milli / 1000), BE_MIN_CPUSET_CORES)
    max_increase = math.ceil(num_processors * BE_MAX_INCREASE_CPU_PERCENT)
    if cpus - old_size > max_increase:
        cpus = old_size + max_increase
    return cpus


def calculate_be_suppress_cpuset_policy(cpus: int, processors: Sequence[ProcessorInfo]) -> list[int]:
    """Pick ``cpus`` CPUs for BE, spread over NUMA nodes/sockets and stacked on hyper-thread pairs
    (``calculateBESuppressCPUSetPolicy``); returns them in selection order, or [] if too few processors.

    Buckets are keyed ``(node + #processors) x (socket + 1)``, each sorted by (core, cpu), buckets by size
    descending then first cpu. Round-robin over buckets, first taking whole sibling pairs, then singles.
    """
    n = len(processors)
    if n < cpus:
        return []
    buckets_by_key: dict[int, list[ProcessorInfo]] = {}
    for p in processors:
        buckets_by_key.setdefault((p.node_id + n) * (p.socket_id + 1), []).append(p)
    buckets = [sorted(b, key=lambda p: (p.core_id, p.cpu_id)) for b in buckets_by_key.values()]
    buckets.sort(key=lambda b: (-len(b), b[0].cpu_id))
    out: list[int] = []
    used: set[int] = set()
    need = cpus
    if not buckets:
        return out
    # Phase 1: hyper-thread pairs, one pair per bucket per pass, until a full pass picks nothing.
    i = 0
    pre_need = -1
    while True:
        if need <= 1:
            break
        if i == 0:
            if pre_need == need:
                break
            pre_need = need
        bucket = buckets[i]
        for j in range(len(bucket) - 1):
            if bucket[j].cpu_id in used:
                continue
            if bucket[j].core_id == bucket[j + 1].core_id:
                out += [bucket[j].cpu_id, bucket[j + 1].cpu_id]
                used.update((bucket[j].cpu_id, bucket[j + 1].cpu_id))
                need -= 2
                break
        i = (i + 1) % len(buckets)
    # Phase 2: single CPUs, starting where phase 1 stopped.
    start = i
    pre_need = -1
    while True:
        if need <= 0:
            break
        if i == start:
            if pre_need == need:
                break
            pre_need = need
        for p in buckets[i]:
            if p.cpu_id not in used:
                out.append(p.cpu_id)
                used.add(p.cpu_id)
                need -= 1
                break
        i = (i + 1) % len(buckets)
    return out
