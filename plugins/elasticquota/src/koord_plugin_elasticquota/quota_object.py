"""The ``ElasticQuota`` object as the plugin reads it: labels, annotations and spec (``apis/extension``).

Reading is lenient where Koordinator is lenient (a shared-weight annotation that does not parse falls back to
``spec.max``; a namespaces annotation that does not parse maps no namespace) and strict where a wrong value
would silently change the tree (a malformed ``spec.min``/``spec.max`` raises ``QuotaObjectError`` naming the
quota and the field).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from koord_framework.api.objects import PodInfo
from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import is_zero, parse_resource_list

__all__ = [
    "ANNOTATION_ALLOCATED",
    "ANNOTATION_CHILD_REQUEST",
    "ANNOTATION_GUARANTEED",
    "ANNOTATION_NON_PREEMPTIBLE_REQUEST",
    "ANNOTATION_NON_PREEMPTIBLE_USED",
    "ANNOTATION_QUOTA_NAMESPACES",
    "ANNOTATION_REQUEST",
    "ANNOTATION_RUNTIME",
    "ANNOTATION_SHARED_WEIGHT",
    "ANNOTATION_TOTAL_RESOURCE",
    "DEFAULT_QUOTA_NAME",
    "LABEL_ALLOW_LENT_RESOURCE",
    "LABEL_PREEMPTIBLE",
    "LABEL_QUOTA_IS_PARENT",
    "LABEL_QUOTA_IS_ROOT",
    "LABEL_QUOTA_NAME",
    "LABEL_QUOTA_PARENT",
    "LABEL_QUOTA_TREE_ID",
    "ROOT_QUOTA_NAME",
    "SYSTEM_QUOTA_NAME",
    "ElasticQuotaSpec",
    "QuotaObjectError",
    "is_pod_non_preemptible",
    "pod_quota_label",
]

SYSTEM_QUOTA_NAME: Final = "koordinator-system-quota"
ROOT_QUOTA_NAME: Final = "koordinator-root-quota"
DEFAULT_QUOTA_NAME: Final = "koordinator-default-quota"

_PREFIX: Final = "quota.scheduling.koordinator.sh"
LABEL_QUOTA_IS_PARENT: Final = f"{_PREFIX}/is-parent"
LABEL_QUOTA_PARENT: Final = f"{_PREFIX}/parent"
LABEL_ALLOW_LENT_RESOURCE: Final = f"{_PREFIX}/allow-lent-resource"
LABEL_QUOTA_NAME: Final = f"{_PREFIX}/name"
LABEL_QUOTA_IS_ROOT: Final = f"{_PREFIX}/is-root"
LABEL_QUOTA_TREE_ID: Final = f"{_PREFIX}/tree-id"
LABEL_PREEMPTIBLE: Final = f"{_PREFIX}/preemptible"
ANNOTATION_SHARED_WEIGHT: Final = f"{_PREFIX}/shared-weight"
ANNOTATION_RUNTIME: Final = f"{_PREFIX}/runtime"
ANNOTATION_REQUEST: Final = f"{_PREFIX}/request"
ANNOTATION_CHILD_REQUEST: Final = f"{_PREFIX}/child-request"
ANNOTATION_TOTAL_RESOURCE: Final = f"{_PREFIX}/total-resource"
ANNOTATION_QUOTA_NAMESPACES: Final = f"{_PREFIX}/namespaces"
ANNOTATION_GUARANTEED: Final = f"{_PREFIX}/guaranteed"
ANNOTATION_ALLOCATED: Final = f"{_PREFIX}/allocated"
ANNOTATION_NON_PREEMPTIBLE_REQUEST: Final = f"{_PREFIX}/non-preemptible-request"
ANNOTATION_NON_PREEMPTIBLE_USED: Final = f"{_PREFIX}/non-preemptible-used"


class QuotaObjectError(ValueError):
    """An ElasticQuota the plugin cannot read; the message names the quota and the field."""


def _parse_json_resources(raw: str) -> dict[str, int] | None:
    try:
        data = json.loads(raw)
        return parse_resource_list(data)
    except (ValueError, QuantityError):
        return None


@dataclass(frozen=True, slots=True)
class ElasticQuotaSpec:
    """What the quota tree needs from one ElasticQuota object."""

    name: str
    namespace: str
    parent: str
    is_parent: bool
    allow_lent_resource: bool
    tree_id: str
    is_root: bool
    min: dict[str, int]
    max: dict[str, int]
    shared_weight: dict[str, int]
    namespaces: tuple[str, ...] = ()
    total_resource: dict[str, int] | None = None
    deleting: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any]) -> ElasticQuotaSpec:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            raise QuotaObjectError("ElasticQuota without metadata.name")
        labels: Mapping[str, str] = meta.get("labels") or {}
        annotations: Mapping[str, str] = meta.get("annotations") or {}
        spec = obj.get("spec") or {}
        where = f"ElasticQuota {meta.get('namespace') or ''}/{name}"
        try:
            max_ = parse_resource_list(spec.get("max"), path="spec.max")
            min_ = parse_resource_list(spec.get("min"), path="spec.min")
        except QuantityError as err:
            raise QuotaObjectError(f"{where}: {err}") from err
        # GetParentQuotaName: every quota but the root hangs under the root unless it names a parent.
        parent = labels.get(LABEL_QUOTA_PARENT, "")
        if not parent and name != ROOT_QUOTA_NAME:
            parent = ROOT_QUOTA_NAME
        weight: dict[str, int] | None = None
        raw_weight = annotations.get(ANNOTATION_SHARED_WEIGHT)
        if raw_weight is not None:
            weight = _parse_json_resources(raw_weight)
            if weight is not None and is_zero(weight):
                weight = None
        namespaces: tuple[str, ...] = ()
        raw_ns = annotations.get(ANNOTATION_QUOTA_NAMESPACES, "")
        if raw_ns:
            try:
                decoded = json.loads(raw_ns)
                if isinstance(decoded, list) and all(isinstance(n, str) for n in decoded):
                    namespaces = tuple(decoded)
            except ValueError:
                namespaces = ()
        total = None
        raw_total = annotations.get(ANNOTATION_TOTAL_RESOURCE, "")
        if raw_total:
            total = _parse_json_resources(raw_total)
        return cls(
            name=name,
            namespace=str(meta.get("namespace") or ""),
            parent=parent,
            is_parent=labels.get(LABEL_QUOTA_IS_PARENT) == "true",
            allow_lent_resource=labels.get(LABEL_ALLOW_LENT_RESOURCE) != "false",
            tree_id=labels.get(LABEL_QUOTA_TREE_ID, ""),
            is_root=labels.get(LABEL_QUOTA_IS_ROOT) == "true",
            min=min_,
            max=max_,
            shared_weight=dict(weight) if weight is not None else dict(max_),
            namespaces=namespaces,
            total_resource=total,
            deleting=bool(meta.get("deletionTimestamp")),
            labels=dict(labels),
        )


def is_pod_non_preemptible(pod: PodInfo) -> bool:
    return pod.labels.get(LABEL_PREEMPTIBLE) == "false"


def pod_quota_label(pod: PodInfo) -> str:
    return pod.labels.get(LABEL_QUOTA_NAME, "")
