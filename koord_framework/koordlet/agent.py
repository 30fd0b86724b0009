"""The koordlet: one node agent loop on the agent's clock.

Each ``step(now)`` does what is due, in this order, so strategies always see the samples of the same step:

1. refresh the node snapshot (pods, Node, NodeSLO, NodeResourceTopology, NodeMetric spec) from the
   states informer;
2. collect metrics (every ``collectResUsedIntervalSeconds``) and the CPU topology (every minute);
3. tick every QoS strategy whose interval elapsed -- ``tick(now)`` when its NodeSLO switch is on,
   ``on_disabled(now)`` when off; an exception is logged and counted, never fatal;
4. report the NodeMetric status (every ``metricCollectPolicy.reportIntervalSeconds``);
5. housekeeping: drop expired series and forget evicted pods that left.

``run()`` repeats steps until stopped, sleeping until the next due task; ``run_once()`` is one full round
(two collections one interval apart, so CPU rates exist, then every strategy once and a report) and returns
what was measured, decided, written and evicted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from pydantic import ValidationError as PydanticValidationError

from koord_framework.cluster.clock import Clock, WallClock
from koord_framework.cluster.events import register_recorder_metrics
from koord_framework.cluster.port import ClusterPort
from koord_framework.config.koordlet import KoordletConfiguration
from koord_framework.config.loader import LoadedKoordletConfig
from koord_framework.errors import KoordError, Problem, ValidationError
from koord_framework.featuregates import FeatureGates
from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.cpuset import CPUSetError
from koord_framework.koordlet.eviction import EvictionRecord, Evictor
from koord_framework.koordlet.executor import AuditRecord, ResourceExecutor
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.metrics.cache import MetricCache
from koord_framework.koordlet.metrics.collector import NODE_CPU_INFO_KEY, CollectResult, ResourceCollector
from koord_framework.koordlet.metrics.reporter import NodeMetricReporter
from koord_framework.koordlet.qos import Decision, QOSContext, QOSStrategy
from koord_framework.koordlet.runtimehooks import HookContext, HookManager, Reconciler, RuntimeHook
from koord_framework.koordlet.states import NodeState, StatesInformer
from koord_framework.koordlet.system import HostReadError, NodeCPUInfo, read_node_cpu_info
from koord_framework.koordlet.topology import KubeletCPUConfig, NodeTopologyReporter
from koord_framework.plugin import PluginArgs, close_plugins
from koord_framework.registry import PluginRegistry

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_STRATEGIES", "AgentOptions", "KoordletAgent", "RoundReport", "StrategySpec"]

DEFAULT_STRATEGIES: tuple[str, ...] = ("BECPUSuppress", "CPUBurst")
"""Koordinator's default-on QoS features (``BECPUSuppress``, ``CPUBurst``); the eviction ones default off.
Used by ``koord koordlet`` when no ``--config`` names strategies."""

StrategySpec = type[QOSStrategy] | tuple[type[QOSStrategy], Any]
"""A strategy class, or ``(class, args)`` where args is a mapping or an ``Args`` instance."""


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """Knobs of the agent loop (Koordinator's koordlet flags). ``from_config`` takes the ones a
    ``KoordletConfiguration`` carries; the rest keep Koordinator's defaults."""

    collect_interval_seconds: float = 1.0
    """Seconds between two metric collections (``CollectResUsedInterval``)."""
    report_interval_seconds: float = 60.0
    """Default NodeMetric report interval; the NodeMetric's ``metricCollectPolicy`` overrides it."""
    cpu_info_interval_seconds: float = 60.0
    metric_retention_seconds: float = 1800.0
    """History per series: must cover the longest NodeMetric aggregation window (30 min by default)."""
    metric_expire_seconds: float = 1800.0
    """Series not updated for this long (pods that left) are dropped (``--metric-expire-seconds``)."""
    report_node_metric: bool = True
    create_node_metric: bool = False
    """Create the NodeMetric when missing (normally the SLO controller does; handy when embedded)."""
    resource_force_update_seconds: float = 60.0
    """A cacheable write is repeated after this long even when unchanged (``ResourceForceUpdateSeconds``)."""
    cgroup_version: int | None = None
    cgroup_driver: str | None = None
    dry_run_eviction: bool = False
    dry_run: bool = False
    """Decide and report, write nothing: no host file, no eviction, no NodeMetric or topology report."""
    prediction_cold_start_seconds: float = 86400.0
    prediction_safety_margin_percent: int = 10
    report_node_topology: bool = True
    """Create and update the node's NodeResourceTopology (Koordinator's ``NodeTopologyReport`` gate, on)."""
    runtime_hooks_failure_policy: str = "Ignore"
    """What a failing runtime hook does by default (``runtimeHooks.failurePolicy``)."""
    runtime_hooks_reconcile_interval_seconds: float = 10.0
    """Seconds between two reconciler rounds of the runtime hooks (``--runtime-hooks-reconcile-interval``)."""
    node_topology_sync_interval_seconds: float = 3.0
    """Seconds between two NodeResourceTopology reports (``--node-topology-sync-interval``)."""
    kubelet: KubeletCPUConfig = field(default_factory=KubeletCPUConfig)
    """kubelet's CPU and topology manager settings for the NRT (Koordinator reads kubelet's configz)."""

    @classmethod
    def from_config(cls, cfg: KoordletConfiguration, **overrides: Any) -> AgentOptions:
        values: dict[str, Any] = {
            "collect_interval_seconds": float(cfg.collect_res_used_interval),
            "report_interval_seconds": float(cfg.report_interval),
            "cgroup_driver": cfg.cgroup_driver,
            "runtime_hooks_failure_policy": cfg.runtime_hooks.failure_policy,
        }
        values.update(overrides)
        return cls(**values)


def host_paths_from_config(cfg: KoordletConfiguration, root: str | None = None) -> HostPaths:
    """The configured roots (``hostPaths``), re-rooted under ``root`` when given (``--host-root``). sysfs is
    taken as the directory two levels above the resctrl mount (``/sys/fs/resctrl`` -> ``/sys``)."""
    hp = cfg.host_paths
    base = Path(root) if root else Path("/")

    def under(path: str) -> Path:
        return base / path.lstrip("/")

    resctrl = under(hp.resctrl_root)
    return HostPaths(
        proc=under(hp.proc_root),
        cgroup=under(hp.cgroup_root),
        sys=resctrl.parent.parent,
        resctrl=resctrl,
        kubelet_root=under(hp.var_lib_kubelet_root),
    )


HookSpec = tuple[type[RuntimeHook[Any]], PluginArgs]
"""A runtime-hook provider class and its validated args."""


def hooks_from_config(loaded: LoadedKoordletConfig) -> list[HookSpec]:
    """The runtime hooks a loaded configuration enables, as (class, validated args)."""
    out: list[HookSpec] = []
    for resolved in loaded.runtime_hooks:
        if not issubclass(resolved.cls, RuntimeHook):
            raise ValidationError(
                loaded.source, [Problem(f"runtimeHooks.enabled[{resolved.name}]", "is not a runtime hook")]
            )
        out.append((resolved.cls, resolved.args))
    return out


def strategies_from_config(loaded: LoadedKoordletConfig) -> list[StrategySpec]:
    """The enabled strategies of a loaded configuration, as (class, validated args)."""
    out: list[StrategySpec] = []
    for resolved in loaded.qos_strategies:
        if not issubclass(resolved.cls, QOSStrategy):
            raise ValidationError(
                loaded.source, [Problem(f"qosStrategies[{resolved.name}].name", "is not a QoS strategy")]
            )
        out.append((resolved.cls, resolved.args))
    return out


@dataclass(slots=True)
class RoundReport:
    """What one step (or ``run_once``) measured, decided, wrote and evicted."""

    time: float
    collected: CollectResult | None = None
    ran: list[str] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    writes: list[AuditRecord] = field(default_factory=list)
    evictions: list[EvictionRecord] = field(default_factory=list)
    node_metric: dict[str, Any] | None = None
    node_topology: dict[str, Any] | None = None
    """The NodeResourceTopology written this step (None: unchanged, or not due)."""
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "measured": self.collected.as_dict() if self.collected else None,
            "strategies": list(self.ran),
            "decided": [d.as_dict() for d in self.decisions],
            "wrote": [w.as_dict() for w in self.writes],
            "evicted": [e.as_dict() for e in self.evictions],
            "nodeMetricStatus": self.node_metric,
            "errors": list(self.errors),
        }


