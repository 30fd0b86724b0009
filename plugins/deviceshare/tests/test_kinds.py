"""The Device kind this distribution contributes (ADR 0004): registered through ``koord.kinds``,
checked as manifests load, with errors naming file, object and field (``KindConformance``)."""

from __future__ import annotations

from koord_plugin_deviceshare.kinds import KINDS

from koord_framework.testing.kinds import KindConformance


class TestKinds(KindConformance):
    kinds = KINDS
    refused = [
        (
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "Device",
                "metadata": {"name": "Node_1"},
                "spec": {"devices": []},
            },
            "metadata.name: 'Node_1' is not a valid DNS-1123 subdomain",
        ),
    ]
