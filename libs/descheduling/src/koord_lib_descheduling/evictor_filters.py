"""Which pods are never evicted, and whether a pod would fit elsewhere (spec §1.4).

Two families share these checks:

* Koordinator's ``evictions.EvictorFilter`` (used by the MigrationController): the *base checks* always
  apply — DaemonSet pods, mirror pods, static pods, terminating pods are rejected — then the configurable
  *constraints* (bare pods, system-critical and priority threshold, local storage, PVCs, nodeFit, label
  selector). The ``descheduler.alpha.kubernetes.io/evict`` annotation overrides every failed check.
* kubernetes-sigs/descheduler's ``DefaultEvictor`` (its own plugin distribution), which builds on the same
  predicates with its "pod protections".

``node_fit`` is ``pkg/descheduler/node.NodeFit``: the pod's nodeSelector and required node affinity match,
its tolerations cover the node's NoSchedule/NoExecute taints, its requests fit in allocatable minus the
requests of the pods already there (a resource the node lacks has nothing free), and the node is
schedulable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from koord_framework.api.constants import (
    ANNOTATION_CONFIG_SOURCE,
    ANNOTATION_DESCHEDULER_EVICT,
    ANNOTATION_MIRROR_POD,
    SYSTEM_CRITICAL_PRIORITY,
)
from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.resources import CPU, MEMORY, PODS
from koord_framework.api.selectors import (
    DO_NOT_SCHEDULE_EFFECTS,
    LabelSelector,
    RequiredNodeAffinity,
    SelectorError,
    find_untolerated_taint,
    parse_label_selector,
)
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import NotFoundError

Constraint = Callable[[PodInfo], str | None]
"""A configurable check: the reason a pod is refused, or None."""

PodsOnNode = Callable[[str], Sequence[PodInfo]]
NodeGetter = Callable[[], Sequence[NodeRecord]]

_BASIC_RESOURCES = frozenset({CPU, MEMORY, PODS})


# --- predicates -----------------------------------------------------------------------------------------
def has_evict_annotation(pod: PodInfo) -> bool:
    return ANNOTATION_DESCHEDULER_EVICT in pod.annotations


def is_daemonset_pod(pod: PodInfo) -> bool:
    return any(ref.kind == "DaemonSet" for ref in pod.owner_refs)


def is_mirror_pod(pod: PodInfo) -> bool:
    return ANNOTATION_MIRROR_POD in pod.annotations


def is_static_pod(pod: PodInfo) -> bool:
    """The kubelet's config source annotation names a source other than the API server."""
    source = pod.annotations.get(ANNOTATION_CONFIG_SOURCE)
    return source is not None and source != "api"


def is_terminating(pod: PodInfo) -> bool:
    return pod.deletion_time is not None


def is_critical_priority_pod(pod: PodInfo) -> bool:
    return pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY


def is_bare_pod(pod: PodInfo) -> bool:
    return not pod.owner_refs


def has_local_storage(pod: PodInfo) -> bool:
    return any(
        isinstance(v, Mapping) and (v.get("hostPath") is not None or v.get("emptyDir") is not None)
        for v in pod.volumes
    )


def has_pvc(pod: PodInfo) -> bool:
    return any(isinstance(v, Mapping) and v.get("persistentVolumeClaim") is not None for v in pod.volumes)


def evictable_by_priority(pod: PodInfo, threshold: int) -> bool:
    """``IsPodEvictableBasedOnPriority``: a pod without priority, or below the threshold."""
    return pod.priority is None or pod.priority < threshold


def resolve_priority_threshold(cluster: ClusterPort, value: int | None, name: str | None) -> int | None:
    """``GetPriorityValueFromPriorityThreshold``: the value, or the named PriorityClass's value.

    Neither set: None (no threshold). A name that does not exist raises ``NotFoundError``; a threshold above
    system-critical raises ``ValueError``, as upstream refuses it (it would protect less than the
    system-critical check already does).
    """
    if value is None and name:
        try:
            obj = cluster.get("PriorityClass", name)
        except NotFoundError as err:
            raise NotFoundError(f"priority threshold: PriorityClass {name!r} not found") from err
        value = int(obj.get("value") or 0)
    if value is not None and value > SYSTEM_CRITICAL_PRIORITY:
        raise ValueError(
            f"priority threshold can't be greater than {SYSTEM_CRITICAL_PRIORITY} (resolved to {value})"
        )
    return value


