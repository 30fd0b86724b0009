"""Koordinator's own Coscheduling unit tests, as data, through the gang cache, the manager and the plugin.

``data/vectors.json`` is the Coscheduling part of the shared scheduler vectors, copied so that the tests need
nothing outside the repository. Each vector's ``notes``/``procedure`` describes the Go test's steps; the
helpers below replay them on ``GangCache``/``GangManager`` (Koordinator's ``GangCache``/``PodGroupManager``)
or, for PreBind, on the plugin in a scheduler harness.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_coscheduling import Coscheduling, CoschedulingArgs, GangCache, GangManager

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.testing.scheduler import SchedulerHarness

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())[
    "vectors"
]


def _by(*functions: str) -> list[Any]:
    return [
        pytest.param(v, id=f"{v['id']} {v['description']}") for v in VECTORS if v["function"] in functions
    ]


def test_all_coscheduling_vectors_are_here() -> None:
    assert len(VECTORS) == 14
    assert {v["plugin"] for v in VECTORS} == {"Coscheduling"}


def _manager(args: dict[str, Any] | None) -> tuple[GangCache, GangManager]:
    parsed = CoschedulingArgs.model_validate(args or {})
    cache = GangCache(parsed)
    return cache, GangManager(parsed, cache)


def _info(pod: dict[str, Any]) -> PodInfo:
    return PodInfo.from_manifest(pod)


@pytest.mark.parametrize("vector", _by("PreEnqueue"))
def test_pre_enqueue(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    cache, manager = _manager(inputs["args"])
    if inputs["podGroup"] is not None:
        cache.on_pod_group_add(inputs["podGroup"])
    for neighbor in inputs["neighborPods"]:
        cache.on_pod_add(neighbor)
        manager.pre_enqueue(_info(neighbor))
    cache.on_pod_add(inputs["pod"])
    pod = _info(inputs["pod"])
    if inputs["setResourceSatisfied"]:
        gang = manager.gang_of(pod)
        assert gang is not None
        gang.group_info.set_resource_satisfied()
    assert manager.pre_enqueue(pod) == vector["expected"]["error"]


@pytest.mark.parametrize("vector", _by("Permit"))
def test_permit(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    cache, manager = _manager(inputs["args"])
    for pg in inputs["podGroups"]:
        cache.on_pod_group_add(pg)
        meta = pg["metadata"]
        gang = cache.get_gang(f"{meta['namespace']}/{meta['name']}")
        assert gang is not None
        gang.group_info.once_resource_satisfied = inputs["forceOnceResourceSatisfied"]
        gang.match_policy = inputs["forceGangMatchPolicy"]
    for pod in inputs["pods"]:
        cache.on_pod_add(pod)
        manager.permit(_info(pod))
    for pod in inputs["runningPods"]:
        cache.on_pod_add(pod)
        manager.post_bind(_info(pod))
    cache.on_pod_add(inputs["pod"])
    wait, status = manager.permit(_info(inputs["pod"]))
    assert status == vector["expected"]["status"]
    assert wait == vector["expected"]["waitTimeSeconds"]


@pytest.mark.parametrize("vector", _by("GetGangBindingInfo"))
def test_gang_binding_info(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    cache, manager = _manager(None)
    for pg in inputs["podGroups"]:
        cache.on_pod_group_add(pg)
    pod = _info(inputs["pod"])
    for assumed in inputs["assumedPods"]:
        gang = manager.gang_of(_info(assumed))
        if gang is not None:
            gang.add_assumed_pod(_member(assumed))
    expected = vector["expected"]["gangBindingInfo"]
    gang = manager.gang_of(pod)
    if gang is not None and expected is not None:
        gang.add_assumed_pod(_member(inputs["pod"]))
        gang.group_info.binding_member_pods = {
            pod.uid,
            *(a["metadata"]["uid"] for a in inputs["assumedPods"]),
        }
    info = manager.gang_binding_info(pod)
    if expected is None:
        assert info is None
    else:
        assert info is not None
        assert (info.gang_group_id, info.member_count) == (expected["gangGroupId"], expected["memberCount"])


def _member(pod: dict[str, Any]) -> Any:
    from koord_plugin_coscheduling.cache import member_from_manifest

    return member_from_manifest(pod)[0]


@pytest.mark.parametrize("vector", _by("Permit+PreBind"))
def test_permit_then_pre_bind(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    h = SchedulerHarness([(Coscheduling, inputs["args"])])
    h.add(inputs["podGroup"], inputs["pod"], *inputs["otherPods"])
    plugin = h.plugin("Coscheduling")
    assert isinstance(plugin, Coscheduling)
    state = CycleState()
    pod = _info(inputs["pod"])
    others = [_info(p) for p in inputs["otherPods"]]
    s, _ = plugin.permit(state, pod, "")
    assert s.is_wait
    for other in others:
        s, _ = plugin.permit(state, other, "")
        assert s.is_success
    if "PostBind" in inputs["procedure"]:
        plugin.post_bind(state, others[0], "node-1")
        s, _ = plugin.permit(state, pod, "")
        assert s.is_success
    s = plugin.pre_bind(state, pod, "node-1")
    assert s.code.label == vector["expected"]["status"]["code"]
    written = state.pod_mutation.annotations
    for key, value in vector["expected"]["podAnnotationsSet"].items():
        assert written.get(key) == value, key
    for key in vector["expected"]["annotationsAbsent"]:
        assert key not in written


@pytest.mark.parametrize("vector", _by("GangCache.onPodAdd"))
def test_gang_cache_on_pod_add(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    cache, _ = _manager(inputs["args"])
    for pod in inputs["pods"]:
        cache.on_pod_add(pod)
    assert set(cache.gangs) == set(vector["expected"]["gangs"])
    for gid, want in vector["expected"]["gangs"].items():
        gang = cache.gangs[gid]
        assert gang.name == want["name"]
        assert gang.wait_time == want["waitTimeSeconds"]
        assert gang.mode == want["mode"]
        assert gang.min_required == want["minRequiredNumber"]
        assert gang.total_children == want["totalChildrenNum"]
        assert gang.gang_group == want["gangGroup"]
        assert gang.gang_group_id == want["gangGroupId"]
        assert gang.has_gang_init == want["hasGangInit"]
        assert gang.gang_from == want["gangFrom"]
        assert gang.match_policy == want["gangMatchPolicy"]
        assert sorted(gang.children) == want["children"]
        assert sorted(gang.pending_children) == want["pendingChildren"]
        assert sorted(gang.bound_children) == want["boundChildren"]
        assert gang.waiting_for_bind_children == {}
        assert gang.once_resource_satisfied == want["onceResourceSatisfied"]
