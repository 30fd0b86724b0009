"""Builders of Kubernetes-shaped test objects: nodes, pods, NodeMetrics, PodDisruptionBudgets.

Each returns a plain dict, as a manifest would hold it, ready for ``MemoryCluster.create`` or for
``PodInfo.from_manifest``. Defaults describe the common case (a Ready node with 4 cores and 8Gi, a pod
with one container named ``main``); keyword arguments change one thing at a time, and ``**extra`` is
merged into the object last (mappings merge recursively, anything else replaces), for the fields no
keyword covers: ``make_pod("p", spec={"tolerations": [...]})``.

Uids are derived from kind, namespace and name, so building the same object twice gives the same uid and
a test run is reproducible.
"""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from koord_framework.api.constants import LABEL_HOSTNAME, LABEL_QOS_CLASS, LABEL_ZONE
from koord_framework.cluster.clock import VirtualClock, format_time
from koord_framework.cluster.kinds import KINDS
from koord_framework.config.common import format_duration_ns

__all__ = [
    "DEFAULT_START",
    "FakeClock",
    "format_duration",
    "make_node",
    "make_node_metric",
    "make_pdb",
    "make_pod",
    "random_cluster",
]

DEFAULT_START = 1_704_067_200.0
"""2024-01-01T00:00:00Z: where a ``FakeClock`` starts and the default NodeMetric ``updateTime``."""

Quantityish = str | int | float
_UID_NAMESPACE = uuid.UUID("6f1f6b8e-0c1e-4a53-9a0e-6b6f6f726431")


class FakeClock(VirtualClock):
    """A ``VirtualClock`` that starts at a fixed instant (``DEFAULT_START``) unless told otherwise."""

    def __init__(self, start: float | datetime | None = None) -> None:
        super().__init__(DEFAULT_START if start is None else start)


def _uid(kind: str, namespace: str, name: str) -> str:
    return str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``extra`` into ``base`` (mappings recursively); nothing of ``extra`` is shared afterwards."""
    for key, value in extra.items():
        if isinstance(value, Mapping):
            target = base.get(key)
            base[key] = _merge(target if isinstance(target, dict) else {}, value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _resource_list(
    base: Mapping[str, Quantityish] | None, **named: Quantityish | None
) -> dict[str, str | int | float]:
    out: dict[str, str | int | float] = {k: v for k, v in (base or {}).items()}
    for name, value in named.items():
        if value is not None:
            out[name] = value
    return out


def _taint(value: str | Mapping[str, Any]) -> dict[str, Any]:
    """A taint from a mapping or from ``key=value:Effect`` / ``key:Effect``."""
    if isinstance(value, Mapping):
        return dict(value)
    key_value, sep, effect = value.rpartition(":")
    if not sep or not key_value:
        raise ValueError(f"taint {value!r}: expected key=value:Effect or key:Effect")
    key, _, val = key_value.partition("=")
    taint: dict[str, Any] = {"key": key, "effect": effect}
    if val:
        taint["value"] = val
    return taint


def make_node(
    name: str,
    cpu: Quantityish = "4",
    memory: Quantityish = "8Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[str | Mapping[str, Any]] | None = None,
    allocatable: Mapping[str, Quantityish] | None = None,
    *,
    capacity: Mapping[str, Quantityish] | None = None,
    annotations: Mapping[str, str] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A Ready node. ``cpu``/``memory``/``pods`` set capacity; allocatable equals capacity, overlaid by
    ``allocatable`` (and ``capacity`` adds other resources). Labels always include the hostname label."""
    cap = _resource_list(capacity, cpu=cpu, memory=memory, pods=pods)
    alloc = dict(cap)
    alloc.update(_resource_list(allocatable))
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("Node", "", name),
            "labels": {LABEL_HOSTNAME: name, **(labels or {})},
        },
        "spec": {},
        "status": {
            "capacity": cap,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "phase": "Running",
        },
    }
    if annotations:
        node["metadata"]["annotations"] = dict(annotations)
    if taints:
        node["spec"]["taints"] = [_taint(t) for t in taints]
    if unschedulable:
        node["spec"]["unschedulable"] = True
    return _merge(node, extra)


