"""Koordinator's co-location mix, and the check that LoadAwareScheduling never overloads a node.

Nodes {cpu 32, memory 256Gi, pods 110, batch-cpu 20000, batch-memory 100Gi}, each with a fresh NodeMetric
reporting cpu usage uniform in 10–80 % and memory in 20–70 % of allocatable; pods 80 % LS {500m, 512Mi,
priority 9000} and 20 % BE {batch-cpu 1000, batch-memory 2Gi, priority 5000} (``bench/workloads.py``).

The profile is Koordinator's shipped ``koord-scheduler`` profile (``configs/scheduler/koord-scheduler.yaml``:
kube-scheduler's default plugins plus SchedulingHint, LoadAwareScheduling, DefaultPreBind) with the values of
Koordinator's Helm chart for LoadAwareScheduling: usage thresholds cpu 65 % / memory 95 %, estimated scaling
factors 85 / 70, NodeMetric expiry 300 s; NodeResourcesFit scores LeastAllocated over cpu, memory,
batch-cpu and batch-memory.

``check_thresholds`` replays every placement of a run in bind order: a node's usage after placing a pod is
its reported usage plus the estimates of the pods placed there so far (the NodeMetric predates them all, so
every one is unreported and fully estimated). A placement is a violation when
``round(usage / allocatable × 100)`` exceeds the threshold — LoadAwareScheduling's own Filter rule. Estimates
come from the plugin's public ``DefaultEstimator`` and are cross-checked against the estimator formula of the
spec recomputed here (max(request, limit) of the resource the pod's class consumes × factor / 100, rounded
half away from zero, capped at the limit; 250m / 200Mi for a pod that asks for nothing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from koord_plugin_loadaware import DefaultEstimator, LoadAwareScheduling, LoadAwareSchedulingArgs

from bench import workloads as wl
from bench.scheduler_perf import Obj, Run, Scenario, Workload
from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.qos import translate_resource
from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY, CPU, MEMORY, parse_resource_list
from koord_framework.config.loader import LoadedSchedulerConfig, load_text

SCHEDULER_NAME = "koord-scheduler"
LOAD_AWARE_ARGS: dict[str, Any] = {
    "filterExpiredNodeMetrics": False,
    "nodeMetricExpirationSeconds": 300,
    "resourceWeights": {"cpu": 1, "memory": 1},
    "usageThresholds": {"cpu": 65, "memory": 95},
    "estimatedScalingFactors": {"cpu": 85, "memory": 70},
}
"""Koordinator's Helm chart values for LoadAwareSchedulingArgs."""

CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: {SCHEDULER_NAME}
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: LeastAllocated
            resources:
              - {{name: cpu, weight: 1}}
              - {{name: memory, weight: 1}}
              - {{name: "kubernetes.io/batch-cpu", weight: 1}}
              - {{name: "kubernetes.io/batch-memory", weight: 1}}
      - name: LoadAwareScheduling
        args:
          filterExpiredNodeMetrics: {str(LOAD_AWARE_ARGS["filterExpiredNodeMetrics"]).lower()}
          nodeMetricExpirationSeconds: {LOAD_AWARE_ARGS["nodeMetricExpirationSeconds"]}
          resourceWeights: {{cpu: 1, memory: 1}}
          usageThresholds: {{cpu: 65, memory: 95}}
          estimatedScalingFactors: {{cpu: 85, memory: 70}}
    plugins:
      queueSort:
        disabled: [{{name: "*"}}]
        enabled: [{{name: PrioritySort}}]
      preFilter:
        enabled: [{{name: SchedulingHint}}]
      filter:
        enabled: [{{name: LoadAwareScheduling}}]
      postFilter:
        disabled: [{{name: "*"}}]
        enabled: [{{name: DefaultPreemption}}]
      score:
        enabled: [{{name: LoadAwareScheduling, weight: 1}}]
      reserve:
        enabled: [{{name: LoadAwareScheduling}}]
      preBind:
        enabled: [{{name: DefaultPreBind}}]
      bind:
        disabled: [{{name: "*"}}]
        enabled: [{{name: DefaultBinder}}]
