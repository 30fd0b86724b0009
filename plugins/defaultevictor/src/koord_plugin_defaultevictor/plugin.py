"""DefaultEvictor: which pods may be evicted (Filter, PreEvictionFilter) and the eviction itself (Evict).

Koordinator wraps kubernetes-sigs/descheduler's ``DefaultEvictor`` (filters) and its own ``PodEvictor``
(eviction through the Eviction API, ``pkg/descheduler/framework/plugins/kubernetes/defaultevictor``).

Filter, in upstream's order: the ``descheduler.alpha.kubernetes.io/evict`` annotation admits a pod outright;
with ``noEvictionPolicy: Mandatory`` a ``prefer-no-eviction`` annotation refuses it; mirror, static and
terminating pods are refused; then every enabled protection and constraint must pass (bare pods, system
critical priority and the priority threshold, local storage, DaemonSet, PVCs, PDB coverage, resource
claims, the label selector, minReplicas, minPodAge).

PreEvictionFilter: with ``nodeFit`` the pod must fit another Ready node (of ``nodeSelector``); with a
``namespaceLabelSelector`` that has ``matchLabels`` its namespace's labels must match.

Evict: ``pods/eviction`` through the cluster port, so PodDisruptionBudgets are honoured; a refusal
(429 from a PDB, a vanished pod, another API error) leaves the pod in place and is reported with its cause.
A successful eviction records a ``Descheduled`` Event on the pod carrying the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from koord_lib_descheduling.evictor_filters import (
    evictable_by_priority,
    has_evict_annotation,
    has_local_storage,
    has_pvc,
    is_bare_pod,
    is_critical_priority_pod,
    is_daemonset_pod,
    is_mirror_pod,
    is_static_pod,
    is_terminating,
    pod_fits_any_other_node,
    resolve_priority_threshold,
)

from koord_framework.api.constants import (
    ANNOTATION_CONFIG_SOURCE,
    ANNOTATION_DESCHEDULER_EVICT,
    ANNOTATION_MIRROR_POD,
    SYSTEM_CRITICAL_PRIORITY,
)
from koord_framework.api.objects import PodInfo
from koord_framework.api.selectors import LabelSelector, parse_label_selector
from koord_framework.cluster.port import EventRecord
from koord_framework.descheduler.args import parse_selector_model
from koord_framework.descheduler.interface import (
    DeschedulerPlugin,
    EvictionFailed,
    EvictOptions,
    EvictPlugin,
    FilterPlugin,
    Handle,
    PreEvictionFilterPlugin,
)
from koord_framework.errors import (
    ClusterError,
    NotFoundError,
    Problem,
    TooManyRequestsError,
    ValidationError,
)
from koord_plugin_defaultevictor.args import DefaultEvictorArgs

SOFT_NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"

Constraint = Callable[[PodInfo], str | None]


class DefaultEvictor(
    DeschedulerPlugin[DefaultEvictorArgs], FilterPlugin, PreEvictionFilterPlugin, EvictPlugin
):
    name = "DefaultEvictor"
    Args = DefaultEvictorArgs

    def __init__(self, args: DefaultEvictorArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        args = self.args
        self.config: DefaultEvictorArgs = args
        self.constraints: list[Constraint] = []
        self._add_protections(args)
        selector = parse_selector_model(args.label_selector)
        extra: list[Constraint] = []
        if selector is not None and not selector.empty():
            extra.append(
                lambda p: (
                    None
                    if selector.matches(p.labels)
                    else "pod labels do not match the labelSelector filter in the policy parameter"
                )
            )
        if args.min_replicas > 1:
            extra.append(self._min_replicas)
        if args.min_pod_age is not None:
            extra.append(self._min_pod_age)
        self.constraints.extend(extra)
        self._other_constraints.extend(extra)
        # Upstream only indexes (and then checks) namespaces when ``matchLabels`` is non-empty
        # (defaultevictor.go New and PreEvictionFilter); a selector of ``matchExpressions`` alone filters
        # nothing. Once active, the whole selector (expressions included) decides.
        ns_args = args.namespace_label_selector
        ns_selector = parse_selector_model(ns_args) if ns_args is not None and ns_args.match_labels else None
        self._namespace_selector: LabelSelector | None = ns_selector

    # --- constraints ----------------------------------------------------------------------------------
    def _add_protections(self, args: DefaultEvictorArgs) -> None:
        enabled = set(args.effective_protections())
        add = self.constraints.append
        # Flags for ``filter``'s inlined checks; ``constraints`` keeps the same checks for ``reasons``.
        self._mandatory_no_eviction = args.no_eviction_policy == "Mandatory"
        self._protect_critical = "SystemCriticalPods" in enabled
        self._protect_bare = "FailedBarePods" in enabled
        self._protect_local_storage = "PodsWithLocalStorage" in enabled
        self._protect_daemonsets = "DaemonSetPods" in enabled
        self._threshold: int | None = None
        if "SystemCriticalPods" in enabled:
            add(
                lambda p: (
                    "pod has system critical priority and is protected against eviction"
                    if is_critical_priority_pod(p)
                    else None
                )
            )
            pt = args.priority_threshold
            if pt is not None and pt.is_set:
                try:
                    threshold = resolve_priority_threshold(self.handle.cluster, pt.value, pt.name)
                except ValueError as err:
                    raise ValidationError(
                        "DefaultEvictorArgs", [Problem("priorityThreshold", str(err))]
                    ) from None
                assert threshold is not None
                self._threshold = threshold
                add(
                    lambda p: (
                        None
                        if evictable_by_priority(p, threshold)
                        else "pod has higher priority than specified priority class threshold"
                    )
                )
        if "FailedBarePods" in enabled:
            add(lambda p: "pod does not have any ownerRefs" if is_bare_pod(p) else None)
        else:
            add(
                lambda p: (
                    "pod does not have any ownerRefs and is not in failed phase"
                    if is_bare_pod(p) and p.phase != "Failed"
                    else None
                )
            )
        if "PodsWithLocalStorage" in enabled:
            add(
                lambda p: (
                    "pod has local storage and is protected against eviction"
                    if has_local_storage(p)
                    else None
                )
            )
        if "DaemonSetPods" in enabled:
            add(lambda p: "daemonset pods are protected against eviction" if is_daemonset_pod(p) else None)
        self._other_constraints: list[Constraint] = []
        if "PodsWithPVC" in enabled:
            self._other_constraints.append(self._pvc_protection(args))
        if "PodsWithoutPDB" in enabled:
            self._other_constraints.append(self._pdb_protection)
        if "PodsWithResourceClaims" in enabled:
            self._other_constraints.append(self._resource_claims_protection)
        self.constraints.extend(self._other_constraints)

    def _pvc_protection(self, args: DefaultEvictorArgs) -> Constraint:
        cfg = args.pod_protections.config
        classes = (
            {sc.name for sc in cfg.pods_with_pvc.protected_storage_classes}
            if cfg is not None and cfg.pods_with_pvc is not None
            else set()
        )
        if not classes:
            return lambda p: "pod with PVC is protected against eviction" if has_pvc(p) else None

        def protected_class(pod: PodInfo) -> str | None:
            for volume in pod.volumes:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if not claim:
                    continue
                try:
                    pvc = self.handle.cluster.get("PersistentVolumeClaim", str(claim), pod.namespace)
                except NotFoundError:
                    return f"failed to get persistent volume claim {pod.namespace!r}/{claim!r}"
                storage_class = (pvc.get("spec") or {}).get("storageClassName")
                if not storage_class:
                    return f"failed to resolve storage class for pod {pod.namespace!r}/{claim!r}"
                if storage_class in classes:
                    return f"pod using protected storage class {storage_class!r}"
            return None

        return protected_class

    def _pdb_protection(self, pod: PodInfo) -> str | None:
        pdbs, _ = self.handle.cluster.list("PodDisruptionBudget", pod.namespace)
        for pdb in pdbs:
            try:
                selector = parse_label_selector((pdb.get("spec") or {}).get("selector"))
            except ValueError:
                continue  # an invalid selector never matches, as upstream
            if selector.matches(pod.labels):
                return None
        return "pod does not have a PodDisruptionBudget and is protected against eviction"

    def _resource_claims_protection(self, pod: PodInfo) -> str | None:
        # The slim record does not keep spec.resourceClaims; read the pod (only when this protection is on).
        try:
            raw = self.handle.cluster.get("Pod", pod.name, pod.namespace)
        except NotFoundError:
            return None
        if (raw.get("spec") or {}).get("resourceClaims"):
            return "pod has ResourceClaims and descheduler is configured to protect ResourceClaims pods"
        return None

    def _min_replicas(self, pod: PodInfo) -> str | None:
        if len(pod.owner_refs) != 1:
            return None  # no owner, or several (upstream does not support those)
        owned = len(self.handle.pods_owned_by(pod.owner_refs[0].uid))
        if owned < self.config.min_replicas:
            return f"owner has {owned} replicas which is less than minReplicas of {self.config.min_replicas}"
        return None

    def _min_pod_age(self, pod: PodInfo) -> str | None:
        min_age = self.config.min_pod_age
        assert min_age is not None
        if pod.start_time is None or self.handle.clock.now() - pod.start_time < min_age:
            return f"pod age is not older than MinPodAge: {min_age.go_string()} seconds"
        return None

    # --- Filter / PreEvictionFilter -------------------------------------------------------------------
    def reasons(self, pod: PodInfo) -> list[str]:
        """Why ``filter`` refuses the pod (empty: it admits it)."""
        if has_evict_annotation(pod):
            return []
        if self.config.no_eviction_policy == "Mandatory" and SOFT_NO_EVICTION_ANNOTATION in pod.annotations:
            return ["pod has the prefer-no-eviction annotation and noEvictionPolicy is Mandatory"]
        out = []
        if is_mirror_pod(pod):
            out.append("pod is a mirror pod")
        if is_static_pod(pod):
            out.append("pod is a static pod")
        if is_terminating(pod):
            out.append("pod is terminating")
        for constraint in self.constraints:
            reason = constraint(pod)
            if reason is not None:
                out.append(reason)
        return out

    def filter(self, pod: PodInfo) -> bool:
        # The checks of ``reasons``, inlined and stopping at the first refusal: Filter runs for every
        # candidate pod of every overloaded node, so it must be cheap.
        ann = pod.annotations
        if ann:
            if ANNOTATION_DESCHEDULER_EVICT in ann:
                return True
            if self._mandatory_no_eviction and SOFT_NO_EVICTION_ANNOTATION in ann:
                return False
            if ANNOTATION_MIRROR_POD in ann:
                return False
            source = ann.get(ANNOTATION_CONFIG_SOURCE)
            if source is not None and source != "api":
                return False
        if pod.deletion_time is not None:
            return False
        refs = pod.owner_refs
        if not refs:
            if self._protect_bare or pod.phase != "Failed":
                return False
        elif self._protect_daemonsets and any(r.kind == "DaemonSet" for r in refs):
            return False
        priority = pod.priority
        if self._protect_critical and priority is not None:
            if priority >= SYSTEM_CRITICAL_PRIORITY:
                return False
            if self._threshold is not None and priority >= self._threshold:
                return False
        if self._protect_local_storage and pod.volumes and has_local_storage(pod):
            return False
        return all(constraint(pod) is None for constraint in self._other_constraints)

    def pre_eviction_filter(self, pod: PodInfo) -> bool:
        if self.config.node_fit:
            nodes = self.handle.ready_nodes(self.config.node_selector)
            # descheduler's NodeFit, which the DefaultEvictor wraps, also wants a free pod slot and no
            # conflict with the pod's required anti-affinity.
            if not pod_fits_any_other_node(pod, nodes, self.handle.pods_on_node, descheduler=True):
                return False
        if self._namespace_selector is None:
            return True
        labels = self.handle.namespace_labels(pod.namespace)
        return labels is not None and self._namespace_selector.matches(labels)

    # --- Evict ----------------------------------------------------------------------------------------
    def evict(self, pod: PodInfo, options: EvictOptions) -> bool:
        reason = options.reason or options.plugin_name or "NotSet"
        requested_by = options.plugin_name or self.name
        try:
            self.handle.cluster.evict(
                pod.namespace, pod.name, reason=reason, requested_by=requested_by, uid=pod.uid or None
            )
        except TooManyRequestsError as err:
            raise EvictionFailed(f"error when evicting pod (ignoring) {pod.name!r}: {err}") from err
        except NotFoundError as err:
            raise EvictionFailed(f"pod not found when evicting {pod.name!r}: {err}") from err
        except ClusterError as err:
            raise EvictionFailed(f"error evicting pod {pod.key}: {err}") from err
        self.handle.cluster.record_event(
            EventRecord(
                kind="Pod",
                namespace=pod.namespace,
                name=pod.name,
                reason="Descheduled",
                message=f"pod evicted by {reason}",
                component=requested_by,
                time=self.handle.clock.now(),
                extra=_event_extra(pod, requested_by, reason),
            )
        )
        return True


def _event_extra(pod: PodInfo, plugin: str, reason: str) -> dict[str, Any]:
    return {"node": pod.node_name, "plugin": plugin, "evictionReason": reason, "action": "Evicting"}
