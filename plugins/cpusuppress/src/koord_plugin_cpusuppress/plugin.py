"""``BECPUSuppress``: keep best-effort pods to the CPU the node's latency-sensitive work leaves free.

Every tick (Koordinator's ``cpuSuppress.suppressBECPU``):

1. BE may use ``capacity x cpuSuppressThresholdPercent - non-BE pods - non-BE host apps - system``
   (system = what the node uses beyond all pods and host apps, at least the node's reservation), floored
   at ``cpuSuppressMinPercent``;
2. with ``cpuSuppressPolicy: cfsQuota`` that becomes the besteffort dir's ``cpu.cfs_quota_us`` (at least
   2000, moving by at least 1 % and rising by at most 10 % of the node per round), and the cpusets are put
   back; with ``cpuset`` (the default) it becomes a set of CPUs for every BE cgroup, spread across NUMA nodes
   and stacked on hyper-thread siblings, written top-down loosened then bottom-up tight, and the quota is
   put back to unlimited.

When the NodeSLO switches the feature off, both are put back (quota -1, cpuset = every CPU but the reserved,
exclusive system and LSE ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from prometheus_client import Gauge

from koord_framework.api.qos import KubeQoS, QoSClass
from koord_framework.koordlet.cgroups import CPU_CFS_QUOTA, CPUSET_CPUS, CgroupError
from koord_framework.koordlet.cpuset import CPUSetError, format_cpuset, parse_cpuset_ordered
from koord_framework.koordlet.executor import CgroupUpdate, WriteResult
from koord_framework.koordlet.helpers import (
    collect_host_app_metrics_last,
    collect_pod_metrics_last,
    kubelet_cpu_manager_policy,
    non_be_pod_filter,
    pod_status_cpuset,
    reserved_cpus_from_annotations,
    system_qos_exclusive_cpus,
)
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.koordlet.nodeslo import CPUSuppressPolicy
from koord_framework.koordlet.qos import IntervalArgs, QOSContext, QOSStrategy
from koord_framework.koordlet.system import NodeCPUInfo, ProcessorInfo
from koord_framework.plugin import PluginArgs
from koord_plugin_cpusuppress.policy import (
    calculate_be_suppress_cpu,
    calculate_be_suppress_cpuset_policy,
    cfs_quota_target,
    cpuset_size,
    node_capacity_milli,
)

REASON = "suppress BE by node cpu usage"
USING = "using"
RECOVERED = "recovered"


class BECPUSuppressArgs(IntervalArgs):
    """Args of ``BECPUSuppress``. The thresholds come from the node's NodeSLO, not from here."""


