"""ElasticQuota validation served by koord-manager's webhook (Koordinator's
``validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``): ``validation.validate_quota`` on the object
against the quotas and pods the manager's informer holds; every problem found is in the denial. And the
ElasticQuota rules of ``/validate-pod`` (``ElasticQuotaPodValidation``) and its quota evaluation
(``EvaluateQuota``)."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from koord_framework.errors import ClusterError, ConflictError
from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.plugin import NoArgs
from koord_plugin_elasticquota.quota_evaluation import (
    ANNOTATION_REPLACE_RESOURCES,
    check_request,
    dump_resource_list,
    parse_resource_list,
    pod_usage,
    quota_admission,
    quota_child_request,
    transform_replace_resources,
)
from koord_plugin_elasticquota.quota_object import (
    ANNOTATION_CHILD_REQUEST,
    ANNOTATION_SHARED_WEIGHT,
    DEFAULT_QUOTA_NAME,
    LABEL_PREEMPTIBLE,
    LABEL_QUOTA_NAME,
    LABEL_QUOTA_PARENT,
    LABEL_QUOTA_TREE_ID,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    ElasticQuotaSpec,
)
from koord_plugin_elasticquota.validation import validate_quota

__all__ = [
    "ElasticQuotaMutation",
    "ElasticQuotaPodValidation",
    "ElasticQuotaValidation",
    "EvaluateQuota",
    "delete_problem",
    "fill_quota_defaults",
    "quota_name_of_pod",
    "tree_id_problem",
]


class ElasticQuotaValidation(AdmissionHandler[NoArgs]):
    """Refuses an ElasticQuota whose min/max, parent or tree is wrong (Koordinator's topology checks)."""

    name = "ElasticQuotaValidation"
    Args = NoArgs
    path: ClassVar[str] = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
    mutating: ClassVar[bool] = False
    resources: ClassVar[tuple[str, ...]] = ("elasticquotas",)
    watches: ClassVar[tuple[str, ...]] = ("ElasticQuota", "Pod")
    gate: ClassVar[str] = "ElasticValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        existing = self.lister.list("ElasticQuota")
        pods = self.lister.list("Pod")
        if request.operation == "DELETE":
            problem = delete_problem(obj, existing, pods)
            if problem:
                raise Denied(problem, 400)
            return
        if request.operation not in ("CREATE", "UPDATE"):
            return
        problems = [str(p) for p in validate_quota(obj, existing, pods)]
        tree = tree_id_problem(obj, request.old_object if request.operation == "UPDATE" else None, existing)
        if tree:
            problems.append(tree)
        if problems:
            # Koordinator's ElasticQuotaValidatingHandler: admission.Errored(400, err) for a failed check.
            raise Denied("; ".join(problems), 400)


def _meta(obj: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    meta = obj.get("metadata") or {}
    return str(meta.get("name") or ""), meta.get("labels") or {}


def _parent(obj: Mapping[str, Any]) -> str:
    name, labels = _meta(obj)
    parent = str(labels.get(LABEL_QUOTA_PARENT) or "")
    return parent or ("" if name == ROOT_QUOTA_NAME else ROOT_QUOTA_NAME)


def _tree(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj)[1].get(LABEL_QUOTA_TREE_ID) or "")


def tree_id_problem(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, quotas: list[dict[str, Any]]
) -> str:
    """Koordinator's ``checkTreeID``: a quota's tree id may not change, and is its parent's and children's
    (``""``: none of that is wrong)."""
    name, _ = _meta(obj)
    if name == ROOT_QUOTA_NAME:
        return ""
    tree = _tree(obj)
    if old is not None and _tree(old) != tree:
        return f"{name} tree id changed [{_tree(old)}] vs [{tree}]"
    by_name = {_meta(q)[0]: q for q in quotas}
    parent = _parent(obj)
    if parent != ROOT_QUOTA_NAME and parent in by_name and _tree(by_name[parent]) != tree:
        return f"{name} tree id is different from parent {parent}, [{tree}] vs [{_tree(by_name[parent])}]"
    for child_name, child in sorted(by_name.items()):
        if child_name != name and _parent(child) == name and _tree(child) != tree:
            return f"{name} tree id is different from child {child_name}, [{tree}] vs [{_tree(child)}]"
    return ""


def delete_problem(obj: Mapping[str, Any], quotas: list[dict[str, Any]], pods: list[dict[str, Any]]) -> str:
    """Koordinator's ``ValidDeleteQuota``: the built-in quotas, an unknown one, one with child quotas or with
    pods labelled into it cannot be deleted (``""``: it can)."""
    name, _ = _meta(obj)
    if name in (SYSTEM_QUOTA_NAME, ROOT_QUOTA_NAME, DEFAULT_QUOTA_NAME):
        return f"can not delete quotaGroup :{name}"
    names = {_meta(q)[0] for q in quotas}
    if name not in names:
        return f"not found quota:{name}"
    children = [q for q in quotas if _meta(q)[0] != name and _parent(q) == name]
    if children:
        return f"delete quota failed, quota {name} has {len(children)} child quotas"
    bound = sorted(
        (
            str((p.get("metadata") or {}).get("namespace") or ""),
            str((p.get("metadata") or {}).get("name") or ""),
        )
        for p in pods
        if ((p.get("metadata") or {}).get("labels") or {}).get(LABEL_QUOTA_NAME) == name
    )
    if bound:
        shown = [n for _, n in bound] if len(bound) <= 2 else [bound[0][1], bound[1][1], "..."]
        return f"delete quota failed, quota {name} has {len(bound)} child pods: {', '.join(shown)}"
    return ""


def _parse_specs(quotas: list[dict[str, Any]]) -> list[ElasticQuotaSpec]:
    specs = []
    for obj in quotas:
        try:
            specs.append(ElasticQuotaSpec.from_manifest(obj))
        except ValueError:
            continue  # a quota the topology could not take is not in it (as Koordinator's quotaInfoMap)
    return specs


def quota_name_of_pod(pod: Mapping[str, Any], specs: list[ElasticQuotaSpec], disable_default: bool) -> str:
    """Koordinator's webhook ``GetQuotaName``: the quota-name label; else (unless ``DisableDefaultQuota``)
    the ElasticQuota named after the pod's namespace in it, then the first quota listing the namespace in
    its namespaces annotation, then the default quota."""
    meta = pod.get("metadata") or {}
    name = str((meta.get("labels") or {}).get(LABEL_QUOTA_NAME) or "")
    if disable_default or name:
        return name
    namespace = str(meta.get("namespace") or "")
    for spec in specs:
        if spec.namespace == namespace and spec.name == namespace:
            return spec.name
    for spec in specs:
        if namespace in spec.namespaces:
            return spec.name
    return DEFAULT_QUOTA_NAME


class ElasticQuotaPodValidation(AdmissionHandler[NoArgs]):
    """The ElasticQuota rules of ``/validate-pod`` (Koordinator's ``QuotaMetaChecker.ValidatePod``): a pod
    may not be put in a parent quota (unless ``SupportParentQuotaSubmitPod``), and its preemptible label may
    not change."""

    name = "ElasticQuotaPodValidation"
    Args = NoArgs
    path: ClassVar[str] = "/validate-pod"
    order: ClassVar[int] = 30  # after the colocation-profile rules, as Koordinator runs them
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    watches: ClassVar[tuple[str, ...]] = ("ElasticQuota",)
    gate: ClassVar[str] = "PodValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation == "UPDATE":
            old = request.old_object
            if old is None:
                raise Denied("oldPod is nil for update operation", 400)
            old_label = ((old.get("metadata") or {}).get("labels") or {}).get(LABEL_PREEMPTIBLE)
            new_label = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_PREEMPTIBLE)
            if (old_label or "") != (new_label or ""):
                raise Denied("Preemptible label is forbidden modify now.", 400)
        elif request.operation != "CREATE":
            return
        if self.gates.enabled("SupportParentQuotaSubmitPod"):
            return
        specs = _parse_specs(self.lister.list("ElasticQuota"))
        name = quota_name_of_pod(obj, specs, self.gates.enabled("DisableDefaultQuota"))
        by_name = {s.name: s for s in specs}
        if not name or name == DEFAULT_QUOTA_NAME or name not in by_name:
            return
        if by_name[name].is_parent:
            pod_name = (obj.get("metadata") or {}).get("name") or ""
            raise Denied(f"pod can not be linked to a parentQuotaGroup,quota:{name}, pod:{pod_name}", 400)