def make_pod(
    name: str,
    namespace: str = "default",
    cpu: Quantityish | None = None,
    memory: Quantityish | None = None,
    requests: Mapping[str, Quantityish] | None = None,
    limits: Mapping[str, Quantityish] | None = None,
    node: str | None = None,
    priority: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    qos: str | None = None,
    scheduler_name: str | None = None,
    owner_kind: str | None = None,
    *,
    owner_name: str | None = None,
    phase: str | None = None,
    priority_class_name: str | None = None,
    creation_time: float | None = None,
    uid: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A pod with one container ``main``.

    ``cpu``/``memory`` are requests (added to ``requests``); ``limits`` as given. With ``node`` the pod is
    bound and ``Running`` (with a PodScheduled condition), otherwise ``Pending``; ``phase`` overrides.
    ``qos`` sets the ``koordinator.sh/qosClass`` label. ``owner_kind`` adds a controller owner reference
    (``owner_name`` defaults to ``<name>-owner``) with the uid ``make_*`` builders would give that owner.
    """
    reqs = _resource_list(requests, cpu=cpu, memory=memory)
    resources: dict[str, Any] = {}
    if reqs:
        resources["requests"] = reqs
    if limits:
        resources["limits"] = _resource_list(limits)
    all_labels = dict(labels or {})
    if qos is not None:
        all_labels[LABEL_QOS_CLASS] = qos
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or _uid("Pod", namespace, name),
    }
    if all_labels:
        meta["labels"] = all_labels
    if annotations:
        meta["annotations"] = dict(annotations)
    if creation_time is not None:
        meta["creationTimestamp"] = format_time(creation_time)
    if owner_kind is not None:
        owner = owner_name or f"{name}-owner"
        meta["ownerReferences"] = [
            {
                "apiVersion": KINDS[owner_kind].api_version if owner_kind in KINDS else "apps/v1",
                "kind": owner_kind,
                "name": owner,
                "uid": _uid(owner_kind, namespace, owner),
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}
    if resources:
        spec["containers"][0]["resources"] = resources
    if node is not None:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if priority_class_name is not None:
        spec["priorityClassName"] = priority_class_name
    if scheduler_name is not None:
        spec["schedulerName"] = scheduler_name
    status: dict[str, Any] = {"phase": phase or ("Running" if node else "Pending")}
    if node is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
    return _merge(pod, extra)


def format_duration(value: float | str) -> str:
    """Seconds as Go's ``time.Duration.String()`` prints them (``300`` -> ``5m0s``); strings unchanged."""
    if isinstance(value, str):
        return value
    total = int(value)
    if total != value or total < 0:
        raise ValueError(f"duration {value!r}: whole, non-negative seconds expected")
    return format_duration_ns(total * 1_000_000_000)


def _usage(resources: Mapping[str, Quantityish]) -> dict[str, Any]:
    return {"resources": {k: v for k, v in resources.items()}}


def make_node_metric(
    node: str,
    cpu: Quantityish | None = "0",
    memory: Quantityish | None = "0",
    update_time: float | str | None = DEFAULT_START,
    pods: Sequence[Mapping[str, Any]] = (),
    aggregated: Mapping[float | str, Mapping[str, Mapping[str, Quantityish]]] | None = None,
    *,
    system: Mapping[str, Quantityish] | None = None,
    usage: Mapping[str, Quantityish] | None = None,
    report_interval: int | None = None,
    aggregate_duration: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A NodeMetric (``slo.koordinator.sh/v1alpha1``) as the koordlet reports it.

    * ``cpu``/``memory`` (plus ``usage`` for other resources): ``status.nodeMetric.nodeUsage``;
    * ``update_time``: epoch seconds or RFC 3339 text; ``None`` leaves ``updateTime`` out (an expired
      metric). Defaults to ``DEFAULT_START``, "now" on a fresh ``FakeClock``;
    * ``pods``: one mapping per pod, ``{"name", "namespace" (default "default"), "cpu", "memory",
      "resources" (more names), "priority", "qos"}``, into ``status.podsMetric``;
    * ``aggregated``: ``{duration: {"p50": {"cpu": ...}, "p90": {...}}}`` with the duration in seconds or
      Go text, into ``status.nodeMetric.aggregatedNodeUsages``;
    * ``system``: ``status.nodeMetric.systemUsage``;
    * ``report_interval`` / ``aggregate_duration``: ``spec.metricCollectPolicy`` seconds.
    """
    node_usage = _resource_list(usage, cpu=cpu, memory=memory)
    info: dict[str, Any] = {"nodeUsage": _usage(node_usage)}
    if system is not None:
        info["systemUsage"] = _usage(system)
    if aggregated:
        info["aggregatedNodeUsages"] = [
            {
                "usage": {agg_type: _usage(res) for agg_type, res in by_type.items()},
                "duration": format_duration(duration),
            }
            for duration, by_type in aggregated.items()
        ]
    pods_metric = []
    for p in pods:
        res = _resource_list(p.get("resources"), cpu=p.get("cpu"), memory=p.get("memory"))
        entry: dict[str, Any] = {
            "namespace": p.get("namespace", "default"),
            "name": p["name"],
            "podUsage": _usage(res),
        }
        for key in ("priority", "qos"):
            if p.get(key) is not None:
                entry[key] = p[key]
        pods_metric.append(entry)
    status: dict[str, Any] = {"nodeMetric": info, "podsMetric": pods_metric}
    if update_time is not None:
        status["updateTime"] = update_time if isinstance(update_time, str) else format_time(update_time)
    spec: dict[str, Any] = {}
    policy: dict[str, Any] = {}
    if report_interval is not None:
        policy["reportIntervalSeconds"] = report_interval
    if aggregate_duration is not None:
        policy["aggregateDurationSeconds"] = aggregate_duration
    if policy:
        spec["metricCollectPolicy"] = policy
    metric = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": node, "uid": _uid("NodeMetric", "", node)},
        "spec": spec,
        "status": status,
    }
    return _merge(metric, extra)


def make_pdb(
    name: str,
    namespace: str = "default",
    match_labels: Mapping[str, str] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    *,
    selector: Mapping[str, Any] | None = None,
    unhealthy_pod_eviction_policy: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget selecting ``match_labels`` (or the full ``selector``)."""
    if selector is None:
        selector = {"matchLabels": dict(match_labels or {})}
    spec: dict[str, Any] = {"selector": dict(selector)}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if unhealthy_pod_eviction_policy is not None:
        spec["unhealthyPodEvictionPolicy"] = unhealthy_pod_eviction_policy
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid("PodDisruptionBudget", namespace, name),
        },
        "spec": spec,
    }
    return _merge(pdb, extra)


