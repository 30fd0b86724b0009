"""What an ElasticQuotaProfile makes of the nodes it selects: its root quota's labels, annotations and
min/max (Koordinator's ``pkg/quota-controller/profile``), computed without touching the cluster.

The nodes' allocatable is summed (``quotav1.Add``: a sum keeps the first summand's format unless it is zero),
scaled by ``spec.resourceRatio`` (a number in (0, 1]; anything else means 1), and the resources named by
the profile's ``quota.scheduling.koordinator.sh/resource-keys`` annotation (default cpu and memory) become
``spec.min``; ``spec.max`` is ``MaxInt64 / 2000`` for each of them. The total and the part on unschedulable
or not-Ready nodes are written as JSON annotations on the quota.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from koord_framework.api.quantity import BINARY_SI, DECIMAL_SI, Quantity, QuantityError
from koord_framework.api.selectors import LabelSelector, SelectorError, parse_label_selector
from koord_plugin_elasticquota.quota_object import (
    ANNOTATION_TOTAL_RESOURCE,
    LABEL_QUOTA_IS_ROOT,
    LABEL_QUOTA_TREE_ID,
)

__all__ = [
    "ANNOTATION_RESOURCE_KEYS",
    "ANNOTATION_UNSCHEDULABLE_RESOURCE",
    "DEFAULT_RESOURCE_KEYS",
    "LABEL_QUOTA_PROFILE",
    "MAX_QUANTITY",
    "ProfileError",
    "QuotaPlan",
    "QuotaProfile",
    "multiply_quantity",
    "plan_root_quota",
    "tree_id_of",
]

_PREFIX: Final = "quota.scheduling.koordinator.sh"
LABEL_QUOTA_PROFILE: Final = f"{_PREFIX}/profile"
ANNOTATION_RESOURCE_KEYS: Final = f"{_PREFIX}/resource-keys"
ANNOTATION_UNSCHEDULABLE_RESOURCE: Final = f"{_PREFIX}/unschedulable-resource"
DEFAULT_RESOURCE_KEYS: Final = ("cpu", "memory")
MAX_QUANTITY: Final = Quantity.from_int((2**63 - 1) // 2000)
"""Every root quota's max: Koordinator's ``math.MaxInt64/2000`` (DecimalSI)."""

_UNPARSED: Final = object()
_FNV64_OFFSET: Final = 0xCBF29CE484222325
_FNV64_PRIME: Final = 0x100000001B3
# Go's strconv.ParseFloat, decimal and hexadecimal forms (no surrounding space, no underscores).
_GO_DECIMAL_FLOAT: Final = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_GO_HEX_FLOAT: Final = re.compile(r"[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+")
_GO_SPECIAL_FLOAT: Final = re.compile(r"[+-]?(inf|infinity|nan)", re.IGNORECASE)


class ProfileError(ValueError):
    """A profile (or a node it selects) the controller cannot use; the message names object and field."""


def tree_id_of(namespace: str, name: str) -> str:
    """The quota tree id Koordinator generates for a profile: FNV-1a 64 of ``namespace/name``, in decimal."""
    h = _FNV64_OFFSET
    for byte in f"{namespace}/{name}".encode():
        h ^= byte
        h = (h * _FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return str(h)


def parse_go_float(text: str) -> float | None:
    """``strconv.ParseFloat(text, 64)``, ``None`` where Go returns an error."""
    if _GO_DECIMAL_FLOAT.fullmatch(text) or _GO_SPECIAL_FLOAT.fullmatch(text):
        value = float(text)
    elif _GO_HEX_FLOAT.fullmatch(text):
        value = float.fromhex(text)
    else:
        return None
    return None if math.isinf(value) and not _GO_SPECIAL_FLOAT.fullmatch(text) else value


def multiply_quantity(value: Quantity, resource: str, ratio: float) -> Quantity:
    """Koordinator's ``MultiplyQuantity``: cpu in milli-units (DecimalSI), memory in whole bytes (BinarySI),
    anything else whole (DecimalSI); each truncated toward zero after the float product."""
    if resource == "cpu":
        return Quantity.from_milli(int(float(value.milli_value()) * ratio))
    if resource == "memory":
        return Quantity.from_int(int(float(value.value()) * ratio), BINARY_SI)
    return Quantity.from_int(int(float(value.value()) * ratio), DECIMAL_SI)


def _add(total: dict[str, Quantity], item: Mapping[str, Quantity]) -> None:
    """``quotav1.Add`` in place: a sum keeps the running total's format, or the addend's over a zero."""
    for name, q in item.items():
        have = total.get(name)
        if have is None:
            total[name] = q
            continue
        fmt = q.format if have.is_zero() else have.format
        total[name] = Quantity.from_nano(have.nano_value() + q.nano_value(), fmt)


def _resource_list_json(resources: Mapping[str, Quantity]) -> str:
    """``json.Marshal`` of a ResourceList: keys sorted, canonical quantities, no spaces."""
    return json.dumps({k: str(resources[k]) for k in sorted(resources)}, separators=(",", ":"))


def _is_ready(node: Mapping[str, Any]) -> bool:
    """``nodeutil.IsNodeReady``: a Ready condition whose status is True."""
    for cond in (node.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def node_allocatable(node: Mapping[str, Any]) -> dict[str, Quantity]:
    """``GetNodeAllocatable``: the node's ``status.allocatable``; a quantity that does not parse is a
    ``ProfileError`` naming the node and the resource."""
    name = (node.get("metadata") or {}).get("name", "")
    raw = (node.get("status") or {}).get("allocatable") or {}
    if not isinstance(raw, Mapping):
        raise ProfileError(f"Node {name}: status.allocatable: expected a resource list")
    out: dict[str, Quantity] = {}
    for resource, value in raw.items():
        try:
            out[str(resource)] = Quantity.parse(value)
        except QuantityError as exc:
            raise ProfileError(f"Node {name}: status.allocatable[{resource}]: {exc}") from None
    return out


@dataclass(frozen=True)
class QuotaProfile:
    """An ElasticQuotaProfile, checked. ``warnings`` are the problems Koordinator tolerates (an unusable
    ratio means 1, unusable resource keys mean cpu and memory), each naming the object and field."""

    namespace: str
    name: str
    quota_name: str
    quota_labels: Mapping[str, str]
    node_selector: LabelSelector
    ratio: float | None
    resource_keys: tuple[str, ...]
    tree_id: str
    warnings: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> QuotaProfile:
        """Raises ``ProfileError`` for what leaves no quota to build (no quota name, a selector that does not
        parse, quota labels that are not strings)."""
        raw_meta = obj.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        where = f"ElasticQuotaProfile {namespace}/{name}"
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            raise ProfileError(f"{where}: spec: expected an object")
        quota_name = spec.get("quotaName")
        if not isinstance(quota_name, str) or not quota_name:
            raise ProfileError(f"{where}: spec.quotaName: required (the name of the root quota)")
        try:
            selector = parse_label_selector(spec.get("nodeSelector"), "spec.nodeSelector")
        except SelectorError as exc:
            raise ProfileError(f"{where}: {exc}") from None
        except (AttributeError, TypeError):
            raise ProfileError(f"{where}: spec.nodeSelector: expected a label selector") from None
        labels = spec.get("quotaLabels") or {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise ProfileError(f"{where}: spec.quotaLabels: expected a map of strings")
        warnings: list[str] = []
        ratio: float | None = None
        raw_ratio = spec.get("resourceRatio")
        if raw_ratio is not None:
            parsed = parse_go_float(raw_ratio) if isinstance(raw_ratio, str) else None
            if parsed is not None and 0 < parsed <= 1.0:
                ratio = parsed
            else:
                ratio = 1.0
                warnings.append(
                    f"{where}: spec.resourceRatio: {raw_ratio!r} is not a number in (0, 1]; using 1"
                )
        keys = list(DEFAULT_RESOURCE_KEYS)
        annotations = meta.get("annotations")
        raw_keys = annotations.get(ANNOTATION_RESOURCE_KEYS) if isinstance(annotations, Mapping) else None
        if raw_keys is not None:
            decoded: object = _UNPARSED
            with contextlib.suppress(TypeError, ValueError):
                decoded = json.loads(raw_keys)
            if decoded is None:  # JSON null: Go leaves the slice nil, so no resource is kept
                keys = []
            elif isinstance(decoded, list) and all(isinstance(k, str) for k in decoded):
                keys = decoded
            else:
                warnings.append(
                    f"{where}: metadata.annotations[{ANNOTATION_RESOURCE_KEYS}]: {raw_keys!r} is not a JSON "
                    f"list of resource names; using {', '.join(DEFAULT_RESOURCE_KEYS)}"
                )
        own_labels = meta.get("labels")
        tree_id = (own_labels.get(LABEL_QUOTA_TREE_ID) if isinstance(own_labels, Mapping) else None) or (
            tree_id_of(namespace, name)
        )
        return cls(
            namespace=namespace,
            name=name,
            quota_name=quota_name,
            quota_labels=dict(labels),
            node_selector=selector,
            ratio=ratio,
            resource_keys=tuple(keys),
            tree_id=str(tree_id),
            warnings=tuple(warnings),
        )

    def decorate(self, total: dict[str, Quantity]) -> dict[str, Quantity]:
        """``DecorateResourceByResourceRatio``: every resource scaled by the ratio, when there is one."""
        if self.ratio is None:
            return total
        return {name: multiply_quantity(q, name, self.ratio) for name, q in total.items()}


@dataclass(frozen=True)
class QuotaPlan:
    """The root quota a profile asks for: what the controller writes over the quota's own fields."""

    min: dict[str, Quantity]
    max: dict[str, Quantity]
    total: dict[str, Quantity]
    unschedulable: dict[str, Quantity]
    labels: dict[str, str]
    annotations: dict[str, str]

    def apply(self, quota: Mapping[str, Any]) -> dict[str, Any]:
        """``quota`` (a stored ElasticQuota, or a new one's skeleton) with this plan written over it: labels
        and annotations merged, ``spec.min`` and ``spec.max`` replaced, the rest kept."""
        meta = dict(quota.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        spec = dict(quota.get("spec") or {})
        spec["min"] = {k: str(v) for k, v in self.min.items()}
        spec["max"] = {k: str(v) for k, v in self.max.items()}
        return {**quota, "metadata": meta, "spec": spec}


def plan_root_quota(profile: QuotaProfile, nodes: Iterable[Mapping[str, Any]]) -> QuotaPlan:
    """The root quota for ``profile`` over ``nodes`` (every node; the profile's selector picks)."""
    total: dict[str, Quantity] = {}
    unschedulable: dict[str, Quantity] = {}
    for node in nodes:
        if not profile.node_selector.matches((node.get("metadata") or {}).get("labels") or {}):
            continue
        allocatable = node_allocatable(node)
        _add(total, allocatable)
        if (node.get("spec") or {}).get("unschedulable") or not _is_ready(node):
            _add(unschedulable, allocatable)
    total = profile.decorate(total)
    unschedulable = profile.decorate(unschedulable)
    minimum = {key: total.get(key, Quantity.from_int(0)) for key in profile.resource_keys}
    maximum = dict.fromkeys(profile.resource_keys, MAX_QUANTITY)
    # Order as Koordinator writes them: the profile label, the quota labels, the tree id, is-root.
    labels = {LABEL_QUOTA_PROFILE: profile.name, **profile.quota_labels}
    labels[LABEL_QUOTA_TREE_ID] = profile.tree_id
    labels[LABEL_QUOTA_IS_ROOT] = "true"
    annotations = {
        ANNOTATION_TOTAL_RESOURCE: _resource_list_json(total),
        ANNOTATION_UNSCHEDULABLE_RESOURCE: _resource_list_json(unschedulable),
    }
    return QuotaPlan(minimum, maximum, total, unschedulable, labels, annotations)
