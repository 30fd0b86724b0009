"""A ClusterColocationProfile read into a typed spec; every problem names the profile and the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.selectors import LabelSelector, SelectorError, parse_label_selector

__all__ = ["ANNOTATION_SKIP_UPDATE_RESOURCE", "ColocationProfile", "ProfileError", "parse_profile"]

ANNOTATION_SKIP_UPDATE_RESOURCE = "config.koordinator.sh/skip-update-resources"


class ProfileError(ValueError):
    """A profile that cannot be applied (its field named)."""


@dataclass(frozen=True)
class ColocationProfile:
    name: str
    namespace_selector: LabelSelector | None = None
    namespace_selector_error: str = ""
    selector: LabelSelector | None = None
    selector_error: str = ""
    probability: int | str | None = None
    qos_class: str = ""
    priority_class_name: str = ""
    koordinator_priority: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    label_keys_mapping: Mapping[str, str] = field(default_factory=dict)
    annotation_keys_mapping: Mapping[str, str] = field(default_factory=dict)
    label_suffixes: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str = ""
    patch: Mapping[str, Any] | None = None
    skip_update_resource: bool = False

    def percent(self) -> int:
        """``intstr.GetScaledValueFromIntOrPercent(probability, 100, false)``; 100 when unset."""
        p = self.probability
        if p is None:
            return 100
        if isinstance(p, int):
            return p
        if not p.endswith("%"):
            raise ProfileError(
                f"ClusterColocationProfile {self.name}: spec.probability: invalid value for IntOrString: "
                f"invalid type: string is not a percentage ({p!r})"
            )
        try:
            return int(p[:-1])
        except ValueError:
            raise ProfileError(
                f"ClusterColocationProfile {self.name}: spec.probability: invalid value {p!r}"
            ) from None


def _string_map(value: Any, name: str, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ProfileError(f"ClusterColocationProfile {name}: {where}: must map strings to strings")
    return dict(value)


def _string(value: Any, name: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ProfileError(f"ClusterColocationProfile {name}: {where}: must be a string")
    return value


def _selector(value: Any, where: str) -> tuple[LabelSelector | None, str]:
    if value is None:
        return None, ""
    try:
        return parse_label_selector(value, where), ""
    except (SelectorError, ValueError, TypeError) as exc:
        return None, f"{where}: {exc}"


def parse_profile(obj: Mapping[str, Any]) -> ColocationProfile:
    """The spec of a ClusterColocationProfile object (``ProfileError`` naming the field)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "?")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ProfileError(f"ClusterColocationProfile {name}: spec: must be an object")
    ns_sel, ns_err = _selector(spec.get("namespaceSelector"), "spec.namespaceSelector")
    sel, sel_err = _selector(spec.get("selector"), "spec.selector")
    prob = spec.get("probability")
    if prob is not None and (isinstance(prob, bool) or not isinstance(prob, int | str)):
        raise ProfileError(
            f"ClusterColocationProfile {name}: spec.probability: must be an integer or a percent"
        )
    kp = spec.get("koordinatorPriority")
    if kp is not None and (isinstance(kp, bool) or not isinstance(kp, int)):
        raise ProfileError(f"ClusterColocationProfile {name}: spec.koordinatorPriority: must be an integer")
    patch = spec.get("patch")
    if patch is not None and not isinstance(patch, Mapping):
        raise ProfileError(f"ClusterColocationProfile {name}: spec.patch: must be an object")
    annotations = meta.get("annotations") or {}
    return ColocationProfile(
        name=name,
        namespace_selector=ns_sel,
        namespace_selector_error=ns_err,
        selector=sel,
        selector_error=sel_err,
        probability=prob,
        qos_class=_string(spec.get("qosClass"), name, "spec.qosClass"),
        priority_class_name=_string(spec.get("priorityClassName"), name, "spec.priorityClassName"),
        koordinator_priority=kp,
        labels=_string_map(spec.get("labels"), name, "spec.labels"),
        annotations=_string_map(spec.get("annotations"), name, "spec.annotations"),
        label_keys_mapping=_string_map(spec.get("labelKeysMapping"), name, "spec.labelKeysMapping"),
        annotation_keys_mapping=_string_map(
            spec.get("annotationKeysMapping"), name, "spec.annotationKeysMapping"
        ),
        label_suffixes=_string_map(spec.get("labelSuffixes"), name, "spec.labelSuffixes"),
        scheduler_name=_string(spec.get("schedulerName"), name, "spec.schedulerName"),
        patch=patch,
        skip_update_resource=isinstance(annotations, Mapping)
        and ANNOTATION_SKIP_UPDATE_RESOURCE in annotations,
    )
