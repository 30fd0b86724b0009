"""The Reservation kind this distribution contributes (ADR 0004): registered through ``koord.kinds``,
checked as manifests load, with errors naming file, object and field (``KindConformance``)."""

from __future__ import annotations

from koord_plugin_reservation.kinds import KINDS

from koord_framework.testing.kinds import KindConformance


class TestKinds(KindConformance):
    kinds = KINDS
    refused = [
        (
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "Reservation",
                "metadata": {"name": "r"},
                "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}, "owners": []},
            },
            "spec.owners: a reservation needs at least one owner",
        ),
    ]
