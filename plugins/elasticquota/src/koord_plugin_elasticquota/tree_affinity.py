"""The multi-quota-tree step of koord-manager's ``/mutate-pod`` (Koordinator's
``multi_quota_tree_affinity.go``, gate ``MultiQuotaTree``, alpha, off by default).

With several quota trees, each tree owns a pool of nodes: its ElasticQuotaProfile (labelled with the tree's
``quota.scheduling.koordinator.sh/tree-id``) selects them. A pod created into a quota of a tree (its quota
label, else the quota named after its namespace, else the one listing the namespace) gets the profile's node
selector as required node affinity: appended to every term it already has, or as its only term.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest
from koord_framework.plugin import NoArgs
from koord_plugin_elasticquota.quota_object import LABEL_QUOTA_NAME, LABEL_QUOTA_TREE_ID, ElasticQuotaSpec

__all__ = ["MultiQuotaTreeAffinity", "add_tree_affinity", "quota_tree_of", "selector_requirements"]


def quota_tree_of(quota_name: str, namespace: str, quotas: Sequence[Mapping[str, Any]]) -> str:
    """``getQuotaInfo(name, namespace).TreeID``: the quota of that name, else the quota listing the
    namespace in its namespaces annotation; ``""`` when none (or it has no tree)."""
    specs: list[ElasticQuotaSpec] = []
    for obj in quotas:
        try:
            specs.append(ElasticQuotaSpec.from_manifest(obj))
        except ValueError:
            continue  # a quota the topology could not take is not in it
    for spec in specs:
        if spec.name == quota_name:
            return spec.tree_id
    for spec in specs:
        if namespace in spec.namespaces:
            return spec.tree_id
    return ""


def selector_requirements(selector: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``convertNodeSelectorToNodeSelectorRequirements``: matchLabels as ``In`` (sorted by key: Go's map
    order is random), then matchExpressions as they are."""
    out: list[dict[str, Any]] = []
    labels = selector.get("matchLabels") or {}
    for key in sorted(labels):
        out.append({"key": key, "operator": "In", "values": [labels[key]]})
    for expr in selector.get("matchExpressions") or []:
        req: dict[str, Any] = {"key": expr.get("key"), "operator": expr.get("operator")}
        if expr.get("values") is not None:
            req["values"] = list(expr["values"])
        out.append(req)
    return out


def _mapping(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def add_tree_affinity(pod: dict[str, Any], requirements: list[dict[str, Any]]) -> None:
    """Append ``requirements`` to every required node-selector term of ``pod`` (one term when none)."""
    spec = _mapping(pod, "spec", "spec")
    affinity = _mapping(spec, "affinity", "spec.affinity")
    node = _mapping(affinity, "nodeAffinity", "spec.affinity.nodeAffinity")
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = _mapping(node, "requiredDuringSchedulingIgnoredDuringExecution", where)
    terms = required.get("nodeSelectorTerms") or []
    if not isinstance(terms, list):
        raise ValueError(f"{where}.nodeSelectorTerms: expected a list")
    for i, term in enumerate(terms):
        if not isinstance(term, dict):
            raise ValueError(f"{where}.nodeSelectorTerms[{i}]: expected an object")
        term["matchExpressions"] = [*(term.get("matchExpressions") or []), *[dict(r) for r in requirements]]
    if not terms:
        terms = [{"matchExpressions": [dict(r) for r in requirements]}]
    required["nodeSelectorTerms"] = terms


class MultiQuotaTreeAffinity(AdmissionHandler[NoArgs]):
    """Keeps a pod of a quota tree on the tree's nodes (its ElasticQuotaProfile's node selector)."""

    name = "MultiQuotaTreeAffinity"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-pod"
    mutating: ClassVar[bool] = True
    order: ClassVar[int] = 30  # after ExtendedResourceSpec, before DeviceResourceSpec, as Koordinator
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    watches: ClassVar[tuple[str, ...]] = ("ElasticQuota", "ElasticQuotaProfile")
    gate: ClassVar[str] = "PodMutatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation != "CREATE" or not self.gates.enabled("MultiQuotaTree"):
            return
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or request.namespace)
        quota_name = str((meta.get("labels") or {}).get(LABEL_QUOTA_NAME) or "") or namespace
        tree = quota_tree_of(quota_name, namespace, self.lister.list("ElasticQuota"))
        if not tree:
            return
        profiles = sorted(
            (
                p
                for p in self.lister.list("ElasticQuotaProfile")
                if ((p.get("metadata") or {}).get("labels") or {}).get(LABEL_QUOTA_TREE_ID) == tree
            ),
            key=lambda p: (str(p["metadata"].get("namespace") or ""), str(p["metadata"].get("name") or "")),
        )
        if not profiles:
            return
        selector = (profiles[0].get("spec") or {}).get("nodeSelector")
        if not isinstance(selector, Mapping):
            return
        add_tree_affinity(obj, selector_requirements(selector))
