"""The co-location benchmark's promise, checked on a real run: LoadAwareScheduling never places a pod on a
node whose usage after the estimate exceeds its threshold.

A correctness test, not a timing one: the run is the co-location mix scaled down (2,400 pods on 40 nodes,
which saturates the cluster as the 20,000-pod run on 1,000 nodes does, so the thresholds are what stops
placements), and nothing here asserts a throughput — the pods/s targets are ``make bench``'s (``python -m
bench --check``). The replay that checks it (``bench.colocation.check_thresholds``) is itself tested to
catch a placement past a threshold, so that its "0 violations" means something.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import colocation
from bench.scheduler_perf import Run, run
from koord_framework.testing import make_pod


@pytest.fixture(scope="module")
def saturated_run() -> tuple[dict[str, Any], Run]:
    return run(colocation.WORKLOADS["colocation-20k"], nodes=40, pods=2400)


def test_no_placement_of_a_saturated_run_exceeds_a_threshold(
    saturated_run: tuple[dict[str, Any], Run],
) -> None:
    report, _ = saturated_run
    check = report["checks"]["loadAwareThresholds"]
    assert check["violations"] == 0, check["firstViolations"]
    assert check["estimatorMatchesSpec"]
    # Every bound measured pod was replayed, and the run did drive nodes up to the cpu threshold: more pods
    # than fit were offered, so "no violation" is the plugin refusing, not the cluster being roomy.
    assert check["placementsChecked"] == report["scheduled"] > 0
    assert report["unscheduled"] > 0
    threshold = check["thresholds"]["cpu"]
    assert threshold - 1 <= check["peakUsagePercent"]["cpu"] < threshold + 0.5


def _hottest_node(finished: Run) -> str:
    counts: dict[str, int] = {}
    for namespace, name in finished.bound:
        pod = finished.scheduler.pod_cache.get(namespace, name)
        if pod is not None and pod.node_name:
            counts[pod.node_name] = counts.get(pod.node_name, 0) + 1
    return max(counts, key=lambda n: (counts[n], n))


def test_the_replay_catches_a_placement_above_the_threshold() -> None:
    # A small saturated run: 600 pods on 10 nodes leave every node at its cpu threshold.
    report, finished = run(colocation.WORKLOADS["colocation-1k"], nodes=10, pods=600)
    assert report["checks"]["loadAwareThresholds"]["violations"] == 0
    assert report["unscheduled"] > 0
    # Bind one more LS pod onto the busiest node behind the scheduler's back, as a faulty scheduler would.
    node = _hottest_node(finished)
    extra = make_pod("intruder", cpu="4", memory="1Gi", node=node, priority=9000, qos="LS")
    finished.cluster.create(extra)
    finished.bound[("default", "intruder")] = max(finished.bound.values()) + 1.0
    check = colocation.check_thresholds(finished)["loadAwareThresholds"]
    assert check["violations"] >= 1
    first = check["firstViolations"][0]
    assert (first["pod"], first["node"], first["resource"]) == ("default/intruder", node, "cpu")
    assert first["usagePercent"] > first["threshold"]
    assert not check["ok"]
