"""LowNodeLoad: move load from nodes whose measured usage is over the high thresholds to underloaded nodes.

Koordinator's ``pkg/descheduler/framework/plugins/loadaware`` (spec §1.5). Per Balance call, for each node
pool in order (the top-level settings first):

1. the pool's nodes (its selector, minus nodes an earlier pool took as sources; a pool without selector
   takes every node);
2. thresholds filled (``new_thresholds``), node usage from NodeMetrics (stale or missing: node skipped),
   thresholds per node (absolute percentages, or deviations around the pool's mean), classification;
3. overloaded nodes must be confirmed by the anomaly detector (more than ``consecutiveAbnormalities``
   consecutive observations; 1 means at once), underloaded nodes reset theirs;
4. nothing happens unless more than ``numberOfNodes`` nodes are underloaded and not all are;
5. pods move from the most loaded sources, node-usage sources first, then prod-usage sources.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from koord_lib_descheduling.sorter import resource_usage_score

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.selectors import LabelSelector as ParsedSelector
from koord_framework.descheduler.args import parse_selector_model
from koord_framework.descheduler.interface import BalancePlugin, DeschedulerPlugin, Handle, Status
from koord_plugin_lownodeload.anomaly import BasicDetector, DetectorCache, State
from koord_plugin_lownodeload.args import LoadAnomalyCondition, LowNodeLoadArgs
from koord_plugin_lownodeload.balance import BalanceContext, evict_pods_from_source_nodes, eviction_reason
from koord_plugin_lownodeload.classify import NodeLoad, classify, overutilized
from koord_plugin_lownodeload.pools import NodePool, new_thresholds, pools_from_args

log = logging.getLogger("koord.descheduler.lownodeload")


class LowNodeLoad(DeschedulerPlugin[LowNodeLoadArgs], BalancePlugin):
    name = "LowNodeLoad"
    Args = LowNodeLoadArgs

    def __init__(self, args: LowNodeLoadArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        args = self.args
        self.config: LowNodeLoadArgs = args
        self.pools: list[NodePool] = pools_from_args(args)
        self._pod_selectors: list[ParsedSelector] = [
            s for s in (parse_selector_model(p.selector) for p in args.pod_selectors) if s is not None
        ]
        ns = args.evictable_namespaces
        self._include = set(ns.include) if ns is not None else set()
        self._exclude = set(ns.exclude) if ns is not None else set()
        ttl = float(args.detector_cache_timeout)
        # koord-descheduler raises the cache timeout to the descheduling interval, so that a detector
        # survives from one cycle to the next.
        if handle.descheduling_interval > 0 and ttl < handle.descheduling_interval:
            ttl = handle.descheduling_interval
        self.node_detectors = DetectorCache(handle.clock, ttl)
        self.prod_detectors = DetectorCache(handle.clock, ttl)

    # --- the pod filter ---------------------------------------------------------------------------
    def pod_filter(self, pod: PodInfo) -> bool:
        """Evictor filters, then the pod selectors, then the evictable namespaces."""
        if self._include and pod.namespace not in self._include:
            return False
        if self._exclude and pod.namespace in self._exclude:
            return False
        if self._pod_selectors and not any(s.matches(pod.labels) for s in self._pod_selectors):
            return False
        return self.handle.evictor().filter(pod)

    # --- Balance ----------------------------------------------------------------------------------
    def balance(self, nodes: Sequence[NodeRecord]) -> Status | None:
        if self.config.paused:
            log.info("LowNodeLoad is paused and will do nothing")
            return None
        processed: set[str] = set()
        for pool in self.pools:
            try:
                self.process_pool(pool, nodes, processed)
            except Exception:
                # Koordinator logs a pool's failure and goes on with the next pool.
                log.exception("LowNodeLoad: failed to process node pool %s", pool.name)
        return None

    def process_pool(self, pool: NodePool, nodes: Sequence[NodeRecord], processed: set[str]) -> None:
        if pool.node_selector is None:
            pool_nodes = list(nodes)
        else:
            selector = pool.node_selector
            pool_nodes = [n for n in nodes if n.name not in processed and selector.matches(n.labels)]
        if not pool_nodes:
            return
        low, high, prod_low, prod_high = new_thresholds(
            pool.use_deviation_thresholds, pool.low, pool.high, pool.prod_low, pool.prod_high
        )
        handle = self.handle
        result = classify(
            pool_nodes,
            handle.node_pods,
            handle.node_metric,
            (low, high, prod_low, prod_high),
            use_deviation=pool.use_deviation_thresholds,
            now=handle.clock.now(),
            expiration_seconds=self.config.node_metric_expiration_seconds,
        )
        # Reported: nodes over the high (node or prod) thresholds, and nodes under the node low thresholds.
        # Prod-low nodes are left out: without prodLowThresholds every node in between is one.
        handle.report_nodes(
            self.name,
            [x.name for x in (*result.source, *result.prod_high)],
            [x.name for x in (*result.low, *result.both_low)],
        )
        log.debug(
            "pool %s: %d low, %d high, %d prod-low, %d prod-high, %d both-low of %d nodes",
            pool.name,
            len(result.low),
            len(result.source),
            len(result.prod_low),
            len(result.prod_high),
            len(result.both_low),
            len(pool_nodes),
        )
        if not result.source and not result.prod_high:
            return
        abnormal = self._real_abnormal(result.source, self.node_detectors, pool.anomaly_condition)
        abnormal_prod = self._real_abnormal(result.prod_high, self.prod_detectors, pool.anomaly_condition)
        if not abnormal and not abnormal_prod:
            return
        if not result.low and not result.prod_low and not result.both_low:
            return
        self._reset(result.low, self.node_detectors)
        self._reset(result.prod_low, self.prod_detectors)
        self._reset(result.both_low, self.node_detectors)
        all_low = len(result.low) + len(result.prod_low) + len(result.both_low)
        if all_low <= self.config.number_of_nodes or all_low == len(pool_nodes):
            return

        weights = pool.resource_weights
        abnormal.sort(key=lambda x: -resource_usage_score(weights, x.usage.usage, x.usage.allocatable))
        abnormal_prod.sort(
            key=lambda x: -resource_usage_score(weights, x.usage.prod_usage, x.usage.allocatable)
        )

        names = result.resource_names

        def continue_eviction(load: NodeLoad, available: Mapping[str, int], prod: bool) -> bool:
            usage = load.usage.prod_usage if prod else load.usage.usage
            limits = load.thresholds.prod_high if prod else load.thresholds.high
            if not overutilized(usage, limits):
                self._reset([load], self.prod_detectors if prod else self.node_detectors)
                return False
            return all(available[n] > 0 for n in names if n in available)

        ctx = BalanceContext(
            pool=pool.name,
            names=names,
            dry_run=self.config.dry_run,
            node_fit=self.config.node_fit,
            weights=weights,
            evictor=handle.evictor(),
            pod_filter=self.pod_filter,
            node_pods=handle.node_pods,
            continue_eviction=continue_eviction,
            reason=eviction_reason(high, prod_high),
            plugin_name=self.name,
        )
        evict_pods_from_source_nodes(
            ctx, abnormal, result.low, abnormal_prod, result.prod_low, result.both_low
        )
        self._mark_normal(abnormal, self.node_detectors)
        self._mark_normal(abnormal_prod, self.prod_detectors)
        processed.update(x.name for x in result.source)

    # --- anomaly detection ------------------------------------------------------------------------
    def _real_abnormal(
        self, loads: list[NodeLoad], cache: DetectorCache, cond: LoadAnomalyCondition | None
    ) -> list[NodeLoad]:
        """``filterRealAbnormalNodes``: the nodes whose detector, after one more abnormal mark, is in
        Anomaly. With no condition or a threshold of 1, every node at once."""
        if cond is None or cond.consecutive_abnormalities == 1:
            return list(loads)
        out = []
        for load in loads:
            detector = cache.get(load.name) or self._new_detector(load.name, cond)
            if detector.mark(False) is State.ANOMALY:
                out.append(load)
            cache.set(load.name, detector)
        return out

    def _new_detector(self, name: str, cond: LoadAnomalyCondition) -> BasicDetector:
        abnormalities = cond.consecutive_abnormalities
        normalities = cond.consecutive_normalities
        return BasicDetector(
            name,
            self.handle.clock,
            timeout=float(cond.timeout or 0.0),
            anomaly_condition=lambda c: c.consecutive_abnormalities > abnormalities,
            normal_condition=lambda c: c.consecutive_normalities > normalities,
        )

    @staticmethod
    def _reset(loads: Sequence[NodeLoad], cache: DetectorCache) -> None:
        for load in loads:
            detector = cache.get(load.name)
            if detector is not None:
                detector.reset()

    @staticmethod
    def _mark_normal(loads: Sequence[NodeLoad], cache: DetectorCache) -> None:
        for load in loads:
            detector = cache.get(load.name)
            if detector is not None:
                detector.mark(True)

    # --- helpers for tests and tools ----------------------------------------------------------------
    def filter_real_abnormal_nodes(
        self, names: Sequence[str], cond: LoadAnomalyCondition | None
    ) -> list[str]:
        """``filterRealAbnormalNodes`` by node name on the node-usage detectors (for tests and tools)."""
        from koord_framework.descheduler.node_usage import NodeUsage
        from koord_plugin_lownodeload.classify import NodeThresholds

        loads = [
            NodeLoad(
                NodeUsage(NodeRecord(n, "", {}, {}, {}, {}), {}, [], [], {}, {}),
                NodeThresholds({}, {}, {}, {}),
            )
            for n in names
        ]
        return [x.name for x in self._real_abnormal(loads, self.node_detectors, cond)]
