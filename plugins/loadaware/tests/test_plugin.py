"""LoadAwareScheduling in a running scheduler: events, Reserve/Unreserve, expiry, metrics, explanations."""

from __future__ import annotations

import copy
import json
from typing import Any

from koord_plugin_loadaware import LoadAwareScheduling

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import format_time
from koord_framework.scheduler.interface import ClusterEvent
from koord_framework.testing import DEFAULT_START, make_node, make_node_metric, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

NOW = DEFAULT_START
NAME = LoadAwareScheduling.name


def harness(args: dict[str, Any] | None = None, *objects: dict[str, Any]) -> SchedulerHarness:
    h = SchedulerHarness([(LoadAwareScheduling, args or {})], now=NOW)
    h.add(*objects)
    return h


def plugin(h: SchedulerHarness) -> LoadAwareScheduling:
    p = h.plugin(NAME)
    assert isinstance(p, LoadAwareScheduling)
    return p


def sample(h: SchedulerHarness, name: str, **labels: str) -> float | None:
    value = h.handle.metrics.get_sample_value(name, {"profile": h.profile_name, **labels})
    return None if value is None else float(value)


def test_hot_node_is_avoided_with_the_reason_and_scores_explained() -> None:
    h = harness(
        {},
        make_node("hot", cpu="32", memory="64Gi"),
        make_node("cool", cpu="32", memory="64Gi"),
        make_node_metric("hot", cpu="24", memory="16Gi"),  # 75% cpu > 65%
        make_node_metric("cool", cpu="8", memory="16Gi"),
    )
    pod = make_pod("web", cpu="2", memory="2Gi", priority=9000)
    result = h.schedule_one(pod)
    assert result.node == "cool"
    assert result.filter["hot"].reasons == ("node(s) cpu usage exceed threshold",)
    assert result.filter["hot"].plugin == NAME
    # cool: cpu (32000 - 8000 - 1700) * 100 // 32000 = 69, memory (64 - 16 - 1.4)Gi share = 72 -> 70
    assert result.scores["cool"][NAME].raw == 70
    assert (
        sample(
            h,
            "koord_scheduler_loadaware_filter_rejections_total",
            reason="usage_exceed_threshold",
            resource="cpu",
        )
        == 1
    )

    p = plugin(h)
    from koord_framework.api.objects import PodInfo
    from koord_framework.scheduler.cycle_state import CycleState

    state = CycleState()
    info = PodInfo.from_manifest(make_pod("web2", cpu="2", memory="2Gi", priority=9000))
    explained = p.explain(state, info, h.node_info("hot"))
    assert explained["filter"]["status"] == "Unschedulable"
    assert explained["filter"]["usage"]["cpu"] == {
        "percent": 80,
        "threshold": 65,
        "used": 25700,
        "allocatable": 32000,
    }
    assert explained["estimatedPod"] == {"cpu": 1700, "memory": 1503238554}
    assert explained["nodeMetricAgeSeconds"] == 0


def test_reserved_pods_count_until_koordlet_reports_them() -> None:
    h = harness(
        {"usageThresholds": {"cpu": 0, "memory": 0}},
        make_node("a", cpu="32", memory="64Gi"),
        make_node("b", cpu="32", memory="64Gi"),
        make_node_metric("a", cpu="4", memory="8Gi"),
        make_node_metric("b", cpu="5", memory="8Gi"),
    )
    placed = [h.schedule_one(make_pod(f"p{i}", cpu="8", memory="1Gi", priority=9000)).node for i in range(4)]
    # Without the assign cache every pod would land on "a"; with it they alternate as estimates pile up.
    assert placed == ["a", "b", "a", "b"]
    assert sample(h, "koord_scheduler_loadaware_assigned_pods") == 4


def test_unreserve_and_pod_delete_remove_the_estimate() -> None:
    h = harness({}, make_node("n", cpu="10", memory="64Gi"), make_node_metric("n", cpu="4", memory="1Gi"))
    big = make_pod("big", cpu="2", priority=9000)
    before = h.score(big, "n")
    assert h.filter(big, "n").is_success  # 4 + 1.7 of 10 cores
    h.reserve(make_pod("r", cpu="4", priority=9000), "n")
    assert h.score(big, "n") < before
    assert h.filter(big, "n").reasons == ("node(s) cpu usage exceed threshold",)  # 4 + 3.4 + 1.7 of 10
    h.check_vector_forms(big, NAME)
    h.unreserve(make_pod("r", cpu="4", priority=9000), "n")
    assert h.score(big, "n") == before and h.filter(big, "n").is_success
    h.add(make_pod("bound", cpu="4", priority=9000, node="n"))
    assert not h.filter(big, "n").is_success
    h.cluster.delete("Pod", "bound", "default")
    assert h.filter(big, "n").is_success
    h.check_vector_forms(big, NAME)


