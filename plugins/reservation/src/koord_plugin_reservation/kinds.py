"""The Reservation kind (scheduling.koordinator.sh/v1alpha1), contributed through the ``koord.kinds``
entry point (ADR 0004). The scheduler framework's reservation hooks read and patch Reservations only for
the reserve pods this plugin creates, so the kind is this distribution's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.field_checks import FieldChecks, check_pod_template
from koord_framework.cluster.kinds import KindInfo, PrinterColumn


def check_reservation(obj: Mapping[str, Any]) -> None:
    """A template with a valid pod spec, at least one owner, a Go duration ``ttl``, an RFC 3339
    ``expires``, and the status fields the scheduler reads."""
    c = FieldChecks()
    spec = c.mapping(obj.get("spec"), "spec", required=True)
    check_pod_template(c, spec.get("template"), "spec.template", spec_required=True)
    owners = c.items(spec.get("owners"), "spec.owners", required=True)
    if not owners:
        raise c.fail("spec.owners", "a reservation needs at least one owner")
    for p, owner in owners:
        c.mapping(owner.get("object"), f"{p}.object")
        c.mapping(owner.get("controller"), f"{p}.controller")
        c.mapping(owner.get("labelSelector"), f"{p}.labelSelector")
    c.duration(spec.get("ttl"), "spec.ttl")
    c.time(spec.get("expires"), "spec.expires")
    c.boolean(spec.get("allocateOnce"), "spec.allocateOnce")
    c.boolean(spec.get("unschedulable"), "spec.unschedulable")
    status = c.mapping(obj.get("status"), "status")
    c.string(status.get("phase"), "status.phase")
    c.string(status.get("nodeName"), "status.nodeName")
    c.resources(status.get("allocatable"), "status.allocatable")
    c.resources(status.get("allocated"), "status.allocated")


RESERVATION = KindInfo(
    "Reservation",
    "scheduling.koordinator.sh",
    "v1alpha1",
    "reservations",
    False,
    validator=check_reservation,
    printer_columns=(
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        PrinterColumn("Node", ".status.nodeName"),
        PrinterColumn("TTL", ".spec.ttl"),
        PrinterColumn("Expires", ".spec.expires"),
    ),
    categories=("koordinator",),
)

KINDS = [RESERVATION]
"""What the ``koord.kinds`` entry point names."""
