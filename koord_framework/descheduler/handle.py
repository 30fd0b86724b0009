"""What the profiles of one descheduler share, and the round report every plugin can add to.

``Services`` bundles the cluster, clock, cache, limiter, metrics and the current ``RoundReport``; each
profile's framework wraps them into its ``Handle``. The report is what ``koord deschedule`` prints: per round,
the nodes balance plugins classified and every eviction (made, would-be in dry run, failed or refused) with
its plugin and reason.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.clock import Clock
from koord_framework.cluster.port import ClusterPort
from koord_framework.descheduler.cache import DeschedulerCache
from koord_framework.descheduler.limiter import EvictionLimiter
from koord_framework.descheduler.selectors import parse_selector_string
from koord_framework.metrics import new_registry

EvictionResult = Literal["evicted", "dry-run", "failed", "refused"]


@dataclass(frozen=True)
class EvictionEntry:
    """One eviction request as the framework saw it."""

    pod: str
    """``namespace/name``."""
    node: str
    plugin: str
    """The plugin that asked (``LowNodeLoad``), not the one that carried it out."""
    reason: str
    profile: str
    result: EvictionResult
    message: str = ""
    """For ``failed``/``refused``: why the pod stayed."""

    def as_dict(self) -> dict[str, str]:
        return {"pod": self.pod, "node": self.node, "plugin": self.plugin, "reason": self.reason}


@dataclass
class RoundReport:
    round: int
    time: float
    high: list[str] = field(default_factory=list)
    low: list[str] = field(default_factory=list)
    evictions: list[EvictionEntry] = field(default_factory=list)
    """Evictions that happened (or, in dry run, would have)."""
    failures: list[EvictionEntry] = field(default_factory=list)
    """Evictions asked for that left the pod in place (evict plugin or API refused, limiter reached)."""
    errors: list[str] = field(default_factory=list)
    """Plugin and cycle errors (a failed plugin, a cluster of fewer than two nodes)."""

    def add_nodes(self, high: Iterable[str], low: Iterable[str]) -> None:
        for names, seen in ((high, self.high), (low, self.low)):
            known = set(seen)
            for name in names:
                if name not in known:
                    known.add(name)
                    seen.append(name)


class DeschedulerMetrics:
    """The descheduler's series on a component registry (Koordinator: ``descheduler_pods_evicted``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.pods_evicted = Counter(
            "koord_descheduler_pods_evicted",
            "Pods evicted, by result (success, error, dry-run, limited), strategy (plugin), namespace, node.",
            ["result", "strategy", "namespace", "node"],
            registry=registry,
        )
        self.plugin_duration = Histogram(
            "koord_descheduler_plugin_duration_seconds",
            "Time spent in a descheduler plugin per extension point.",
            ["plugin", "extension_point", "status"],
            registry=registry,
        )
        self.cycle_duration = Histogram(
            "koord_descheduler_cycle_duration_seconds",
            "Time of one descheduling cycle (every profile's Deschedule and Balance plugins).",
            registry=registry,
        )
        self._evicted_children: dict[tuple[str, str, str, str], Any] = {}

    def count_eviction(self, result: str, strategy: str, namespace: str, node: str) -> None:
        """``pods_evicted{result,strategy,namespace,node} += 1`` (children cached: a cycle may evict
        thousands of pods and looking a child up is not free)."""
        key = (result, strategy, namespace, node)
        child = self._evicted_children.get(key)
        if child is None:
            child = self._evicted_children[key] = self.pods_evicted.labels(*key)
        child.inc()


class Services:
    """Everything the profiles of one descheduler share."""

    def __init__(
        self,
        cluster: ClusterPort,
        *,
        cache: DeschedulerCache | None = None,
        limiter: EvictionLimiter | None = None,
        metrics: CollectorRegistry | None = None,
        dry_run: bool = False,
        descheduling_interval: float = 0.0,
        instance_name: str = "",
    ) -> None:
        self.cluster = cluster
        self.instance_name = instance_name
        """The descheduler's name across restarts (``Handle.instance_name``)."""
        self.clock: Clock = cluster.clock
        self.cache = cache if cache is not None else DeschedulerCache(cluster)
        self.limiter = limiter if limiter is not None else EvictionLimiter()
        self.registry = metrics if metrics is not None else new_registry()
        self.metrics = DeschedulerMetrics(self.registry)
        self.dry_run = dry_run
        self.descheduling_interval = descheduling_interval
        self.shared_slots: dict[Any, Any] = {}
        """What plugins of every profile share (``Handle.shared(scope="component")``)."""
        self.stopping = threading.Event()
        """Set when the component is asked to stop: the round in progress evicts nothing more."""
        self.report = RoundReport(round=0, time=self.clock.now())
        """The report of the round in progress (round 0 collects anything done outside a round)."""
        self.verdicts: dict[str, str] | None = None
        """``koord deschedule --explain``: pod key -> why a candidate stayed (the Filter or PreEvictionFilter
        plugin that refused it, with its reason when the plugin gives one); None records nothing."""

    def refused(self, pod: PodInfo, plugin: Any, point: str) -> None:
        """Note that ``plugin`` at ``point`` refused ``pod`` (only while verdicts are recorded). A plugin may
        say why with ``refusal_reason(pod) -> str | None``."""
        if self.verdicts is None or pod.key in self.verdicts:
            return
        explain = getattr(plugin, "refusal_reason", None)
        why = explain(pod) if callable(explain) else None
        name = getattr(plugin, "name", type(plugin).__name__)
        self.verdicts[pod.key] = f"refused by {point} {name}" + (f": {why}" if why else "")

    def ready_nodes(self, label_selector: str = "") -> list[NodeRecord]:
        match = parse_selector_string(label_selector)
        return [n for n in self.cache.nodes() if n.ready and match(n.labels)]

    def pods_on_node(self, node: str) -> list[PodInfo]:
        return self.cache.pods_on_node(node)
