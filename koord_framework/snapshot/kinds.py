"""What a snapshot holds: the kinds the scheduler, descheduler, koordlet and manager read, in dump order."""

from __future__ import annotations

SNAPSHOT_KINDS: tuple[str, ...] = (
    "Node",
    "Pod",
    "NodeMetric",
    "NodeSLO",
    "NodeResourceTopology",
    "Device",
    "ElasticQuota",
    "PodGroup",
    "Reservation",
    "PodMigrationJob",
    "PodDisruptionBudget",
    # Owners of pods: the descheduler's evictor and the migration controller look pods' owners up.
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "PriorityClass",
    "ClusterColocationProfile",
)
"""Kinds listed in full (every namespace), in the order they are dumped."""

CONFIG_MAPS: tuple[str, ...] = (
    "koord-scheduler-config",
    "koord-descheduler-config",
    "slo-controller-config",
)
"""The components' ConfigMaps, read by name from ``--config-namespace`` (default Koordinator's
``koordinator-system``)."""

DEFAULT_CONFIG_NAMESPACE = "koordinator-system"
