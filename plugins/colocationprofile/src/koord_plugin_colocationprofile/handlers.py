"""The pod webhooks, as koord-manager admission handlers (entry-point group ``koord.manager.webhooks``).

``/mutate-pod`` (Koordinator's ``PodMutatingHandler.handleCreate``, on CREATE only):
``ClusterColocationProfile`` (order 10), then ``ExtendedResourceSpec`` (order 20).
``/validate-pod``: ``PodColocationValidation`` (Koordinator's ``clusterColocationProfileValidatingPod``).
``/mutate-reservation``: ``ReservationColocationProfile`` (Koordinator's reservation webhook, gate
``ReservationMutatingWebhook``): here because it applies the profiles this distribution owns.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, ClassVar

from koord_framework.api.selectors import LabelSelector
from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.plugin import NoArgs
from koord_plugin_colocationprofile.mutation import (
    apply_profile,
    apply_profile_to_reservation,
    mutate_extended_resource_spec,
    mutate_pod_resource_spec,
)
from koord_plugin_colocationprofile.profile import ColocationProfile, ProfileError, parse_profile
from koord_plugin_colocationprofile.validation import validate_pod

__all__ = [
    "ClusterColocationProfile",
    "ExtendedResourceSpec",
    "PodColocationValidation",
    "ReservationColocationProfile",
]

KIND = "ClusterColocationProfile"


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


class _ProfileCache:
    """Profiles parsed once per resourceVersion (hot path: every admission lists them all)."""

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, str], ColocationProfile] = {}

    def get(self, obj: Mapping[str, Any]) -> ColocationProfile:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("name") or ""), str(meta.get("resourceVersion") or ""))
        found = self._parsed.get(key)
        if found is None or not key[1]:
            found = parse_profile(obj)
            if key[1]:
                if len(self._parsed) > 4096:
                    self._parsed.clear()
                self._parsed[key] = found
        return found


class ClusterColocationProfile(AdmissionHandler[NoArgs]):
    """Applies every matching ClusterColocationProfile to a pod being created, then turns a batch (or mid)
    pod's cpu / memory into ``kubernetes.io/batch-*`` (or ``mid-*``) resources."""

    name = "ClusterColocationProfile"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-pod"
    mutating: ClassVar[bool] = True
    order: ClassVar[int] = 10
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    watches: ClassVar[tuple[str, ...]] = (KIND, "Namespace", "PriorityClass")
    gate: ClassVar[str] = "PodMutatingWebhook"

    def __init__(self, args: NoArgs | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.rand_intn = random.Random().randrange  # randIntnFn: replaced by tests
        self._profiles = _ProfileCache()

    def _profile(self, obj: Mapping[str, Any]) -> ColocationProfile:
        return self._profiles.get(obj)

    def _matches(self, selector: LabelSelector | None, error: str, labels: Mapping[str, str]) -> bool:
        # Koordinator skips a profile only when the selector parsed and did not match: a selector that does
        # not parse, like a namespace that cannot be read, does not exclude it.
        if selector is None:
            return True
        if error:
            return True
        return selector.empty() or selector.matches(labels)

    def matching(self, pod: Mapping[str, Any]) -> list[ColocationProfile]:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        matched = []
        for obj in self.lister.list(KIND):
            profile = self._profile(obj)
            if profile.namespace_selector is not None and not profile.namespace_selector.empty():
                ns = self.lister.get("Namespace", namespace)
                if ns is not None and not self._matches(
                    profile.namespace_selector, profile.namespace_selector_error, _labels(ns)
                ):
                    continue
            if not self._matches(profile.selector, profile.selector_error, _labels(pod)):
                continue
            matched.append(profile)
        return sorted(matched, key=lambda p: p.name)

    def skip(self, profile: ColocationProfile) -> bool:
        """``shouldSkipProfile``: probability 0, or not 100 and ``randIntn(100) > percent``."""
        percent = profile.percent()
        return percent == 0 or (percent != 100 and self.rand_intn(100) > percent)

    def mutate(self, pod: dict[str, Any]) -> bool:
        """``clusterColocationProfileMutatingPod`` on ``pod`` (in place); whether it changed."""
        profiles = self.matching(pod)
        if not profiles:
            return False
        skip_resources = False
        mutated = False
        for profile in profiles:
            if profile.skip_update_resource:
                skip_resources = True
            if self.skip(profile):
                continue
            out = apply_profile(pod, profile, lambda name: self.lister.get("PriorityClass", name))
            if out is not pod:
                pod.clear()
                pod.update(out)
            mutated = True
        if skip_resources or self.gates.enabled("ColocationProfileSkipMutatingResources"):
            return mutated
        return mutate_pod_resource_spec(pod) or mutated

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation != "CREATE":
            return
        try:
            self.mutate(obj)
        except ProfileError as exc:
            # A profile that cannot be applied is the manager's problem, not the pod's: failure policy.
            raise RuntimeError(str(exc)) from None


class ReservationColocationProfile(AdmissionHandler[NoArgs]):
    """Applies every matching ClusterColocationProfile to a Reservation being created (Koordinator's
    ``/mutate-reservation``; no namespace selector, no resource rewrite)."""

    name = "ReservationColocationProfile"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-reservation"
    mutating: ClassVar[bool] = True
    order: ClassVar[int] = 10
    resources: ClassVar[tuple[str, ...]] = ("reservations",)
    watches: ClassVar[tuple[str, ...]] = (KIND, "PriorityClass")
    gate: ClassVar[str] = "ReservationMutatingWebhook"

    def __init__(self, args: NoArgs | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.rand_intn = random.Random().randrange  # randIntnFn: replaced by tests
        self._profiles = _ProfileCache()

    def matching(self, reservation: Mapping[str, Any]) -> list[ColocationProfile]:
        matched = []
        for obj in self.lister.list(KIND):
            profile = self._profiles.get(obj)
            # Koordinator skips only a selector that parsed and did not match (an empty one matches all).
            selector = profile.selector
            if (
                selector is not None
                and not profile.selector_error
                and not selector.empty()
                and not selector.matches(_labels(reservation))
            ):
                continue
            matched.append(profile)
        return sorted(matched, key=lambda p: p.name)

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation != "CREATE":
            return
        try:
            for profile in self.matching(obj):
                percent = profile.percent()
                if percent == 0 or (percent != 100 and self.rand_intn(100) > percent):
                    continue
                out = apply_profile_to_reservation(
                    obj, profile, lambda name: self.lister.get("PriorityClass", name)
                )
                if out is not obj:
                    obj.clear()
                    obj.update(out)
        except ProfileError as exc:
            raise RuntimeError(str(exc)) from None


class ExtendedResourceSpec(AdmissionHandler[NoArgs]):
    """Records the containers' batch resources in ``node.koordinator.sh/extended-resource-spec`` (what the
    koordlet's runtime hooks read to set cgroups of BE containers)."""

    name = "ExtendedResourceSpec"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-pod"
    mutating: ClassVar[bool] = True
    order: ClassVar[int] = 20
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    gate: ClassVar[str] = "PodMutatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        # Koordinator's handleUpdate mutates nothing: only pods being created get the annotation.
        if request.operation != "CREATE" or self.gates.enabled("DisableExtendedResourceSpec"):
            return
        mutate_extended_resource_spec(obj)


class PodColocationValidation(AdmissionHandler[NoArgs]):
    """Refuses pods whose QoS class, priority class and batch resources do not go together."""

    name = "PodColocationValidation"
    Args = NoArgs
    path: ClassVar[str] = "/validate-pod"
    mutating: ClassVar[bool] = False
    order: ClassVar[int] = 20
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    gate: ClassVar[str] = "PodValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation not in ("CREATE", "UPDATE"):
            return
        errs = validate_pod(
            request.operation,
            obj,
            request.old_object,
            skip_priority=self.gates.enabled("ColocationProfileSkipValidatingPriority"),
        )
        if errs:
            # field.ErrorList.ToAggregate().Error(): one message as is, several in brackets. Koordinator's
            # PodValidatingHandler answers every sub-handler's error with admission.Errored(400, err).
            raise Denied(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]", 400)