class KoordletAgent:
    """The node agent for one node. Build, ``start()``, then ``step``/``run``/``run_once``."""

    def __init__(
        self,
        node_name: str,
        cluster: ClusterPort | None,
        *,
        host: HostPaths,
        options: AgentOptions | None = None,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        strategies: Sequence[StrategySpec] | None = None,
        qos_registry: PluginRegistry | None = None,
        layout: CgroupLayout | None = None,
        hooks: Sequence[HookSpec] = (),
        gates: FeatureGates | None = None,
    ) -> None:
        """``gates``: the koordlet's feature gates (``--feature-gates``). Given, they are the one switch of
        the QoS strategies and runtime hooks Koordinator gates (``KOORDLET_PLUGIN_GATES``): a strategy or hook
        whose gates are all off is not built, an eviction strategy keeps only the triggers whose gate is on,
        and without ``strategies`` every installed strategy whose gate is on runs. ``None`` (tests,
        embedding): the strategies and hooks given run as given."""
        self.node_name = node_name
        self.gates = gates
        self.cluster = cluster
        self.host = host
        self.options = options or AgentOptions()
        self.clock: Clock = clock or WallClock()
        self.registry = registry or CollectorRegistry()
        if cluster is not None:
            register_recorder_metrics(cluster, self.registry)
        cfg = self.options
        self.layout = layout or CgroupLayout.detect(
            host,
            CgroupVersion(cfg.cgroup_version) if cfg.cgroup_version else None,
            CgroupDriver(cfg.cgroup_driver) if cfg.cgroup_driver else None,
        )
        self.metrics = MetricCache(
            retention_seconds=cfg.metric_retention_seconds,
            interval_seconds=cfg.collect_interval_seconds,
            expire_seconds=cfg.metric_expire_seconds,
        )
        self.executor = ResourceExecutor(
            self.layout,
            clock=self.clock,
            force_update_seconds=cfg.resource_force_update_seconds,
            registry=self.registry,
            dry_run=cfg.dry_run,
        )
        self.evictor = Evictor(
            cluster, clock=self.clock, dry_run=cfg.dry_run_eviction or cfg.dry_run, registry=self.registry
        )
        self.collector = ResourceCollector(host, self.layout, self.metrics)
        self.reporter = NodeMetricReporter(
            self.metrics,
            cold_start_seconds=cfg.prediction_cold_start_seconds,
            safety_margin_percent=cfg.prediction_safety_margin_percent,
            default_report_interval_seconds=cfg.report_interval_seconds,
        )
        self.informer = StatesInformer(cluster, node_name, self.layout) if cluster is not None else None
        self.topology_reporter = NodeTopologyReporter(host, cfg.kubelet)
        self._state = NodeState(node_name)
        self.context = QOSContext(
            node_name=node_name,
            host=host,
            layout=self.layout,
            executor=self.executor,
            metrics=self.metrics,
            evictor=self.evictor,
            clock=self.clock,
            state_provider=lambda: self._state,
            registry=self.registry,
            collect_interval_seconds=cfg.collect_interval_seconds,
            cluster=cluster,
        )
        self.strategies: list[QOSStrategy] = self._build_strategies(strategies, qos_registry)
        # One pluggy PluginManager per agent: two agents in a process (tests, --once runs) never share hooks.
        self.hook_context = HookContext(
            node_name, host, self.layout, lambda: self._state, clock=self.clock, registry=self.registry
        )
        self.hooks = HookManager(self.hook_context, failure_policy=cfg.runtime_hooks_failure_policy)
        for cls, hook_args in hooks:
            if gates is not None and not gates.plugin_enabled("runtimehooks", cls.name):
                log.info("runtime hook %s is off: feature gate %s", cls.name, cls.name)
                continue
            self.hooks.register(cls(cls.parse_args(hook_args), self.hook_context))
        self.reconciler = Reconciler(
            self.hooks,
            self.executor,
            lambda: self._state,
            interval_seconds=cfg.runtime_hooks_reconcile_interval_seconds,
        )
        self._closed = False
        self._tick_seconds = Histogram(
            "koordlet_qos_strategy_duration_seconds",
            "Time one QoS strategy round took, by strategy and outcome.",
            ["strategy", "status"],
            registry=self.registry,
        )
        self._due: dict[str, float] = {}
        self._started = False

    # --- construction -----------------------------------------------------------------------------------
    def _build_strategies(
        self, specs: Sequence[StrategySpec] | None, qos_registry: PluginRegistry | None
    ) -> list[QOSStrategy]:
        gates = self.gates
        if specs is None:
            registry = qos_registry or PluginRegistry.discover("qos")
            names = (
                [n for n in DEFAULT_STRATEGIES if n in registry]
                if gates is None
                else [
                    n
                    for n in registry.names()
                    if gates.plugin_gates("qos", n) and gates.plugin_enabled("qos", n)
                ]
            )
            specs = [cls for cls in registry.load(names) if issubclass(cls, QOSStrategy)]
        out: list[QOSStrategy] = []
        for i, spec in enumerate(specs):
            cls, raw = spec if isinstance(spec, tuple) else (spec, None)
            if gates is not None and not gates.plugin_enabled("qos", cls.name):
                log.info(
                    "QoS strategy %s is off: feature gates %s", cls.name, gates.plugin_gates("qos", cls.name)
                )
                continue
            try:
                args: PluginArgs = cls.parse_args(raw)
            except PydanticValidationError as err:
                problems = [
                    Problem(
                        f"qosStrategies[{i}][{cls.name}].args." + ".".join(str(p) for p in e["loc"]), e["msg"]
                    )
                    for e in err.errors(include_url=False)
                ]
                raise ValidationError("KoordletConfiguration", problems) from None
            triggers = getattr(args, "triggers", None)
            if gates is not None and triggers is not None and gates.plugin_gates("qos", cls.name):
                # Koordinator checks each eviction trigger's own gate before building its task.
                on = [t for t in triggers if gates.values.get(t, False)]
                if not on:
                    log.info(
                        "QoS strategy %s is off: the gates of its triggers %s are off", cls.name, triggers
                    )
                    continue
                args = args.model_copy(update={"triggers": on})
            out.append(cls(args, self.context))
        return out

    # --- lifecycle ----------------------------------------------------------------------------------------
    @property
    def state(self) -> NodeState:
        return self._state

    def set_state(self, state: NodeState) -> None:
        """Use a given snapshot (tests and embedding without a cluster port)."""
        self._state = state

    def start(self, *, watch: bool = True) -> None:
        if self._started:
            return
        if self.informer is not None:
            self.informer.start(watch=watch)
            self._state = self.informer.snapshot()
        self._refresh_cpu_info()
        self._started = True

    def stop(self) -> None:
        if self.informer is not None:
            self.informer.stop()
        if not self._closed:
            self._closed = True
            close_plugins({s.name: s for s in self.strategies}, "koordlet")
            self.hooks.close()

    def _refresh_cpu_info(self) -> None:
        try:
            info = read_node_cpu_info(self.host)
        except HostReadError as err:
            log.warning("cannot read the CPU topology: %s", err)
            return
        self.metrics.set(NODE_CPU_INFO_KEY, info)
        if info.processors:
            self.executor.node_cpus = info.cpu_ids

    def _due_now(self, name: str, now: float, interval: float) -> bool:
        due = self._due.get(name)
        if due is not None and now < due:
            return False
        # Non-sliding schedule; after a long stall, restart from now instead of running a backlog.
        nxt = (due + interval) if due is not None else now + interval
        self._due[name] = nxt if nxt > now else now + interval
        return True

    # --- one step ---------------------------------------------------------------------------------------
    def step(self, now: float | None = None) -> RoundReport:
        if not self._started:
            self.start()
        now = self.clock.now() if now is None else now
        report = RoundReport(time=now)
        if self.informer is not None:
            self._state = self.informer.snapshot()
            report.errors.extend(self.informer.errors)
        cfg = self.options
        if self._due_now("cpuinfo", now, cfg.cpu_info_interval_seconds):
            self._refresh_cpu_info()
        if self._due_now("collect", now, cfg.collect_interval_seconds):
            report.collected = self.collector.collect(self._state, now)
            report.errors.extend(report.collected.errors)
        for strategy in self.strategies:
            if self._due_now(f"qos/{strategy.name}", now, strategy.interval_seconds):
                self._run_strategy(strategy, now, report)
        if self.hooks.hooks:
            reconciled = self.reconciler.tick(now)
            if reconciled is not None:
                report.ran.append(f"RuntimeHooksReconciler ({reconciled.reason})")
                report.errors.extend(str(f) for f in reconciled.failures)
        topology_due = cfg.report_node_topology and self.cluster is not None
        if topology_due and self._due_now("topology", now, cfg.node_topology_sync_interval_seconds):
            report.node_topology = self._report_topology(report)
        if cfg.report_node_metric and self.cluster is not None:
            policy = self.reporter.policy(self._state)
            if self._due_now("report", now, policy.report_interval_seconds):
                report.node_metric = self._report(now, report)
        if self._due_now("gc", now, 60.0):
            self.metrics.gc(now)
            self.evictor.forget_gone(p.uid for p in self._state.pods)
        report.decisions = self.context.decisions_since(now)
        report.writes = self.executor.audit_since(now)
        report.evictions = self.evictor.records_since(now)
        return report

    def _run_strategy(self, strategy: QOSStrategy, now: float, report: RoundReport) -> None:
        started = time.perf_counter()
        status = "ok"
        try:
            if strategy.enabled(self._state.node_slo):
                strategy.tick(now)
                report.ran.append(strategy.name)
            else:
                strategy.on_disabled(now)
                report.ran.append(f"{strategy.name} (disabled by NodeSLO)")
        except Exception as err:  # one broken strategy must not stop the node agent
            status = "error"
            log.exception("QoS strategy %s failed", strategy.name)
            report.errors.append(f"{strategy.name}: {type(err).__name__}: {err}")
        self._tick_seconds.labels(strategy.name, status).observe(time.perf_counter() - started)

    def _report_topology(self, report: RoundReport) -> dict[str, Any] | None:
        """Create or update the node's NodeResourceTopology; None when unchanged or not possible yet."""
        assert self.cluster is not None
        cpu_info = self.metrics.get(NODE_CPU_INFO_KEY)
        if not isinstance(cpu_info, NodeCPUInfo) or not cpu_info.processors or self._state.node is None:
            return None  # as upstream: nothing to report before the CPU topology and the Node are known
        try:
            return self.topology_reporter.report(self.cluster, self._state, cpu_info)
        except (KoordError, CPUSetError) as err:
            report.errors.append(f"NodeResourceTopology report: {err}")
            return None

    def _report(self, now: float, report: RoundReport) -> dict[str, Any] | None:
        assert self.cluster is not None
        try:
            return self.reporter.report(
                self.cluster, self._state, now, create=self.options.create_node_metric
            )
        except KoordError as err:
            report.errors.append(f"NodeMetric report: {err}")
            return None

    # --- loops ------------------------------------------------------------------------------------------
    def run(
        self,
        stop: threading.Event | None = None,
        *,
        duration: float | None = None,
        on_step: Callable[[RoundReport], None] | None = None,
    ) -> None:
        """Step until ``stop`` is set or ``duration`` seconds of the agent's clock passed; ``on_step`` sees
        every step's report."""
        self.start()
        stop = stop or threading.Event()
        deadline = self.clock.now() + duration if duration is not None else None
        while not stop.is_set():
            now = self.clock.now()
            if deadline is not None and now >= deadline:
                break
            report = self.step(now)
            if on_step is not None:
                on_step(report)
            wake = min(self._due.values()) if self._due else now + 1.0
            if deadline is not None:
                wake = min(wake, deadline)
            delay = max(wake - self.clock.now(), 0.0)
            if isinstance(self.clock, WallClock):
                stop.wait(delay)
            elif delay > 0:
                self.clock.sleep(delay)
        self.stop()

    def run_once(self) -> RoundReport:
        """One complete round: a baseline collection, one collect interval later a second one, the
        NodeResourceTopology report, then every strategy once and the NodeMetric report. The report merges
        both collections' errors."""
        self.start(watch=False)
        begin = self.clock.now()
        baseline = self.collector.collect(self._state, begin)
        self.clock.sleep(self.options.collect_interval_seconds)
        now = self.clock.now()
        report = RoundReport(time=now)
        report.errors.extend(baseline.errors)
        if self.informer is not None:
            self._state = self.informer.snapshot()
            report.errors.extend(self.informer.errors)
        report.collected = self.collector.collect(self._state, now)
        report.errors.extend(e for e in report.collected.errors if e not in report.errors)
        if self.options.report_node_topology and self.cluster is not None:
            report.node_topology = self._report_topology(report)
        for strategy in self.strategies:
            self._run_strategy(strategy, now, report)
        if self.options.report_node_metric and self.cluster is not None:
            report.node_metric = self._report(now, report)
        report.decisions = self.context.decisions_since(begin)
        report.writes = self.executor.audit_since(begin)
        report.evictions = self.evictor.records_since(begin)
        return report
