"""The webhook's metrics, in whichever process answers the admissions, and their sum on the manager's
``/metrics``.

Every process serving admissions (the manager itself, or each ``--webhook-workers`` process) records into
its own ``PROCESS`` metrics:

* ``koord_manager_webhook_binding_admission_decisions_total{decision}``: Koordinator's binding-admission
  counter (``pkg/webhook/metrics/binding_admission.go``), by its decision names;
* ``koord_manager_webhook_webhook_duration_milliseconds{webhook_type,object_type,operation,plugin_name,
  status}``: Koordinator's per-plugin admission histogram (``webhook_duration.go``, its buckets), for every
  handler (Koordinator records it for its ConfigMap and ElasticQuota handlers only);
* ``koord_manager_webhook_duration_seconds{path,allowed}``: the project's per-request histogram (Koordinator
  has none per request).

A worker process sends a snapshot of its samples to the manager (``snapshot``) when they changed, at most
every ``PUSH_INTERVAL`` seconds; the manager keeps the last one of each worker, folds a dead worker's last
one into a retired total (so counters never go back when a worker restarts), and ``WebhookMetricsCollector``
on the manager's registry adds them to the manager's own (``merge``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = [
    "PROCESS",
    "PUSH_INTERVAL",
    "Family",
    "Snapshot",
    "WebhookMetrics",
    "WebhookMetricsCollector",
    "merge",
    "snapshot",
]

PUSH_INTERVAL: Final = 1.0
"""Seconds between a worker's snapshots (sent only when something changed)."""

SUBSYSTEM: Final = "koord_manager_webhook"
OBJECT_TYPES: Final = {
    "Pod": "pod",
    "Node": "node",
    "ConfigMap": "configmap",
    "ElasticQuota": "elasticquota",
    "Reservation": "reservation",
}
"""Koordinator's ``object_type`` label values; another kind is its lower-cased name."""

# Koordinator: prometheus.ExponentialBuckets(0.001, 2, 20), in milliseconds.
_KOORD_BUCKETS: Final = tuple(0.001 * 2**i for i in range(20))

Sample = tuple[str, tuple[tuple[str, str], ...], float]
Family = tuple[str, str, str, tuple[Sample, ...]]
"""A metric family as plain data (name, type, help, samples), what crosses the worker's pipe."""
Snapshot = tuple[Family, ...]


class WebhookMetrics:
    """The webhook's metrics of one process, on their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.binding_decisions = Counter(
            f"{SUBSYSTEM}_binding_admission_decisions",
            "Total number of binding admission decisions.",
            ["decision"],
            registry=self.registry,
        )
        self.plugin_duration = Histogram(
            f"{SUBSYSTEM}_webhook_duration_milliseconds",
            "webhook_duration_milliseconds",
            ["webhook_type", "object_type", "operation", "plugin_name", "status"],
            registry=self.registry,
            buckets=_KOORD_BUCKETS,
        )
        self.request_duration = Histogram(
            f"{SUBSYSTEM}_duration_seconds",
            "Duration of one admission request, by path and whether it was allowed",
            ["path", "allowed"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        )

    def record_plugin(
        self, mutating: bool, kind: str, operation: str, plugin: str, allowed: bool, seconds: float
    ) -> None:
        """Koordinator's ``RecordWebhookDurationMilliseconds``."""
        self.plugin_duration.labels(
            "mutate" if mutating else "validate",
            OBJECT_TYPES.get(kind, kind.lower()),
            operation,
            plugin,
            "allowed" if allowed else "rejected",
        ).observe(seconds * 1000)


PROCESS: Final = WebhookMetrics()
"""This process's webhook metrics (the handlers and the dispatcher record here)."""


def snapshot(registry: CollectorRegistry) -> Snapshot:
    """The samples of ``registry`` that add up over processes (counters and histograms, without their
    ``_created`` timestamps, which do not), as plain data."""
    families: list[Family] = []
    for metric in registry.collect():
        if metric.type not in ("counter", "histogram"):
            continue
        samples = tuple(
            (s.name, tuple(sorted(s.labels.items())), float(s.value))
            for s in metric.samples
            if not s.name.endswith("_created")
        )
        families.append((metric.name, metric.type, metric.documentation, samples))
    return tuple(families)


def merge(snapshots: Iterable[Snapshot]) -> Snapshot:
    """The sample-wise sum of ``snapshots`` (a family's type and help from its first appearance)."""
    meta: dict[str, tuple[str, str]] = {}
    sums: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for snap in snapshots:
        for name, typ, doc, samples in snap:
            meta.setdefault(name, (typ, doc))
            into = sums.setdefault(name, {})
            for sample_name, labels, value in samples:
                into[(sample_name, labels)] = into.get((sample_name, labels), 0.0) + value
    return tuple(
        (name, meta[name][0], meta[name][1], tuple((s, ls, v) for (s, ls), v in sums[name].items()))
        for name in meta
    )


class WebhookMetricsCollector(Collector):
    """On the manager's registry: this process's webhook metrics plus what ``remote()`` returns (the
    worker processes' snapshots, retired ones included)."""

    def __init__(
        self, local: CollectorRegistry, remote: Callable[[], Sequence[Snapshot]] | None = None
    ) -> None:
        self.local = local
        self.remote = remote

    def collect(self) -> Iterator[Metric]:
        parts: list[Snapshot] = [snapshot(self.local)]
        if self.remote is not None:
            parts += self.remote()
        for name, typ, doc, samples in merge(parts):
            metric = Metric(name, doc, typ)
            for sample_name, labels, value in samples:
                metric.add_sample(sample_name, dict(labels), value)
            yield metric

    def describe(self) -> Iterator[Metric]:
        return iter(())  # the families are known only at collect time (workers may add label values)
