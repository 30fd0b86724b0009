"""What a snapshot holds: the kinds the scheduler, descheduler, koordlet and manager read, in dump order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from koord_framework.cluster.kinds import KindInfo

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

CONFIG_MAP_KIND = "ConfigMap"
"""Named in ``--kinds``, it selects the components' ConfigMaps."""


def select_kinds(names: Iterable[str], registry: Mapping[str, KindInfo]) -> tuple[str, ...]:
    """The snapshot's kinds (and ``ConfigMap``) that ``--kinds`` names, in dump order: each name a kind or
    its plural as the kinds registry spells them, case-insensitively. Raises ``ValueError`` naming the first
    unknown name and listing the known ones."""
    known: dict[str, str] = {}
    for kind in (*SNAPSHOT_KINDS, CONFIG_MAP_KIND):
        known[kind.lower()] = kind
        info = registry.get(kind)
        if info is not None:
            known[info.plural.lower()] = kind
    wanted = set()
    for name in names:
        found = known.get(name.strip().lower())
        if found is None:
            listing = ", ".join(_spelling(k, registry) for k in (*SNAPSHOT_KINDS, CONFIG_MAP_KIND))
            raise ValueError(f"unknown kind {name.strip()!r}; known: {listing}")
        wanted.add(found)
    return tuple(k for k in (*SNAPSHOT_KINDS, CONFIG_MAP_KIND) if k in wanted)


def _spelling(kind: str, registry: Mapping[str, KindInfo]) -> str:
    info = registry.get(kind)
    return f"{kind} ({info.plural})" if info is not None else kind
