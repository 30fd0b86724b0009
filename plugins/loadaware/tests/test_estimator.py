"""The default estimator beyond the shared vectors: priority classes, limits, annotations, raw allocatable."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_loadaware import DefaultEstimator, LoadAwareSchedulingArgs
from koord_plugin_loadaware.estimator import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    Estimator,
    custom_estimated_seconds,
    custom_scaling_factors,
    go_round,
    load_estimator,
)

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.testing import make_node, make_pod

FACTORS_ANNOTATION = "scheduling.koordinator.sh/load-estimated-scaling-factors"


def estimate(pod: dict[str, Any], **args: Any) -> dict[str, int]:
    return DefaultEstimator(LoadAwareSchedulingArgs.model_validate(args)).estimate_pod(
        PodInfo.from_manifest(pod)
    )


def test_go_round_is_half_away_from_zero() -> None:
    assert [go_round(x) for x in (0.5, 1.5, 2.5, -0.5, -2.5, 0.49999999999999994, 2.4999)] == [
        1,
        2,
        3,
        -1,
        -3,
        0,
        2,
    ]


def test_prod_pod_uses_max_of_request_and_limit_clamped_to_limit() -> None:
    pod = make_pod(
        "p", requests={"cpu": "2", "memory": "4Gi"}, limits={"cpu": "4", "memory": "4Gi"}, priority=9000
    )
    assert estimate(pod) == {"cpu": round(4000 * 0.85), "memory": go_round(4 * 2**30 * 0.7)}


def test_batch_pod_is_estimated_from_batch_resources() -> None:
    pod = make_pod(
        "b", requests={"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2Gi"}, priority=5500
    )
    assert estimate(pod) == {"cpu": 1700, "memory": go_round(2 * 2**30 * 0.7)}


def test_best_effort_pod_without_requests_gets_250m_and_200mi() -> None:
    assert estimate(make_pod("be")) == {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}


def test_mid_pod_without_mid_requests_estimates_zero() -> None:
    assert estimate(make_pod("m", priority=7500)) == {"cpu": 0, "memory": 0}


def test_free_pod_has_no_resource_mapping() -> None:
    # koord-free translates cpu/memory to no resource at all, so nothing (not even the defaults) applies.
    assert estimate(make_pod("f", cpu="1", priority=3500)) == {"cpu": 0, "memory": 0}


def test_prod_pod_without_requests_gets_defaults_via_cpu_and_memory() -> None:
    assert estimate(make_pod("p", priority=9500)) == {"cpu": 250, "memory": DEFAULT_MEMORY_REQUEST}


def test_extra_resources_are_estimated_when_they_have_a_factor() -> None:
    pod = make_pod("g", cpu="1", requests={"nvidia.com/gpu": "2"}, priority=9000)
    got = estimate(pod, estimatedScalingFactors={"nvidia.com/gpu": 100})
    assert got == {"cpu": 850, "memory": DEFAULT_MEMORY_REQUEST, "nvidia.com/gpu": 2}


def test_pod_annotation_factors_only_when_allowed() -> None:
    pod = make_pod("p", cpu="10", priority=9000, annotations={FACTORS_ANNOTATION: '{"cpu": 50}'})
    assert estimate(pod)["cpu"] == 8500
    assert estimate(pod, allowCustomizeEstimation=True)["cpu"] == 5000
    # Missing keys come from the args; an unreadable annotation falls back entirely.
    assert estimate(pod, allowCustomizeEstimation=True)["memory"] == DEFAULT_MEMORY_REQUEST
    bad = make_pod("q", cpu="10", priority=9000, annotations={FACTORS_ANNOTATION: '{"cpu": 50.5}'})
    assert estimate(bad, allowCustomizeEstimation=True)["cpu"] == 8500


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('{"cpu": 50, "memory": 60}', {"cpu": 50, "memory": 60}),
        ('{"cpu": null}', {"cpu": 0}),
        ("null", {}),
        ('{"cpu": 1.5}', None),
        ('{"cpu": "50"}', None),
        ('{"cpu": true}', None),
        ("[1]", None),
        ("not json", None),
        ('{"cpu": 99999999999999999999}', None),
    ],
)
def test_custom_scaling_factor_parsing_follows_go_json(text: str, want: dict[str, int] | None) -> None:
    assert custom_scaling_factors({FACTORS_ANNOTATION: text}) == want


@pytest.mark.parametrize(
    ("text", "want"), [("30", 30), ("+7", 7), ("-5", -5), (" 30", -1), ("3.0", -1), ("", -1)]
)
def test_custom_seconds_parse_like_strconv(text: str, want: int) -> None:
    assert custom_estimated_seconds({"k": text}, "k") == want


def node(annotations: dict[str, str] | None = None, **alloc: str) -> NodeRecord:
    return NodeRecord.from_manifest(make_node("n", allocatable=alloc or None, annotations=annotations))


def test_raw_allocatable_overrides_amplified_allocatable() -> None:
    raw = json.dumps({"cpu": "32", "memory": "64Gi"})
    record = NodeRecord.from_manifest(
        make_node("n", cpu="48", memory="64Gi", annotations={"node.koordinator.sh/raw-allocatable": raw})
    )
    got = DefaultEstimator(LoadAwareSchedulingArgs()).estimate_node(record)
    assert got["cpu"] == 32000 and got["memory"] == 64 * 2**30 and got["pods"] == 110


def test_unreadable_raw_allocatable_is_ignored() -> None:
    record = NodeRecord.from_manifest(
        make_node("n", cpu="48", annotations={"node.koordinator.sh/raw-allocatable": '{"cpu": "x"}'})
    )
    assert DefaultEstimator(LoadAwareSchedulingArgs()).estimate_node(record)["cpu"] == 48000


def test_numeric_raw_allocatable_is_read_as_quantity_text() -> None:
    record = NodeRecord.from_manifest(
        make_node("n", cpu="48", annotations={"node.koordinator.sh/raw-allocatable": '{"cpu": 1.5}'})
    )
    assert DefaultEstimator(LoadAwareSchedulingArgs()).estimate_node(record)["cpu"] == 1500


class HalfEstimator(Estimator):
    """A stand-in third-party estimator."""

    name = "half"

    def estimate_pod(self, pod: PodInfo) -> dict[str, int]:
        return {k: v // 2 for k, v in pod.requests.items()}

    def estimate_node(self, node: NodeRecord) -> dict[str, int]:
        return dict(node.allocatable)


def test_unknown_estimator_name_falls_back_to_default(caplog: pytest.LogCaptureFixture) -> None:
    est = load_estimator(LoadAwareSchedulingArgs(estimator="noSuchEstimator"))
    assert isinstance(est, DefaultEstimator)
    assert "noSuchEstimator" in caplog.text


def test_default_estimator_is_registered_as_entry_point() -> None:
    from importlib import metadata

    eps = {ep.name: ep for ep in metadata.entry_points(group="koord.scheduler.loadaware.estimators")}
    assert eps["defaultEstimator"].load() is DefaultEstimator
    assert isinstance(load_estimator(LoadAwareSchedulingArgs(estimator="defaultEstimator")), DefaultEstimator)
    assert HalfEstimator(LoadAwareSchedulingArgs()).estimate_pod(
        PodInfo.from_manifest(make_pod("x", cpu="2"))
    ) == {"cpu": 1000}
