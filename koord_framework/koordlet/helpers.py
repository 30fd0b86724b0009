"""Calculations several QoS strategies share (Koordinator's ``qosmanager/helpers``). They live in the
framework because plugins never import each other."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from koord_framework.api.constants import ANNOTATION_NODE_RESERVATION, ANNOTATION_RESOURCE_STATUS
from koord_framework.api.qos import KubeQoS, QoSClass
from koord_framework.api.resources import CPU, MEMORY, max_each, parse_resource_list
from koord_framework.errors import KoordError
from koord_framework.koordlet.cpuset import CPUSetError, parse_cpuset
from koord_framework.koordlet.metrics.cache import MetricCache, MetricKind
from koord_framework.koordlet.nodeslo import HostApplicationSpec
from koord_framework.koordlet.states import PodMeta

__all__ = [
    "calculate_filter_pods_used",
    "collect_host_app_metrics_last",
    "collect_pod_metrics_last",
    "node_reservation_from_annotations",
    "node_reserved",
    "non_be_host_app_filter",
    "non_be_pod_filter",
]

CGROUP_BASE_KUBE_BESTEFFORT: Final = "KubepodsBesteffort"


def node_reservation_from_annotations(annotations: Mapping[str, str]) -> dict[str, int]:
    """The ``node.koordinator.sh/reservation`` annotation as resources; ``reservedCPUs`` overrides the cpu
    amount with its CPU count (``GetNodeReservationFromAnnotation``). Unparsable -> {} (upstream logs and
    ignores it)."""
    raw = annotations.get(ANNOTATION_NODE_RESERVATION)
    if not raw:
        return {}
    try:
        reservation = json.loads(raw)
        if not isinstance(reservation, Mapping):
            return {}
        out = parse_resource_list(reservation.get("resources") or {}, path="reservation.resources")
        cpus = reservation.get("reservedCPUs")
        if cpus:
            out[CPU] = len(parse_cpuset(str(cpus))) * 1000
        return out
    except (ValueError, KoordError, CPUSetError):
        return {}


def reserved_cpus_from_annotations(annotations: Mapping[str, str]) -> frozenset[int]:
    """The ``reservedCPUs`` list of a reservation annotation (Node or NodeResourceTopology)."""
    raw = annotations.get(ANNOTATION_NODE_RESERVATION)
    if not raw:
        return frozenset()
    try:
        reservation = json.loads(raw)
        cpus = reservation.get("reservedCPUs") if isinstance(reservation, Mapping) else None
        return parse_cpuset(str(cpus)) if cpus else frozenset()
    except (ValueError, CPUSetError):
        return frozenset()


def node_reserved(node: Mapping[str, Any] | None) -> dict[str, int]:
    """``max(kubelet reserved, annotation reservation)`` per resource (``GetNodeResourceReserved``).

    Kubelet reserved is ``capacity - allocatable`` for cpu and memory, floored at 0, computed on the
    status *as reported*: a resource missing from allocatable counts as 0 there, as in Go's quota math."""
    if not node:
        return {}
    status = node.get("status") or {}
    capacity = parse_resource_list(status.get("capacity") or {}, path="Node.status.capacity")
    allocatable = parse_resource_list(status.get("allocatable") or {}, path="Node.status.allocatable")
    kubelet: dict[str, int] = {}
    for name in (CPU, MEMORY):
        if name in capacity or name in allocatable:
            kubelet[name] = max(capacity.get(name, 0) - allocatable.get(name, 0), 0)
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return max_each(kubelet, node_reservation_from_annotations(annotations))


def non_be_pod_filter(meta: PodMeta) -> bool:
    """Not BE by label and not BestEffort by Kubernetes QoS (``NonBEPodFilter``)."""
    return meta.raw_qos is not QoSClass.BE and meta.pod.kube_qos is not KubeQoS.BEST_EFFORT


def non_be_host_app_filter(app: HostApplicationSpec) -> bool:
    """A host application counts as BE only when its QoS is BE *and* it runs under the besteffort dir."""
    return app.qos != "BE" or app.cgroup_path is None or app.cgroup_path.base != CGROUP_BASE_KUBE_BESTEFFORT


