"""Koordinator's own unit-test cases for CPU eviction (copied into ``data/vectors.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_cpuevict.policy import (
    BECPUSample,
    ConfigInvalid,
    be_milli_allocatable,
    be_pod_evict_infos,
    check_satisfaction_config,
    milli_release_by_allocatable,
    milli_release_by_be_satisfaction,
    milli_release_by_used_threshold,
)

from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.states import PodMeta

VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]
LAYOUT = CgroupLayout(HostPaths.under("/nonexistent"), CgroupVersion.V1, CgroupDriver.SYSTEMD)


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def _sample(raw: dict[str, Any] | None) -> BECPUSample | None:
    if raw is None:
        return None
    return BECPUSample(
        raw["count"], float(raw["cpuUsed"]), float(raw["cpuRequest"]), float(raw["cpuRealLimit"])
    )


def test_every_vector_is_exercised() -> None:
    handled = (
        "calculateMilliReleaseByBESatisfaction",
        "calculateMilliReleaseByUsedThresholdPercent",
        "calculateMilliReleaseByAllocatableThresholdPercent",
        "isSatisfactionConfigValid",
        "getBEPodEvictInfoAndSort",
    )
    assert all(v["function"].startswith(handled) for v in VECTORS)


@pytest.mark.parametrize("vector", _by("calculateMilliReleaseByBESatisfaction"))
def test_release_by_be_satisfaction(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    t = ResourceThresholdStrategy.model_validate(inp["thresholdConfig"])
    interval = inp["metricCollectIntervalSeconds"]
    window = max(interval, t.cpu_evict_time_window_seconds or 0)
    avg = _sample(inp["avg"])
    assert avg is not None
    got = milli_release_by_be_satisfaction(
        t,
        avg,
        _sample(inp["current"]),
        be_milli_allocatable(inp["nodeFromStatesInformer"]),
        window_seconds=window,
        interval_seconds=interval,
    )
    assert got == vector["expected"]["releaseBatchCPU"]


@pytest.mark.parametrize("vector", _by("calculateMilliReleaseByUsedThresholdPercent"))
def test_release_by_used_threshold(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    t = ResourceThresholdStrategy.model_validate(inp["thresholdConfig"])
    capacity_milli = int(inp["nodeCapacity"]["cpu"]) * 1000
    got = milli_release_by_used_threshold(t, capacity_milli, float(inp["nodeCPUUsedCores"]))
    assert got == vector["expected"]["releaseCPUMilli"]


@pytest.mark.parametrize("vector", _by("calculateMilliReleaseByAllocatableThresholdPercent"))
def test_release_by_allocatable(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    t = ResourceThresholdStrategy.model_validate(inp["thresholdConfig"])
    pods = [PodMeta.from_manifest(p, LAYOUT) for p in inp["pods"]]
    assert milli_release_by_allocatable(t, inp["node"], pods) == vector["expected"]["release"]


@pytest.mark.parametrize("vector", _by("isSatisfactionConfigValid"))
def test_satisfaction_config_checks(vector: dict[str, Any]) -> None:
    raw = vector["inputs"]["thresholdConfig"]
    t = None if raw is None else ResourceThresholdStrategy.model_validate(raw)
    with pytest.raises(ConfigInvalid) as info:
        check_satisfaction_config(t)
    assert str(info.value) == vector["expected"]["error"]


def _pod(raw: dict[str, Any]) -> dict[str, Any]:
    if "batchCPURequest" in raw:
        res = {"kubernetes.io/batch-cpu": str(raw["batchCPURequest"])}
    else:
        res = {"cpu": f"{raw['cpuRequestMilli']}m"}
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": res, "limits": res}}]}
    if "priority" in raw:
        spec["priority"] = raw["priority"]
    return {
        "metadata": {
            "name": raw["uid"],
            "uid": raw["uid"],
            "labels": {"koordinator.sh/qosClass": raw["qos"]},
        },
        "spec": spec,
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize("vector", _by("getBEPodEvictInfoAndSort"))
def test_be_pod_order(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    pods = [PodMeta.from_manifest(_pod(p), LAYOUT) for p in inp["pods"]]
    used = {k: float(v) for k, v in inp["podCPUUsedCores"].items()}
    got = be_pod_evict_infos(pods, used, "BECPUEvict")
    want = vector["expected"]["order"]
    assert [
        {
            "uid": i.pod.uid,
            "milliRequest": i.milli_cpu_request,
            "milliUsed": i.milli_cpu_used,
            "cpuUsage": i.cpu_usage,
        }
        for i in got
    ] == want
