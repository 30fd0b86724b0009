"""The pod mutation of Koordinator's ``cluster_colocation_profile.go`` and ``extended_resource_spec.go``, on
a pod manifest (a dict, changed in place).

Order (Koordinator's): the matching profiles sorted by name, each unless its probability skips it: labels,
annotations, label keys mapping, annotation keys mapping, label suffixes, schedulerName, qosClass label,
priorityClassName (with the class's value and preemption policy), koordinatorPriority label, patch. Then,
unless a matching profile carries ``config.koordinator.sh/skip-update-resources`` or the gate
``ColocationProfileSkipMutatingResources`` is on, the resources of a batch or mid pod (priority class with
default): cpu / memory requests and limits of init containers and containers, and the overhead, renamed to
``kubernetes.io/batch-*`` (cpu in milli-cores as an integer), and a missing batch request set to its limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from koord_framework.api.constants import ANNOTATION_EXTENDED_RESOURCE_SPEC, LABEL_PRIORITY, LABEL_QOS_CLASS
from koord_framework.api.qos import PriorityClass, priority_class_with_default
from koord_framework.api.quantity import Quantity, QuantityError, parse_quantity
from koord_plugin_colocationprofile.profile import ColocationProfile, ProfileError
from koord_plugin_colocationprofile.strategic import strategic_merge

__all__ = [
    "BATCH_RESOURCES",
    "RESOURCE_NAME_MAP",
    "apply_profile",
    "apply_profile_to_reservation",
    "extended_resource_spec",
    "mutate_extended_resource_spec",
    "mutate_pod_resource_spec",
]

BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
MID_CPU, MID_MEMORY = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"
BATCH_RESOURCES = (BATCH_CPU, BATCH_MEMORY)
RESOURCE_NAME_MAP: Mapping[PriorityClass, Mapping[str, str]] = {
    PriorityClass.BATCH: {"cpu": BATCH_CPU, "memory": BATCH_MEMORY},
    PriorityClass.MID: {"cpu": MID_CPU, "memory": MID_MEMORY},
}
"""``extension.ResourceNameMap``."""

PriorityClassLookup = Callable[[str], Mapping[str, Any] | None]


def _map(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        value = obj[key] = {}
    if not isinstance(value, dict):
        raise ValueError(f"{key}: must be an object, got {type(value).__name__}")
    return value


def _apply_metadata(obj: dict[str, Any], profile: ColocationProfile) -> None:
    """Labels, annotations, key mappings, suffixes, the QoS and koordinator-priority labels. They touch
    only metadata, so doing them before the spec fields keeps Koordinator's order's result."""
    meta = _map(obj, "metadata")
    if profile.labels:
        _map(meta, "labels").update(profile.labels)
    if profile.annotations:
        _map(meta, "annotations").update(profile.annotations)
    if profile.label_keys_mapping:
        labels = _map(meta, "labels")
        for old, new in profile.label_keys_mapping.items():
            labels[new] = labels.get(old, "")
    if profile.annotation_keys_mapping:
        annotations = _map(meta, "annotations")
        for old, new in profile.annotation_keys_mapping.items():
            annotations[new] = annotations.get(old, "")
    if profile.label_suffixes:
        labels = _map(meta, "labels")
        for key, suffix in profile.label_suffixes.items():
            if key in labels:
                labels[key] = f"{labels[key]}{suffix}"
    if profile.qos_class:
        _map(meta, "labels")[LABEL_QOS_CLASS] = profile.qos_class
    if profile.koordinator_priority is not None:
        _map(meta, "labels")[LABEL_PRIORITY] = str(profile.koordinator_priority)


def _apply_pod_spec(
    spec: dict[str, Any], profile: ColocationProfile, priority_class: PriorityClassLookup
) -> None:
    """schedulerName, then priorityClassName with the class's value and preemption policy."""
    if profile.scheduler_name:
        spec["schedulerName"] = profile.scheduler_name
    if profile.priority_class_name:
        pc = priority_class(profile.priority_class_name)
        if pc is None:
            raise ProfileError(
                f"ClusterColocationProfile {profile.name}: spec.priorityClassName: "
                f'priorityclasses.scheduling.k8s.io "{profile.priority_class_name}" not found'
            )
        spec["priorityClassName"] = profile.priority_class_name
        spec["priority"] = int(pc.get("value") or 0)
        policy = pc.get("preemptionPolicy")
        if policy is None:
            spec.pop("preemptionPolicy", None)
        else:
            spec["preemptionPolicy"] = policy


def apply_profile(
    pod: dict[str, Any], profile: ColocationProfile, priority_class: PriorityClassLookup
) -> dict[str, Any]:
    """``doMutateByColocationProfile``: the pod after ``profile`` (the patch may replace the whole dict, so
    the result is returned; ``pod`` is changed in place up to the patch)."""
    _map(pod, "metadata")
    spec = _map(pod, "spec")
    _apply_metadata(pod, profile)
    _apply_pod_spec(spec, profile, priority_class)
    if profile.patch:
        return strategic_merge(pod, profile.patch)
    return pod


