"""The metrics advisor: one pass reads the host and appends samples to the metric cache.

Per pass (Koordinator's node/pod/BE/host-app/system collectors, merged into one so each file is read once):

* node: busy ticks of ``/proc/stat`` -> cores (delta ticks / elapsed / USER_HZ); ``MemTotal - MemAvailable``;
* every pod and running container on the node: ``cpuacct.usage`` (v2: ``cpu.stat usage_usec``) -> cores,
  ``memory.stat`` anon + unevictable -> bytes, and containers' ``cpu.stat`` -> throttled-period ratio;
* the besteffort QoS dir: CPU used, the batch-cpu requested by BE pods and the CPU it may use right now
  (cpuset size, capped by its cfs quota), all in milli-cores -- what BE CPU eviction reasons about;
* host applications named by the NodeSLO, and the system remainder ``node - pods - host apps`` (>= 0).

A rate needs two reads, so the first pass records baselines only. Timestamps come from the agent's clock,
so a fake tree and a virtual clock give exact, reproducible rates in tests.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

from koord_framework.api.qos import KubeQoS, QoSClass
from koord_framework.api.resources import BATCH_CPU
from koord_framework.koordlet.cgroups import (
    CFS_BASE_PERIOD,
    USER_HZ,
    CgroupError,
    CgroupLayout,
    CgroupNotFoundError,
    CgroupReader,
    CgroupVersion,
    CPUStat,
    throttled_ratio,
)
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.metrics.cache import MetricCache, MetricKind
from koord_framework.koordlet.nodeslo import HostApplicationSpec
from koord_framework.koordlet.states import NodeState, PodMeta
from koord_framework.koordlet.system import HostReadError, read_cpu_ticks, read_meminfo

log = logging.getLogger(__name__)

NODE_CPU_INFO_KEY: Final = "node_cpu_info"
"""Metric-cache key of the node's ``NodeCPUInfo`` (Koordinator's ``NodeCPUInfoKey``)."""


@dataclass(slots=True)
class CollectResult:
    """What one pass measured (for ``koord koordlet --once`` and tests)."""

    time: float
    node_cpu: float | None = None
    """Cores."""
    node_memory: int | None = None
    """Bytes."""
    pod_cpu: dict[str, float] = field(default_factory=dict)
    pod_memory: dict[str, int] = field(default_factory=dict)
    container_cpu: dict[str, float] = field(default_factory=dict)
    be_cpu_usage_milli: int | None = None
    be_cpu_request_milli: int | None = None
    be_cpu_real_limit_milli: int | None = None
    system_cpu: float | None = None
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "time": self.time,
            "nodeCPUCores": self.node_cpu,
            "nodeMemoryBytes": self.node_memory,
            "podCPUCores": dict(self.pod_cpu),
            "podMemoryBytes": dict(self.pod_memory),
            "beCPU": {
                "usageMilli": self.be_cpu_usage_milli,
                "requestMilli": self.be_cpu_request_milli,
                "realLimitMilli": self.be_cpu_real_limit_milli,
            },
            "systemCPUCores": self.system_cpu,
            "errors": list(self.errors),
        }


def host_app_cgroup_dir(layout: CgroupLayout, app: HostApplicationSpec) -> str:
    """A host application's cgroup parent dir (``GetHostAppCgroupRelativePath``)."""
    if app.cgroup_path is None:
        base = {
            "LSE": "host-latency-sensitive",
            "LSR": "host-latency-sensitive",
            "LS": "host-latency-sensitive",
            "BE": "host-best-effort",
        }.get(app.qos, "")
        return "/".join(p for p in (base, app.name) if p)
    base = {
        "Kubepods": layout.qos_dir(KubeQoS.GUARANTEED),
        "KubepodsBurstable": layout.qos_dir(KubeQoS.BURSTABLE),
        "KubepodsBesteffort": layout.qos_dir(KubeQoS.BEST_EFFORT),
    }.get(app.cgroup_path.base, "")
    parts = (base, app.cgroup_path.parent_dir.strip("/"), app.cgroup_path.relative_path.strip("/"))
    return "/".join(p for p in parts if p)


