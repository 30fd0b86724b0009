"""Units below the plugin: NodeMetric reading, per-node threshold profiles, the assign cache's sums."""

from __future__ import annotations

import json

import pytest
from koord_plugin_loadaware import DefaultEstimator, LoadAwareSchedulingArgs
from koord_plugin_loadaware.assign_cache import AssignCache
from koord_plugin_loadaware.nodemetric import NodeMetricError, parse_node_metric
from koord_plugin_loadaware.profile import base_profile, node_profile
from koord_plugin_loadaware.vectors import Vectorizer

from koord_framework.api.objects import PodInfo
from koord_framework.testing import DEFAULT_START, make_node_metric, make_pod

VZ = Vectorizer(["memory", "cpu"])
GI = 2**30
NOW = DEFAULT_START
THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"


# --- NodeMetric --------------------------------------------------------------------------------------
def test_vectorizer_sorts_and_ignores_unknown_names() -> None:
    assert VZ.names == ("cpu", "memory")
    assert VZ.to_vec({"memory": 5, "gpu": 9}) == [0, 5]


def test_node_metric_vectors_and_pod_usages() -> None:
    m = make_node_metric(
        "n1",
        cpu="10",
        memory="20Gi",
        pods=[
            {"name": "a", "cpu": "1", "memory": "1Gi", "priority": "koord-prod"},
            {"name": "b", "cpu": "2"},
            {"name": "empty"},
        ],
        report_interval=30,
    )
    r = parse_node_metric(m, VZ)
    assert r.update_time == NOW and r.report_interval == 30.0 and r.has_info
    assert r.node_usage == [10000, 20 * GI]
    assert r.pod_usages == {"default/a": [1000, GI], "default/b": [2000, 0]}
    assert r.prod_pods == frozenset({"default/a"})


def test_aggregated_usage_keys_and_longest_window_default() -> None:
    m = make_node_metric(
        "n1",
        cpu="1",
        aggregated={300: {"p95": {"cpu": "5"}, "p99": {"cpu": "6"}}, 1800: {"p95": {"cpu": "7"}}},
    )
    r = parse_node_metric(m, VZ)
    assert r.aggregated_usage("p95", 300 * 10**9) == [5000, 0]
    assert r.aggregated_usage("p95", 0) == [7000, 0]  # the longest window
    assert r.aggregated_usage("p99", 0) == [6000, 0]
    assert r.aggregated_usage("avg", 0) == [1000, 0]  # nothing reported: instant usage
    assert r.aggregated_usage("avg", 60 * 10**9) is None


def test_node_metric_without_update_time_or_info() -> None:
    r = parse_node_metric({"metadata": {"name": "n"}, "status": {}}, VZ)
    assert r.update_time is None and not r.has_info and r.node_usage is None and r.report_interval == 60.0


def test_bad_node_metric_names_the_field() -> None:
    m = make_node_metric("n1")
    m["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"] = "lots"
    with pytest.raises(NodeMetricError, match=r"status\.nodeMetric\.nodeUsage\.resources\.cpu"):
        parse_node_metric(m, VZ)


# --- profiles ----------------------------------------------------------------------------------------
ARGS = LoadAwareSchedulingArgs.model_validate(
    {"usageThresholds": {"cpu": 65, "memory": 95}, "prodUsageThresholds": {"cpu": 50}}
)
BASE = base_profile(ARGS, VZ)


def test_node_annotation_replaces_whole_parts() -> None:
    p = node_profile(BASE, {THRESHOLDS: '{"usageThresholds": {"memory": 60}}'}, VZ)
    assert p.usage == [0, 60] and p.prod == [50, 0] and p.aggregated is None


