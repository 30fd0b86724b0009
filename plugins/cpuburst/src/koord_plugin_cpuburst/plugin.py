"""``CPUBurst``: let latency-sensitive containers burst past their CPU limit (Koordinator's ``cpuBurst``).

Every tick, for each active pod that is not LSE/LSR/BE (by label), with the node's ``cpuBurstStrategy``
overlaid by the pod's ``koordinator.sh/cpuBurst`` annotation:

* **static burst** (``cpuBurstOnly``/``auto``): each container's ``cpu.cfs_burst_us`` (v2 ``cpu.max.burst``)
  = limit x ``cpuBurstPercent``% x 100 ms, the pod's = their sum; other policies write 0. A kernel without
  the file is skipped quietly.
* **cfs quota burst** (``cfsQuotaBurstOnly``/``auto``): a throttled container's quota rises x1.2, up to
  ``cfsQuotaBurstPercent``% of its limit-derived quota; it falls x0.8 when a token bucket
  (``cfsQuotaBurstPeriodSeconds``) says it burst too long, or when the node's shared CPU pool is overloaded
  (usage over ``sharePoolThresholdPercent``); and returns to the limit when the policy is off. Pod and
  container quotas move together (pod first when growing, container first when shrinking) in one
  transaction that rolls back if the second write fails.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from prometheus_client import Gauge

from koord_framework.api.qos import QoSClass
from koord_framework.api.resources import CPU
from koord_framework.koordlet.cgroups import CPU_BURST, CPU_CFS_QUOTA, CgroupError
from koord_framework.koordlet.executor import CgroupUpdate
from koord_framework.koordlet.helpers import collect_pod_metrics_avg
from koord_framework.koordlet.metrics.cache import MetricKind
from koord_framework.koordlet.nodeslo import NodeSLO
from koord_framework.koordlet.qos import IntervalArgs, QOSContext, QOSStrategy
from koord_framework.koordlet.states import ContainerMeta, NodeState, PodMeta
from koord_framework.plugin import PluginArgs
from koord_plugin_cpuburst.policy import (
    BurstConfig,
    BurstLimiter,
    CFSOperation,
    NodeBurstState,
    cfs_quota_burst_enabled,
    change_operation_by_node,
    milli_cpu_to_quota,
    node_burst_state,
    pod_burst_config,
    quota_ceil,
    static_burst_us,
    target_quota,
)

NOT_BURSTABLE = (QoSClass.LSR, QoSClass.LSE, QoSClass.BE)


class CPUBurstArgs(IntervalArgs):
    """Args of ``CPUBurst``. The policy and percentages come from the NodeSLO's ``cpuBurstStrategy``."""