def base_check_reasons(pod: PodInfo) -> list[str]:
    """The checks Koordinator's EvictorFilter always applies."""
    reasons = []
    if is_daemonset_pod(pod):
        reasons.append("pod is a DaemonSet pod")
    if is_mirror_pod(pod):
        reasons.append("pod is a mirror pod")
    if is_static_pod(pod):
        reasons.append("pod is a static pod")
    if is_terminating(pod):
        reasons.append("pod is terminating")
    return reasons


# --- node fit -------------------------------------------------------------------------------------------
def node_requested(pods: Iterable[PodInfo], names: Iterable[str]) -> dict[str, int]:
    """``NodeUtilization``: summed requests of ``names`` over pods (cpu/memory always, pods = count)."""
    pods = list(pods)
    totals: dict[str, int] = {CPU: 0, MEMORY: 0, PODS: len(pods)}
    wanted = [n for n in names if n not in _BASIC_RESOURCES]
    for n in wanted:
        totals[n] = 0
    for pod in pods:
        req = pod.requests
        for n in (CPU, MEMORY, *wanted):
            value = req.get(n)
            if value:
                totals[n] += value
    return totals


def node_available(node: NodeRecord, requested: Mapping[str, int], names: Iterable[str]) -> dict[str, int]:
    """``nodeAvailableResources``: allocatable minus requested for cpu, memory, pods and the extended
    resources named; an extended resource the node does not have has 0 available."""
    alloc = node.allocatable
    out = {
        CPU: alloc.get(CPU, 0) - requested.get(CPU, 0),
        MEMORY: alloc.get(MEMORY, 0) - requested.get(MEMORY, 0),
        PODS: alloc.get(PODS, 0) - requested.get(PODS, 0),
    }
    for n in names:
        if n not in _BASIC_RESOURCES:
            out[n] = alloc[n] - requested.get(n, 0) if n in alloc else 0
    return out


def _non_terminal(pods: Iterable[PodInfo]) -> list[PodInfo]:
    return [p for p in pods if p.phase not in ("Succeeded", "Failed")]


def anti_affinity_conflict(pod: PodInfo, node: NodeRecord, running: Sequence[PodInfo]) -> str | None:
    """kubernetes-sigs/descheduler v0.35.1 ``podMatchesInterPodAntiAffinity``: an error when a pod of
    ``running`` (the node's pods that are not Succeeded/Failed), not named like ``pod``, matches one of
    ``pod``'s required anti-affinity terms (the term's namespaces, else the pod's own; its label selector)
    and ``node`` has the term's topology key. A selector that does not parse is an error too, as in Go."""
    anti = (pod.affinity or {}).get("podAntiAffinity") or {}
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    if not terms:
        return None
    for term in terms:
        namespaces = set(term.get("namespaces") or ()) or {pod.namespace}
        try:
            selector = parse_label_selector(term.get("labelSelector"))
        except SelectorError as err:
            return f"pod anti-affinity term has an invalid label selector: {err}"
        for other in running:
            if (
                other.name == pod.name
                or other.namespace not in namespaces
                or not selector.matches(other.labels)
            ):
                continue
            if str(term.get("topologyKey") or "") in node.labels:
                return "pod matches inter-pod anti-affinity rule of other pod on node"
    return None


def node_fit(
    pod: PodInfo, node: NodeRecord, pods_on_node: PodsOnNode, *, descheduler: bool = False
) -> list[str]:
    """Why ``pod`` would not fit ``node`` (empty: it fits): Koordinator's ``NodeFit``.

    ``descheduler`` adds the two checks of kubernetes-sigs/descheduler v0.35.1's ``NodeFit``, which the
    DefaultEvictor wraps and Koordinator's own helper (the MigrationController's) does not make: at least
    one pod slot must be left ("insufficient pods", whatever the pod requests), and no pod on the node may
    match the pod's required anti-affinity (``anti_affinity_conflict``)."""
    errors: list[str] = []
    if not RequiredNodeAffinity.of(pod).match_node(node):
        errors.append("pod node selector does not match the node label")
    if find_untolerated_taint(node.taints, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS) is not None:
        errors.append("pod does not tolerate taints on the node")
    names = list(pod.requests)
    running = _non_terminal(pods_on_node(node.name))
    available = node_available(node, node_requested(running, names), names)
    for n in names:
        # Go compares MilliValue()s; our integers keep the same order for every resource.
        if n not in available or pod.requests[n] > available[n]:
            errors.append(f"insufficient {n}")
    if descheduler and not errors and available[PODS] <= 0:
        errors.append(f"insufficient {PODS}")
    if node.unschedulable:
        errors.append("node is not schedulable")
    if descheduler:
        conflict = anti_affinity_conflict(pod, node, running)
        if conflict is not None:
            errors.append(conflict)
    return errors


