"""PodDisruptionBudget arithmetic and the Eviction API's decision, as Kubernetes makes them.

Two upstream pieces are folded together here because the embedded cluster has no disruption controller
running beside it: the controller's status computation (``pkg/controller/disruption/disruption.go``:
expected pods, desired and current healthy, disruptions allowed) and the eviction subresource's check
(``pkg/registry/core/pod/storage/eviction.go``). The embedded cluster computes the status afresh for every
eviction instead of reading a possibly stale ``status`` block; since it deletes an evicted pod at once
there is no ``disruptedPods`` bookkeeping to do.

Deliberate difference: where a pod's controller (named by its controller ``ownerReference``) is not in
the cluster, Kubernetes fails the budget's sync and so refuses every eviction; embedded clusters are
routinely loaded with pods but without their workloads, so such a pod counts as one expected pod of its
own. Pods without any controller are left out of the expected count exactly as upstream does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
ScaleLookup = Callable[[Mapping[str, Any], str], tuple[tuple[str, str, str], int] | None]
"""(controller ownerReference, namespace) -> (identity of the scaled workload, its replicas), or None."""

_PERCENT = re.compile(r"^(-?[0-9]+)%$")


class SelectorError(ValueError):
    """A label selector Kubernetes would refuse to convert (unknown operator, bad values)."""


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, Any]) -> bool:
    """``metav1.LabelSelectorAsSelector(selector).Matches(labels)``.

    ``None`` matches nothing and ``{}`` matches everything (policy/v1 semantics; callers that need the
    policy/v1beta1 rule, where an empty selector matches nothing, check emptiness themselves).
    """
    if selector is None:
        return False
    match_labels = selector.get("matchLabels") or {}
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for i, expr in enumerate(selector.get("matchExpressions") or ()):
        if not isinstance(expr, Mapping):
            raise SelectorError(f"matchExpressions[{i}] is not a mapping")
        key = str(expr.get("key") or "")
        op = expr.get("operator")
        values = expr.get("values") or []
        present = key in labels
        if op == "In":
            if not values:
                raise SelectorError(f"matchExpressions[{i}]: operator In needs values")
            if not present or labels[key] not in values:
                return False
        elif op == "NotIn":
            if not values:
                raise SelectorError(f"matchExpressions[{i}]: operator NotIn needs values")
            if present and labels[key] in values:
                return False
        elif op == "Exists":
            if values:
                raise SelectorError(f"matchExpressions[{i}]: operator Exists takes no values")
            if not present:
                return False
        elif op == "DoesNotExist":
            if values:
                raise SelectorError(f"matchExpressions[{i}]: operator DoesNotExist takes no values")
            if present:
                return False
        else:
            raise SelectorError(f"matchExpressions[{i}]: unknown operator {op!r}")
    return True


def scaled_value(value: int | str, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int as is, ``"N%"`` as N percent of ``total``."""
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _PERCENT.fullmatch(value)
        if m is None:
            raise ValueError(
                f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}"
            )
        percent = int(m.group(1))
        if round_up:
            return math.ceil(percent * total / 100)
        return math.floor(percent * total / 100)
    raise ValueError(f"invalid value for IntOrString: {value!r}")