"""


def config() -> LoadedSchedulerConfig:
    loaded = load_text(CONFIG, "bench/colocation.py", component="scheduler")
    assert isinstance(loaded, LoadedSchedulerConfig)
    return loaded


def build(nodes: int, init: int, measured: int) -> Scenario:
    """``init`` is unused: the co-location mix starts from empty nodes whose load is all in NodeMetrics."""

    def setup() -> Iterable[Obj]:
        yield from wl.colocation_nodes(nodes)

    return Scenario(setup(), list(wl.colocation_pods(measured)))


# --- the threshold check ---------------------------------------------------------------------------
def spec_estimate(pod: PodInfo, factors: Mapping[str, int]) -> dict[str, int]:
    """The default estimator of the spec, recomputed independently of the plugin."""
    out: dict[str, int] = {}
    for name, factor in factors.items():
        real = translate_resource(name, pod.priority_class)
        limit = pod.limits.get(real, 0)
        request = pod.requests.get(real, 0)
        quantity = max(limit, request)
        if quantity == 0:
            out[name] = {CPU: 250, BATCH_CPU: 250, MEMORY: 200 << 20, BATCH_MEMORY: 200 << 20}.get(real, 0)
            continue
        value = float(quantity) * float(factor) / 100
        estimate = math.trunc(value)
        if value - estimate >= 0.5:  # Go's math.Round: half away from zero (values are positive)
            estimate += 1
        out[name] = min(estimate, limit) if limit > 0 else estimate
    return out


def _exceeds(used: int, allocatable: int, threshold: int) -> bool:
    """``round(used / allocatable × 100) > threshold`` in exact integers (half rounds up for positives)."""
    if threshold <= 0 or allocatable <= 0:
        return False
    return 2 * used * 100 >= (2 * threshold + 1) * allocatable


def check_thresholds(run: Run) -> dict[str, Any]:
    """Replay every placement of the run; count placements that left a node above a usage threshold."""
    args = LoadAwareScheduling.parse_args(LOAD_AWARE_ARGS)
    assert isinstance(args, LoadAwareSchedulingArgs)
    estimator = DefaultEstimator(args)
    thresholds = dict(args.usage_thresholds)
    factors = dict(args.estimated_scaling_factors)

    usage: dict[str, dict[str, int]] = {}
    for metric in run.cluster.list_shared("NodeMetric")[0]:
        name = metric["metadata"]["name"]
        raw = ((metric.get("status") or {}).get("nodeMetric") or {}).get("nodeUsage") or {}
        usage[name] = parse_resource_list(raw.get("resources") or {}, path=f"NodeMetric {name}")
    allocatable: dict[str, dict[str, int]] = {}
    for node in run.cluster.list_shared("Node")[0]:
        record = NodeRecord.from_manifest(node)
        allocatable[record.name] = estimator.estimate_node(record)

    order = sorted((t, key) for key, t in run.bound.items())
    violations: list[dict[str, Any]] = []
    estimator_mismatches = 0
    peak: dict[str, float] = {}
    per_node: dict[str, int] = {}
    for _, (namespace, name) in order:
        pod = run.scheduler.pod_cache.get(namespace, name)
        if pod is None or not pod.node_name:
            continue
        estimate = estimator.estimate_pod(pod)
        if estimate != spec_estimate(pod, factors):
            estimator_mismatches += 1
        used = usage.setdefault(pod.node_name, {})
        for resource, value in estimate.items():
            used[resource] = used.get(resource, 0) + value
        per_node[pod.node_name] = per_node.get(pod.node_name, 0) + 1
        alloc = allocatable.get(pod.node_name, {})
        for resource, threshold in thresholds.items():
            total, cap = used.get(resource, 0), alloc.get(resource, 0)
            if cap > 0:
                peak[resource] = max(peak.get(resource, 0.0), total * 100 / cap)
            if _exceeds(total, cap, threshold):
                violations.append(
                    {
                        "pod": f"{namespace}/{name}",
                        "node": pod.node_name,
                        "resource": resource,
                        "usagePercent": round(total * 100 / cap, 3),
                        "threshold": threshold,
                    }
                )
    return {
        "loadAwareThresholds": {
            "placementsChecked": sum(per_node.values()),
            "nodesUsed": len(per_node),
            "violations": len(violations),
            "firstViolations": violations[:10],
            "peakUsagePercent": {r: round(v, 3) for r, v in sorted(peak.items())},
            "thresholds": thresholds,
            "estimatorMatchesSpec": estimator_mismatches == 0,
            "ok": not violations and estimator_mismatches == 0,
        }
    }


COLOCATION_1K = Workload(
    name="colocation-1k",
    title="Co-location mix: 1,000 pods (80% LS, 20% BE) on 100 nodes with NodeMetrics (koord-scheduler)",
    nodes=100,
    init_pods=0,
    measured_pods=1000,
    build=build,
    config=config,
    min_pods_per_second=650,
    aim_pods_per_second=2000,
    verify=check_thresholds,
)

COLOCATION_20K = Workload(
    name="colocation-20k",
    title="Co-location mix: 20,000 pods (80% LS, 20% BE) on 1,000 nodes with NodeMetrics (koord-scheduler)",
    nodes=1000,
    init_pods=0,
    measured_pods=20_000,
    build=build,
    config=config,
    min_pods_per_second=650,
    aim_pods_per_second=2000,
    verify=check_thresholds,
)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (COLOCATION_1K, COLOCATION_20K)}
