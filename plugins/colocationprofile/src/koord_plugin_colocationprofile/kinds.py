"""The ClusterColocationProfile kind (config.koordinator.sh/v1alpha1), contributed through the ``koord.kinds``
entry point (ADR 0004): profiles in a cluster folder load only when this distribution is installed, and are
checked here as the mutating webhook reads them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.field_checks import FieldChecks
from koord_framework.cluster.kinds import KindInfo

__all__ = ["CLUSTER_COLOCATION_PROFILE", "KINDS", "check_colocation_profile"]

QOS_CLASSES = ("LSE", "LSR", "LS", "BE", "SYSTEM")


def check_colocation_profile(obj: Mapping[str, Any]) -> None:
    """Selectors parse; qosClass is one of Koordinator's; the names, priority, maps and probability have
    their types."""
    c = FieldChecks()
    spec = c.mapping(obj.get("spec"), "spec")
    c.selector(spec.get("namespaceSelector"), "spec.namespaceSelector")
    c.selector(spec.get("selector"), "spec.selector")
    c.string(spec.get("qosClass"), "spec.qosClass", choices=QOS_CLASSES)
    c.string(spec.get("priorityClassName"), "spec.priorityClassName")
    c.string(spec.get("schedulerName"), "spec.schedulerName")
    c.integer(spec.get("koordinatorPriority"), "spec.koordinatorPriority")
    for key in ("labels", "annotations", "labelKeysMapping", "annotationKeysMapping", "labelSuffixes"):
        c.string_map(spec.get(key), f"spec.{key}")
    c.int_or_percent(spec.get("probability"), "spec.probability")
    c.mapping(spec.get("patch"), "spec.patch")


CLUSTER_COLOCATION_PROFILE = KindInfo(
    "ClusterColocationProfile",
    "config.koordinator.sh",
    "v1alpha1",
    "clustercolocationprofiles",
    False,
    validator=check_colocation_profile,
    categories=("koordinator",),
)

KINDS = [CLUSTER_COLOCATION_PROFILE]
"""What the ``koord.kinds`` entry point names."""
