"""Bindings are cheap but exact: the embedded cluster shares what a binding leaves alone, and the pod
cache derives the bound record from the previous one instead of parsing the pod again."""

from __future__ import annotations

import random
from typing import Any

import pytest

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.informer import PodCache, SharedInformer, _same_except
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.merge_patch import copy_json
from koord_framework.cluster.port import WatchEvent
from koord_framework.testing import make_node, make_pod


def _fields(p: PodInfo) -> dict[str, Any]:
    # ``non_zero`` is a cache filled on first use, not a parsed field.
    return {name: getattr(p, name) for name in PodInfo.__slots__ if name != "non_zero"}


def _pods() -> list[dict[str, Any]]:
    with_status = make_pod("with-status", cpu="1", memory="1Gi")
    with_status["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z"},
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-01-01T00:00:05Z"},
        ],
        "nominatedNodeName": "n1",
    }
    no_status = make_pod("no-status", cpu="500m")
    no_status.pop("status", None)
    labelled = make_pod("labelled", cpu="2", labels={"app": "x"}, priority=10)
    return [with_status, no_status, labelled]


@pytest.mark.parametrize("index", range(3))
def test_bound_record_equals_a_fresh_parse(index: int) -> None:
    cluster = MemoryCluster(VirtualClock(1_704_067_200.0))
    cluster.create(make_node("n1"))
    cache = PodCache(SharedInformer(cluster))
    manifest = _pods()[index]
    cluster.create(manifest)
    name = manifest["metadata"]["name"]
    before = cache.get("default", name)
    assert before is not None
    cluster.clock.set(1_704_067_260.0)  # type: ignore[attr-defined]
    cluster.bind("default", name, "n1")
    after = cache.get("default", name)
    assert after is not None and after is not before
    assert _fields(after) == _fields(PodInfo.from_manifest(cluster.get("Pod", name)))
    assert after.node_name == "n1" and after.scheduled_time == 1_704_067_260.0
    assert before.node_name == ""  # the earlier record is left as it was


def test_other_updates_are_parsed_in_full() -> None:
    cluster = MemoryCluster(VirtualClock(0.0))
    cluster.create(make_node("n1"))
    cache = PodCache(SharedInformer(cluster))
    cluster.create(make_pod("p", cpu="1"))
    cluster.bind("default", "p", "n1")
    cluster.patch("Pod", "p", "default", {"metadata": {"labels": {"new": "label"}}})
    record = cache.get("default", "p")
    assert record is not None and record.labels["new"] == "label"
    assert _fields(record) == _fields(PodInfo.from_manifest(cluster.get("Pod", "p")))
    cluster.patch("Pod", "p", "default", {"status": {"phase": "Running"}}, status=True)
    record = cache.get("default", "p")
    assert record is not None and record.phase == "Running"


@pytest.mark.parametrize("index", range(3))
def test_record_after_an_annotations_patch_equals_a_fresh_parse(index: int) -> None:
    """PreBind's batched patch (annotations only) is derived like a binding, then the binding itself."""
    cluster = MemoryCluster(VirtualClock(0.0))
    cluster.create(make_node("n1"))
    cache = PodCache(SharedInformer(cluster))
    manifest = _pods()[index]
    name = manifest["metadata"]["name"]
    cluster.create(manifest)
    before = cache.get("default", name)
    cluster.patch("Pod", name, "default", {"metadata": {"annotations": {"a/b": "1", "c": "2"}}})
    after = cache.get("default", name)
    assert after is not None and after is not before and after.annotations["a/b"] == "1"
    assert _fields(after) == _fields(PodInfo.from_manifest(cluster.get("Pod", name)))
    assert before is not None and "a/b" not in before.annotations
    cluster.patch("Pod", name, "default", {"metadata": {"annotations": {"c": None}}})
    cluster.bind("default", name, "n1")
    bound = cache.get("default", name)
    assert bound is not None and "c" not in bound.annotations and bound.node_name == "n1"
    assert _fields(bound) == _fields(PodInfo.from_manifest(cluster.get("Pod", name)))


def test_patch_never_modifies_the_stored_version_watchers_hold() -> None:
    cluster = MemoryCluster(VirtualClock(0.0))
    seen: list[WatchEvent] = []
    cluster.subscribe(["Pod"], seen.append)
    cluster.create(make_pod("p", cpu="1", memory="1Gi", labels={"a": "b"}))
    stored = seen[-1].obj
    snapshot = copy_json(stored)
    patch: dict[str, Any] = {"metadata": {"annotations": {"x": "1"}, "labels": {"a": None}}}
    cluster.patch("Pod", "p", "default", patch)
    new = seen[-1].obj
    assert stored == snapshot  # the old version is untouched
    assert new["metadata"]["annotations"] == {"x": "1"} and "a" not in new["metadata"]["labels"]
    assert new["spec"] is stored["spec"]  # what the patch leaves alone is shared, both being read-only
    patch["metadata"]["annotations"]["x"] = "changed"  # the caller's patch document stays the caller's
    assert cluster.get("Pod", "p")["metadata"]["annotations"] == {"x": "1"}


def test_binding_never_modifies_the_stored_version_watchers_hold() -> None:
    cluster = MemoryCluster(VirtualClock(0.0))
    cluster.create(make_node("n1"))
    seen: list[WatchEvent] = []
    cluster.subscribe(["Pod"], seen.append)
    cluster.create(make_pod("p", cpu="1", memory="1Gi", labels={"a": "b"}))
    stored = seen[-1].obj
    snapshot = copy_json(stored)
    cluster.bind("default", "p", "n1")
    event = seen[-1]
    assert event.type == "MODIFIED" and event.old is stored
    assert stored == snapshot  # the old version is untouched
    new = event.obj
    assert new["spec"]["nodeName"] == "n1" and "nodeName" not in stored["spec"]
    assert [c["type"] for c in new["status"]["conditions"]] == ["PodScheduled"]
    assert new["spec"]["containers"] is stored["spec"]["containers"]  # shared, as both are read-only
    got = cluster.get("Pod", "p")  # a copy the caller owns
    got["spec"]["containers"][0]["name"] = "changed"
    assert new["spec"]["containers"][0]["name"] != "changed"


_KEYS = ["a", "b", "c", "spec", "status"]
_VALUES: list[Any] = [None, 0, 1, "x", [1], {"k": 1}]


def _naive_same_except(a: Any, b: Any, skip: frozenset[str]) -> bool:
    a = {} if a is None else a
    b = {} if b is None else b
    if not isinstance(a, dict) or not isinstance(b, dict):
        return a == b
    return {k: v for k, v in a.items() if k not in skip} == {k: v for k, v in b.items() if k not in skip}


@pytest.mark.parametrize("seed", range(300))
def test_same_except_is_equality_outside_the_skipped_keys(seed: int) -> None:
    rng = random.Random(seed)

    def some_dict() -> dict[str, Any]:
        return {k: rng.choice(_VALUES) for k in rng.sample(_KEYS, rng.randint(0, len(_KEYS)))}

    a = some_dict()
    b = dict(a) if rng.random() < 0.5 else some_dict()
    if rng.random() < 0.5 and b:  # change, add or drop one key
        key = rng.choice(_KEYS)
        if rng.random() < 0.5:
            b.pop(key, None)
        else:
            b[key] = rng.choice(_VALUES)
    skip = frozenset(rng.sample(_KEYS, rng.randint(0, 2)))
    expected = _naive_same_except(a, b, skip)
    assert _same_except(a, b, skip) is expected
    assert _same_except(b, a, skip) is expected
