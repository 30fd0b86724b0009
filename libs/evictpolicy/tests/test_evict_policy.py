"""The threshold-eviction rules CPU and memory eviction share: config checks with Koordinator's messages,
the used-threshold release, and the candidates of the priority-based triggers."""

from __future__ import annotations

from typing import Any

import pytest
from koord_lib_evictpolicy.evict_policy import (
    ConfigInvalid,
    EvictResource,
    check_allocatable_config,
    priority_evict_infos,
    release_by_used_percent,
)

from koord_framework.api.resources import CPU, MEMORY
from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.nodeslo import ResourceThresholdStrategy
from koord_framework.koordlet.states import PodMeta
from koord_framework.testing.hosttree import make_running_pod

LAYOUT = CgroupLayout(HostPaths.under("/nonexistent"), CgroupVersion.V1, CgroupDriver.SYSTEMD)


@pytest.mark.parametrize(
    ("resource", "config", "error"),
    [
        (CPU, None, "ResourceThresholdStrategy not config"),
        (CPU, {}, "CPUAllocatableEvictThresholdPercent not config"),
        (MEMORY, {}, "MemoryAllocatableEvictThresholdPercent not config"),
        # Koordinator words the negative threshold differently for the two resources
        (
            CPU,
            {"cpu_allocatable_evict_threshold_percent": -1},
            "threshold percent(-1) should equal or greater than 0",
        ),
        (
            MEMORY,
            {"memory_allocatable_evict_threshold_percent": -1},
            "threshold percent(-1) should greater than 0",
        ),
        (CPU, {"cpu_allocatable_evict_threshold_percent": 80}, "CPUAllocatableEvictLowerPercent not config"),
        (
            MEMORY,
            {"memory_allocatable_evict_threshold_percent": 80, "memory_allocatable_evict_lower_percent": 80},
            "lower percent(80) should less than threshold percent(80)",
        ),
        (
            CPU,
            {"cpu_allocatable_evict_threshold_percent": 80, "cpu_allocatable_evict_lower_percent": 70},
            "AllocatableEvictPriorityThreshold not config",
        ),
        (
            MEMORY,
            {
                "memory_allocatable_evict_threshold_percent": 80,
                "memory_allocatable_evict_lower_percent": 70,
                "allocatable_evict_priority_threshold": 8000,
            },
            "priorityThresholdPercent(8000) should less than 7999, koor-prod pods should not be killed",
        ),
    ],
)
def test_allocatable_config_errors(
    resource: EvictResource, config: dict[str, Any] | None, error: str
) -> None:
    # model_construct: NodeSLO validation already refuses some of these; the check must hold on its own.
    t = None if config is None else ResourceThresholdStrategy.model_construct(**config)
    with pytest.raises(ConfigInvalid) as info:
        check_allocatable_config(t, resource)
    assert str(info.value) == error


def test_allocatable_config_accepts_a_complete_strategy() -> None:
    t = ResourceThresholdStrategy.model_validate(
        {
            "memoryAllocatableEvictThresholdPercent": 80,
            "memoryAllocatableEvictLowerPercent": 70,
            "allocatableEvictPriorityThreshold": 7999,
        }
    )
    check_allocatable_config(t, MEMORY)


@pytest.mark.parametrize(
    ("used", "threshold", "lower", "release"),
    [
        (7200, 80, None, 960),  # 90% -> back to 78% (threshold - 2): 8000 x 12 // 100
        (7200, 80, 50, 3200),  # explicit lower percent
        (6399, 80, None, 0),  # 79% (integer percent) is below the threshold
        (6400, 80, None, 160),  # exactly at the threshold releases
        (7200, None, None, 0),  # no threshold, no release
    ],
)
def test_release_by_used_percent(used: int, threshold: int | None, lower: int | None, release: int) -> None:
    assert release_by_used_percent(8000, used, threshold, lower) == release


def test_release_by_used_percent_without_capacity() -> None:
    assert release_by_used_percent(0, 100, 80, None) == 0


def _pods() -> list[PodMeta]:
    enabled = {"koordinator.sh/eviction-enabled": "true"}
    manifests = [
        make_running_pod("high", priority=900, labels=enabled, requests={"cpu": "1", "memory": "1Gi"}),
        make_running_pod("small", priority=100, labels=enabled, requests={"cpu": "1", "memory": "1Gi"}),
        make_running_pod("large", priority=100, labels=enabled, requests={"cpu": "3", "memory": "3Gi"}),
        make_running_pod("over", priority=2000, labels=enabled, requests={"cpu": "1"}),
        make_running_pod("no-opt-in", priority=10, requests={"cpu": "1"}),
        make_running_pod("no-metric", priority=10, labels=enabled, requests={"cpu": "1"}),
    ]
    return [PodMeta.from_manifest(m, LAYOUT) for m in manifests]


def test_priority_candidates_measure_cpu_in_milli_cores() -> None:
    used = {"uid-high": 0.5, "uid-small": 2.0, "uid-large": 0.25, "uid-over": 1.0, "uid-no-opt-in": 1.0}
    by_used = priority_evict_infos(_pods(), "CPUEvict", 1000, used, CPU, by_request=False)
    assert [(i.pod.pod.name, i.milli_cpu_used, i.milli_cpu_request) for i in by_used] == [
        ("small", 2000, 1000),
        ("large", 250, 3000),
        ("high", 500, 1000),
    ]
    assert all(i.memory_used == 0 and i.memory_request == 0 for i in by_used)
    by_request = priority_evict_infos(_pods(), "CPUAllocatableEvict", 1000, used, CPU, by_request=True)
    assert [i.pod.pod.name for i in by_request] == ["large", "small", "high"]


def test_priority_candidates_count_memory_used_1000_fold() -> None:
    gi = 1024**3
    used = {"uid-small": float(2 * gi), "uid-large": float(gi)}
    infos = priority_evict_infos(_pods(), "MemoryEvict", 1000, used, MEMORY, by_request=False)
    assert [(i.pod.pod.name, i.memory_used, i.memory_request) for i in infos] == [
        ("small", 2000 * gi, gi),
        ("large", 1000 * gi, 3 * gi),
    ]
    assert all(i.milli_cpu_used == 0 and i.milli_cpu_request == 0 for i in infos)


def test_eviction_policy_annotation_keeps_a_pod_out() -> None:
    pods = [
        PodMeta.from_manifest(
            make_running_pod(
                "guarded",
                priority=100,
                labels={"koordinator.sh/eviction-enabled": "true"},
                annotations={"koordinator.sh/eviction-policy": '["BECPUEvict"]'},
            ),
            LAYOUT,
        )
    ]
    assert priority_evict_infos(pods, "CPUEvict", 1000, {"uid-guarded": 1.0}, CPU, by_request=False) == []
    assert (
        len(priority_evict_infos(pods, "BECPUEvict", 1000, {"uid-guarded": 1.0}, CPU, by_request=False)) == 1
    )