_SKIPPED_QUOTAS = frozenset({"", DEFAULT_QUOTA_NAME, SYSTEM_QUOTA_NAME, ROOT_QUOTA_NAME})
_UPDATE_RETRIES = 3
"""Retries of the child-request write after a conflict (Koordinator's ``quotaUpdateMinRetries``)."""


def _resource_version(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class EvaluateQuota(AdmissionHandler[NoArgs]):
    """The ResourceQuota-like evaluation of ``/validate-pod`` (Koordinator's ``evaluateQuota``, gate
    ``EnableQuotaAdmission``): a pod created into an ElasticQuota (or moved into another one, with
    ``EnableQuotaAdmissionOnUpdate``) is refused when the quota's admitted requests plus its own would
    exceed the quota's ``admission`` (else ``max``); when admitted, the new sum is written to the quota's
    ``child-request`` annotation.

    Admissions of one quota run one at a time in a process; the write is optimistic (resourceVersion), so
    several processes or replicas admitting into one quota retry on conflict with a fresh read, as
    Koordinator's accessor with ``--quota-update-conflict-fresh-get``."""

    name = "EvaluateQuota"
    Args = NoArgs
    path: ClassVar[str] = "/validate-pod"
    order: ClassVar[int] = 40  # after the ElasticQuota pod rules, before the device rules
    resources: ClassVar[tuple[str, ...]] = ("pods",)
    watches: ClassVar[tuple[str, ...]] = ("ElasticQuota",)
    writes: ClassVar[tuple[str, ...]] = ("ElasticQuota",)
    gate: ClassVar[str] = "PodValidatingWebhook"

    def __init__(self, args: NoArgs | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._updated: dict[str, dict[str, Any]] = {}
        """Quotas this handler wrote, newer than the informer may hold yet (Koordinator's updatedQuotas)."""

    def _lock(self, key: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def _quota_name(self, pod: Mapping[str, Any], namespace: str) -> str:
        meta = pod.get("metadata") or {}
        if not meta.get("namespace") and namespace:
            pod = {**pod, "metadata": {**meta, "namespace": namespace}}
        specs = _parse_specs(self.lister.list("ElasticQuota"))
        return quota_name_of_pod(pod, specs, self.gates.enabled("DisableDefaultQuota"))

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if not self.gates.enabled("EnableQuotaAdmission"):
            return
        if request.operation == "CREATE":
            quota_name = self._quota_name(obj, request.namespace)
        elif request.operation == "UPDATE":
            if not self.gates.enabled("EnableQuotaAdmissionOnUpdate"):
                return
            if request.old_object is None:
                raise Denied("oldPod is nil for update operation", 400)
            quota_name = self._quota_name(obj, request.namespace)
            if self._quota_name(request.old_object, request.namespace) == quota_name:
                return
        else:
            return
        if quota_name in _SKIPPED_QUOTAS:
            return
        found = [
            q for q in self.lister.list("ElasticQuota") if (q.get("metadata") or {}).get("name") == quota_name
        ]
        if not found:
            raise Denied(f"elastic quota {quota_name} not found", 400)
        if len(found) > 1:
            raise Denied(f"more than one elastic quota {quota_name} found", 400)
        pod = copy.deepcopy(obj)  # the transform must not touch the object other handlers see
        if self.gates.enabled("ElasticQuotaEvaluationTransformPod") and self.gates.enabled(
            "ReplaceResourcesTransformer"
        ):
            try:
                transform_replace_resources(pod)
            except ValueError as exc:
                raise ValueError(f"metadata.annotations[{ANNOTATION_REPLACE_RESOURCES}]: {exc}") from None
        usage = pod_usage(pod)
        meta = found[0].get("metadata") or {}
        key = f"{meta.get('namespace') or ''}/{quota_name}"
        with self._lock(key):
            self._evaluate(key, found[0], usage, request.dry_run)

    def _current(self, key: str, cached: dict[str, Any]) -> dict[str, Any]:
        """The informer's quota, unless this handler wrote a newer one (``checkCache``)."""
        mine = self._updated.get(key)
        if mine is None:
            return cached
        if _resource_version(cached) >= _resource_version(mine):
            del self._updated[key]
            return cached
        return mine

    def _evaluate(self, key: str, cached: dict[str, Any], usage: Mapping[str, Any], dry_run: bool) -> None:
        quota = self._current(key, cached)
        for attempt in range(_UPDATE_RETRIES + 1):
            try:
                used = quota_child_request(quota)
                admission = quota_admission(quota)
                names = frozenset(((quota.get("spec") or {}).get("max") or {}).keys())
            except ValueError as exc:
                raise Denied(f"elastic quota {key}: {exc}", 400) from None
            try:
                new_usage = check_request(key, used, admission, names, usage)
            except PermissionError as exc:
                raise Denied(str(exc), 400) from None
            if new_usage is None or new_usage == used or dry_run:
                return  # nothing to record (a dry run records nothing: the webhook has no side effects)
            updated = copy.deepcopy(quota)
            annotations = updated.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[ANNOTATION_CHILD_REQUEST] = dump_resource_list(new_usage)
            updated.setdefault("kind", "ElasticQuota")
            try:
                self._updated[key] = self.writer.update(updated)
                return
            except ConflictError as exc:
                if attempt == _UPDATE_RETRIES:
                    raise Denied(f"elastic quota {key}: {exc}", 400) from None
                namespace, _, name = key.partition("/")
                fresh = self.writer.get("ElasticQuota", name, namespace)
                if fresh is None:
                    raise Denied(f"elastic quota {name} not found", 400) from None
                quota = fresh
            except ClusterError as exc:
                raise Denied(f"elastic quota {key}: {exc}", 400) from None


def fill_quota_defaults(quota: dict[str, Any], quotas: list[dict[str, Any]]) -> None:
    """Koordinator's ``fillQuotaDefaultInformation``, in place: the parent label defaults to the root quota;
    a quota under another one takes its parent's tree id unless it has one; the shared-weight annotation
    defaults to ``spec.max`` and otherwise gets exactly ``max``'s resources (missing ones from ``max``,
    extra ones dropped). ``Denied`` (400) naming the quota when the parent is unknown or the annotation does
    not parse."""
    meta = quota.setdefault("metadata", {})
    name = str(meta.get("name") or "")
    if name == ROOT_QUOTA_NAME:
        return
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    meta["labels"], meta["annotations"] = labels, annotations
    if not labels.get(LABEL_QUOTA_PARENT):
        labels[LABEL_QUOTA_PARENT] = ROOT_QUOTA_NAME
    parent = labels[LABEL_QUOTA_PARENT]
    if not labels.get(LABEL_QUOTA_TREE_ID) and parent != ROOT_QUOTA_NAME:
        found = [q for q in quotas if (q.get("metadata") or {}).get("name") == parent]
        if not found:
            raise Denied(f"fill quota {name} failed, parent not exist", 400)
        tree = ((found[0].get("metadata") or {}).get("labels") or {}).get(LABEL_QUOTA_TREE_ID)
        if tree:
            labels[LABEL_QUOTA_TREE_ID] = tree
    spec = quota.get("spec") or {}
    raw_max = spec.get("max") if isinstance(spec, Mapping) else None
    try:
        max_ = parse_resource_list(raw_max, "spec.max")
    except ValueError as exc:
        raise ValueError(f"ElasticQuota {name}: {exc}") from None
    shared = annotations.get(ANNOTATION_SHARED_WEIGHT)
    if not shared:
        # json.Marshal of a nil ResourceList is "null", as Koordinator writes for a quota without max.
        annotations[ANNOTATION_SHARED_WEIGHT] = dump_resource_list(max_) if raw_max is not None else "null"
        return
    try:
        weights = parse_resource_list(json.loads(shared), f"annotation {ANNOTATION_SHARED_WEIGHT}")
    except ValueError as exc:
        raise Denied(f"fillDefaultQuotaInfo unmarshal sharedWeight failed:{exc}", 400) from None
    fixed = {k: weights.get(k, v) for k, v in max_.items()}
    if fixed.keys() != weights.keys():
        annotations[ANNOTATION_SHARED_WEIGHT] = dump_resource_list(fixed)


class ElasticQuotaMutation(AdmissionHandler[NoArgs]):
    """Fills a new ElasticQuota's parent, tree id and shared weight (Koordinator's ElasticQuota mutating
    webhook, ``QuotaMetaChecker.AdmitQuota``)."""

    name = "ElasticQuotaMutation"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
    mutating: ClassVar[bool] = True
    resources: ClassVar[tuple[str, ...]] = ("elasticquotas",)
    watches: ClassVar[tuple[str, ...]] = ("ElasticQuota",)
    gate: ClassVar[str] = "ElasticMutatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation != "CREATE":
            return
        fill_quota_defaults(obj, self.lister.list("ElasticQuota"))
