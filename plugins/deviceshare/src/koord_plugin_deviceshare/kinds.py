"""The Device kind (scheduling.koordinator.sh/v1alpha1: one object per node, named after it, listing the
node's GPUs, RDMA NICs and FPGAs), contributed through the ``koord.kinds`` entry point (ADR 0004)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.field_checks import FieldChecks, check_subdomain_name
from koord_framework.cluster.kinds import KindInfo


def check_device(obj: Mapping[str, Any]) -> None:
    """The name is a node's (a DNS-1123 subdomain); every device has a type, and its minor, health and
    resources the types DeviceShare reads."""
    c = FieldChecks()
    check_subdomain_name(c, obj)
    spec = c.mapping(obj.get("spec"), "spec")
    for p, dev in c.items(spec.get("devices"), "spec.devices"):
        c.string(dev.get("type"), f"{p}.type", required=True)
        c.string(dev.get("uuid"), f"{p}.uuid")
        c.integer(dev.get("minor"), f"{p}.minor", minimum=0)
        c.integer(dev.get("moduleID"), f"{p}.moduleID")
        c.boolean(dev.get("health"), f"{p}.health")
        c.resources(dev.get("resources"), f"{p}.resources")
        c.mapping(dev.get("topology"), f"{p}.topology")


DEVICE = KindInfo(
    "Device",
    "scheduling.koordinator.sh",
    "v1alpha1",
    "devices",
    False,
    validator=check_device,
    status_subresource=False,
    categories=("koordinator",),
)

KINDS = [DEVICE]
"""What the ``koord.kinds`` entry point names."""