def pod_fits_any_other_node(
    pod: PodInfo, nodes: Iterable[NodeRecord], pods_on_node: PodsOnNode, *, descheduler: bool = False
) -> bool:
    return any(
        node.name != pod.node_name and not node_fit(pod, node, pods_on_node, descheduler=descheduler)
        for node in nodes
    )


def pod_fits_any_node(pod: PodInfo, nodes: Iterable[NodeRecord], pods_on_node: PodsOnNode) -> bool:
    return any(not node_fit(pod, node, pods_on_node) for node in nodes)


# --- Koordinator's EvictorFilter ------------------------------------------------------------------------
class EvictorFilter:
    """``evictions.NewEvictorFilter``: base checks, then the configured constraints; the evict annotation
    overrides any failure."""

    def __init__(
        self,
        *,
        node_getter: NodeGetter,
        pods_on_node: PodsOnNode,
        evict_local_storage_pods: bool = False,
        evict_system_critical_pods: bool = False,
        ignore_pvc_pods: bool = False,
        evict_failed_bare_pods: bool = False,
        evict_all_bare_pods: bool = False,
        priority_threshold: int | None = None,
        node_fit: bool = False,
        label_selector: LabelSelector | None = None,
    ) -> None:
        self.constraints: list[Constraint] = []
        add = self.constraints.append
        if not evict_all_bare_pods:
            if evict_failed_bare_pods:
                add(
                    lambda p: (
                        "pod does not have any ownerRefs and is not in failed phase"
                        if is_bare_pod(p) and p.phase != "Failed"
                        else None
                    )
                )
            else:
                add(lambda p: "pod does not have any ownerRefs" if is_bare_pod(p) else None)
        if not evict_system_critical_pods:
            add(lambda p: "pod has system critical priority" if is_critical_priority_pod(p) else None)
            if priority_threshold is not None:
                threshold = priority_threshold
                add(
                    lambda p: (
                        None
                        if evictable_by_priority(p, threshold)
                        else "pod has higher priority than specified priority class threshold"
                    )
                )
        if not evict_local_storage_pods:
            add(
                lambda p: (
                    "pod has local storage and descheduler is not configured with evictLocalStoragePods"
                    if has_local_storage(p)
                    else None
                )
            )
        if ignore_pvc_pods:
            add(
                lambda p: (
                    "pod has a PVC and descheduler is configured to ignore PVC pods" if has_pvc(p) else None
                )
            )
        if node_fit:
            add(
                lambda p: (
                    None
                    if pod_fits_any_other_node(p, node_getter(), pods_on_node)
                    else "pod does not fit on any other node because of nodeSelector(s), Taint(s), "
                    "or nodes marked as unschedulable"
                )
            )
        if label_selector is not None and not label_selector.empty():
            selector = label_selector
            add(
                lambda p: (
                    None
                    if selector.matches(p.labels)
                    else "pod labels do not match the labelSelector filter in the policy parameter"
                )
            )

    def reasons(self, pod: PodInfo) -> list[str]:
        """Every failed check (empty: evictable), ignoring the override annotation."""
        out = base_check_reasons(pod)
        for constraint in self.constraints:
            reason = constraint(pod)
            if reason is not None:
                out.append(reason)
        return out

    def filter(self, pod: PodInfo) -> bool:
        return has_evict_annotation(pod) or not self.reasons(pod)


def constraint_reasons(constraints: Sequence[Constraint], pod: PodInfo) -> list[str]:
    out = []
    for constraint in constraints:
        reason = constraint(pod)
        if reason is not None:
            out.append(reason)
    return out