def test_node_annotation_aggregated_needs_thresholds_and_type() -> None:
    text = json.dumps(
        {
            "aggregatedUsage": {
                "usageThresholds": {"cpu": 60},
                "usageAggregationType": "p95",
                "usageAggregatedDuration": "5m",
            }
        }
    )
    p = node_profile(BASE, {THRESHOLDS: text}, VZ)
    assert p.aggregated == [60, 0] and p.agg_type == "p95" and p.agg_window_ns == 300 * 10**9
    half = json.dumps({"aggregatedUsage": {"usageThresholds": {"cpu": 60}}})
    assert node_profile(BASE, {THRESHOLDS: half}, VZ) is BASE


@pytest.mark.parametrize(
    "text", ["not json", '{"usageThresholds": {"cpu": "60"}}', "{}", '{"usageThresholds": {}}', "null"]
)
def test_unusable_annotation_keeps_the_base_profile(text: str) -> None:
    assert node_profile(BASE, {THRESHOLDS: text}, VZ) is BASE


def test_annotation_keys_match_case_insensitively_like_go() -> None:
    p = node_profile(BASE, {THRESHOLDS: '{"UsageThresholds": {"cpu": 10}}'}, VZ)
    assert p.usage == [10, 0]


# --- assign cache ------------------------------------------------------------------------------------
def cache(**args: object) -> tuple[AssignCache, list[str]]:
    a = LoadAwareSchedulingArgs.model_validate(args)
    changed: list[str] = []
    return AssignCache(a, VZ, DefaultEstimator(a), lambda: NOW, changed.append), changed


def pod(
    name: str, cpu: str = "4", node: str = "n1", prod: bool = True, scheduled: float | None = None
) -> PodInfo:
    manifest = make_pod(name, cpu=cpu, memory="1Gi", node=node, priority=9000 if prod else 5500)
    if not prod:
        manifest["spec"]["containers"][0]["resources"] = {
            "requests": {
                "kubernetes.io/batch-cpu": str(int(float(cpu) * 1000)),
                "kubernetes.io/batch-memory": "1Gi",
            }
        }
    if scheduled is not None:
        manifest["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(scheduled)}
        ]
    return PodInfo.from_manifest(manifest)


def _iso(t: float) -> str:
    from koord_framework.cluster.clock import format_time

    return format_time(t)


def test_unreported_pod_is_estimated_fully_and_reported_one_by_delta() -> None:
    c, changed = cache()
    c.set_metric(
        "n1", parse_node_metric(make_node_metric("n1", cpu="10", pods=[{"name": "seen", "cpu": "1"}]), VZ)
    )
    c.assign("n1", pod("fresh"))  # no usage reported: full estimate 3400m
    c.assign("n1", pod("seen"))  # young (timestamp now), reported 1000m: delta 2400m
    load = c.get("n1")
    assert load is not None
    assert load.node_delta[0] == 3400 + 2400
    assert load.node_estimated[0] == 3400 * 2
    assert load.existing_estimate(False) == [10000 + 5800, load.node_delta[1]]
    assert changed == ["n1", "n1", "n1"]


def test_old_reported_pod_is_not_estimated() -> None:
    c, _ = cache()
    c.set_metric(
        "n1", parse_node_metric(make_node_metric("n1", cpu="10", pods=[{"name": "old", "cpu": "1"}]), VZ)
    )
    c.assign("n1", pod("old", scheduled=NOW - 3600))
    load = c.get("n1")
    assert load is not None and load.node_delta == [0, 0] and load.node_estimated[0] == 3400


def test_forced_estimation_window_keeps_old_pod_estimated() -> None:
    c, _ = cache(estimatedSecondsAfterPodScheduled=7200)
    c.set_metric(
        "n1", parse_node_metric(make_node_metric("n1", cpu="10", pods=[{"name": "old", "cpu": "1"}]), VZ)
    )
    c.assign("n1", pod("old", scheduled=NOW - 3600))
    load = c.get("n1")
    assert load is not None and load.node_delta[0] == 2400


