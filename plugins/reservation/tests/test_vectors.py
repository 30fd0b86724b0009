"""Koordinator's own Reservation unit tests, as data, through the plugin's extension points and functions.

``data/vectors.json`` is the Reservation part of the shared scheduler vectors (TestScore, TestFitsNode*,
TestFitsReservation*), copied so that the tests need nothing outside the repository. The Score vectors set
up what Koordinator's test sets up: every given reservation is matched on the node, with the allocated
resources the test injects; then PreScore nominates and Score answers, as the framework would call them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.fit import fits_node, fits_reservation
from koord_plugin_reservation.model import info_from_object
from koord_plugin_reservation.plugin import STATE_KEY, NodeState, PodState

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.frameworkext import is_reserve_pod
from koord_framework.testing.scheduler import SchedulerHarness

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())[
    "vectors"
]


def _by(*functions: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"] in functions]


def _res(value: Any) -> dict[str, int] | None:
    return None if value is None else parse_resource_list(value)


def test_vectors_cover_every_function() -> None:
    assert {v["function"] for v in VECTORS} == {"PreScore+Score", "fitsNode", "fitsReservation"}


@pytest.mark.parametrize("vector", _by("fitsNode"))
def test_fits_node(vector: dict[str, Any]) -> None:
    i = vector["inputs"]
    got = fits_node(
        _res(i["podRequest"]) or {},
        _res(i["nodeAllocatable"]) or {},
        _res(i.get("allPodsRequested")),
        _res(i.get("allRAllocated")),
        _res(i.get("rRemained")),
        int(i.get("matchedOrIgnored") or 0),
        int(i.get("allocatedPods") or 0),
        _res(i.get("preemptible")),
        i.get("ignoredResources") or [],
        i.get("ignoredResourceGroups") or [],
    )
    assert (got or None) == vector["expected"]["insufficientResources"]


@pytest.mark.parametrize("vector", _by("fitsReservation"))
def test_fits_reservation(vector: dict[str, Any]) -> None:
    i = vector["inputs"]
    allocated = _res(i.get("allocated") or i.get("reservationAllocated"))
    info = info_from_object(i["reservation"], allocated=allocated)
    reasons = fits_reservation(
        _res(i["podRequest"]) or {},
        info,
        _res(i.get("preemptibleInRR")),
        bool(i.get("isDetailed")),
        i.get("ignoredResources") or [],
        i.get("ignoredResourceGroups") or [],
    )
    assert bool(reasons) == vector["expected"]["hasInsufficientReasons"]
    assert reasons == vector["expected"]["reasons"]


@pytest.mark.parametrize("vector", _by("PreScore+Score"))
def test_pre_score_and_score(vector: dict[str, Any]) -> None:
    i = vector["inputs"]
    node = i["node"]
    node_name = node["metadata"]["name"]
    harness = SchedulerHarness([Reservation], now="2024-01-01T00:00:00Z")
    harness.add(node)
    harness._refresh()
    plugin = harness.plugin("Reservation")
    assert isinstance(plugin, Reservation)
    overrides = i.get("reservationAllocatedOverride") or {}
    matched = [
        info_from_object(r, allocated=_res(overrides.get(r["metadata"].get("uid", ""))))
        for r in i.get("reservations") or []
    ]
    meta = i["pod"].setdefault("metadata", {})
    meta.setdefault("name", "test-pod")
    pod = PodInfo.from_manifest(i["pod"])
    state = CycleState()
    ps = PodState(reserve_pod=is_reserve_pod(pod), pod_requests=dict(pod.requests))
    if matched and not ps.reserve_pod:
        ps.nodes[node_name] = NodeState(matched=matched)
    state.write(STATE_KEY, ps)
    ni = harness.handle.node_info(node_name)
    assert ni is not None
    s = plugin.pre_score(state, pod, [ni])
    assert s.is_success or s.is_skip, s
    # As Koordinator's TestScore: Score is asked whatever PreScore said (a skipped plugin adds 0 anyway).
    score, s = plugin.score(state, pod, ni)
    assert score == vector["expected"]["score"]
    assert s.code.label == vector["expected"]["status"]["code"]