def apply_profile_to_reservation(
    reservation: dict[str, Any], profile: ColocationProfile, priority_class: PriorityClassLookup
) -> dict[str, Any]:
    """The reservation webhook's ``doMutateByColocationProfile``: the same metadata; schedulerName and the
    priority class go into ``spec.template.spec`` when the reservation has a template; the patch applies to
    the Reservation. No resource rewrite (Koordinator's TODO)."""
    _map(reservation, "metadata")
    spec = _map(reservation, "spec")
    _apply_metadata(reservation, profile)
    template = spec.get("template")
    if template is not None:
        if not isinstance(template, dict):
            raise ValueError(f"spec.template: must be an object, got {type(template).__name__}")
        _apply_pod_spec(_map(template, "spec"), profile, priority_class)
    if profile.patch:
        return strategic_merge(reservation, profile.patch)
    return reservation


def _replace_and_erase(resources: dict[str, Any], mapping: Mapping[str, str], name: str, where: str) -> bool:
    extended = mapping.get(name)
    if not extended or name not in resources:
        return False
    raw = resources.pop(name)
    try:
        q = parse_quantity(raw)
    except QuantityError as exc:
        raise ValueError(f"{where}.{name}: {exc}") from None
    # cpu in milli-cores as a plain integer (resource.NewQuantity(MilliValue, DecimalSI)), memory as it is.
    resources[extended] = str(Quantity.from_int(q.milli_value())) if name == "cpu" else str(q)
    return True


def _restrict(requirements: dict[str, Any], mapping: Mapping[str, str], name: str) -> bool:
    extended = mapping.get(name)
    if not extended:
        return False
    requests = requirements.get("requests") or {}
    limits = requirements.get("limits") or {}
    if extended not in requests and extended in limits:
        requirements["requests"] = {**requests, extended: limits[extended]}
        return True
    return False


def mutate_pod_resource_spec(pod: dict[str, Any]) -> bool:
    """``mutatePodResourceSpec``: whether anything changed."""
    klass = priority_class_with_default(pod)
    mapping = RESOURCE_NAME_MAP.get(klass)
    if klass in (PriorityClass.NONE, PriorityClass.PROD) or mapping is None:
        return False
    spec = pod.get("spec") or {}
    mutated = False
    for field in ("initContainers", "containers"):
        containers = spec.get(field) or []
        if not isinstance(containers, list):
            raise ValueError(f"spec.{field}: must be a list")
        for i, container in enumerate(containers):
            if not isinstance(container, dict):
                raise ValueError(f"spec.{field}[{i}]: must be an object")
            requirements = container.get("resources")
            if requirements is None:
                requirements = {}
            if not isinstance(requirements, dict):
                raise ValueError(f"spec.{field}[{i}].resources: must be an object")
            changed = False
            for part in ("requests", "limits"):
                values = requirements.get(part)
                if values is None:
                    continue
                if not isinstance(values, dict):
                    raise ValueError(f"spec.{field}[{i}].resources.{part}: must be an object")
                where = f"spec.{field}[{i}].resources.{part}"
                changed = _replace_and_erase(values, mapping, "cpu", where) or changed
                changed = _replace_and_erase(values, mapping, "memory", where) or changed
            changed = _restrict(requirements, mapping, "cpu") or changed
            changed = _restrict(requirements, mapping, "memory") or changed
            if changed:
                container["resources"] = requirements
                mutated = True
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        mutated = _replace_and_erase(overhead, mapping, "cpu", "spec.overhead") or mutated
        mutated = _replace_and_erase(overhead, mapping, "memory", "spec.overhead") or mutated
    return mutated


def extended_resource_spec(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The ``node.koordinator.sh/extended-resource-spec`` value the pod's containers call for: each
    container's batch-cpu / batch-memory requests and limits (init containers and overhead not counted, as
    Koordinator)."""
    containers: dict[str, Any] = {}
    found = (pod.get("spec") or {}).get("containers") or []
    if not isinstance(found, list):
        raise ValueError("spec.containers: must be a list")
    for i, c in enumerate(found):
        if not isinstance(c, Mapping) or not isinstance(c.get("resources") or {}, Mapping):
            raise ValueError(f"spec.containers[{i}]: must be an object with resources an object")
        resources = c.get("resources") or {}
        entry: dict[str, Any] = {}
        for part in ("limits", "requests"):
            values_in = resources.get(part) or {}
            if not isinstance(values_in, Mapping):
                raise ValueError(f"spec.containers[{i}].resources.{part}: must be an object")
            values = {n: values_in[n] for n in BATCH_RESOURCES if n in values_in}
            if values:
                entry[part] = values
        if entry:
            containers[str(c.get("name") or "")] = entry
    return {"containers": containers} if containers else {}


def _normalized(spec: Any) -> Any:
    """Quantities by value (``reflect.DeepEqual`` on parsed ``resource.Quantity`` values)."""
    if isinstance(spec, dict):
        return {k: _normalized(v) for k, v in spec.items() if v not in ({}, None)}
    if isinstance(spec, str):
        try:
            return parse_quantity(spec)
        except QuantityError:
            return spec
    return spec


def mutate_extended_resource_spec(pod: dict[str, Any]) -> bool:
    """``mutateByExtendedResources``: write the annotation when it differs from what the containers ask."""
    wanted = extended_resource_spec(pod)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
    current: Any = {}
    if raw is not None:
        try:
            current = json.loads(raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"metadata.annotations[{ANNOTATION_EXTENDED_RESOURCE_SPEC}]: failed to get current extended "
                f"resource spec: {exc}"
            ) from None
    if _normalized(current) == _normalized(wanted):
        return False
    _map(_map(pod, "metadata"), "annotations")[ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps(
        wanted, separators=(",", ":")
    )
    return True
