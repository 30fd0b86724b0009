"""Admitting a pod against its ElasticQuota (Koordinator's ``pkg/webhook/quotaevaluate``), the arithmetic.

Koordinator's webhook keeps, on each ElasticQuota, the sum of the requests it has admitted into it (annotation
``quota.scheduling.koordinator.sh/child-request``, which the scheduler's quota controller also refreshes).
A pod is admitted when that sum plus the pod's requests stays within the quota's ``admission`` annotation,
or its ``spec.max`` when the annotation is absent or empty, for every resource the pod asks for that the
quota's ``max`` names; the new sum is then written back. Everything here works on exact quantities
(``Quantity``) so that sums and messages print as Go's ``resource.Quantity`` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from koord_framework.api.quantity import Quantity, QuantityError
from koord_plugin_elasticquota.quota_object import ANNOTATION_CHILD_REQUEST

__all__ = [
    "ANNOTATION_ADMISSION",
    "ANNOTATION_REPLACE_RESOURCES",
    "POD_RESOURCES",
    "ResourceList",
    "check_request",
    "dump_resource_list",
    "pod_usage",
    "pretty",
    "quota_admission",
    "quota_child_request",
    "transform_replace_resources",
]

ResourceList = dict[str, Quantity]

ANNOTATION_ADMISSION: Final = "quota.scheduling.koordinator.sh/admission"
ANNOTATION_REPLACE_RESOURCES: Final = "pod.koordinator.sh/replace-resources"

POD_RESOURCES: Final = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "kubernetes.io/batch-cpu",
        "kubernetes.io/batch-memory",
        "kubernetes.io/mid-cpu",
        "kubernetes.io/mid-memory",
        "koordinator.sh/gpu",
        "nvidia.com/gpu",
        "koordinator.sh/gpu.shared",
        "koordinator.sh/gpu-memory-ratio",
    }
)
"""The resources a quota can limit pods by (Koordinator's ``podResources``): a quota whose ``max`` names
none of them admits every pod."""


def _add(a: Quantity, b: Quantity) -> Quantity:
    # Go's Quantity.Add keeps the receiver's format.
    return Quantity.from_nano(a.nano_value() + b.nano_value(), a.format)


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """``quotav1.Add``: the sum over the union of names."""
    out = dict(a)
    for name, q in b.items():
        out[name] = _add(out[name], q) if name in out else q
    return out


def mask(a: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    keep = set(names)
    return {k: v for k, v in a.items() if k in keep}


def less_than_or_equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> tuple[bool, list[str]]:
    """``quotav1.LessThanOrEqual``: names of ``a`` above ``b`` (a name ``b`` lacks is not limited)."""
    exceeded = [k for k, v in a.items() if k in b and v > b[k]]
    return not exceeded, exceeded


def pretty(resources: Mapping[str, Quantity]) -> str:
    """Koordinator's ``prettyPrint``: ``name=value`` sorted by name, comma separated."""
    return ",".join(f"{k}={resources[k]}" for k in sorted(resources))


def dump_resource_list(resources: Mapping[str, Quantity]) -> str:
    """A ResourceList as Go's ``json.Marshal`` writes it (sorted keys, canonical quantities)."""
    return json.dumps({k: str(resources[k]) for k in sorted(resources)}, separators=(",", ":"))


def parse_resource_list(raw: Any, where: str) -> ResourceList:
    """A manifest ResourceList as exact quantities (``ValueError`` naming ``where`` and the resource)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object of quantities, got {type(raw).__name__}")
    out: ResourceList = {}
    for name, value in raw.items():
        try:
            out[str(name)] = Quantity.parse(value) if value is not None else Quantity.from_int(0)
        except (QuantityError, TypeError) as exc:
            raise ValueError(f"{where}[{name}]: {exc}") from None
    return out


def _annotation_list(quota: Mapping[str, Any], key: str) -> ResourceList:
    annotations = (quota.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(key) or ""
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"annotation {key}: {exc}") from None
    return parse_resource_list(raw, f"annotation {key}")


def quota_child_request(quota: Mapping[str, Any]) -> ResourceList:
    """``extension.GetChildRequest``: what has been admitted into the quota so far."""
    return _annotation_list(quota, ANNOTATION_CHILD_REQUEST)


def quota_max(quota: Mapping[str, Any]) -> ResourceList:
    spec = quota.get("spec") or {}
    return parse_resource_list(spec.get("max") if isinstance(spec, Mapping) else None, "spec.max")


def quota_admission(quota: Mapping[str, Any]) -> ResourceList:
    """``GetQuotaAdmission``: the admission annotation, or ``spec.max`` when it is absent or empty."""
    admission = _annotation_list(quota, ANNOTATION_ADMISSION)
    return admission if admission else quota_max(quota)


# --- the pod's side ------------------------------------------------------------------------------------

_POD_LEVEL_RESOURCES: Final = ("cpu", "memory")


def _requests(container: Any, where: str) -> ResourceList:
    if not isinstance(container, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(container).__name__}")
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise ValueError(f"{where}.resources: expected an object")
    return parse_resource_list(resources.get("requests"), f"{where}.resources.requests")


def _max_into(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, q in other.items():
        if name not in into or q > into[name]:
            into[name] = q


def _list(spec: Mapping[str, Any], key: str) -> list[Any]:
    value = spec.get(key) or []
    if not isinstance(value, list):
        raise ValueError(f"spec.{key}: expected a list, got {type(value).__name__}")
    return value


def pod_requests(pod: Mapping[str, Any]) -> ResourceList:
    """``PodRequests`` of k8s.io/component-helpers (v0.35, default options): the containers' sum; each init
    container on top of the sidecars (``restartPolicy: Always``) started before it, the largest of them if
    above; sidecars counted with the containers; pod-level ``spec.resources.requests`` of cpu / memory /
    hugepages in place of the containers' when set; plus ``spec.overhead``."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ValueError("spec: expected an object")
    reqs: ResourceList = {}
    for i, c in enumerate(_list(spec, "containers")):
        reqs = add(reqs, _requests(c, f"spec.containers[{i}]"))
    sidecars: ResourceList = {}
    init_max: ResourceList = {}
    for i, c in enumerate(_list(spec, "initContainers")):
        own = _requests(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            reqs = add(reqs, own)
            sidecars = add(sidecars, own)
            effective = dict(sidecars)
        else:
            effective = add(own, sidecars)
        _max_into(init_max, effective)
    _max_into(reqs, init_max)
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping) and pod_level.get("requests"):
        level = parse_resource_list(pod_level.get("requests"), "spec.resources.requests")
        for name, q in level.items():
            if name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
                reqs[name] = q
    overhead = parse_resource_list(spec.get("overhead"), "spec.overhead")
    return add(reqs, overhead)


def _counts(pod: Mapping[str, Any], now: datetime) -> bool:
    """``QuotaV1Pod``: a finished pod, or one past its deletion grace period, uses nothing."""
    status = pod.get("status") or {}
    if isinstance(status, Mapping) and status.get("phase") in ("Failed", "Succeeded"):
        return False
    meta = pod.get("metadata") or {}
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if deleted and grace is not None:
        try:
            at = datetime.fromisoformat(str(deleted).replace("Z", "+00:00"))
            if now.timestamp() > at.timestamp() + float(grace):
                return False
        except (TypeError, ValueError) as exc:
            raise ValueError(f"metadata.deletionTimestamp: {exc}") from None
    return True


def pod_usage(pod: Mapping[str, Any], now: datetime | None = None) -> ResourceList:
    """``PodUsageFunc``: what the pod counts against a quota."""
    if not _counts(pod, now or datetime.now(UTC)):
        return {}
    return pod_requests(pod)


def _replace(resources: dict[str, Any], src: str, dst: str) -> None:
    """``replaceAndEraseResource`` on a manifest map: ``src`` moves to ``dst`` unless ``dst`` is set;
    cpu becomes milli-cores counted as units (Koordinator's NewQuantity(MilliValue))."""
    if not dst or dst in resources or src not in resources:
        return
    quantity = Quantity.parse(resources[src])
    if src == "cpu":
        quantity = Quantity.from_int(quantity.milli_value())
    resources[dst] = str(quantity)
    del resources[src]


def transform_replace_resources(pod: dict[str, Any]) -> None:
    """``TransformReplaceResources`` (gate ``ReplaceResourcesTransformer``), in place: the annotation
    ``pod.koordinator.sh/replace-resources`` (``a:b,c:`` replaces ``a`` by ``b`` and erases ``c``) applied
    to every container's requests and limits and to the overhead."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_REPLACE_RESOURCES) or ""
    if not text:
        return
    erase: list[str] = []
    replace: dict[str, str] = {}
    for mapping in str(text).split(","):
        parts = mapping.split(":")
        if len(parts) != 2:
            continue
        src, dst = parts[0].strip(), parts[1].strip()
        if dst:
            replace[src] = dst
        else:
            erase.append(src)
    if not erase and not replace:
        return
    spec = pod.get("spec") or {}
    targets: list[dict[str, Any]] = []
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            resources = c.get("resources") if isinstance(c, dict) else None
            if isinstance(resources, dict):
                targets += [
                    r for r in (resources.get("requests"), resources.get("limits")) if isinstance(r, dict)
                ]
    if isinstance(spec.get("overhead"), dict):
        targets.append(spec["overhead"])
    for resources in targets:
        for name in erase:
            resources.pop(name, None)
        for src, dst in replace.items():
            try:
                _replace(resources, src, dst)
            except QuantityError as exc:
                raise ValueError(f"{src}: {exc}") from None


# --- the check -----------------------------------------------------------------------------------------


def check_request(
    quota_ref: str,
    used: Mapping[str, Quantity],
    admission: Mapping[str, Quantity],
    names: frozenset[str],
    usage: Mapping[str, Quantity],
) -> ResourceList | None:
    """``checkRequest`` for one pod: ``None`` when the pod adds nothing the quota limits (nothing to write),
    else the new usage; ``PermissionError`` (Koordinator's message) when it would exceed ``admission``.
    ``names`` are the resources of the quota's ``max``, ``quota_ref`` ``namespace/name``."""
    if not names & POD_RESOURCES:
        return None
    requested = {k: v for k, v in usage.items() if k in names and not v.is_zero()}
    if not requested:
        return None
    new_usage = add(used, requested)
    ok, exceeded = less_than_or_equal(mask(new_usage, requested), admission)
    if not ok:
        raise PermissionError(
            f"exceeded quota: {quota_ref}, requested: {pretty(mask(requested, exceeded))}, "
            f"used: {pretty(mask(used, exceeded))}, limited: {pretty(mask(admission, exceeded))}"
        )
    return new_usage
