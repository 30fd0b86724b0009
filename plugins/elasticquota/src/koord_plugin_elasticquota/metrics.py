"""ElasticQuota's metrics: every quota's limits and state as gauges, computed when scraped.

Koordinator's ``elastic_quota_status`` gauge (``metrics.go``, filled by ``syncElasticQuotaMetrics``): one
series per quota, resource and field, with the quota's tree, parent and is-parent as labels; cpu in
milli-cores, everything else in ``Value()`` units. Computed from the quota manager at scrape time, so it
costs nothing while scheduling and never goes stale.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from koord_plugin_elasticquota.quota_set import QuotaSet

__all__ = ["QuotaCollector", "register_quota_metrics"]

log = logging.getLogger(__name__)

STATUS_METRIC: Final = "koord_scheduler_elastic_quota_status"
FIELDS: Final = (
    ("runtime", "runtime"),
    ("request", "request"),
    ("childRequest", "child-request"),
    ("guaranteed", "guaranteed"),
    ("allocated", "allocated"),
    ("nonPreemptibleRequest", "non-preemptible-request"),
    ("nonPreemptibleUsed", "non-preemptible-used"),
    ("used", "used"),
    ("min", "min"),
    ("max", "max"),
    ("sharedWeight", "sharedWeight"),
)
"""(summary key, the ``field`` label as Koordinator spells it)."""


class QuotaCollector(Collector):
    def __init__(self, quotas: QuotaSet, profile: str) -> None:
        self.quotas = quotas
        self.profile = profile

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            STATUS_METRIC,
            "ElasticQuota current status: runtime, request, used, min, max, ... per quota and resource",
            labels=["profile", "name", "resource", "tree", "is_parent", "parent", "field"],
        )
        for name, summary in sorted(self.quotas.summaries(refresh=False).items()):
            tree, parent = str(summary["tree"]), str(summary["parent"])
            is_parent = "true" if summary["isParent"] else "false"
            for key, field in FIELDS:
                for resource, value in sorted(summary[key].items()):
                    family.add_metric([self.profile, name, resource, tree, is_parent, parent, field], value)
        yield family


def register_quota_metrics(
    registry: CollectorRegistry, quotas: QuotaSet, profile: str
) -> QuotaCollector | None:
    collector = QuotaCollector(quotas, profile)
    try:
        registry.register(collector)
    except ValueError as err:
        # A second profile with ElasticQuota in one scheduler: the first one's series stand for both.
        log.warning("ElasticQuota metrics of profile %s not registered: %s", profile, err)
        return None
    return collector
