"""ElasticQuota validation served by koord-manager's webhook (Koordinator's
``validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``): ``validation.validate_quota`` on the object
against the quotas and pods the manager's informer holds; every problem found is in the denial. And the
ElasticQuota rules of ``/validate-pod`` (``ElasticQuotaPodValidation``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.plugin import NoArgs
from koord_plugin_elasticquota.quota_object import (
    DEFAULT_QUOTA_NAME,
    LABEL_PREEMPTIBLE,
    LABEL_QUOTA_NAME,
    ElasticQuotaSpec,
)
from koord_plugin_elasticquota.validation import validate_quota

__all__ = ["ElasticQuotaPodValidation", "ElasticQuotaValidation", "quota_name_of_pod"]


class ElasticQuotaValidation(AdmissionHandler[NoArgs]):
    """Refuses an ElasticQuota whose min/max, parent or tree is wrong (Koordinator's topology checks)."""

    name = "ElasticQuotaValidation"
    Args = NoArgs
    path: ClassVar[str] = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
    mutating: ClassVar[bool] = False
    resources: ClassVar[tuple[str, ...]] = ("elasticquotas",)
    watches: ClassVar[tuple[str, ...]] = ("ElasticQuota", "Pod")
    gate: ClassVar[str] = "ElasticValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation not in ("CREATE", "UPDATE"):
            return
        existing = self.lister.list("ElasticQuota")
        pods = self.lister.list("Pod")
        problems = validate_quota(obj, existing, pods)
        if problems:
            # Koordinator's ElasticQuotaValidatingHandler: admission.Errored(400, err) for a failed check.
            raise Denied("; ".join(str(p) for p in problems), 400)


def _parse_specs(quotas: list[dict[str, Any]]) -> list[ElasticQuotaSpec]:
    specs = []
    for obj in quotas:
        try:
            specs.append(ElasticQuotaSpec.from_manifest(obj))
        except ValueError:
            continue  # a quota the topology could not take is not in it (as Koordinator's quotaInfoMap)
    return specs


def quota_name_of_pod(pod: Mapping[str, Any], specs: list[ElasticQuotaSpec], disable_default: bool) -> str:
    """Koordinator's webhook ``GetQuotaName``: the quota-name label; else (unless ``DisableDefaultQuota``)
    the ElasticQuota named after the pod's namespace in it, then the first quota listing the namespace in
    its namespaces annotation, then the default quota."""
    meta = pod.get("metadata") or {}
    name = str((meta.get("labels") or {}).get(LABEL_QUOTA_NAME) or "")
    if disable_default or name:
        return name
    namespace = str(meta.get("namespace") or "")
    for spec in specs:
        if spec.namespace == namespace and spec.name == namespace:
            return spec.name
    for spec in specs:
        if namespace in spec.namespaces:
            return spec.name
    return DEFAULT_QUOTA_NAME


class ElasticQuotaPodValidation(AdmissionHandler[NoArgs]):
    """The ElasticQuota rules of ``/validate-pod`` (Koordinator's ``QuotaMetaChecker.ValidatePod``): a pod
    may not be put in a parent quota (unless ``SupportParentQuotaSubmitPod``), and its preemptible label may
    not change."""

    name = "ElasticQuotaPodValidation"
    Args = NoArgs
    path: ClassVar[str] = "/validate-pod"
    order: ClassVar[int] = 30  # after the colocation-profile rules, as Koordinator runs them
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    watches: ClassVar[tuple[str, ...]] = ("ElasticQuota",)
    gate: ClassVar[str] = "PodValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation == "UPDATE":
            old = request.old_object
            if old is None:
                raise Denied("oldPod is nil for update operation", 400)
            old_label = ((old.get("metadata") or {}).get("labels") or {}).get(LABEL_PREEMPTIBLE)
            new_label = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_PREEMPTIBLE)
            if (old_label or "") != (new_label or ""):
                raise Denied("Preemptible label is forbidden modify now.", 400)
        elif request.operation != "CREATE":
            return
        if self.gates.enabled("SupportParentQuotaSubmitPod"):
            return
        specs = _parse_specs(self.lister.list("ElasticQuota"))
        name = quota_name_of_pod(obj, specs, self.gates.enabled("DisableDefaultQuota"))
        by_name = {s.name: s for s in specs}
        if not name or name == DEFAULT_QUOTA_NAME or name not in by_name:
            return
        if by_name[name].is_parent:
            pod_name = (obj.get("metadata") or {}).get("name") or ""
            raise Denied(f"pod can not be linked to a parentQuotaGroup,quota:{name}, pod:{pod_name}", 400)