def calculate_filter_pods_used(
    node_used: float,
    node_reserved_value: float,
    pods: Sequence[PodMeta],
    pod_used: Mapping[str, float],
    host_apps: Sequence[HostApplicationSpec],
    host_app_used: Mapping[str, float],
    pod_filter: Callable[[PodMeta], bool],
    host_app_filter: Callable[[HostApplicationSpec], bool],
) -> tuple[float, float, float]:
    """``(Σ used of filtered pods, Σ used of filtered host apps, system used)`` (``CalculateFilterPodsUsed``).

    A pod with a metric but no pod record counts as filtered (unknown pods are treated as non-BE, so BE is
    suppressed harder rather than too little). System used = max(node - all pods - all host apps, 0),
    raised to the node reservation.
    """
    by_uid = {p.uid: p for p in pods}
    pods_all = pods_filtered = 0.0
    for uid, used in pod_used.items():
        pods_all += used
        meta = by_uid.get(uid)
        if meta is None or pod_filter(meta):
            pods_filtered += used
    apps_all = apps_filtered = 0.0
    for app in host_apps:
        if app.name not in host_app_used:
            continue
        used = host_app_used[app.name]
        apps_all += used
        if host_app_filter(app):
            apps_filtered += used
    system = max(node_used - pods_all - apps_all, 0.0)
    system = max(system, node_reserved_value)
    return pods_filtered, apps_filtered, system


def collect_pod_metrics_last(
    cache: MetricCache, kind: MetricKind, pods: Iterable[PodMeta], now: float, collect_interval: float
) -> dict[str, float]:
    """``uid -> newest sample within 2 x collect interval`` (``CollectAllPodMetricsLast``)."""
    return _newest_by_key(cache, kind, (p.uid for p in pods), now, collect_interval)


def collect_pod_metrics_avg(
    cache: MetricCache, kind: MetricKind, pods: Iterable[PodMeta], start: float, end: float
) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in pods:
        w = cache.query(kind, start, end, p.uid)
        if w:
            out[p.uid] = w.avg()
    return out


def collect_host_app_metrics_last(
    cache: MetricCache,
    kind: MetricKind,
    apps: Iterable[HostApplicationSpec],
    now: float,
    collect_interval: float,
) -> dict[str, float]:
    """``name -> newest sample within 2 x collect interval`` (``CollectAllHostAppMetricsLast``)."""
    return _newest_by_key(cache, kind, (app.name for app in apps), now, collect_interval)


def _newest_by_key(
    cache: MetricCache, kind: MetricKind, keys: Iterable[str], now: float, collect_interval: float
) -> dict[str, float]:
    """The newest sample of each key within 2 x collect interval; keys without one are left out."""
    out: dict[str, float] = {}
    for key in keys:
        v = cache.last(kind, now, 2 * collect_interval, key)
        if v is not None:
            out[key] = v
    return out


ANNOTATION_KUBELET_CPU_MANAGER_POLICY: Final = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_SYSTEM_QOS_RESOURCE: Final = "node.koordinator.sh/system-qos-resource"


def kubelet_cpu_manager_policy(annotations: Mapping[str, str]) -> str:
    """The kubelet CPU manager policy a NodeResourceTopology reports (``static``/``none``); ``""`` when not
    reported. Raises ``ValueError`` for an unparsable annotation (upstream refuses to act then)."""
    raw = annotations.get(ANNOTATION_KUBELET_CPU_MANAGER_POLICY)
    if raw is None:
        return ""
    data = json.loads(raw)
    if not isinstance(data, Mapping):
        raise ValueError(f"{ANNOTATION_KUBELET_CPU_MANAGER_POLICY} must be a JSON object")
    return str(data.get("policy") or "")


def system_qos_exclusive_cpus(annotations: Mapping[str, str]) -> frozenset[int]:
    """CPUs reserved exclusively for SYSTEM QoS (``cpusetExclusive`` defaults to true); none when the
    annotation is absent or unreadable."""
    raw = annotations.get(ANNOTATION_SYSTEM_QOS_RESOURCE)
    if not raw:
        return frozenset()
    try:
        data = json.loads(raw)
        if not isinstance(data, Mapping) or not data.get("cpuset"):
            return frozenset()
        if data.get("cpusetExclusive") is False:
            return frozenset()
        return parse_cpuset(str(data["cpuset"]))
    except (ValueError, CPUSetError):
        return frozenset()


def pod_status_cpuset(annotations: Mapping[str, str]) -> frozenset[int] | None:
    """The cpuset the scheduler bound an LSE/LSR pod to (``scheduling.koordinator.sh/resource-status``);
    None when absent, empty or unreadable."""
    raw = annotations.get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        cpuset = data.get("cpuset") if isinstance(data, Mapping) else None
        return parse_cpuset(str(cpuset)) if cpuset else None
    except (ValueError, CPUSetError):
        return None


def node_status_resources(node: Mapping[str, Any] | None, key: str = "capacity") -> dict[str, int]:
    """``status.capacity`` / ``status.allocatable`` exactly as reported, as canonical ints."""
    status = (node or {}).get("status") or {}
    return parse_resource_list(status.get(key) or {}, path=f"Node.status.{key}")
