"""Validation of ElasticQuota objects as a pure function: what koord-manager's webhook will serve, and what
``koord quota check`` runs offline over a folder (Koordinator's ``pkg/webhook/elasticquota``: quota topology
checks).

``validate_quotas(quotas, pods)`` looks at a whole set at once and returns every problem found, each naming
the quota and the field; ``validate_quota(obj, existing, pods)`` is the admission form for one object against
the quotas already stored. Nothing here touches the cluster.

Checks: the manifest reads (quantities parse); ``min <= max`` for every resource of min (a resource min names
but max does not is refused too, as upstream's ``checkMinQuotaValidate``); the built-in quotas cannot be
changed; a parent must exist and be marked ``is-parent``; the tree has no cycle; the children's min sum does
not exceed the parent's min; a child's max names only resources the parent's max has; a quota that has
pods may not become a parent (pods would be charged to a quota nobody can schedule into).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import format_resource
from koord_plugin_elasticquota.quota_object import (
    DEFAULT_QUOTA_NAME,
    LABEL_QUOTA_IS_PARENT,
    LABEL_QUOTA_NAME,
    LABEL_QUOTA_PARENT,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    ElasticQuotaSpec,
    QuotaObjectError,
)

__all__ = ["QuotaProblem", "validate_quota", "validate_quotas"]


@dataclass(frozen=True, slots=True)
class QuotaProblem:
    quota: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"ElasticQuota {self.quota}: {self.field}: {self.message}"


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "?")


def _fmt(name: str, value: int) -> str:
    return format_resource(name, value)


def validate_quotas(
    quotas: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any] | PodInfo] = ()
) -> list[QuotaProblem]:
    """Every problem of a set of ElasticQuota manifests (and the pods that name them)."""
    problems: list[QuotaProblem] = []
    specs: dict[str, ElasticQuotaSpec] = {}
    for obj in quotas:
        try:
            spec = ElasticQuotaSpec.from_manifest(obj)
        except QuotaObjectError as err:
            problems.append(QuotaProblem(_name(obj), "spec", str(err)))
            continue
        if spec.name in specs:
            problems.append(QuotaProblem(spec.name, "metadata.name", "defined more than once"))
            continue
        specs[spec.name] = spec
    for spec in specs.values():
        problems.extend(_own_problems(spec))
    problems.extend(_tree_problems(specs))
    problems.extend(_pod_problems(specs, pods))
    return problems


def validate_quota(
    obj: Mapping[str, Any],
    existing: Sequence[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any] | PodInfo] = (),
) -> list[QuotaProblem]:
    """Admission of one quota object (create or update) against the stored ones: only its own problems
    and those it causes."""
    name = _name(obj)
    others = [o for o in existing if _name(o) != name]
    before = {str(p) for p in validate_quotas(others, pods)}
    return [p for p in validate_quotas([*others, obj], pods) if str(p) not in before]


def _own_problems(spec: ElasticQuotaSpec) -> list[QuotaProblem]:
    out: list[QuotaProblem] = []
    if spec.name in (SYSTEM_QUOTA_NAME, ROOT_QUOTA_NAME) and (
        spec.min or spec.labels.get(LABEL_QUOTA_PARENT)
    ):
        out.append(QuotaProblem(spec.name, "metadata.name", "the built-in quota cannot be modified"))
    for res, value in sorted(spec.min.items()):
        if value < 0:
            out.append(QuotaProblem(spec.name, f"spec.min.{res}", "must not be negative"))
        cap = spec.max.get(res)
        if cap is None:
            out.append(QuotaProblem(spec.name, f"spec.min.{res}", "has no matching spec.max entry"))
        elif value > cap:
            out.append(
                QuotaProblem(
                    spec.name,
                    f"spec.min.{res}",
                    f"min {_fmt(res, value)} is greater than max {_fmt(res, cap)}",
                )
            )
    for res, value in sorted(spec.max.items()):
        if value < 0:
            out.append(QuotaProblem(spec.name, f"spec.max.{res}", "must not be negative"))
    if spec.parent == spec.name:
        out.append(
            QuotaProblem(
                spec.name, f"metadata.labels[{LABEL_QUOTA_PARENT}]", "a quota cannot be its own parent"
            )
        )
    return out


def _tree_problems(specs: Mapping[str, ElasticQuotaSpec]) -> list[QuotaProblem]:
    out: list[QuotaProblem] = []
    parent_label = f"metadata.labels[{LABEL_QUOTA_PARENT}]"
    for spec in specs.values():
        if spec.name == ROOT_QUOTA_NAME or spec.parent in ("", ROOT_QUOTA_NAME) or spec.parent == spec.name:
            continue
        parent = specs.get(spec.parent)
        if parent is None:
            out.append(QuotaProblem(spec.name, parent_label, f"parent quota {spec.parent!r} does not exist"))
            continue
        if parent.tree_id != spec.tree_id:
            out.append(
                QuotaProblem(
                    spec.name, parent_label, f"parent quota {spec.parent!r} is in another quota tree"
                )
            )
        if not parent.is_parent:
            out.append(
                QuotaProblem(
                    spec.name,
                    parent_label,
                    f"parent quota {spec.parent!r} is not marked {LABEL_QUOTA_IS_PARENT}=true",
                )
            )
        for res in sorted(spec.max):
            if parent.max and res not in parent.max:
                out.append(
                    QuotaProblem(
                        spec.name, f"spec.max.{res}", f"parent quota {spec.parent!r} has no max for it"
                    )
                )
    # Cycles: follow parents from every quota; a walk that comes back to a quota it passed is a cycle.
    reported: set[frozenset[str]] = set()
    for start in sorted(specs):
        path: list[str] = []
        current: str | None = start
        while current is not None and current in specs and current not in path:
            path.append(current)
            nxt = specs[current].parent
            current = nxt if nxt not in ("", ROOT_QUOTA_NAME) else None
        if current is not None and current in path:
            cycle = path[path.index(current) :]
            key = frozenset(cycle)
            if key not in reported:
                reported.add(key)
                loop = " -> ".join([*cycle, current])
                out.append(QuotaProblem(min(cycle), parent_label, f"the quota tree has a cycle: {loop}"))
    # Children's mins must fit in the parent's min.
    children: dict[str, list[ElasticQuotaSpec]] = {}
    for spec in specs.values():
        children.setdefault(spec.parent, []).append(spec)
    for parent_name, kids in sorted(children.items()):
        parent = specs.get(parent_name)
        if parent is None or parent_name == ROOT_QUOTA_NAME:
            continue
        total: dict[str, int] = {}
        for kid in kids:
            for res, value in kid.min.items():
                total[res] = total.get(res, 0) + value
        for res, value in sorted(total.items()):
            limit = parent.min.get(res, 0)
            if value > limit:
                out.append(
                    QuotaProblem(
                        parent_name,
                        f"spec.min.{res}",
                        f"children's min sum {_fmt(res, value)} is greater than the parent's min "
                        f"{_fmt(res, limit)}",
                    )
                )
    return out


def _pod_problems(
    specs: Mapping[str, ElasticQuotaSpec], pods: Iterable[Mapping[str, Any] | PodInfo]
) -> list[QuotaProblem]:
    out: list[QuotaProblem] = []
    parents_with_pods: dict[str, int] = {}
    for pod in pods:
        labels = pod.labels if isinstance(pod, PodInfo) else ((pod.get("metadata") or {}).get("labels") or {})
        name = labels.get(LABEL_QUOTA_NAME, "")
        if not name or name == DEFAULT_QUOTA_NAME:
            continue
        spec = specs.get(name)
        if spec is not None and spec.is_parent:
            parents_with_pods[name] = parents_with_pods.get(name, 0) + 1
    for name, count in sorted(parents_with_pods.items()):
        out.append(
            QuotaProblem(
                name,
                f"metadata.labels[{LABEL_QUOTA_IS_PARENT}]",
                f"a parent quota cannot have pods ({count} pod(s) name it)",
            )
        )
    return out
