"""Platform conformance, plus random clusters with NodeMetrics: vectorised forms held to the per-node ones.

The framework's kit checks the entry point, the args (defaults valid, bad values refused, schema) and, on
random clusters, that ``filter_all``/``score_all`` equal ``filter``/``score`` and scores stay in [0, 100]. The
generic random clusters have no NodeMetrics, which would leave most of this plugin unexercised, so the
clusters here add them: fresh, stale and missing reports, percentile windows, pod usages with and without
prod priority, per-node threshold annotations (valid, partial and unreadable), raw-allocatable annotations,
and assigned pods of every priority class, young and old. Several args profiles run over each cluster.
"""

from __future__ import annotations

import json
import random
from typing import Any, ClassVar

import numpy as np
import pytest
from koord_plugin_loadaware import LoadAwareScheduling

from koord_framework.cluster.clock import format_time
from koord_framework.testing import DEFAULT_START, make_node, make_node_metric, make_pod
from koord_framework.testing.conformance import SchedulerPluginConformance
from koord_framework.testing.scheduler import SchedulerHarness

NOW = DEFAULT_START
PRIORITIES = [9500, 9000, 7500, 5500, 3500, None]
ARGS_PROFILES: list[dict[str, Any]] = [
    {},
    {
        "usageThresholds": {"cpu": 0, "memory": 0},
        "filterExpiredNodeMetrics": False,
        "nodeMetricExpirationSeconds": 300,
    },
    {
        "usageThresholds": {"cpu": 40, "memory": 60},
        "prodUsageThresholds": {"cpu": 35, "memory": 50},
        "prodUsageIncludeSys": True,
        "scoreAccordingProdUsage": True,
        "dominantResourceWeight": 2,
    },
    {
        "aggregated": {
            "usageThresholds": {"cpu": 50},
            "usageAggregationType": "p95",
            "usageAggregatedDuration": "5m",
            "scoreAggregationType": "p99",
        },
        "resourceWeights": {"cpu": 3, "memory": 1},
        "enableScheduleWhenNodeMetricsExpired": True,
        "estimatedSecondsAfterPodScheduled": 600,
    },
    {
        "aggregated": {
            "usageThresholds": {"memory": 70},
            "usageAggregationType": "avg",
            "scoreAggregationType": "p50",
        },
        "dominantResourceWeight": 5,
        "resourceWeights": {},
        "allowCustomizeEstimation": True,
        "estimatedSecondsAfterInitialized": 60,
    },
]


def _annotation(rng: random.Random) -> dict[str, str]:
    key = "scheduling.koordinator.sh/usage-thresholds"
    choice = rng.random()
    if choice < 0.55:
        return {}
    if choice < 0.65:
        return {key: "{not json"}
    if choice < 0.8:
        return {key: json.dumps({"usageThresholds": {"cpu": rng.randint(20, 90)}})}
    if choice < 0.9:
        return {key: json.dumps({"prodUsageThresholds": {"memory": rng.randint(20, 90)}})}
    return {
        key: json.dumps(
            {
                "aggregatedUsage": {
                    "usageThresholds": {"cpu": rng.randint(20, 90), "memory": rng.randint(20, 90)},
                    "usageAggregationType": rng.choice(["p50", "p95", "p99"]),
                    "usageAggregatedDuration": rng.choice(["5m", "30m", "10m"]),
                }
            }
        )
    }


def _pod(rng: random.Random, name: str, node: str | None) -> dict[str, Any]:
    priority = rng.choice(PRIORITIES)
    cpu = rng.choice([None, "100m", "500m", "1", "2", "4", "8"])
    memory = rng.choice([None, "128Mi", "1Gi", "4Gi", "16Gi"])
    kwargs: dict[str, Any] = {"priority": priority}
    if priority is not None and 5000 <= priority < 6000 and rng.random() < 0.7:
        kwargs["requests"] = {
            "kubernetes.io/batch-cpu": str(rng.randint(0, 8000)),
            "kubernetes.io/batch-memory": "2Gi",
        }
    elif priority is not None and 7000 <= priority < 8000 and rng.random() < 0.7:
        kwargs["requests"] = {
            "kubernetes.io/mid-cpu": str(rng.randint(0, 8000)),
            "kubernetes.io/mid-memory": "1Gi",
        }
    else:
        kwargs["cpu"], kwargs["memory"] = cpu, memory
        if cpu is not None and rng.random() < 0.4:
            kwargs["limits"] = {"cpu": str(float(cpu.rstrip("m")) * (2 if not cpu.endswith("m") else 0.002))}
    if rng.random() < 0.1:
        kwargs["owner_kind"] = "DaemonSet"
    if rng.random() < 0.2:
        kwargs["annotations"] = {
            "scheduling.koordinator.sh/load-estimated-scaling-factors": json.dumps(
                {"cpu": rng.randint(10, 100)}
            ),
            "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled": str(rng.randint(-1, 900)),
        }
    pod = make_pod(name, node=node, **kwargs)
    if node is not None:
        conditions = []
        if rng.random() < 0.7:
            t = NOW - rng.choice([5, 30, 90, 400, 3600])
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(t)}
            )
            if rng.random() < 0.5:
                conditions.append(
                    {"type": "Initialized", "status": "True", "lastTransitionTime": format_time(t + 3)}
                )
        pod["status"]["conditions"] = conditions
    return pod


