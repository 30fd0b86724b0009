"""``DefaultEvictorArgs``: kubernetes-sigs/descheduler's ``defaultevictor`` args (v0.35), as Koordinator
decodes them (``apiVersion: descheduler/v1alpha2``, ``kind: DefaultEvictorArgs``).

Two ways to say which pods are protected from eviction:

* the deprecated booleans (``evictLocalStoragePods``, ``evictDaemonSetPods``, ``evictSystemCriticalPods``,
  ``evictFailedBarePods``, ``ignorePvcPods``, ``ignorePodsWithoutPDB``), or
* ``podProtections``: default protections (PodsWithLocalStorage, SystemCriticalPods, FailedBarePods,
  DaemonSetPods) minus ``defaultDisabled``, plus ``extraEnabled`` ones (PodsWithPVC, PodsWithoutPDB,
  PodsWithResourceClaims).

Mixing the two is refused, as upstream's validation does.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from koord_framework.api.selectors import SelectorError
from koord_framework.config.common import ConfigModel, Duration, LabelSelector
from koord_framework.descheduler.args import (
    PriorityThreshold,
    fail,
    priority_threshold_problems,
    selector_problems,
)
from koord_framework.descheduler.selectors import parse_selector
from koord_framework.plugin import PluginArgs

PodProtection = Literal[
    "PodsWithLocalStorage",
    "DaemonSetPods",
    "SystemCriticalPods",
    "FailedBarePods",
    "PodsWithPVC",
    "PodsWithoutPDB",
    "PodsWithResourceClaims",
]
DEFAULT_PROTECTIONS: tuple[PodProtection, ...] = (
    "PodsWithLocalStorage",
    "SystemCriticalPods",
    "FailedBarePods",
    "DaemonSetPods",
)
"""Enabled unless listed in ``podProtections.defaultDisabled``."""
EXTRA_PROTECTIONS: tuple[PodProtection, ...] = ("PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims")
"""Enabled only when listed in ``podProtections.extraEnabled``."""


class ProtectedStorageClass(ConfigModel):
    name: str
    """A StorageClass whose PVCs protect a pod."""


class PodsWithPVCConfig(ConfigModel):
    protected_storage_classes: list[ProtectedStorageClass] = []
    """Only PVCs of these classes protect a pod; empty: every PVC does."""


class PodProtectionsConfig(ConfigModel):
    pods_with_pvc: PodsWithPVCConfig | None = Field(default=None, alias="PodsWithPVC")
    """Settings of the PodsWithPVC protection."""


class PodProtections(ConfigModel):
    extra_enabled: list[PodProtection] = []
    """Protections beyond the defaults: PodsWithPVC, PodsWithoutPDB, PodsWithResourceClaims."""
    default_disabled: list[PodProtection] = []
    """Default protections to turn off: PodsWithLocalStorage, DaemonSetPods, SystemCriticalPods,
    FailedBarePods."""
    config: PodProtectionsConfig | None = None
    """Settings of individual protections (upstream ``podProtections.config``). Default: unset."""


class DefaultEvictorArgs(PluginArgs):
    """Which pods the descheduler may evict, and the checks made right before evicting."""

    node_selector: str = ""
    """Label-selector string (``a=b,c!=d``) of the nodes nodeFit considers; empty: every Ready node."""
    label_selector: LabelSelector | None = None
    """Only pods matching this selector may be evicted; unset: any pod."""
    namespace_label_selector: LabelSelector | None = None
    """PreEvictionFilter: only pods in namespaces whose labels match may be evicted; applied only when
    ``matchLabels`` is non-empty (as upstream)."""
    priority_threshold: PriorityThreshold | None = None
    """Only pods with a priority below this value (or PriorityClass) may be evicted; ignored when
    system-critical pods are evictable."""
    node_fit: bool = False
    """PreEvictionFilter: the pod must fit another Ready node (selectors, taints, requests, schedulable)."""
    min_replicas: int = Field(default=0, ge=0)
    """A pod whose owner has fewer pods than this is kept (values 0 and 1 disable the check)."""
    min_pod_age: Duration | None = None
    """A pod running for less than this (since ``status.startTime``) is kept; unset: no minimum."""
    no_eviction_policy: Literal["", "Preferred", "Mandatory"] = ""
    """``Mandatory``: pods annotated ``descheduler.alpha.kubernetes.io/prefer-no-eviction`` are kept."""
    pod_protections: PodProtections = PodProtections()
    """The protection policies (see the module docs); use either these or the deprecated booleans."""
    evict_local_storage_pods: bool = False
    """Deprecated: disable the PodsWithLocalStorage protection (hostPath/emptyDir volumes)."""
    evict_daemon_set_pods: bool = False
    """Deprecated: disable the DaemonSetPods protection."""
    evict_system_critical_pods: bool = False
    """Deprecated: disable the SystemCriticalPods protection (priority >= 2000000000, and the threshold)."""
    ignore_pvc_pods: bool = False
    """Deprecated: enable the PodsWithPVC protection."""
    ignore_pods_without_pdb: bool = Field(default=False, alias="ignorePodsWithoutPDB")
    """Deprecated: enable the PodsWithoutPDB protection."""
    evict_failed_bare_pods: bool = False
    """Deprecated: let bare pods (no ownerReferences) be evicted when their phase is Failed."""

    @model_validator(mode="after")
    def _validate(self) -> DefaultEvictorArgs:
        problems: list[tuple[tuple[str | int, ...], str, object]] = priority_threshold_problems(
            self.priority_threshold
        )
        deprecated = (
            self.evict_local_storage_pods
            or self.evict_daemon_set_pods
            or self.evict_system_critical_pods
            or self.ignore_pvc_pods
            or self.evict_failed_bare_pods
            or self.ignore_pods_without_pdb
        )
        pp = self.pod_protections
        if deprecated and (pp.extra_enabled or pp.default_disabled):
            problems.append(
                (
                    ("podProtections",),
                    "cannot use Deprecated fields alongside PodProtections.ExtraEnabled or "
                    "PodProtections.DefaultDisabled",
                    None,
                )
            )
        for i, p in enumerate(pp.extra_enabled):
            if p not in EXTRA_PROTECTIONS:
                problems.append(
                    (
                        ("podProtections", "extraEnabled", i),
                        f"invalid pod protection policy in ExtraEnabled: {p!r}. "
                        f"Valid options are: {list(EXTRA_PROTECTIONS)}",
                        p,
                    )
                )
        for i, p in enumerate(pp.default_disabled):
            if p not in DEFAULT_PROTECTIONS:
                problems.append(
                    (
                        ("podProtections", "defaultDisabled", i),
                        f"invalid pod protection policy in DefaultDisabled: {p!r}. "
                        f"Valid options are: {list(DEFAULT_PROTECTIONS)}",
                        p,
                    )
                )
        if len(set(pp.default_disabled)) != len(pp.default_disabled):
            problems.append(
                (
                    ("podProtections", "defaultDisabled"),
                    "PodProtections.DefaultDisabled contains duplicate entries",
                    None,
                )
            )
        if len(set(pp.extra_enabled)) != len(pp.extra_enabled):
            problems.append(
                (
                    ("podProtections", "extraEnabled"),
                    "PodProtections.ExtraEnabled contains duplicate entries",
                    None,
                )
            )
        if (
            "PodsWithPVC" in pp.extra_enabled
            and pp.config is not None
            and pp.config.pods_with_pvc is not None
        ):
            for i, sc in enumerate(pp.config.pods_with_pvc.protected_storage_classes):
                if not sc.name:
                    problems.append(
                        (
                            ("podProtections", "config", "PodsWithPVC", "protectedStorageClasses", i, "name"),
                            f"PodProtections.Config.PodsWithPVC.ProtectedStorageClasses[{i}] "
                            "name cannot be empty",
                            "",
                        )
                    )
        problems += selector_problems(self.label_selector, ("labelSelector",))
        problems += selector_problems(self.namespace_label_selector, ("namespaceLabelSelector",))
        try:
            parse_selector(self.node_selector)
        except SelectorError as err:
            problems.append((("nodeSelector",), str(err), self.node_selector))
        fail("DefaultEvictorArgs", problems)
        return self

    def effective_protections(self) -> list[PodProtection]:
        """``getEffectivePodProtections``: the new-style list when used, else the deprecated booleans."""
        pp = self.pod_protections
        if pp.default_disabled or pp.extra_enabled:
            out = [p for p in DEFAULT_PROTECTIONS if p not in pp.default_disabled]
            return out + list(pp.extra_enabled)
        legacy: list[PodProtection] = []
        if not self.evict_local_storage_pods:
            legacy.append("PodsWithLocalStorage")
        if not self.evict_daemon_set_pods:
            legacy.append("DaemonSetPods")
        if not self.evict_system_critical_pods:
            legacy.append("SystemCriticalPods")
        if not self.evict_failed_bare_pods:
            legacy.append("FailedBarePods")
        if self.ignore_pvc_pods:
            legacy.append("PodsWithPVC")
        if self.ignore_pods_without_pdb:
            legacy.append("PodsWithoutPDB")
        return legacy
