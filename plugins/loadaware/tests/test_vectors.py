"""Koordinator's own LoadAwareScheduling unit tests, as data, through the plugin's public extension points.

``data/vectors.json`` is the LoadAwareScheduling part of the shared scheduler vectors (Filter, Score,
EstimatePod, EstimateNode), copied so that the tests need nothing outside the repository. Filter and Score
vectors run through the scheduler harness: the node, its NodeMetric and the assigned pods go into an
in-memory cluster (so the plugin learns about them through the informer, as it would in a cluster), and the
incoming pod goes through PreFilter → Filter, or PreFilter → PreScore → Score. The vectorised forms are held
to the same answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_loadaware import DefaultEstimator, LoadAwareScheduling, LoadAwareSchedulingArgs

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.cluster.clock import parse_time
from koord_framework.testing.scheduler import SchedulerHarness

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())[
    "vectors"
]


def _by(function: str) -> list[Any]:
    return [pytest.param(v, id=f"{v['id']} {v['description']}") for v in VECTORS if v["function"] == function]


def test_all_loadaware_vectors_are_here() -> None:
    assert len(VECTORS) == 27
    assert {v["plugin"] for v in VECTORS} == {"LoadAwareScheduling"}
    assert {v["function"] for v in VECTORS} == {"Filter", "Score", "EstimatePod", "EstimateNode"}


def _harness(inputs: dict[str, Any]) -> SchedulerHarness:
    harness = SchedulerHarness([(LoadAwareScheduling, inputs["args"])], now=parse_time(inputs["now"]))
    objects = [inputs["node"]]
    if inputs.get("nodeMetric") is not None:
        objects.append(inputs["nodeMetric"])
    objects += inputs.get("assignedPods") or []
    harness.add(*objects)
    return harness


@pytest.mark.parametrize("vector", _by("Filter"))
def test_filter_vector(vector: dict[str, Any]) -> None:
    inputs, expected = vector["inputs"], vector["expected"]["status"]
    harness = _harness(inputs)
    node = inputs["node"]["metadata"]["name"]
    status = harness.filter(inputs["pod"], node)
    assert status.code.label == expected["code"], vector.get("notes", "")
    assert list(status.reasons) == expected.get("reasons", [])
    harness.check_vector_forms(inputs["pod"], LoadAwareScheduling.name)


@pytest.mark.parametrize("vector", _by("Score"))
def test_score_vector(vector: dict[str, Any]) -> None:
    inputs, expected = vector["inputs"], vector["expected"]
    harness = _harness(inputs)
    node = inputs["node"]["metadata"]["name"]
    assert expected["status"]["code"] == "Success"
    assert harness.score(inputs["pod"], node) == expected["score"], vector.get("notes", "")
    harness.check_vector_forms(inputs["pod"], LoadAwareScheduling.name)


@pytest.mark.parametrize("vector", _by("EstimatePod"))
def test_estimate_pod_vector(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    # Koordinator's test builds the estimator directly from (defaulted, unvalidated) args: one vector uses a
    # memory factor of 110, which validation refuses but the estimator's arithmetic allows.
    args = LoadAwareSchedulingArgs.model_construct(
        estimated_scaling_factors={"cpu": 85, "memory": 70, **inputs["estimatedScalingFactors"]},
        allow_customize_estimation=inputs["allowCustomizeEstimation"],
    )
    got = DefaultEstimator(args).estimate_pod(PodInfo.from_manifest(inputs["pod"]))
    assert got == vector["expected"]["estimated"]


@pytest.mark.parametrize("vector", _by("EstimateNode"))
def test_estimate_node_vector(vector: dict[str, Any]) -> None:
    node = NodeRecord.from_manifest(vector["inputs"]["node"])
    got = DefaultEstimator(LoadAwareSchedulingArgs()).estimate_node(node)
    assert got == parse_resource_list(vector["expected"]["allocatable"])