def pod_be_milli_cpu_request(meta: PodMeta) -> int:
    """Σ positive batch-cpu requests of app and sidecar containers (``GetPodBEMilliCPURequest``)."""
    total = 0
    for c in meta.pod.containers:
        if c.kind in ("app", "sidecar"):
            total += max(c.requests.get(BATCH_CPU, 0), 0)
    return total


class ResourceCollector:
    """Reads the host once per ``collect`` and appends every sample to the cache."""

    def __init__(self, host: HostPaths, layout: CgroupLayout, cache: MetricCache) -> None:
        self.host = host
        self.layout = layout
        self.reader = CgroupReader(layout)
        self.cache = cache
        self._last_ticks: tuple[int, float] | None = None
        self._last_usage: dict[str, tuple[int, float]] = {}
        self._last_stat: dict[str, CPUStat] = {}

    def collect(self, state: NodeState, now: float) -> CollectResult:
        out = CollectResult(time=now)
        seen: set[str] = set()
        self._collect_node(now, out)
        pods_cpu = pods_mem = 0.0
        for meta in state.pods:
            cpu, mem = self._collect_cgroup(f"pod/{meta.uid}", meta.cgroup_dir, now, seen, out)
            if cpu is not None:
                out.pod_cpu[meta.uid] = cpu
                pods_cpu += cpu
                self.cache.append(MetricKind.POD_CPU_USAGE, now, cpu, meta.uid)
            if mem is not None:
                out.pod_memory[meta.uid] = mem
                pods_mem += mem
                self.cache.append(MetricKind.POD_MEMORY_USAGE, now, float(mem), meta.uid)
            for c in meta.containers:
                if not (c.running and c.cgroup_dir):
                    continue
                ccpu, cmem = self._collect_cgroup(f"container/{c.container_id}", c.cgroup_dir, now, seen, out)
                if ccpu is not None:
                    out.container_cpu[c.container_id] = ccpu
                    self.cache.append(MetricKind.CONTAINER_CPU_USAGE, now, ccpu, c.container_id)
                if cmem is not None:
                    self.cache.append(MetricKind.CONTAINER_MEMORY_USAGE, now, float(cmem), c.container_id)
                self._collect_throttled(c.container_id, c.cgroup_dir, now)
        apps_cpu, apps_mem = self._collect_host_apps(state, now, seen, out)
        self._collect_be(state, now, seen, out)
        if out.node_cpu is not None:
            out.system_cpu = max(out.node_cpu - pods_cpu - apps_cpu, 0.0)
            self.cache.append(MetricKind.SYSTEM_CPU_USAGE, now, out.system_cpu)
        if out.node_memory is not None:
            self.cache.append(
                MetricKind.SYSTEM_MEMORY_USAGE, now, max(out.node_memory - pods_mem - apps_mem, 0.0)
            )
        # Forget baselines of cgroups that left, so a reused id never yields a bogus delta.
        for key in [k for k in self._last_usage if k not in seen]:
            del self._last_usage[key]
        for key in [k for k in self._last_stat if f"container/{k}" not in seen]:
            del self._last_stat[key]
        return out

    # --- parts --------------------------------------------------------------------------------------------
    def _collect_node(self, now: float, out: CollectResult) -> None:
        try:
            ticks = read_cpu_ticks(self.host)
            mem = read_meminfo(self.host)
        except HostReadError as err:
            out.errors.append(str(err))
            return
        out.node_memory = mem.usage()
        self.cache.append(MetricKind.NODE_MEMORY_USAGE, now, float(mem.usage()))
        self.cache.append(MetricKind.NODE_MEMORY_WITH_PAGE_CACHE, now, float(mem.usage_with_page_cache()))
        last, self._last_ticks = self._last_ticks, (ticks, now)
        if last is None or now <= last[1] or ticks < last[0]:
            return
        out.node_cpu = (ticks - last[0]) / ((now - last[1]) * USER_HZ)
        self.cache.append(MetricKind.NODE_CPU_USAGE, now, out.node_cpu)

    def _rate(self, key: str, usage_ns: int, now: float, seen: set[str]) -> float | None:
        seen.add(key)
        last = self._last_usage.get(key)
        self._last_usage[key] = (usage_ns, now)
        if last is None or now <= last[1] or usage_ns < last[0]:
            return None
        return (usage_ns - last[0]) / ((now - last[1]) * 1e9)

    def _collect_cgroup(
        self, key: str, cgroup_dir: str, now: float, seen: set[str], out: CollectResult
    ) -> tuple[float | None, int | None]:
        try:
            usage = self.reader.read_cpuacct_usage(cgroup_dir)
            mem = self.reader.read_memory_stat(cgroup_dir).usage()
        except CgroupNotFoundError:
            return None, None  # not created yet, or already gone: no sample, no alarm
        except CgroupError as err:
            out.errors.append(str(err))
            return None, None
        return self._rate(key, usage, now, seen), mem

    def _collect_throttled(self, container_id: str, cgroup_dir: str, now: float) -> None:
        try:
            stat = self.reader.read_cpu_stat(cgroup_dir)
        except CgroupError:
            return
        last = self._last_stat.get(container_id)
        self._last_stat[container_id] = stat
        if last is not None:
            self.cache.append(
                MetricKind.CONTAINER_CPU_THROTTLED, now, throttled_ratio(stat, last), container_id
            )

    def _collect_host_apps(
        self, state: NodeState, now: float, seen: set[str], out: CollectResult
    ) -> tuple[float, float]:
        if state.node_slo is None:
            return 0.0, 0.0
        total_cpu = total_mem = 0.0
        for app in state.node_slo.host_applications:
            cpu, mem = self._collect_cgroup(
                f"hostapp/{app.name}", host_app_cgroup_dir(self.layout, app), now, seen, out
            )
            if cpu is not None:
                total_cpu += cpu
                self.cache.append(MetricKind.HOST_APP_CPU_USAGE, now, cpu, app.name)
            if mem is not None:
                total_mem += mem
                self.cache.append(MetricKind.HOST_APP_MEMORY_USAGE, now, float(mem), app.name)
        return total_cpu, total_mem

    def _collect_be(self, state: NodeState, now: float, seen: set[str], out: CollectResult) -> None:
        be_dir = self.layout.qos_dir(KubeQoS.BEST_EFFORT)
        try:
            limit = self.be_real_milli_limit()
            usage_ns = self.reader.read_cpuacct_usage(be_dir)
        except CgroupError as err:
            out.errors.append(f"best-effort dir: {err}")
            return
        request = sum(pod_be_milli_cpu_request(m) for m in state.pods if m.raw_qos is QoSClass.BE)
        rate = self._rate("qos/besteffort", usage_ns, now, seen)
        out.be_cpu_real_limit_milli = limit
        out.be_cpu_request_milli = request
        if rate is None:
            return  # Koordinator skips the whole BE sample on the first pass.
        usage_milli = int(rate * 1000)
        out.be_cpu_usage_milli = usage_milli
        self.cache.append(MetricKind.BE_CPU_REAL_LIMIT, now, float(limit))
        self.cache.append(MetricKind.BE_CPU_REQUEST, now, float(request))
        self.cache.append(MetricKind.BE_CPU_USAGE, now, float(usage_milli))

    def be_real_milli_limit(self) -> int:
        """CPU the BE dir may use now: the smallest cpuset among the BE dir and its containers (a sandbox may
        keep all CPUs) x 1000, capped by the BE dir's cfs quota (``getBECPURealMilliLimit``)."""
        be_dir = self.layout.qos_dir(KubeQoS.BEST_EFFORT)
        candidates = [*self.layout.dirs_at_depth("cpuset", be_dir, 2), be_dir]
        smallest: int | None = None
        for d in candidates:
            n = len(self.reader.read_cpuset(d))
            if n == 0 and self.layout.version is CgroupVersion.V2:
                continue  # an empty v2 cpuset means "inherit the parent's", not "no CPU"
            if smallest is None or n < smallest:
                smallest = n
        limit = (smallest or 0) * 1000
        quota = self.reader.read_cpu_quota(be_dir)
        if quota == -1:
            return limit
        period = self.reader.read_cpu_period(be_dir) or CFS_BASE_PERIOD
        return min(limit, quota * 1000 // period)
