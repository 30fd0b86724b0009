"""The PodGroup kind (scheduling.sigs.k8s.io/v1alpha1, scheduler-plugins' CRD that Koordinator's
Coscheduling reads), contributed through the ``koord.kinds`` entry point (ADR 0004)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.field_checks import FieldChecks
from koord_framework.cluster.kinds import KindInfo


def check_pod_group(obj: Mapping[str, Any]) -> None:
    """minMember and scheduleTimeoutSeconds are non-negative integers, minResources a ResourceList."""
    c = FieldChecks()
    spec = c.mapping(obj.get("spec"), "spec")
    c.integer(spec.get("minMember"), "spec.minMember", minimum=0)
    c.integer(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", minimum=0)
    c.resources(spec.get("minResources"), "spec.minResources")


POD_GROUP = KindInfo(
    "PodGroup",
    "scheduling.sigs.k8s.io",
    "v1alpha1",
    "podgroups",
    True,
    validator=check_pod_group,
    status_subresource=False,
    approval="https://github.com/kubernetes-sigs/scheduler-plugins/pull/50",
    categories=("koordinator",),
)

KINDS = [POD_GROUP]
"""What the ``koord.kinds`` entry point names."""
