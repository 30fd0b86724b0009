"""Pod binding admission (Koordinator's ``pod/validating/binding_admission.go``, ``/validate-pod-binding``,
gate ``BindingAdmissionWebhook``, alpha, off by default).

During a move from another scheduler to koord-scheduler, only the listed schedulers may bind pods: a
``pods/binding`` CREATE whose requesting user name contains none of ``user_names`` is refused, unless the
check is off (no user names), the pod's namespace is excluded or out of the enforced namespaces, the pod
carries one of the bypass labels or annotations (presence is enough), or the check is a dry run (would-be
denials only logged and counted). The webhook's failure policy is ``Ignore``: bindings go on when the
manager is unreachable. In the framework: Koordinator has it in its core pod webhook.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from koord_framework.manager.webhook.admission import (
    AdmissionHandler,
    AdmissionRequest,
    Denied,
    FailurePolicy,
)
from koord_framework.manager.webhook.metrics import PROCESS
from koord_framework.plugin import PluginArgs

__all__ = ["DECISIONS", "BindingAdmission", "BindingAdmissionArgs", "parse_list"]

log = logging.getLogger("koord.manager.webhook")

DECISIONS = PROCESS.binding_decisions
"""Koordinator's ``koord_manager_webhook_binding_admission_decisions_total{decision}``, in the process
answering the admission (summed over the worker processes on the manager's ``/metrics``)."""

DENIED_MESSAGE = "binding denied: username is not in the allowed list"


def parse_list(text: str) -> list[str]:
    """A comma-separated flag: items trimmed, empty ones dropped (Koordinator's ``parseList``)."""
    return [item.strip() for item in text.split(",") if item.strip()]


class BindingAdmissionArgs(PluginArgs):
    """Koordinator's ``--binding-admission-*`` flags (the manager's flags of the same names)."""

    user_name: str = ""
    """Comma-separated substrings of the allowed requesting user names; empty turns the check off."""
    dry_run: bool = False
    """Allow everything, log and count what would be denied."""
    namespaces: str = ""
    """Comma-separated namespaces enforced; empty: none; ``*``: all."""
    exclude_namespaces: str = "kube-system"
    """Comma-separated namespaces always allowed."""
    bypass_labels: str = "koordinator.sh/binding-admission-bypass"
    """Comma-separated pod label keys whose presence allows the binding."""
    bypass_annotations: str = ""
    """Comma-separated pod annotation keys whose presence allows the binding."""


class BindingAdmission(AdmissionHandler[BindingAdmissionArgs]):
    """Refuses pod bindings requested by users outside the allowed list."""

    name = "BindingAdmission"
    Args = BindingAdmissionArgs
    path: ClassVar[str] = "/validate-pod-binding"
    failure_policy: ClassVar[FailurePolicy] = "Ignore"
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    watches: ClassVar[tuple[str, ...]] = ("Pod",)
    gate: ClassVar[str] = "BindingAdmissionWebhook"

    def __init__(self, args: BindingAdmissionArgs | dict[str, Any] | None = None) -> None:
        super().__init__(args)
        a = self.args
        self.user_names = parse_list(a.user_name)
        self.all_namespaces = a.namespaces == "*"
        self.namespaces = frozenset() if self.all_namespaces else frozenset(parse_list(a.namespaces))
        self.excluded = frozenset(parse_list(a.exclude_namespaces))
        self.bypass_labels = frozenset(parse_list(a.bypass_labels))
        self.bypass_annotations = frozenset(parse_list(a.bypass_annotations))

    def handles(self, request: AdmissionRequest) -> bool:
        # Only the binding subresource of pods (the base class ignores every subresource).
        return request.resource.resource == "pods" and request.sub_resource == "binding"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if not self.gates.enabled("BindingAdmissionWebhook") or not self.user_names:
            return
        if request.operation != "CREATE":
            return
        username = str(request.user_info.get("username") or "")
        if any(name in username for name in self.user_names):
            DECISIONS.labels("allowed_username").inc()
            return
        namespace = request.namespace
        key = f"{namespace}/{request.name}"
        if namespace in self.excluded:
            DECISIONS.labels("excluded_ns").inc()
            return
        if not self.all_namespaces:
            if not self.namespaces:
                return
            if namespace not in self.namespaces:
                DECISIONS.labels("out_of_scope").inc()
                return
        pod = self._pod(namespace, request.name)
        if pod is None:
            log.info("binding admission: pod %s not in the cache, allowing", key)
            return  # fail open, as Koordinator on a cache miss
        meta = pod.get("metadata") or {}
        if any(k in (meta.get("labels") or {}) for k in self.bypass_labels):
            DECISIONS.labels("bypass_label").inc()
            return
        if any(k in (meta.get("annotations") or {}) for k in self.bypass_annotations):
            DECISIONS.labels("bypass_annotation").inc()
            return
        if self.args.dry_run:
            log.info(
                "binding admission [DRY-RUN]: would deny pod %s, username=%r not in allowlist names=%s",
                key,
                username,
                self.user_names,
            )
            DECISIONS.labels("dry_run").inc()
            return
        log.info(
            "binding admission denied: pod %s, username=%r not in allowlist %s",
            key,
            username,
            self.user_names,
        )
        DECISIONS.labels("denied").inc()
        raise Denied(DENIED_MESSAGE)  # admission.Denied: 403

    def _pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.lister.get("Pod", name, namespace)
        except Exception as exc:  # a cache read error lets the binding through (Koordinator fails open)
            log.info(
                "binding admission: failed to get pod %s/%s from cache, fail-open: %s", namespace, name, exc
            )
            return None