def _conditions(pod: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [c for c in status.get("conditions") or () if isinstance(c, Mapping)]


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """``podutil.IsPodReady``, adapted to manifests that never went through a kubelet.

    A ``Ready`` condition decides when present. Without one, a ``Running`` pod counts as ready: embedded
    clusters are loaded from hand-written manifests that state the phase and rarely the conditions.
    """
    for cond in _conditions(pod):
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return phase(pod) == "Running"


def _controller_ref(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def _is_v1beta1(pdb: Mapping[str, Any]) -> bool:
    return pdb.get("apiVersion") == "policy/v1beta1"


def pdb_selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether the budget covers the pod: same namespace and the selector matches.

    An invalid selector covers nothing (the eviction handler skips such a budget).
    """
    pdb_ns = (pdb.get("metadata") or {}).get("namespace") or "default"
    pod_ns = (pod.get("metadata") or {}).get("namespace") or "default"
    if pdb_ns != pod_ns:
        return False
    spec = pdb.get("spec") or {}
    selector = spec.get("selector")
    if selector is None:
        return False
    if _is_v1beta1(pdb) and not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return False  # policy/v1beta1: an empty selector selects no pods
    try:
        return selector_matches(selector, (pod.get("metadata") or {}).get("labels") or {})
    except SelectorError:
        return False


@dataclass(frozen=True)
class DisruptionStatus:
    """The ``status`` the disruption controller would write for a budget."""

    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int
    error: str | None = None
    """Why the status could not be computed (the controller then fails safe: no disruption allowed)."""


def _expected_scale(pods: Sequence[Mapping[str, Any]], namespace: str, scale_of: ScaleLookup) -> int:
    controllers: dict[tuple[str, str, str], int] = {}
    orphans_of_missing_controllers = 0
    for pod in pods:
        ref = _controller_ref(pod)
        if ref is None:
            continue  # unmanaged pods do not count, as upstream (it warns with an UnmanagedPods event)
        found = scale_of(ref, namespace)
        if found is None:
            orphans_of_missing_controllers += 1
            continue
        key, scale = found
        controllers.setdefault(key, scale)
    return sum(controllers.values()) + orphans_of_missing_controllers


def disruption_status(
    pdb: Mapping[str, Any], namespace_pods: Iterable[Mapping[str, Any]], scale_of: ScaleLookup
) -> DisruptionStatus:
    """Compute the budget's status from the pods of its namespace (the controller's ``trySync``)."""
    namespace = (pdb.get("metadata") or {}).get("namespace") or "default"
    pods = [p for p in namespace_pods if pdb_selects(pdb, p)]
    spec = pdb.get("spec") or {}
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    if min_available is None and max_unavailable is None and _is_v1beta1(pdb):
        min_available = 1  # policy/v1beta1 defaulting
    expected = desired = 0
    try:
        if max_unavailable is not None:
            expected = _expected_scale(pods, namespace, scale_of)
            desired = max(expected - scaled_value(max_unavailable, expected, True), 0)
        elif min_available is not None:
            if isinstance(min_available, int) and not isinstance(min_available, bool):
                desired = min_available
                expected = len(pods)
            else:
                expected = _expected_scale(pods, namespace, scale_of)
                desired = scaled_value(min_available, expected, True)
    except ValueError as err:
        return DisruptionStatus(0, 0, 0, 0, str(err))
    healthy = sum(1 for p in pods if not is_terminating(p) and is_pod_ready(p))
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return DisruptionStatus(expected, desired, healthy, allowed)


@dataclass(frozen=True)
class EvictionRefusal:
    """Why the Eviction API refuses: ``code`` 429 means retry later, 500 means it never will."""

    code: int
    message: str


def can_ignore_pdb(pod: Mapping[str, Any]) -> bool:
    """Terminal, pending and terminating pods are deleted without consulting any budget."""
    return phase(pod) in ("Succeeded", "Failed", "Pending") or is_terminating(pod)


def eviction_refusal(
    pod: Mapping[str, Any],
    pdbs: Iterable[Mapping[str, Any]],
    namespace_pods: Iterable[Mapping[str, Any]],
    scale_of: ScaleLookup,
) -> EvictionRefusal | None:
    """The eviction subresource's verdict for ``pod`` given the budgets and pods of its namespace."""
    if can_ignore_pdb(pod):
        return None
    matching = [b for b in pdbs if pdb_selects(b, pod)]
    if not matching:
        return None
    if len(matching) > 1:
        return EvictionRefusal(
            500,
            "This pod has more than one PodDisruptionBudget, "
            "which the eviction subresource does not support.",
        )
    pdb = matching[0]
    name = (pdb.get("metadata") or {}).get("name", "")
    status = disruption_status(pdb, namespace_pods, scale_of)
    if not is_pod_ready(pod):
        # An unready pod does not count towards healthy, so evicting it costs the budget nothing when the
        # application is not disrupted (IfHealthyBudget, the default) or always (AlwaysAllow).
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
        if policy == "AlwaysAllow":
            return None
        if status.current_healthy >= status.desired_healthy and status.desired_healthy > 0:
            return None
    if status.disruptions_allowed <= 0:
        detail = status.error or (
            f"The disruption budget {name} needs {status.desired_healthy} healthy pods "
            f"and has {status.current_healthy} currently"
        )
        return EvictionRefusal(
            429, f"Cannot evict pod as it would violate the pod's disruption budget. {detail}"
        )
    return None
