"""DefaultEvictor against the platform's descheduler contracts (the framework's conformance kit): its Filter
and PreEvictionFilter answer for every pod of random clusters, and Evict refuses only by returning False or
raising ``EvictionFailed``. Run twice: with empty args and with most checks switched on."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_defaultevictor import DefaultEvictor

from koord_framework.testing.conformance import DeschedulerPluginConformance

STRICT = {
    "nodeFit": True,
    "minReplicas": 2,
    "priorityThreshold": {"value": 8000},
    "labelSelector": {"matchExpressions": [{"key": "never-set", "operator": "DoesNotExist"}]},
    "podProtections": {"extraEnabled": ["PodsWithPVC"]},
}
"""Every kind of check on, yet admitting some of the random clusters' pods (below priority 8000, owners
with two or more pods), so Evict runs too."""


class TestDefaultEvictorConformance(DeschedulerPluginConformance):
    plugin_class = DefaultEvictor
    valid_args: ClassVar[list[dict[str, Any]]] = [
        STRICT,
        {"evictLocalStoragePods": True, "ignorePvcPods": True, "nodeSelector": "zone in (a,b)"},
        {"apiVersion": "descheduler/v1alpha2", "kind": "DefaultEvictorArgs", "noEvictionPolicy": "Mandatory"},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"priorityThreshold": {"value": 1, "name": "high"}},
        {"evictLocalStoragePods": True, "podProtections": {"defaultDisabled": ["DaemonSetPods"]}},
        {"podProtections": {"extraEnabled": ["DaemonSetPods"]}},
        {"noEvictionPolicy": "Sometimes"},
        {"nodeSelector": "a in b"},
        {"minReplicas": -1},
    ]


class TestDefaultEvictorConformanceStrict(TestDefaultEvictorConformance):
    harness_args: ClassVar[dict[str, Any] | None] = STRICT