def test_node_metric_events_update_filter_and_score() -> None:
    metric = make_node_metric("n", cpu="9", memory="1Gi")
    h = harness({}, make_node("n", cpu="10", memory="64Gi"), metric)
    pod = make_pod("p", cpu="1", priority=9000)
    assert not h.filter(pod, "n").is_success
    h.cluster.patch(
        "NodeMetric",
        "n",
        "",
        {"status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "1"}}}}},
        status=True,
    )
    assert h.filter(pod, "n").is_success
    h.check_vector_forms(pod, NAME)
    h.cluster.delete("NodeMetric", "n")
    assert h.filter(pod, "n").is_success and h.score(pod, "n") == 0
    assert sample(h, "koord_scheduler_loadaware_nodes_without_nodemetric") == 1
    h.check_vector_forms(pod, NAME)


def test_expiry_follows_the_scheduler_clock() -> None:
    h = harness({}, make_node("n", cpu="10", memory="64Gi"), make_node_metric("n", cpu="1", memory="1Gi"))
    pod = make_pod("p", cpu="1", priority=9000)
    assert h.filter(pod, "n").is_success and h.score(pod, "n") > 0
    h.clock.advance(179)
    assert h.filter(pod, "n").is_success
    h.clock.advance(1)
    assert h.filter(pod, "n").reasons == ("node(s) nodeMetric expired",)
    assert h.score(pod, "n") == 0
    assert sample(h, "koord_scheduler_loadaware_nodemetric_expired_nodes") == 1
    assert sample(h, "koord_scheduler_loadaware_nodemetric_staleness_seconds") == 180
    h.check_vector_forms(pod, NAME)
    labels = {"reason": "node_metric_expired", "resource": ""}
    before = sample(h, "koord_scheduler_loadaware_filter_rejections_total", **labels) or 0
    result = h.schedule_one(pod)
    assert result.node is None
    assert sample(h, "koord_scheduler_loadaware_filter_rejections_total", **labels) == before + 1


def test_node_annotation_changes_reach_the_vectorised_path() -> None:
    h = harness({}, make_node("n", cpu="10", memory="64Gi"), make_node_metric("n", cpu="5", memory="1Gi"))
    pod = make_pod("p", cpu="1", priority=9000)
    assert h.filter(pod, "n").is_success
    node = copy.deepcopy(h.cluster.get("Node", "n"))
    node["metadata"].setdefault("annotations", {})["scheduling.koordinator.sh/usage-thresholds"] = json.dumps(
        {"usageThresholds": {"cpu": 50}}
    )
    h.cluster.update(node)
    assert h.filter(pod, "n").reasons == ("node(s) cpu usage exceed threshold",)
    h.check_vector_forms(pod, NAME)
    assert h.schedule_one(pod).node is None


def test_daemonset_pods_always_pass() -> None:
    h = harness({}, make_node("n", cpu="10"), make_node_metric("n", cpu="10"))
    assert h.filter(make_pod("ds", cpu="1", owner_kind="DaemonSet"), "n").is_success
    assert not h.filter(make_pod("plain", cpu="1"), "n").is_success


def test_prod_pods_are_judged_on_prod_usage() -> None:
    metric = make_node_metric(
        "n",
        cpu="8",
        memory="1Gi",
        pods=[{"name": "prod", "cpu": "1", "priority": "koord-prod"}, {"name": "batch", "cpu": "7"}],
    )
    scheduled = format_time(NOW - 3600)
    objects = [
        make_node("n", cpu="10", memory="64Gi"),
        metric,
        make_pod("prod", cpu="1", priority=9000, node="n"),
        make_pod("batch", requests={"kubernetes.io/batch-cpu": "7000"}, priority=5500, node="n"),
    ]
    for obj in objects[2:]:
        obj["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}
        ]
    h = harness({"prodUsageThresholds": {"cpu": 50}}, *objects)
    # Prod: 1 core of prod usage + 1.7 estimated = 27% <= 50. Batch pods see the node: 80% + ... > 65.
    assert h.filter(make_pod("new-prod", cpu="2", priority=9000), "n").is_success
    assert h.filter(
        make_pod("new-batch", requests={"kubernetes.io/batch-cpu": "1000"}, priority=5500), "n"
    ).reasons == ("node(s) cpu usage exceed threshold",)
    h.check_vector_forms(make_pod("new-prod", cpu="2", priority=9000), NAME)


def test_shipped_profile_never_filters_but_still_scores() -> None:
    args = {
        "filterExpiredNodeMetrics": False,
        "nodeMetricExpirationSeconds": 300,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "usageThresholds": {"cpu": 0, "memory": 0},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    }
    h = harness(args, make_node("n", cpu="10", memory="10Gi"), make_node_metric("n", cpu="10", memory="10Gi"))
    pod = make_pod("p", cpu="1", memory="1Gi", priority=9000)
    assert h.filter(pod, "n").is_success
    assert h.score(pod, "n") == 0  # fully used
    h.clock.advance(400)
    assert h.filter(pod, "n").is_success  # expired metrics are not filtered by this profile


def test_events_to_register_and_extension_points() -> None:
    h = harness({})
    assert plugin(h).events_to_register() == [
        ClusterEvent("Pod", "Delete"),
        ClusterEvent("NodeMetric", "Add"),
        ClusterEvent("NodeMetric", "Update"),
        ClusterEvent("NodeMetric", "Delete"),
    ]
    assert LoadAwareScheduling.extension_points() == ["PreFilter", "Filter", "Score", "Reserve"]


def test_unreadable_node_metric_is_counted_and_ignored() -> None:
    bad = make_node_metric("n", cpu="1")
    bad["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"] = "lots"
    h = harness({}, make_node("n", cpu="10"), bad)
    assert sample(h, "koord_scheduler_loadaware_nodemetric_errors_total") == 1
    assert h.score(make_pod("p", cpu="1"), "n") == 0


def test_vectorised_expiry_of_a_metric_that_arrived_later() -> None:
    """A NodeMetric that arrives after the last full expiry pass must still expire on time in filter_all."""
    h = harness({}, make_node("a", cpu="10"), make_node("b", cpu="10"))
    pod = make_pod("p", cpu="1", priority=9000)
    h.check_vector_forms(pod, NAME)  # every row expired (no NodeMetric): nothing pending
    h.add(make_node_metric("a", cpu="1", update_time=NOW))
    h.clock.advance(100)
    h.add(make_node_metric("b", cpu="1", update_time=NOW + 100))
    h.check_vector_forms(pod, NAME)
    h.clock.advance(100)  # a expired (200 s), b fresh (100 s)
    assert h.filter(pod, "a").reasons == ("node(s) nodeMetric expired",) and h.filter(pod, "b").is_success
    h.check_vector_forms(pod, NAME)
    h.clock.advance(100)
    h.check_vector_forms(pod, NAME)
    assert h.schedule_one(pod).node is None


def test_threshold_boundary_is_exact_in_every_form() -> None:
    """65% of 10 cores: 6549m rounds to 65 (passes), 6550m to 66 (fails). The per-node form, the whole-table
    form and the row-patching form of filter_all must all put the boundary at the same milli-core."""
    others = [make_node(f"n{i}", cpu="10", memory="64Gi") for i in range(8)]  # so one row is patched alone
    h = harness({}, make_node("a", cpu="10", memory="64Gi"), make_node("b", cpu="10", memory="64Gi"), *others)
    h.add(make_node_metric("a", cpu="1", memory="1Gi"), make_node_metric("b", cpu="5700m", memory="1Gi"))
    pod = make_pod("p", cpu="1", priority=9000)  # estimated 850m
    assert h.filter(pod, "b").reasons == ("node(s) cpu usage exceed threshold",)
    h.check_vector_forms(pod, NAME)  # whole-table computation for this pod shape
    for usage, passes in (("5699m", True), ("5700m", False), ("5699m", True)):
        patch = {"status": {"nodeMetric": {"nodeUsage": {"resources": {"cpu": usage}}}}}
        h.cluster.patch("NodeMetric", "a", "", patch, status=True)
        assert h.filter(pod, "a").is_success is passes
        h.check_vector_forms(pod, NAME)  # now only row "a" is recomputed


def test_rejections_are_counted_per_reason_when_several_reasons_occur() -> None:
    h = harness(
        {},
        make_node("cpu-hot-1", cpu="32", memory="64Gi"),
        make_node("cpu-hot-2", cpu="32", memory="64Gi"),
        make_node("memory-hot", cpu="32", memory="64Gi"),
        make_node("stale", cpu="32", memory="64Gi"),
        make_node("cool", cpu="32", memory="64Gi"),
        make_node_metric("cpu-hot-1", cpu="24", memory="1Gi"),  # 75% cpu > 65%
        make_node_metric("cpu-hot-2", cpu="30", memory="1Gi"),
        make_node_metric("memory-hot", cpu="1", memory="62Gi"),  # 97% memory > 95% once the pod is added
        make_node_metric("stale", cpu="1", memory="1Gi", update_time=NOW - 400),
        make_node_metric("cool", cpu="1", memory="1Gi"),
    )
    pod = make_pod("web", cpu="2", memory="2Gi", priority=9000)
    result = h.schedule_one(pod)
    assert result.node == "cool"
    counted = {
        (reason, resource): sample(
            h, "koord_scheduler_loadaware_filter_rejections_total", reason=reason, resource=resource
        )
        for reason, resource in [
            ("usage_exceed_threshold", "cpu"),
            ("usage_exceed_threshold", "memory"),
            ("node_metric_expired", ""),
            ("aggregated_usage_exceed_threshold", "cpu"),
        ]
    }
    assert counted == {
        ("usage_exceed_threshold", "cpu"): 2,
        ("usage_exceed_threshold", "memory"): 1,
        ("node_metric_expired", ""): 1,
        ("aggregated_usage_exceed_threshold", "cpu"): None,  # never rejected: no series at all
    }

    # With the cool node gone nothing fits, and every node's reason comes from the bulk statuses.
    h.cluster.delete("Node", "cool")
    failed = h.schedule_one(make_pod("web-2", cpu="2", memory="2Gi", priority=9000))
    assert failed.node is None
    assert {name: status.reasons for name, status in failed.filter.items()} == {
        "cpu-hot-1": ("node(s) cpu usage exceed threshold",),
        "cpu-hot-2": ("node(s) cpu usage exceed threshold",),
        "memory-hot": ("node(s) memory usage exceed threshold",),
        "stale": ("node(s) nodeMetric expired",),
    }


def test_rejections_of_a_single_reason_are_counted_per_node() -> None:
    h = harness(
        {},
        *(make_node(f"hot-{i}", cpu="32", memory="64Gi") for i in range(3)),
        *(make_node_metric(f"hot-{i}", cpu="30", memory="1Gi") for i in range(3)),
    )
    for i in range(2):
        assert h.schedule_one(make_pod(f"web-{i}", cpu="1", priority=9000)).node is None
    labels = {"reason": "usage_exceed_threshold", "resource": "cpu"}
    assert sample(h, "koord_scheduler_loadaware_filter_rejections_total", **labels) == 6


def test_pods_of_one_shape_share_their_estimate() -> None:
    h = harness({"allowCustomizeEstimation": True}, make_node("n", cpu="32", memory="64Gi"))
    p = plugin(h)

    def incoming(manifest: dict[str, Any]) -> Any:
        return p._estimate_incoming(PodInfo.from_manifest(manifest))

    a = incoming(make_pod("a", cpu="2", memory="2Gi", priority=9000))
    assert incoming(make_pod("b", cpu="2", memory="2Gi", priority=9000)) is a
    assert a.estimated == [1700, round(2 * 2**30 * 0.7)] and a.prod and not a.daemonset
    factors = {"scheduling.koordinator.sh/load-estimated-scaling-factors": json.dumps({"cpu": 50})}
    custom = incoming(make_pod("c", cpu="2", memory="2Gi", priority=9000, annotations=factors))
    assert custom.estimated[0] == 1000
    daemon = incoming(make_pod("d", cpu="2", memory="2Gi", priority=9000, owner_kind="DaemonSet"))
    assert daemon.daemonset and daemon.estimated == a.estimated
    batch = incoming(make_pod("e", cpu="2", memory="2Gi", priority=5500))
    assert not batch.prod and batch is not a


def test_estimated_node_usage_is_what_filter_starts_from() -> None:
    """``koord compare`` reads each node's estimate (UsageEstimatingPlugin): the NodeMetric's usage plus the
    estimate of every pod placed since, and the thresholds a non-prod pod is held to."""
    h = harness(
        {},
        make_node("hot", cpu="32", memory="64Gi"),
        make_node("cool", cpu="32", memory="64Gi"),
        make_node("bare", cpu="32", memory="64Gi"),
        make_node_metric("hot", cpu="24", memory="16Gi"),
        make_node_metric("cool", cpu="8", memory="16Gi"),
    )
    assert h.schedule_one(make_pod("web", cpu="2", memory="2Gi", priority=9000)).node == "cool"
    p = plugin(h)
    cool = p.estimate_node_usage(h.node_info("cool"))
    assert cool is not None and not cool.expired
    assert cool.used == {"cpu": 8000 + 1700, "memory": 16 * 2**30 + 1503238554}
    assert cool.allocatable == {"cpu": 32000, "memory": 64 * 2**30}
    assert cool.thresholds == {"cpu": 65, "memory": 95}
    hot = p.estimate_node_usage(h.node_info("hot"))
    assert hot is not None and hot.used["cpu"] == 24000
    assert p.estimate_node_usage(h.node_info("bare")) is None  # no NodeMetric: nothing to estimate from
