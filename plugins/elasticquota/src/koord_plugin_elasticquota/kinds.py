"""The ElasticQuota kind (scheduling.sigs.k8s.io/v1alpha1, scheduler-plugins' CRD that Koordinator
serves), contributed through the ``koord.kinds`` entry point (ADR 0004): a cluster folder's quotas load
only when this distribution is installed, and are checked here as the API server would hold them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.field_checks import FieldChecks
from koord_framework.cluster.kinds import KindInfo


def check_elastic_quota(obj: Mapping[str, Any]) -> None:
    """min, max and status.used are ResourceLists whose quantities parse."""
    c = FieldChecks()
    spec = c.mapping(obj.get("spec"), "spec")
    c.resources(spec.get("min"), "spec.min")
    c.resources(spec.get("max"), "spec.max")
    status = c.mapping(obj.get("status"), "status")
    c.resources(status.get("used"), "status.used")


ELASTIC_QUOTA = KindInfo(
    "ElasticQuota",
    "scheduling.sigs.k8s.io",
    "v1alpha1",
    "elasticquotas",
    True,
    validator=check_elastic_quota,
    status_subresource=False,
    approval="https://github.com/kubernetes-sigs/scheduler-plugins/pull/52",
    categories=("koordinator",),
)


def check_elastic_quota_profile(obj: Mapping[str, Any]) -> None:
    """spec.quotaName a string, spec.nodeSelector a label selector object, quotaLabels a string map."""
    c = FieldChecks()
    spec = c.mapping(obj.get("spec"), "spec")
    c.string(spec.get("quotaName"), "spec.quotaName")
    c.selector(spec.get("nodeSelector"), "spec.nodeSelector")
    c.string_map(spec.get("quotaLabels"), "spec.quotaLabels")


ELASTIC_QUOTA_PROFILE = KindInfo(
    "ElasticQuotaProfile",
    "quota.koordinator.sh",
    "v1alpha1",
    "elasticquotaprofiles",
    True,
    validator=check_elastic_quota_profile,
    status_subresource=False,
    short_names=("eqp",),
)
"""Koordinator's quota profile (apis/quota/v1alpha1): the nodes of a quota tree; the ``/mutate-pod`` step of
``MultiQuotaTree`` reads its nodeSelector."""

KINDS = [ELASTIC_QUOTA, ELASTIC_QUOTA_PROFILE]
"""What the ``koord.kinds`` entry point names."""
