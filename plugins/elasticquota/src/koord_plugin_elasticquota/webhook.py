"""ElasticQuota validation served by koord-manager's webhook (Koordinator's
``validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``): ``validation.validate_quota`` on the object
against the quotas and pods the manager's informer holds; every problem found is in the denial."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.plugin import NoArgs
from koord_plugin_elasticquota.validation import validate_quota

__all__ = ["ElasticQuotaValidation"]


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
            raise Denied("; ".join(str(p) for p in problems))
