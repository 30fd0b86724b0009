"""The descheduler: profiles, the cycle, the interval, dry run, and the background work between cycles.

Koordinator's ``pkg/descheduler/descheduler.go``. One cycle (``run_once``):

1. list the Ready nodes matching the global ``nodeSelector``; with fewer than two the cycle fails
   ("the cluster size is 0 or 1 ...") and nothing runs;
2. reset the eviction limiter (its limits are per cycle);
3. for every profile in order, run its Deschedule plugins on the profile's nodes (its own ``nodeSelector``,
   else all); a plugin error ends the cycle;
4. then for every profile in order, its Balance plugins, likewise.

``run`` repeats cycles every ``deschedulingInterval`` (non-sliding: a cycle that overruns starts the next at
once); an interval of 0 runs one cycle. Between cycles the clock advances and background plugins (the
MigrationController's job reconciler) ``tick``; on a ``VirtualClock`` that takes no wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from koord_framework.api.selectors import parse_label_selector
from koord_framework.cluster.events import register_recorder_metrics
from koord_framework.cluster.port import ClusterPort
from koord_framework.descheduler.cache import DeschedulerCache
from koord_framework.descheduler.framework import DeschedulerFramework, ProfileSpec
from koord_framework.descheduler.handle import RoundReport, Services
from koord_framework.descheduler.limiter import EvictionLimiter

CLUSTER_TOO_SMALL = "the cluster size is 0 or 1 meaning eviction causes service disruption or degradation"
DRAIN_HORIZON = 600.0
"""Seconds of (virtual) time ``drain`` gives background work to finish after the last cycle."""
_MIN_STEP = 0.001


class Descheduler:
    def __init__(
        self,
        profiles: Sequence[ProfileSpec],
        cluster: ClusterPort,
        *,
        node_selector: Mapping[str, Any] | None = None,
        descheduling_interval: float = 0.0,
        dry_run: bool = False,
        max_per_node: int | None = None,
        max_per_namespace: int | None = None,
        max_total: int | None = None,
        metrics: CollectorRegistry | None = None,
        cache: DeschedulerCache | None = None,
        instance_name: str = "",
    ) -> None:
        if not profiles:
            raise ValueError("at least one profile is required")
        self.services = Services(
            cluster,
            cache=cache,
            limiter=EvictionLimiter(max_per_node, max_per_namespace, max_total),
            metrics=metrics,
            dry_run=dry_run,
            descheduling_interval=descheduling_interval,
            instance_name=instance_name,
        )
        self.node_selector = parse_label_selector(node_selector) if node_selector is not None else None
        self.descheduling_interval = descheduling_interval
        if metrics is not None:
            register_recorder_metrics(cluster, metrics)
        self.frameworks = [
            DeschedulerFramework(spec, self.services, where=f"profiles[{i}]")
            for i, spec in enumerate(profiles)
        ]
        self._profile_selectors = [
            parse_label_selector(fw.spec.node_selector) if fw.spec.node_selector is not None else None
            for fw in self.frameworks
        ]
        self.reports: list[RoundReport] = []
        self.companions: list[Callable[[float], float | None]] = []
        """Other components on the same clock (``koord deschedule --then-schedule`` runs the scheduler and
        the workload controllers): each is called after the plugins at every tick with the time, and
        returns when it wants to run again (None: only when something else wakes the loop)."""

    @classmethod
    def from_config(
        cls,
        loaded: Any,
        cluster: ClusterPort,
        *,
        dry_run: bool | None = None,
        metrics: CollectorRegistry | None = None,
        cache: DeschedulerCache | None = None,
        instance_name: str = "",
    ) -> Descheduler:
        """From ``koord_framework.config.loader.load_descheduler_config``'s result; ``dry_run`` overrides."""
        cfg = loaded.config
        selector = None
        if cfg.node_selector is not None:
            selector = {
                "matchLabels": dict(cfg.node_selector.match_labels),
                "matchExpressions": [
                    {"key": r.key, "operator": r.operator, "values": list(r.values)}
                    for r in cfg.node_selector.match_expressions
                ],
            }
        return cls(
            [ProfileSpec.from_resolved(p) for p in loaded.profiles],
            cluster,
            node_selector=selector,
            descheduling_interval=float(cfg.descheduling_interval),
            dry_run=cfg.dry_run if dry_run is None else dry_run,
            max_per_node=cfg.max_no_of_pods_to_evict_per_node,
            max_per_namespace=cfg.max_no_of_pods_to_evict_per_namespace,
            max_total=cfg.max_no_of_pods_to_evict_total,
            metrics=metrics,
            cache=cache,
            instance_name=instance_name,
        )

    @property
    def cluster(self) -> ClusterPort:
        return self.services.cluster

    @property
    def dry_run(self) -> bool:
        return self.services.dry_run

    # --- one cycle ----------------------------------------------------------------------------------
    def run_once(self) -> RoundReport:
        """One descheduling cycle; returns its report (also appended to ``reports``)."""
        services = self.services
        report = RoundReport(round=len(self.reports) + 1, time=services.clock.now())
        services.report = report
        self.reports.append(report)
        start = time.perf_counter()
        try:
            nodes = [
                n
                for n in services.cache.nodes()
                if n.ready and (self.node_selector is None or self.node_selector.matches(n.labels))
            ]
            if len(nodes) <= 1:
                report.errors.append(CLUSTER_TOO_SMALL)
                return report
            services.limiter.reset()
            for run in ("deschedule", "balance"):
                for fw, selector in zip(self.frameworks, self._profile_selectors):
                    selected = nodes if selector is None else [n for n in nodes if selector.matches(n.labels)]
                    if run == "deschedule":
                        errors = fw.run_deschedule_plugins(selected)
                    else:
                        errors = fw.run_balance_plugins(selected)
                    if errors:
                        report.errors.extend(f"profile {fw.profile_name}: {e}" for e in errors)
                        return report
            return report
        finally:
            services.metrics.cycle_duration.observe(time.perf_counter() - start)

    # --- background work ------------------------------------------------------------------------------
    def tick(self) -> float | None:
        """Let background plugins work at the current time; the earliest time one wants to run again."""
        now = self.services.clock.now()
        wake: float | None = None
        for fw in self.frameworks:
            for plugin in fw.background_plugins:
                nxt = plugin.tick(now)
                if nxt is not None and (wake is None or nxt < wake):
                    wake = nxt
        for companion in self.companions:
            nxt = companion(now)
            if nxt is not None and (wake is None or nxt < wake):
                wake = nxt
        return wake

    def settle(self, until: float) -> None:
        """Advance the clock to ``until``, ticking background plugins whenever they asked to run."""
        clock = self.services.clock
        while True:
            wake = self.tick()
            now = clock.now()
            if now >= until:
                return
            target = until if wake is None else min(until, max(wake, now + _MIN_STEP))
            clock.sleep(target - now)

    def drain(self, horizon: float = DRAIN_HORIZON) -> None:
        """After the last cycle: tick until background work is idle or ``horizon`` seconds have passed."""
        clock = self.services.clock
        deadline = clock.now() + horizon
        while True:
            wake = self.tick()
            now = clock.now()
            if wake is None or now >= deadline:
                return
            clock.sleep(min(deadline, max(wake, now + _MIN_STEP)) - now)

    # --- the loop -----------------------------------------------------------------------------------
    def run(self, rounds: int | None = None, *, drain: bool = True) -> list[RoundReport]:
        """Run ``rounds`` cycles (default: one when the interval is 0, else until interrupted), spaced by
        the interval (without one, each after the previous cycle's background work settled); returns this
        call's reports."""
        if rounds is None and self.descheduling_interval <= 0:
            rounds = 1
        done: list[RoundReport] = []
        clock = self.services.clock
        i = 0
        while rounds is None or i < rounds:
            started = clock.now()
            done.append(self.run_once())
            i += 1
            if rounds is not None and i >= rounds:
                break
            if self.descheduling_interval > 0:
                self.settle(started + self.descheduling_interval)
            else:
                # Back-to-back cycles (``--rounds`` with no interval): each starts once background work
                # of the previous one (migration jobs) has settled.
                self.drain()
        if drain:
            self.drain()
        return done

    def close(self) -> None:
        for fw in reversed(self.frameworks):
            fw.close()
        self.services.cache.close()
