"""The pod enhanced validator (Koordinator's ``pod_enhanced_validator.go``, the last step of
``/validate-pod``; gate ``EnablePodEnhancedValidator``, alpha, off by default, under
``PodValidatingWebhook``).

Rules come from the ConfigMap ``koordinator-system/pod-enhanced-validator-config``: ``enable`` (``"true"``,
any case, turns it on) and ``rules``, a JSON list of ``{name, requiredLabels, namespaceWhitelist}``. A pod
created or updated outside a rule's whitelisted namespaces must carry every required label, unless it is
labelled ``pod.koordinator.sh/skip-enhanced-validation: "true"``. Koordinator polls the ConfigMap every five
minutes; here it is read from the manager's informer, so a change applies at once. A ConfigMap whose rules
do not parse is logged and the last good rules stay (Koordinator's ``handleConfigMapUpdate``); a missing one
means disabled.

In the framework, not a plugin: Koordinator has it in its core pod webhook, and it validates any pod.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.plugin import PluginArgs

__all__ = ["EnhancedValidatorConfig", "PodEnhancedValidation", "PodEnhancedValidationArgs", "parse_config"]

log = logging.getLogger("koord.manager.webhook")

LABEL_SKIP = "pod.koordinator.sh/skip-enhanced-validation"


class PodEnhancedValidationArgs(PluginArgs):
    """Where the rules are (Koordinator's ``--pod-enhanced-validator-config-namespace`` / ``-name``)."""

    config_namespace: str = "koordinator-system"
    """Namespace of the rules ConfigMap."""
    config_name: str = "pod-enhanced-validator-config"
    """Name of the rules ConfigMap."""


@dataclass(frozen=True)
class Rule:
    name: str
    required_labels: tuple[str, ...] = ()
    namespace_whitelist: frozenset[str] = frozenset()


@dataclass(frozen=True)
class EnhancedValidatorConfig:
    enable: bool = False
    rules: tuple[Rule, ...] = field(default_factory=tuple)


DISABLED = EnhancedValidatorConfig()


def parse_config(data: Mapping[str, Any]) -> EnhancedValidatorConfig:
    """The ConfigMap's ``data`` as a config (``ValueError`` when ``rules`` does not parse)."""
    enable = str(data.get("enable") or "").strip().lower() == "true"
    raw = data.get("rules")
    if raw is None:
        return EnhancedValidatorConfig(enable, ())
    try:
        items = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"failed to unmarshal validation rules: {exc}") from None
    if not isinstance(items, list):
        raise ValueError("failed to unmarshal validation rules: rules must be a JSON list")
    rules = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"failed to unmarshal validation rules: rules[{i}] must be an object")
        labels = item.get("requiredLabels") or []
        whitelist = item.get("namespaceWhitelist") or []
        if not all(isinstance(x, str) for x in [*labels, *whitelist]) or not isinstance(
            item.get("name", ""), str
        ):
            raise ValueError(
                f"failed to unmarshal validation rules: rules[{i}]: names and labels must be strings"
            )
        rules.append(Rule(item.get("name", ""), tuple(labels), frozenset(ns for ns in whitelist if ns)))
    return EnhancedValidatorConfig(enable, tuple(rules))


def missing_labels_error(labels: Mapping[str, Any], rule: Rule) -> str:
    """``validateRequiredLabels``: the error, ``""`` when every required label is there."""
    missing = [key for key in rule.required_labels if key not in labels]
    if not missing:
        return ""
    if len(missing) == 1:
        return f"required label '{missing[0]}' is missing"
    return f"required labels are missing: [{' '.join(missing)}]"


class PodEnhancedValidation(AdmissionHandler[PodEnhancedValidationArgs]):
    """Refuses pods missing the labels the configured rules require."""

    name = "PodEnhancedValidation"
    Args = PodEnhancedValidationArgs
    path: ClassVar[str] = "/validate-pod"
    order: ClassVar[int] = 90  # Koordinator runs it last
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    watches: ClassVar[tuple[str, ...]] = ("ConfigMap",)
    gate: ClassVar[str] = "PodValidatingWebhook"

    def __init__(self, args: PodEnhancedValidationArgs | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self._config: tuple[str, EnhancedValidatorConfig] = ("", DISABLED)

    def config(self) -> EnhancedValidatorConfig:
        cm = self.lister.get("ConfigMap", self.args.config_name, self.args.config_namespace)
        if cm is None:
            return DISABLED
        rv = str((cm.get("metadata") or {}).get("resourceVersion") or "")
        if rv and rv == self._config[0]:
            return self._config[1]
        data = cm.get("data") or {}
        try:
            parsed = parse_config(data if isinstance(data, Mapping) else {})
        except ValueError as exc:
            log.error("failed to parse config for pod-enhanced-validator, err=%s", exc)
            return self._config[1]
        self._config = (rv, parsed)
        return parsed

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if not self.gates.enabled("EnablePodEnhancedValidator"):
            return
        if request.operation not in ("CREATE", "UPDATE"):
            return
        config = self.config()
        if not config.enable:
            return
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(LABEL_SKIP) == "true":
            return
        namespace = str(meta.get("namespace") or request.namespace)
        for rule in config.rules:
            if namespace in rule.namespace_whitelist:
                continue
            error = missing_labels_error(labels, rule)
            if error:
                log.info(
                    "pod %s/%s: validation rule '%s' failed: %s",
                    namespace,
                    meta.get("name"),
                    rule.name,
                    error,
                )
                # Koordinator answers admission.Errored(400, err): the message is the error itself.
                raise Denied(error, 400)