class CPUBurst(QOSStrategy[CPUBurstArgs]):
    """cpu.cfs_burst_us and elastic cfs quota for burstable (LS and unlabelled) pods."""

    name: ClassVar[str] = "CPUBurst"
    Args: ClassVar[type[PluginArgs]] = CPUBurstArgs
    feature: ClassVar[str] = "CPUBurst"

    def __init__(self, args: CPUBurstArgs, context: QOSContext, *, rng: random.Random | None = None) -> None:
        super().__init__(args, context)
        self.limiters: dict[str, BurstLimiter] = {}
        self._rng = rng or random.Random()
        self._scaled = Gauge(
            "koordlet_container_scaled_cfs_quota_us",
            "cfs quota the CPUBurst strategy last set for a container.",
            ["namespace", "pod", "container"],
            registry=context.registry,
        )
        self._state = Gauge(
            "koordlet_cpu_burst_node_state",
            "1 for the node's current burst state (share-pool load), 0 for the others.",
            ["state"],
            registry=context.registry,
        )

    def enabled(self, node_slo: NodeSLO | None) -> bool:
        # Not gated by the threshold switch: with policy "none" the strategy actively resets burst values.
        return node_slo is not None

    def tick(self, now: float) -> None:
        # Each round starts from an empty gauge (``ResetCPUBurstCollector``, cpu_burst.go:210), so a container
        # that was not rescaled this round, or is gone, has no stale series.
        self._scaled.clear()
        state = self.context.state
        slo = state.node_slo
        if slo is None:
            return
        strategy = slo.cpu_burst
        node_cfg = BurstConfig.from_node(strategy)
        node_state = self.node_state_for_burst(int(strategy.share_pool_threshold_percent or 0), state, now)
        for s in NodeBurstState:
            self._state.labels(s.value).set(1 if s is node_state else 0)
        scaled: list[dict[str, Any]] = []
        for meta in state.pods:
            if meta.raw_qos in NOT_BURSTABLE or not meta.is_active:
                continue
            cfg = pod_burst_config(meta.pod.annotations, node_cfg)
            self.apply_cpu_burst(cfg, meta)
            scaled += self.apply_cfs_quota_burst(cfg, meta, node_state, now)
        for key in [k for k, lim in self.limiters.items() if lim.expired(now)]:
            del self.limiters[key]
        if scaled:
            self.decide(
                f"cfs quota burst: {len(scaled)} container(s) rescaled",
                nodeState=node_state.value,
                scaled=scaled,
            )

    # --- node state --------------------------------------------------------------------------------------
    def node_state_for_burst(self, threshold_percent: int, state: NodeState, now: float) -> NodeBurstState:
        """Share-pool load (``getNodeStateForBurst``): node CPU used minus LSE/LSR/BE pods' use, over all CPUs
        minus LSE/LSR requests, averaged over min(5 intervals, 10 s)."""
        ctx = self.context
        window = min(5 * self.interval_seconds, 10.0)
        node = ctx.metrics.query(MetricKind.NODE_CPU_USAGE, now - window, now)
        cpu_info = ctx.cpu_info
        if not node or cpu_info is None:
            return NodeBurstState.UNKNOWN
        pod_used = collect_pod_metrics_avg(
            ctx.metrics, MetricKind.POD_CPU_USAGE, state.pods, now - window, now
        )
        total = float(len(cpu_info.processors))
        usage = node.avg()
        for meta in state.pods:
            if meta.raw_qos in (QoSClass.LSE, QoSClass.LSR):
                total -= meta.pod.requests.get(CPU, 0) / 1000
            if meta.uid in pod_used and meta.raw_qos in (QoSClass.LSE, QoSClass.LSR, QoSClass.BE):
                usage -= pod_used[meta.uid]
        ratio = usage / total if total > 0 else 1.0
        return node_burst_state(ratio, threshold_percent)

    # --- static burst ------------------------------------------------------------------------------------
    def apply_cpu_burst(self, cfg: BurstConfig, meta: PodMeta) -> None:
        executor = self.context.executor
        pod_total = 0
        for c in _app_containers(meta):
            if not c.container_id or not c.cgroup_dir or c.info is None:
                continue
            value = static_burst_us(c.info.limits.get(CPU, -1), cfg)
            pod_total += value
            executor.update(
                CgroupUpdate(CPU_BURST, c.cgroup_dir, str(value), "CPUBurst", self.name), cacheable=True
            )
        executor.update(
            CgroupUpdate(CPU_BURST, meta.cgroup_dir, str(pod_total), "CPUBurst", self.name), cacheable=True
        )

    # --- cfs quota burst ---------------------------------------------------------------------------------
    def apply_cfs_quota_burst(
        self, cfg: BurstConfig, meta: PodMeta, node_state: NodeBurstState, now: float
    ) -> list[dict[str, Any]]:
        reader = self.context.reader
        out = []
        for c in _app_containers(meta):
            if not c.running or not c.cgroup_dir or c.info is None:
                continue
            base = milli_cpu_to_quota(c.info.limits.get(CPU, -1))
            if base <= 0:
                continue
            try:
                current = reader.read_cpu_quota(c.cgroup_dir)
            except CgroupError:
                continue
            ceil = quota_ceil(base, cfg.cfs_quota_burst_percent)
            origin = self.operation_for_container(cfg, c, now)
            op = change_operation_by_node(node_state, origin)
            target = target_quota(op, current, base, ceil)
            if target == current:
                continue
            if self.apply_container_quota(meta, c, current, target - current):
                self._scaled.labels(meta.pod.namespace, meta.pod.name, c.name).set(target)
                out.append(
                    {
                        "container": f"{meta.key}/{c.name}",
                        "operation": op.value,
                        "from": current,
                        "to": target,
                    }
                )
        return out

    def operation_for_container(self, cfg: BurstConfig, c: ContainerMeta, now: float) -> CFSOperation:
        """``genOperationByContainer``: reset when the policy is off, down when the limiter refuses, up when
        the container was throttled in the last sample, otherwise remain."""
        allowed = self.allowed_by_limiter(cfg, c, now)
        if not cfs_quota_burst_enabled(cfg.policy):
            return CFSOperation.RESET
        if not allowed:
            return CFSOperation.SCALE_DOWN
        ctx = self.context
        w = ctx.metrics.query(
            MetricKind.CONTAINER_CPU_THROTTLED, now - 2 * ctx.collect_interval_seconds, now, c.container_id
        )
        if not w:
            return CFSOperation.REMAIN
        return CFSOperation.SCALE_UP if w.last() > 0 else CFSOperation.REMAIN

    def allowed_by_limiter(self, cfg: BurstConfig, c: ContainerMeta, now: float) -> bool:
        period = cfg.cfs_quota_burst_period_seconds
        if period is None or period < 0:
            return True
        pct = cfg.cfs_quota_burst_percent
        if pct is None or pct < 100:
            return False
        assert c.info is not None
        limit = c.info.limits.get(CPU, -1) / 1000
        usage = limit
        last = self.context.metrics.last(
            MetricKind.CONTAINER_CPU_USAGE, now, 2 * self.context.collect_interval_seconds, c.container_id
        )
        if last is not None:
            usage = last
        limiter = self.limiters.get(c.container_id)
        if limiter is None:
            limiter = self.limiters[c.container_id] = BurstLimiter(period, pct, now, rng=self._rng)
        else:
            limiter.update_if_changed(period, pct, now)
        allowed, _ = limiter.allow(now, int(usage / limit * 100) if limit > 0 else 0)
        return allowed

    def apply_container_quota(self, meta: PodMeta, c: ContainerMeta, current: int, delta: int) -> bool:
        """Move pod and container quota by ``delta`` in the order that keeps pod >= container, as one
        transaction (``applyContainerCFSQuota``). A pod without a quota (-1) is left alone."""
        try:
            pod_quota = self.context.reader.read_cpu_quota(meta.cgroup_dir)
        except CgroupError as err:
            self.decide(f"cfs quota burst: cannot read pod {meta.key} quota", error=str(err))
            return False
        reason = "CFSQuotaBurst"
        container = CgroupUpdate(CPU_CFS_QUOTA, c.cgroup_dir, str(current + delta), reason, self.name)
        updates = [container]
        if pod_quota > 0:
            pod = CgroupUpdate(CPU_CFS_QUOTA, meta.cgroup_dir, str(pod_quota + delta), reason, self.name)
            updates = [pod, container] if delta > 0 else [container, pod]
        results = self.context.executor.transaction(updates, cacheable=True)
        return all(r.ok for r in results)


def _app_containers(meta: PodMeta) -> list[ContainerMeta]:
    """Containers of ``spec.containers`` with a status, in status order (init containers are not burst)."""
    return [c for c in meta.containers if c.info is not None and c.info.kind == "app"]
