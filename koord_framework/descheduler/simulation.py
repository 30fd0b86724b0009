"""What happens around the descheduler in a real cluster, for runs on the embedded one.

In a cluster, koordlet keeps NodeMetrics current and workload controllers replace evicted pods, which the
scheduler then places. The embedded cluster has neither, so ``koord deschedule`` uses these stand-ins:

* ``refresh_node_metrics``: koordlet's next report — pod entries of pods no longer on the node are
  dropped (their usage leaves ``nodeUsage`` too) and ``updateTime`` is now. Without it a second cycle would
  see the evicted pods' load still on their old node.
* ``recreate_pods``: a controller's replacement for each evicted pod — the same pod, unbound and Pending.
* ``start_bound_pods``: kubelet starting a replacement once it is bound — Running and Ready (a
  ReservationFirst migration waits for the pod that took its reservation to be Ready).
* ``load_imbalance``: how evenly measured load is spread, per resource: the mean, standard deviation and
  spread (max − min) of node usage percentages, where a node's usage is its system usage plus the measured
  usage of the pods on it now (a moved pod takes its measured usage along).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koord_framework.api.objects import NodeRecord
from koord_framework.api.resources import CPU, MEMORY, format_resource_list, parse_resource_list
from koord_framework.cluster.clock import format_time
from koord_framework.cluster.port import ClusterPort, Obj
from koord_framework.descheduler.node_usage import NodeMetricInfo, raw_allocatable


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def pods_by_node(cluster: ClusterPort) -> dict[str, set[str]]:
    """``namespace/name`` of the non-terminal pods bound to each node."""
    out: dict[str, set[str]] = {}
    for pod in cluster.list("Pod")[0]:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if node and phase not in ("Succeeded", "Failed"):
            out.setdefault(str(node), set()).add(_key(pod))
    return out


def refresh_node_metrics(cluster: ClusterPort, now: float) -> int:
    """Drop pod entries of pods gone from their node and stamp ``updateTime``; returns metrics written."""
    on_node = pods_by_node(cluster)
    written = 0
    for metric in cluster.list("NodeMetric")[0]:
        name = str((metric.get("metadata") or {}).get("name") or "")
        status = copy.deepcopy(metric.get("status") or {})
        present = on_node.get(name, set())
        kept: list[Any] = []
        removed: list[Any] = []
        for entry in status.get("podsMetric") or ():
            key = f"{entry.get('namespace') or ''}/{entry.get('name') or ''}"
            (kept if key in present else removed).append(entry)
        node_metric = status.get("nodeMetric")
        if removed and isinstance(node_metric, dict):
            usage = parse_resource_list(((node_metric.get("nodeUsage") or {}).get("resources")) or {})
            for entry in removed:
                for res, value in parse_resource_list(
                    (entry.get("podUsage") or {}).get("resources") or {}
                ).items():
                    if res in usage:
                        usage[res] = max(usage[res] - value, 0)
            node_metric.setdefault("nodeUsage", {})["resources"] = format_resource_list(usage)
        status["podsMetric"] = kept
        status["updateTime"] = format_time(now)
        cluster.patch("NodeMetric", name, "", {"status": status}, status=True)
        written += 1
    return written


def recreate_pods(cluster: ClusterPort, originals: Mapping[str, Obj], keys: Iterable[str]) -> list[str]:
    """Create each pod of ``keys`` again from its manifest in ``originals``: unbound, Pending, no status.

    Pods that still exist (an eviction that did not happen) are skipped. Returns the keys created.
    """
    created = []
    for key in keys:
        original = originals.get(key)
        if original is None:
            continue
        ns, name = key.split("/", 1)
        if cluster.try_get("Pod", name, ns) is not None:
            continue
        pod = copy.deepcopy(original)
        meta = pod.setdefault("metadata", {})
        for field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            meta.pop(field, None)
        spec = pod.setdefault("spec", {})
        spec.pop("nodeName", None)
        pod["status"] = {"phase": "Pending"}
        cluster.create(pod)
        created.append(key)
    return created


def start_bound_pods(cluster: ClusterPort, keys: Iterable[str]) -> list[str]:
    """Each pod of ``keys`` that is bound but not Running yet becomes Running and Ready; returns the keys of
    the pods still waiting to be bound."""
    waiting: list[str] = []
    for key in keys:
        ns, name = key.split("/", 1)
        pod = cluster.try_get("Pod", name, ns)
        if pod is None:
            continue
        if not (pod.get("spec") or {}).get("nodeName"):
            waiting.append(key)
            continue
        status = pod.get("status") or {}
        if status.get("phase") == "Running":
            continue
        now = format_time(cluster.clock.now())
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "Ready"]
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": now})
        cluster.patch(
            "Pod", name, ns, {"status": {"phase": "Running", "conditions": conditions}}, status=True
        )
    return waiting


@dataclass(frozen=True)
class Imbalance:
    """Node usage percentages of one resource, summarised."""

    resource: str
    mean: float
    stddev: float
    min: float
    max: float

    @property
    def spread(self) -> float:
        return self.max - self.min

    def as_dict(self) -> dict[str, float]:
        return {
            "mean": round(self.mean, 2),
            "stddev": round(self.stddev, 2),
            "min": round(self.min, 2),
            "max": round(self.max, 2),
            "spread": round(self.spread, 2),
        }


def measured_usage(
    nodes: Iterable[NodeRecord],
    metrics: Mapping[str, NodeMetricInfo],
    pod_usage: Mapping[str, Mapping[str, int]],
    placement: Mapping[str, set[str]],
) -> dict[str, dict[str, int]]:
    """Per node: system usage + the measured usage of the pods placed on it (pods without a measurement
    count as 0)."""
    out: dict[str, dict[str, int]] = {}
    for node in nodes:
        metric = metrics.get(node.name)
        usage = dict(metric.system_usage) if metric is not None else {}
        for key in placement.get(node.name, ()):
            for res, value in pod_usage.get(key, {}).items():
                usage[res] = usage.get(res, 0) + value
        out[node.name] = usage
    return out


def load_imbalance(
    nodes: Iterable[NodeRecord],
    usage: Mapping[str, Mapping[str, int]],
    resources: Iterable[str] = (CPU, MEMORY),
) -> list[Imbalance]:
    nodes = list(nodes)
    out = []
    for res in resources:
        values = []
        for node in nodes:
            alloc = raw_allocatable(node).get(res, 0)
            if alloc:
                values.append(100.0 * usage.get(node.name, {}).get(res, 0) / alloc)
        if not values:
            continue
        mean = sum(values) / len(values)
        stddev = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        out.append(Imbalance(res, mean, stddev, min(values), max(values)))
    return out


def pod_usage_of(metrics: Iterable[NodeMetricInfo]) -> dict[str, Mapping[str, int]]:
    """The measured usage of every pod any NodeMetric reports, by ``namespace/name``."""
    out: dict[str, Mapping[str, int]] = {}
    for metric in metrics:
        out.update(metric.pod_usage)
    return out