class BECPUSuppress(QOSStrategy[BECPUSuppressArgs]):
    """Suppress best-effort CPU by cpuset or cfs quota (Koordinator feature ``BECPUSuppress``)."""

    name: ClassVar[str] = "BECPUSuppress"
    Args: ClassVar[type[PluginArgs]] = BECPUSuppressArgs
    feature: ClassVar[str] = "BECPUSuppress"

    def __init__(self, args: BECPUSuppressArgs, context: QOSContext) -> None:
        super().__init__(args, context)
        self.policy_status: dict[str, str] = {}
        self._cores = Gauge(
            "koordlet_be_suppress_cpu_cores",
            "CPU cores best-effort pods were suppressed to, by policy (cpuset or cfsQuota).",
            ["type"],
            registry=context.registry,
        )
        self._ls_used = Gauge(
            "koordlet_be_suppress_ls_used_cpu_cores",
            "CPU cores non-BE pods used when suppression was last computed.",
            registry=context.registry,
        )

    @property
    def be_dir(self) -> str:
        return self.context.layout.qos_dir(KubeQoS.BEST_EFFORT)

    # --- the tick ----------------------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        ctx = self.context
        state = ctx.state
        slo = state.node_slo
        if slo is None or state.node_manifest is None:
            self.decide("skipped: no node or NodeSLO yet")
            return
        if not state.pods:
            self.decide("skipped: no pods on the node")
            return
        interval = ctx.collect_interval_seconds
        pod_used = collect_pod_metrics_last(ctx.metrics, MetricKind.POD_CPU_USAGE, state.pods, now, interval)
        node_used = ctx.metrics.last(MetricKind.NODE_CPU_USAGE, now, 2 * interval)
        if node_used is None:
            self.decide("skipped: no recent node cpu sample")
            return
        apps = slo.host_applications
        app_used = collect_host_app_metrics_last(
            ctx.metrics, MetricKind.HOST_APP_CPU_USAGE, apps, now, interval
        )
        threshold = slo.threshold
        suppress = calculate_be_suppress_cpu(
            state.node_manifest,
            node_used,
            pod_used,
            state.pods,
            apps,
            app_used,
            int(threshold.cpu_suppress_threshold_percent or 0),
            threshold.cpu_suppress_min_percent,
        )
        ls_used = sum(
            v for uid, v in pod_used.items() if (m := state.pod(uid)) is None or non_be_pod_filter(m)
        )
        self._ls_used.set(ls_used)
        cpu_info = ctx.cpu_info
        if cpu_info is None:
            self.decide("skipped: CPU topology unknown", suppressMilli=suppress)
            return
        if threshold.cpu_suppress_policy is CPUSuppressPolicy.CFS_QUOTA:
            self.adjust_by_cfs_quota(suppress, state.node_manifest, node_used=node_used, pod_used=pod_used)
            self.policy_status[CPUSuppressPolicy.CFS_QUOTA] = USING
            self.recover_cpuset(max_depth=2)
        else:
            self.adjust_by_cpuset(suppress, cpu_info)
            self.policy_status[CPUSuppressPolicy.CPUSET] = USING
            self.recover_cfs_quota()

    def on_disabled(self, now: float) -> None:
        # Like upstream: without a NodeSLO nothing is known, so nothing is undone either.
        if self.context.node_slo is None:
            return
        self.recover_cfs_quota()
        self.recover_cpuset(max_depth=2)

    # --- cfs quota -----------------------------------------------------------------------------------------
    def adjust_by_cfs_quota(
        self,
        suppress_milli: int,
        node: Mapping[str, Any] | None,
        *,
        node_used: float | None = None,
        pod_used: dict[str, float] | None = None,
    ) -> WriteResult | None:
        """Write the BE dir's quota for ``suppress_milli`` (``adjustByCfsQuota``); None when unchanged."""
        try:
            current = self.context.reader.read_cpu_quota(self.be_dir)
        except CgroupError as err:
            self.decide("cfs quota: cannot read the BE dir's quota", error=str(err))
            return None
        capacity_cores = -(-node_capacity_milli(node) // 1000)  # Quantity.Value() rounds up
        target = cfs_quota_target(suppress_milli, current, capacity_cores)
        details: dict[str, Any] = {
            "suppressMilli": suppress_milli,
            "currentQuota": current,
            "targetQuota": target,
        }
        if node_used is not None:
            details["nodeUsedCores"] = node_used
        if pod_used is not None:
            details["podUsedCores"] = dict(pod_used)
        if target is None:
            self.decide("cfs quota: change too small, left as is", **details)
            return None
        result = self.context.executor.update(
            CgroupUpdate(CPU_CFS_QUOTA, self.be_dir, str(target), REASON, self.name)
        )
        if result.ok:
            self._cores.labels(CPUSuppressPolicy.CFS_QUOTA.value).set(target / 100000)
        self.decide(
            f"cfs quota: BE suppressed to {target} us per 100 ms", status=result.status.value, **details
        )
        return result

    def recover_cfs_quota(self) -> None:
        if self.policy_status.get(CPUSuppressPolicy.CFS_QUOTA) == RECOVERED:
            return
        result = self.context.executor.update(
            CgroupUpdate(CPU_CFS_QUOTA, self.be_dir, "-1", "recover BE cfs quota", self.name)
        )
        if result.ok:
            self.policy_status[CPUSuppressPolicy.CFS_QUOTA] = RECOVERED

    # --- cpuset ----------------------------------------------------------------------------------------
    def adjust_by_cpuset(self, suppress_milli: int, cpu_info: NodeCPUInfo) -> list[int]:
        """Choose and write BE's CPUs for ``suppress_milli`` (``adjustByCPUSet``); returns the chosen CPUs."""
        ctx = self.context
        if not ctx.state.has_topology:
            # As upstream: without the node's NodeResourceTopology (koordlet creates it) the reserved and
            # system-QoS CPUs are unknown, so BE's cpuset is left alone until it exists.
            self.decide("cpuset: waiting for the node's NodeResourceTopology", suppressMilli=suppress_milli)
            return []
        try:
            old = parse_cpuset_ordered(ctx.reader.read_cpuset_raw(self.be_dir))
        except (CgroupError, CPUSetError, ValueError) as err:
            self.decide("cpuset: cannot read the BE dir's cpuset", error=str(err))
            return []
        state = ctx.state
        pool: dict[int, QoSClass] = {}
        for meta in state.pods:
            cpus = pod_status_cpuset(meta.pod.annotations)
            if cpus is None:
                continue
            for cpu in cpus:
                pool[cpu] = meta.raw_qos
        annotations = state.topology_annotations
        excluded = reserved_cpus_from_annotations(annotations) | system_qos_exclusive_cpus(annotations)
        lsr: list[ProcessorInfo] = []
        ls: list[ProcessorInfo] = []
        for p in cpu_info.processors:
            if p.cpu_id in excluded:
                continue
            owner = pool.get(p.cpu_id)
            if owner is QoSClass.LSR:
                lsr.append(p)
            elif owner is not QoSClass.LSE:
                ls.append(p)
        cpus_n = cpuset_size(suppress_milli, len(old), len(cpu_info.processors))
        lsr_n = cpus_n * len(lsr) // (len(lsr) + len(ls)) if (lsr or ls) else 0
        chosen: list[int] = []
        if lsr_n > 0:
            chosen += calculate_be_suppress_cpuset_policy(lsr_n, lsr)
        if cpus_n - lsr_n > 0:
            chosen += calculate_be_suppress_cpuset_policy(cpus_n - lsr_n, ls)
        details: dict[str, Any] = {
            "suppressMilli": suppress_milli,
            "oldCPUSet": format_cpuset(old),
            "cpus": cpus_n,
            "fromLSR": lsr_n,
            "chosen": chosen,
        }
        try:
            policy = kubelet_cpu_manager_policy(annotations)
        except ValueError as err:
            self.decide(
                "cpuset: unreadable kubelet cpu manager policy, nothing written", error=str(err), **details
            )
            return chosen
        if policy == "static":
            # The kubelet owns container cpusets under the static policy: BE pod dirs get the whole BE pool
            # and only containers are narrowed. Upstream recovers the pod level before it looks at the chosen
            # set (cpu_suppress.go:183-185), so that happens even when no CPU is left for BE.
            self.recover_cpuset(max_depth=1)
        if not chosen:
            self.decide("cpuset: no CPU available for BE, left as is", **details)
            return chosen
        value = format_cpuset(chosen)
        if policy == "static":
            containers = ctx.layout.dirs_at_depth("cpuset", self.be_dir, 2)
            results = ctx.executor.update_batch(
                [CgroupUpdate(CPUSET_CPUS, d, value, REASON, self.name) for d in containers], cacheable=True
            )
        else:
            paths = ctx.layout.walk("cpuset", self.be_dir, 2)
            base_depth = len(self.be_dir.split("/"))
            levels: list[list[CgroupUpdate]] = [[], [], []]
            for d in paths:
                levels[len(d.split("/")) - base_depth].append(
                    CgroupUpdate(CPUSET_CPUS, d, value, REASON, self.name)
                )
            results = ctx.executor.leveled_update(levels)
        failed = [r for r in results if not r.ok]
        self._cores.labels(CPUSuppressPolicy.CPUSET.value).set(len(chosen))
        self.decide(
            f"cpuset: BE suppressed to cpus {value}",
            kubeletPolicy=policy or "none",
            failed=[f"{r.path}: {r.error}" for r in failed],
            **details,
        )
        return chosen

    def be_recover_cpuset(self, cpu_info: NodeCPUInfo) -> frozenset[int]:
        """Every CPU but the exclusive system-QoS, reserved and LSE-bound ones (``calcBECPUSet``)."""
        state = self.context.state
        excluded = set(system_qos_exclusive_cpus(state.topology_annotations))
        excluded |= reserved_cpus_from_annotations(state.topology_annotations)
        for meta in state.pods:
            if meta.raw_qos is QoSClass.LSE:
                excluded |= pod_status_cpuset(meta.pod.annotations) or frozenset()
        return frozenset(p.cpu_id for p in cpu_info.processors if p.cpu_id not in excluded)

    def recover_cpuset(self, *, max_depth: int) -> None:
        """Give BE cgroups down to ``max_depth`` (1 = pods, 2 = containers) the whole BE pool again."""
        cpu_info = self.context.cpu_info
        if cpu_info is None or not self.context.state.has_topology:
            return  # upstream's calcBECPUSet fails without the NodeResourceTopology: nothing is recovered
        cpus = self.be_recover_cpuset(cpu_info)
        if not cpus:
            return  # an empty cpuset would starve BE entirely; keep what is there
        paths = self.context.layout.walk("cpuset", self.be_dir, max_depth)
        value = format_cpuset(cpus)
        self.context.executor.update_batch(
            [CgroupUpdate(CPUSET_CPUS, d, value, "recover BE cpuset", self.name) for d in paths],
            cacheable=True,
        )
        self.policy_status[CPUSuppressPolicy.CPUSET] = RECOVERED
