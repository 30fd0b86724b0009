"""The QoS extension point of the node agent (entry-point group ``koord.koordlet.qos``).

A QoS strategy is a plugin class subclassing ``QOSStrategy``. The agent builds it once with its typed args
and a ``QOSContext``, then calls ``tick(now)`` every ``interval_seconds`` of the agent's clock while
``enabled(node_slo)`` holds, and ``on_disabled(now)`` at the same pace while it does not. Nothing runs in a
thread of the strategy's own, so a test drives a strategy with a virtual clock and a fake host tree::

    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), context)
    strategy.tick(clock.now())

Contract:

* ``tick`` reads state only through the context (``context.state`` pods and node, ``context.metrics``,
  ``context.reader``) and changes the host only through ``context.executor``; it evicts only through
  ``context.evictor`` (the cluster's Eviction API, with a reason; a pod is never evicted twice).
* ``tick`` must not raise for host trouble: a failed write is a ``WriteResult``; the agent still catches
  and counts exceptions so one broken strategy never stops the others.
* ``enabled`` decides from the merged NodeSLO (``None`` when the node has none). The default follows
  Koordinator's ``IsFeatureDisabled`` for the class's ``feature``: ``resourceUsedThresholdWithBE.enable``.
* ``on_disabled`` undoes what ``tick`` set (CPU suppress writes the unlimited quota and the full cpuset back);
  the default does nothing.
* ``context.decide(...)`` records what was decided and why; ``koord koordlet --once`` prints it.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from prometheus_client import CollectorRegistry
from pydantic import Field

from koord_framework.cluster.clock import Clock
from koord_framework.cluster.port import ClusterPort
from koord_framework.koordlet.cgroups import CgroupLayout, CgroupReader
from koord_framework.koordlet.eviction import Evictor
from koord_framework.koordlet.executor import ResourceExecutor
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.metrics.cache import MetricCache
from koord_framework.koordlet.metrics.collector import NODE_CPU_INFO_KEY
from koord_framework.koordlet.nodeslo import NodeSLO, is_feature_disabled
from koord_framework.koordlet.states import NodeState
from koord_framework.koordlet.system import NodeCPUInfo
from koord_framework.plugin import ArgsT, ExtensionPoint, Plugin, PluginArgs

__all__ = ["Decision", "IntervalArgs", "QOSContext", "QOSStrategy"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One thing a strategy decided, for the round report and the logs."""

    time: float
    strategy: str
    summary: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "strategy": self.strategy,
            "summary": self.summary,
            "details": self.details,
        }


@dataclass(slots=True)
class QOSContext:
    """Everything a strategy may use. Built by the agent (or by a test from a fake host tree)."""

    node_name: str
    host: HostPaths
    layout: CgroupLayout
    executor: ResourceExecutor
    metrics: MetricCache
    evictor: Evictor
    clock: Clock
    state_provider: Callable[[], NodeState]
    """Returns the snapshot of the current round (pods with cgroup dirs, node, NodeSLO, topology)."""
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    """Where strategies register their Prometheus metrics (never the global registry)."""
    collect_interval_seconds: float = 1.0
    """How often the collector samples: strategies query ``2 x`` this for "the last value"."""
    cluster: ClusterPort | None = None
    journal: deque[Decision] = field(default_factory=lambda: deque(maxlen=2048))

    @property
    def reader(self) -> CgroupReader:
        return CgroupReader(self.layout)

    @property
    def state(self) -> NodeState:
        return self.state_provider()

    @property
    def node_slo(self) -> NodeSLO | None:
        return self.state_provider().node_slo

    @property
    def cpu_info(self) -> NodeCPUInfo | None:
        info = self.metrics.get(NODE_CPU_INFO_KEY)
        return info if isinstance(info, NodeCPUInfo) else None

    def decide(self, strategy: str, summary: str, **details: Any) -> Decision:
        d = Decision(self.clock.now(), strategy, summary, details)
        self.journal.append(d)
        return d

    def decisions_since(self, since: float) -> list[Decision]:
        return [d for d in self.journal if d.time >= since]


class IntervalArgs(PluginArgs):
    """Args every strategy has: how often it runs."""

    interval_seconds: float = Field(default=1.0, gt=0)
    """Seconds between two ticks (Koordinator's ``--*-interval-seconds`` flags); must be > 0."""


class QOSStrategy(Plugin[ArgsT], ExtensionPoint):
    """Base of every QoS strategy. Subclasses set ``name``, ``Args`` and implement ``tick``."""

    extension_point: ClassVar[str] = "QoS"
    feature: ClassVar[str] = ""
    """The Koordinator feature whose NodeSLO switch gates the strategy (e.g. ``BECPUSuppress``)."""

    def __init__(self, args: ArgsT, context: QOSContext) -> None:
        # Validated again when given raw (a mapping in a test): ``self.args`` is always ``Args``.
        self.args = cast(ArgsT, type(self).parse_args(args))
        self.context = context

    @property
    def interval_seconds(self) -> float:
        value = getattr(self.args, "interval_seconds", 1.0)
        return float(value) if value and value > 0 else 1.0

    def enabled(self, node_slo: NodeSLO | None) -> bool:
        """Whether ``tick`` should run under this NodeSLO (default: the feature's threshold switch)."""
        return not is_feature_disabled(node_slo, self.feature or self.name)

    @abc.abstractmethod
    def tick(self, now: float) -> None:
        """One round of the strategy at ``now`` (seconds since the epoch on the agent's clock)."""

    def on_disabled(self, now: float) -> None:
        """Called instead of ``tick`` while the NodeSLO switches the strategy off: undo what ``tick`` set."""

    def decide(self, summary: str, **details: Any) -> Decision:
        return self.context.decide(self.name, summary, **details)