def test_prod_usage_counts_only_pods_both_sides_call_prod() -> None:
    c, _ = cache()
    metric = make_node_metric(
        "n1",
        cpu="10",
        pods=[{"name": "p1", "cpu": "2", "priority": "koord-prod"}, {"name": "p2", "cpu": "3"}],
    )
    c.set_metric("n1", parse_node_metric(metric, VZ))
    c.assign("n1", pod("p1", scheduled=NOW - 3600))
    c.assign("n1", pod("p2", scheduled=NOW - 3600))  # reported, but not as prod: fully estimated for prod
    load = c.get("n1")
    assert load is not None
    assert load.prod_usage[0] == 2000
    assert load.prod_delta[0] == 3400
    assert load.existing_estimate(True) == [5400, load.prod_usage[1] + load.prod_delta[1]]


def test_remove_reverses_add_exactly_and_empty_nodes_disappear() -> None:
    c, _ = cache()
    c.assign("n1", pod("a"))
    c.set_metric("n1", parse_node_metric(make_node_metric("n1", cpu="10"), VZ))
    c.assign("n1", pod("b", prod=False))
    c.unassign("n1", pod("a").uid)
    c.unassign("n1", pod("b").uid)
    load = c.get("n1")
    assert load is not None and load.node_delta == [0, 0] and load.node_estimated == [0, 0]
    c.set_metric("n1", None)
    assert c.get("n1") is None


def test_pod_moving_nodes_and_terminating_is_followed() -> None:
    c, _ = cache()
    for n in ("n1", "n2"):
        c.set_metric(n, parse_node_metric(make_node_metric(n), VZ))
    c.on_pod_add(pod("a", node="n1"))
    c.on_pod_update(pod("a", node="n1"), pod("a", node="n2"))
    assert c.node_of(pod("a").uid) == "n2" and c.get("n1").node_estimated == [0, 0]  # type: ignore[union-attr]
    done = pod("a", node="n2")
    done.phase = "Succeeded"
    c.on_pod_update(None, done)
    assert c.pod_count == 0


def test_reserve_pods_and_terminal_pods_are_not_counted() -> None:
    c, _ = cache()
    reserve = PodInfo.from_manifest(
        make_pod("r", cpu="1", node="n1", annotations={"scheduling.koordinator.sh/reserve-pod": "true"})
    )
    c.assign("n1", reserve)
    assert c.pod_count == 0


def _sums(c: AssignCache, node: str = "n1") -> tuple[list[int], ...]:
    load = c.get(node)
    assert load is not None
    return load.node_delta, load.node_estimated, load.prod_delta, load.prod_usage


def test_rebind_changes_sums_only_when_the_new_timestamp_changes_what_is_estimated() -> None:
    metric = make_node_metric("n1", cpu="10", pods=[{"name": "seen", "cpu": "1", "priority": "koord-prod"}])
    c, changed = cache()
    c.set_metric("n1", parse_node_metric(metric, VZ))
    young = pod("seen", scheduled=NOW - 5)  # inside the report interval: still estimated (delta)
    c.assign("n1", young)
    before = [list(v) for v in _sums(c)]
    changed.clear()

    # Bound 10 s ago instead of 5: still young, so the sums stay and the row need not be rewritten.
    assert c.rebind(young.uid, "n1", NOW - 10, None, young.labels, young.annotations)
    assert [list(v) for v in _sums(c)] == before and changed == []
    entry = c.cached(young.uid)
    assert entry is not None and entry.timestamp == NOW - 10 and entry.signature[4] == NOW - 10

    # Bound an hour ago: no longer estimated, exactly as if it had been assigned with that time.
    assert c.rebind(young.uid, "n1", NOW - 3600, None, young.labels, young.annotations)
    assert changed == ["n1"]
    fresh, _ = cache()
    fresh.set_metric("n1", parse_node_metric(metric, VZ))
    fresh.assign("n1", pod("seen", scheduled=NOW - 3600))
    assert _sums(c) == _sums(fresh)
    assert _sums(c) != tuple(before)