def load_cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes, NodeMetrics and assigned pods; and pending pods to try against them."""
    objects: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for i in range(rng.randint(6, 14)):
        name = f"node-{i}"
        cores = rng.choice([4, 8, 16, 32, 96])
        gib = rng.choice([8, 32, 64, 256, 512])
        annotations = _annotation(rng)
        if rng.random() < 0.15:
            raw = {"cpu": str(cores // 2 or 1), "memory": f"{gib}Gi"}
            annotations["node.koordinator.sh/raw-allocatable"] = json.dumps(raw)
        objects.append(make_node(name, cpu=str(cores), memory=f"{gib}Gi", annotations=annotations or None))
        assigned = [_pod(rng, f"a-{i}-{j}", name) for j in range(rng.randint(0, 5))]
        objects += assigned
        if rng.random() < 0.15:
            continue  # no NodeMetric at all
        pods_metric = []
        for p in assigned:
            if rng.random() < 0.6:
                pods_metric.append(
                    {
                        "name": p["metadata"]["name"],
                        "cpu": f"{rng.randint(0, 4000)}m",
                        "memory": f"{rng.randint(0, 4096)}Mi",
                        "priority": rng.choice(["koord-prod", "koord-batch", None]),
                    }
                )
        aggregated: dict[float | str, dict[str, dict[str, str | int | float]]] | None = None
        if rng.random() < 0.6:
            aggregated = {
                window: {
                    t: {"cpu": f"{rng.randint(0, cores * 1000)}m", "memory": f"{rng.randint(0, gib)}Gi"}
                    for t in rng.sample(["avg", "p50", "p95", "p99"], rng.randint(1, 4))
                }
                for window in rng.sample([300, 600, 1800], rng.randint(1, 3))
            }
        update_time = rng.choice([NOW, NOW - 10, NOW - 100, NOW - 179, NOW - 180, NOW - 250, NOW - 301, None])
        metric = make_node_metric(
            name,
            cpu=f"{rng.randint(0, cores * 1000)}m",
            memory=f"{rng.randint(0, gib * 1024)}Mi",
            update_time=update_time,
            pods=pods_metric,
            aggregated=aggregated,
            system={"cpu": f"{rng.randint(0, 2000)}m", "memory": "512Mi"},
            report_interval=rng.choice([None, 30, 60]),
        )
        if rng.random() < 0.08:
            del metric["status"]["nodeMetric"]
        objects.append(metric)
    pending = [_pod(rng, f"pending-{k}", None) for k in range(6)]
    return objects, pending


class TestConformance(SchedulerPluginConformance):
    plugin_class = LoadAwareScheduling
    valid_args: ClassVar[list[dict[str, Any]]] = ARGS_PROFILES
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"usageThresholds": {"cpu": 101}},
        {"prodUsageThresholds": {"memory": 101}},
        {"aggregated": {"usageThresholds": {"cpu": 200}}},
        {"resourceWeights": {"cpu": 0}},
        {"estimatedScalingFactors": {"cpu": 0}},
        {"dominantResourceWeight": 101},
        {"nodeMetricExpirationSeconds": -1},
        {"aggregated": {"scoreAggregationType": "max"}},
    ]

    def make_harness(self) -> Any:
        return SchedulerHarness([LoadAwareScheduling], now=NOW)

    def make_objects(self, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        # The kit's generic clusters carry no NodeMetrics; these do (see the module docstring).
        return load_cluster(rng)


@pytest.mark.parametrize("profile", range(len(ARGS_PROFILES)))
@pytest.mark.parametrize("seed", range(8))
def test_vector_forms_agree_on_random_load(profile: int, seed: int) -> None:
    harness = SchedulerHarness([(LoadAwareScheduling, ARGS_PROFILES[profile])], now=NOW)
    objects, pending = load_cluster(random.Random(1000 * profile + seed))
    harness.add(*objects)
    for pod in pending:
        harness.check_vector_forms(pod, LoadAwareScheduling.name)
        for node, score in harness.normalized_scores(pod).items():
            assert 0 <= score <= 100, (node, score)


@pytest.mark.parametrize("seed", range(4))
def test_vector_forms_agree_while_pods_are_placed_and_time_passes(seed: int) -> None:
    """Reserve, bind, unreserve and clock advances keep the columns in step with the per-node view."""
    rng = random.Random(seed)
    harness = SchedulerHarness([(LoadAwareScheduling, ARGS_PROFILES[seed % len(ARGS_PROFILES)])], now=NOW)
    objects, pending = load_cluster(rng)
    harness.add(*objects)
    for i, pod in enumerate(pending):
        harness.check_vector_forms(pod, LoadAwareScheduling.name)
        result = harness.schedule_one(pod)
        if result.node is not None and i % 2:
            victim = make_pod(f"extra-{i}", cpu="1", priority=9000)
            harness.reserve(victim, result.node)
            harness.check_vector_forms(pending[0], LoadAwareScheduling.name)
            harness.unreserve(victim, result.node)
        harness.clock.advance(rng.choice([1, 30, 90]))
        harness.check_vector_forms(pending[-1], LoadAwareScheduling.name)


@pytest.mark.parametrize("seed", range(6))
def test_cached_vector_results_follow_random_event_streams(seed: int) -> None:
    """The vectorised forms patch per-pod-shape results row by row as events arrive; after any sequence of
    NodeMetric updates and deletions, node annotation changes, binds, deletions, reservations and clock moves,
    they must still equal the per-node forms (same pod shapes asked again and again, so patching is used)."""
    rng = random.Random(seed)
    harness = SchedulerHarness([(LoadAwareScheduling, ARGS_PROFILES[seed % len(ARGS_PROFILES)])], now=NOW)
    objects, pending = load_cluster(rng)
    harness.add(*objects)
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    shapes = pending[:3]
    for step in range(40):
        action = rng.randrange(6)
        node = rng.choice(nodes)
        if action == 0:
            usage = {"cpu": f"{rng.randint(0, 32000)}m", "memory": f"{rng.randint(0, 64)}Gi"}
            patch = {
                "status": {
                    "updateTime": format_time(harness.clock.now()),
                    "nodeMetric": {"nodeUsage": {"resources": usage}},
                }
            }
            if harness.cluster.try_get("NodeMetric", node) is None:
                harness.add(make_node_metric(node, usage["cpu"], usage["memory"], harness.clock.now()))
            else:
                harness.cluster.patch("NodeMetric", node, "", patch, status=True)
        elif action == 1 and harness.cluster.try_get("NodeMetric", node) is not None:
            harness.cluster.delete("NodeMetric", node)
        elif action == 2:
            harness.add(_pod(rng, f"bound-{step}", node))
        elif action == 3:
            current = harness.cluster.get("Node", node)
            current["metadata"]["annotations"] = _annotation(rng)
            harness.cluster.update(current)
        elif action == 4:
            harness.clock.advance(rng.choice([5, 60, 120]))
        else:
            harness.schedule_one(_pod(rng, f"new-{step}", None))
        for pod in shapes:
            harness.check_vector_forms(pod, LoadAwareScheduling.name)
        _check_cached_tallies(harness)


def _check_cached_tallies(harness: SchedulerHarness) -> None:
    """The per-shape Filter results keep a count per reason code and a pass mask next to the codes, patched
    with them; both must always describe the codes exactly (Filter answers "nobody fails" from the counts)."""
    plugin = harness.plugin(LoadAwareScheduling.name)
    assert isinstance(plugin, LoadAwareScheduling)
    for entry in plugin._filter_cache._entries.values():
        codes = entry.values
        assert entry.counts == np.bincount(codes, minlength=len(entry.counts)).tolist()
        assert entry.is_zero.tolist() == (codes == 0).tolist()
        assert entry.present() == [code for code, n in enumerate(entry.counts) if n]
