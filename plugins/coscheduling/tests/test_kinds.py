"""The PodGroup kind this distribution contributes (ADR 0004): registered through ``koord.kinds``,
checked as manifests load, with errors naming file, object and field (``KindConformance``)."""

from __future__ import annotations

from koord_plugin_coscheduling.kinds import KINDS

from koord_framework.testing.kinds import KindConformance


class TestKinds(KindConformance):
    kinds = KINDS
    refused = [
        (
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"namespace": "team", "name": "pg"},
                "spec": {"minMember": -1},
            },
            "spec.minMember: must be greater than or equal to 0",
        ),
    ]
