"""MigrationController against the platform's descheduler contracts (the framework's conformance kit): its
Filter and PreEvictionFilter answer for every pod of random clusters, and Evict (which creates
PodMigrationJobs) refuses only by returning False or raising ``EvictionFailed``."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_migration import MigrationController

from koord_framework.testing.conformance import DeschedulerPluginConformance


class TestMigrationControllerConformance(DeschedulerPluginConformance):
    plugin_class = MigrationController
    harness_args: ClassVar[dict[str, Any] | None] = {
        "defaultJobMode": "EvictDirectly",
        "nodeFit": True,
        # The random clusters' pods name ReplicaSets the cluster does not hold; skip the workload gates so
        # Evict is reached for some of them.
        "skipEvictionGates": ["ExpectedReplicas", "MaxMigratingPerWorkload", "MaxUnavailablePerWorkload"],
    }
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"evictQPS": "10", "evictBurst": 1, "namespaces": {"exclude": ["kube-system"]}},
        {"maxMigratingPerWorkload": "20%", "maxUnavailablePerWorkload": 2, "defaultJobMode": "EvictDirectly"},
        {"objectLimiters": {"namespace": {"duration": "1m", "maxMigrating": 2}}, "defaultJobTTL": "10m"},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"evictQPS": 0},
        {"evictQPS": "fast"},
        {"evictBurst": 0},
        {"maxMigratingPerWorkload": "abc"},
        {"defaultJobMode": "Sometimes"},
        {"skipEvictionGates": ["NoSuchGate"]},
        {"defaultJobTTL": "-1s"},
    ]
