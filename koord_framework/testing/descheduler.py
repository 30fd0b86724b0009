"""A descheduler harness for plugin tests, with a recording evictor.

    harness = DeschedulerHarness([(LowNodeLoad, {"lowThresholds": {...}, "highThresholds": {...}})])
    harness.add(make_node("n1"), make_node("n2"), make_pod("p1", node="n1", owner_kind="ReplicaSet"),
                make_node_metric("n1", ...), make_node_metric("n2", ...))
    report = harness.run_once()          # one cycle: Deschedule, then Balance plugins
    assert harness.evicted == ["default/p1"]

One profile is built from the given plugin classes: each goes to every profile key whose extension point
it implements (``deschedule``, ``balance``, ``filter``), and the Evict plugin is ``evictor`` —
``RecordingEvictor`` by default, which records evictions instead of making them (and admits every pod
through its Filter unless told otherwise); pass ``DefaultEvictor`` (or any class, or a ``(class, args)``
pair) to evict through the cluster. A plugin listed in ``plugins`` that itself implements Evict is used as
the evictor when ``evictor`` is not given.

The cluster is a ``MemoryCluster`` on a ``VirtualClock`` (``now`` sets where it starts); ``run`` drives the
interval and the background plugins on that clock without sleeping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import VirtualClock, parse_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.descheduler.descheduler import Descheduler
from koord_framework.descheduler.framework import DeschedulerFramework, EvictionFailed, ProfileSpec
from koord_framework.descheduler.handle import RoundReport
from koord_framework.descheduler.interface import (
    PROFILE_KEYS,
    DeschedulerPlugin,
    EvictOptions,
    EvictPlugin,
    FilterPlugin,
    Handle,
)
from koord_framework.plugin import Plugin, PluginArgs
from koord_framework.testing.builders import DEFAULT_START

PluginSpec = type[Plugin] | tuple[type[Plugin], Mapping[str, Any] | None]


@dataclass(frozen=True)
class RecordedEviction:
    pod: str
    """``namespace/name``."""
    node: str
    plugin: str
    reason: str


class RecordingEvictor(DeschedulerPlugin, FilterPlugin, EvictPlugin):
    """An Evict plugin that records evictions and changes nothing; its Filter admits every pod.

    ``refuse`` (pod keys) makes ``evict`` fail for those pods, as an API refusal would; ``admit`` replaces
    the Filter. Both are plain attributes a test may set at any time.
    """

    name: ClassVar[str] = "RecordingEvictor"

    def __init__(self, args: PluginArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.evictions: list[RecordedEviction] = []
        self.refused: list[RecordedEviction] = []
        self.refuse: set[str] = set()
        self.admit: Callable[[PodInfo], bool] = lambda pod: True

    def filter(self, pod: PodInfo) -> bool:
        return self.admit(pod)

    def evict(self, pod: PodInfo, options: EvictOptions) -> bool:
        record = RecordedEviction(pod.key, pod.node_name, options.plugin_name, options.reason)
        if pod.key in self.refuse:
            self.refused.append(record)
            raise EvictionFailed(f"eviction of {pod.key} refused by the test")
        self.evictions.append(record)
        return True


def _start(now: float | str | datetime | None) -> float:
    if now is None:
        return DEFAULT_START
    if isinstance(now, datetime):
        return now.timestamp()
    if isinstance(now, str):
        parsed = parse_time(now)
        assert parsed is not None
        return parsed
    return float(now)


class DeschedulerHarness:
    """A one-profile descheduler over an in-memory cluster; see the module docstring."""

    def __init__(
        self,
        plugins: Sequence[PluginSpec],
        *,
        evictor: PluginSpec | None = None,
        cluster: MemoryCluster | None = None,
        now: float | str | datetime | None = None,
        dry_run: bool = False,
        max_per_node: int | None = None,
        max_per_namespace: int | None = None,
        max_total: int | None = None,
        descheduling_interval: float = 0.0,
        node_selector: Mapping[str, Any] | None = None,
        profile_name: str = "koord-descheduler",
        instance_name: str = "",
    ) -> None:
        self.cluster = cluster if cluster is not None else MemoryCluster(VirtualClock(_start(now)))
        entries = [p if isinstance(p, tuple) else (p, None) for p in plugins]
        if evictor is None:
            own = [e for e in entries if issubclass(e[0], EvictPlugin)]
            evictor = own[0] if own else RecordingEvictor
        ev_cls, ev_args = evictor if isinstance(evictor, tuple) else (evictor, None)
        if all(cls is not ev_cls for cls, _ in entries):
            entries.append((ev_cls, ev_args))
        classes = {cls.name: cls for cls, _ in entries}
        args: dict[str, PluginArgs] = {}
        for cls, raw in entries:
            if raw is not None:
                args[cls.name] = cls.parse_args(raw)
        points: dict[str, list[str]] = {key: [] for key in PROFILE_KEYS}
        for cls, _ in entries:
            implemented = cls.extension_points()
            for key, (point, *_rest) in PROFILE_KEYS.items():
                if key == "evict":
                    continue
                if point in implemented:
                    points[key].append(cls.name)
        points["evict"] = [ev_cls.name]
        self.spec = ProfileSpec(
            name=profile_name,
            points={k: tuple(v) for k, v in points.items()},
            classes=classes,
            args=args,
        )
        self._options: dict[str, Any] = {
            "node_selector": node_selector,
            "descheduling_interval": descheduling_interval,
            "dry_run": dry_run,
            "max_per_node": max_per_node,
            "max_per_namespace": max_per_namespace,
            "max_total": max_total,
            "instance_name": instance_name,
        }
        self._descheduler: Descheduler | None = None

    # --- building -----------------------------------------------------------------------------------
    @property
    def descheduler(self) -> Descheduler:
        """Built on first use, after the test ``add``-ed its objects (plugins see them from the start)."""
        if self._descheduler is None:
            self._descheduler = Descheduler([self.spec], self.cluster, **self._options)
        return self._descheduler

    @property
    def framework(self) -> DeschedulerFramework:
        return self.descheduler.frameworks[0]

    @property
    def handle(self) -> Handle:
        return self.framework

    @property
    def clock(self) -> VirtualClock:
        clock = self.cluster.clock
        assert isinstance(clock, VirtualClock)
        return clock

    def plugin(self, name: str) -> DeschedulerPlugin:
        return self.framework.plugins[name]

    def add(self, *manifests: Mapping[str, Any]) -> None:
        """Create objects in the cluster (nodes, pods, NodeMetrics, PDBs, workloads, ...)."""
        for obj in manifests:
            self.cluster.create(dict(obj))

    # --- running ------------------------------------------------------------------------------------
    def run_once(self) -> RoundReport:
        """One full cycle (ready nodes, limiter reset, Deschedule then Balance plugins)."""
        return self.descheduler.run_once()

    def run(self, rounds: int, *, drain: bool = True) -> list[RoundReport]:
        return self.descheduler.run(rounds, drain=drain)

    def balance(self, node_names: Sequence[str] | None = None) -> RoundReport:
        """Only the Balance plugins, on the given nodes (default: every node in the cluster, Ready or not),
        as Koordinator's tests call ``RunBalancePlugins``; the limiter is reset first."""
        return self._run_point("balance", node_names)

    def deschedule(self, node_names: Sequence[str] | None = None) -> RoundReport:
        """Only the Deschedule plugins, likewise."""
        return self._run_point("deschedule", node_names)

    def _run_point(self, point: str, node_names: Sequence[str] | None) -> RoundReport:
        d = self.descheduler
        services = d.services
        report = RoundReport(round=len(d.reports) + 1, time=services.clock.now())
        services.report = report
        d.reports.append(report)
        services.limiter.reset()
        nodes = services.cache.nodes()
        if node_names is not None:
            by_name = {n.name: n for n in nodes}
            nodes = [by_name[n] for n in node_names]
        fw = self.framework
        errors = fw.run_balance_plugins(nodes) if point == "balance" else fw.run_deschedule_plugins(nodes)
        report.errors.extend(errors)
        return report

    def tick(self) -> float | None:
        return self.descheduler.tick()

    # --- results ------------------------------------------------------------------------------------
    @property
    def reports(self) -> list[RoundReport]:
        return self.descheduler.reports

    @property
    def evicted(self) -> list[str]:
        """Pods evicted (or, in dry run, that would have been) over every round so far, in order."""
        return [e.pod for r in self.reports for e in r.evictions]

    @property
    def recorder(self) -> RecordingEvictor:
        evictor = self.framework.evict_plugin
        if not isinstance(evictor, RecordingEvictor):
            raise TypeError(f"the harness evicts through {type(evictor).__name__}, not the RecordingEvictor")
        return evictor


__all__ = ["DeschedulerHarness", "RecordedEviction", "RecordingEvictor"]