_ZONES = ("zone-a", "zone-b", "zone-c")


def random_cluster(
    rng: random.Random, *, nodes: tuple[int, int] = (3, 8), pending: int = 6
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A small random cluster for property-style tests, fully determined by ``rng``.

    Returns ``(objects, pending_pods)``: ``objects`` are nodes (varied sizes, zones, some tainted or
    cordoned), pods already running on them and fresh NodeMetrics reporting usage for most nodes; the
    pending pods (not included in ``objects``) vary in requests, QoS, priority, node selectors and
    tolerations, so that Filter and Score plugins meet feasible and infeasible nodes alike.
    """
    objects: list[dict[str, Any]] = []
    for n in range(rng.randint(*nodes)):
        name = f"node-{n}"
        cores = rng.choice((2, 4, 8, 16, 32))
        memory_gi = cores * rng.choice((2, 4, 8))
        taints = ["dedicated=batch:NoSchedule"] if rng.random() < 0.2 else None
        node = make_node(
            name,
            cpu=str(cores),
            memory=f"{memory_gi}Gi",
            labels={LABEL_ZONE: rng.choice(_ZONES)},
            taints=taints,
            allocatable={"cpu": f"{cores * 1000 - rng.choice((0, 100, 500))}m"},
            unschedulable=rng.random() < 0.1,
        )
        objects.append(node)
        used_milli = used_bytes = 0
        pod_metrics: list[dict[str, Any]] = []
        for i in range(rng.randint(0, 5)):
            cpu_m = rng.choice((100, 250, 500, 1000))
            mem_mi = rng.choice((128, 256, 512, 1024))
            pod = make_pod(
                f"{name}-run-{i}",
                cpu=f"{cpu_m}m",
                memory=f"{mem_mi}Mi",
                node=name,
                priority=rng.choice((None, 9000, 7000, 5000)),
                qos=rng.choice((None, "LS", "BE")),
                owner_kind="ReplicaSet",
                owner_name=f"app-{rng.randint(0, 3)}",
                creation_time=DEFAULT_START - rng.randint(60, 3600),
            )
            objects.append(pod)
            usage_m = rng.randint(0, cpu_m)
            usage_mi = rng.randint(0, mem_mi)
            used_milli += usage_m
            used_bytes += usage_mi
            pod_metrics.append(
                {"name": pod["metadata"]["name"], "cpu": f"{usage_m}m", "memory": f"{usage_mi}Mi"}
            )
        if rng.random() < 0.8:
            system_m = rng.randint(0, 500)
            objects.append(
                make_node_metric(
                    name,
                    cpu=f"{used_milli + system_m}m",
                    memory=f"{used_bytes + rng.randint(0, 1024)}Mi",
                    pods=pod_metrics,
                    aggregated={
                        300: {p: {"cpu": f"{used_milli + system_m}m"} for p in ("p50", "p90", "p95", "p99")}
                    },
                )
            )
    waiting: list[dict[str, Any]] = []
    for i in range(pending):
        extra: dict[str, Any] = {}
        spec: dict[str, Any] = {}
        if rng.random() < 0.3:
            spec["nodeSelector"] = {LABEL_ZONE: rng.choice(_ZONES)}
        if rng.random() < 0.3:
            spec["tolerations"] = [
                {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
            ]
        if spec:
            extra["spec"] = spec
        waiting.append(
            make_pod(
                f"pending-{i}",
                cpu=f"{rng.choice((100, 500, 1000, 2000, 4000, 64000))}m",
                memory=f"{rng.choice((64, 512, 2048, 8192))}Mi",
                priority=rng.choice((None, 9000, 5000)),
                qos=rng.choice((None, "LS", "BE")),
                **extra,
            )
        )
    return objects, waiting
