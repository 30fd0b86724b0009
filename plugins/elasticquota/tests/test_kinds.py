"""The ElasticQuota and ElasticQuotaProfile kinds this distribution contributes (ADR 0004): registered
through ``koord.kinds``, checked as manifests load, with errors naming file, object and field
(``KindConformance``)."""

from __future__ import annotations

from koord_plugin_elasticquota.kinds import KINDS

from koord_framework.testing.kinds import KindConformance


class TestKinds(KindConformance):
    kinds = KINDS
    refused = [
        (
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {"namespace": "team", "name": "q"},
                "spec": {"max": {"cpu": "lots"}},
            },
            "spec.max.cpu: ",
        ),
        (
            {
                "apiVersion": "quota.koordinator.sh/v1alpha1",
                "kind": "ElasticQuotaProfile",
                "metadata": {"namespace": "team", "name": "p"},
                "spec": {"quotaName": "q", "nodeSelector": {"matchLabels": {"pool": 1}}},
            },
            "spec.nodeSelector.matchLabels",
        ),
    ]
