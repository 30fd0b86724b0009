"""Every DeviceShare vector of Koordinator's unit tests, through the allocator API or the plugin.

The vectors (``data/vectors.json``) were extracted from ``pkg/scheduler/plugins/deviceshare/*_test.go`` at
a7a1b76b. Each function the vector names maps onto this plugin's API: request validation and conversion,
per-GPU requirements, memory conversions, the allocator (with and without a scorer), node scoring, and
PreFilter through the plugin in a scheduler harness.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_deviceshare import DeviceShare
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import to_wire
from koord_plugin_deviceshare.allocator import AutopilotAllocator
from koord_plugin_deviceshare.device import DeviceInfo, ParsedDevice, parse_device
from koord_plugin_deviceshare.nodedevice import NodeDevice
from koord_plugin_deviceshare.requests import (
    DeviceRequestError,
    GPURequirements,
    calc_desired_requests_and_count_for_gpu,
    combination_flags,
    convert_device_request,
    memory_bytes_to_ratio,
    memory_ratio_to_bytes,
    validate_device_request,
)
from koord_plugin_deviceshare.scoring import DeviceScorer
from koord_plugin_deviceshare.state import PodDeviceState, prepare_pod

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.testing.scheduler import SchedulerHarness

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())


def by_function(*names: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"] in names]


def rl(raw: dict[str, Any] | None) -> dict[str, int]:
    return parse_resource_list(raw or {})


def per_minor(raw: dict[str, Any] | None) -> dict[str, dict[int, dict[str, int]]]:
    return {t: {int(m): rl(r) for m, r in devs.items()} for t, devs in (raw or {}).items()}


def wire_equal(got: dict[str, list[dict[str, Any]]], want: dict[str, list[dict[str, Any]]]) -> None:
    """Compare allocations by value: quantities parsed, VF minors defaulted to 0, ids ignored (PreBind)."""
    assert sorted(got) == sorted(want)
    for t in want:
        assert len(got[t]) == len(want[t]), (t, got[t], want[t])
        for g, w in zip(got[t], want[t]):
            assert g["minor"] == w["minor"]
            assert rl(g["resources"]) == rl(w["resources"])
            gv = [(v.get("minor", 0), v["busID"]) for v in (g.get("extension") or {}).get("vfs", [])]
            wv = [(v.get("minor", 0), v["busID"]) for v in (w.get("extension") or {}).get("vfs", [])]
            assert gv == wv


def test_every_vector_is_covered() -> None:
    handled = {
        "ValidateDeviceRequest",
        "ConvertDeviceRequest",
        "calcDesiredRequestsAndCountForGPU",
        "memoryRatioToBytes",
        "memoryBytesToRatio",
        "AutopilotAllocator.Allocate(+fillGPUTotalMem)",
        "preparePod+AutopilotAllocator.Allocate(+fillGPUTotalMem)",
        "Score",
        "PreFilter",
    }
    assert {v["function"] for v in VECTORS} <= handled
    assert len(VECTORS) == 38


@pytest.mark.parametrize("v", by_function("ValidateDeviceRequest"))
def test_validate(v: dict[str, Any]) -> None:
    request = rl(v["inputs"]["deviceRequest"])
    if not v["expected"]["valid"]:
        with pytest.raises(DeviceRequestError):
            validate_device_request(request)
        return
    combination = validate_device_request(request)
    assert combination == v["expected"]["combination"]
    assert set(combination_flags(combination).split("|")) == set(v["expected"]["combinationFlags"].split("|"))


@pytest.mark.parametrize("v", by_function("ConvertDeviceRequest"))
def test_convert(v: dict[str, Any]) -> None:
    got = convert_device_request(rl(v["inputs"]["deviceRequest"]), v["inputs"]["combination"])
    want = v["expected"]["converted"]
    assert got == (None if want is None else rl(want))


@pytest.mark.parametrize("v", by_function("calcDesiredRequestsAndCountForGPU"))
def test_calc_desired_for_gpu(v: dict[str, Any]) -> None:
    per_gpu, count, shared = calc_desired_requests_and_count_for_gpu(rl(v["inputs"]["gpuRequests"]))
    assert per_gpu == rl(v["expected"]["requestsPerGPU"])
    assert count == v["expected"]["numberOfGPUs"]
    assert shared == v["expected"]["gpuShared"]


@pytest.mark.parametrize("v", by_function("memoryRatioToBytes", "memoryBytesToRatio"))
def test_memory_conversions(v: dict[str, Any]) -> None:
    total = rl({"m": v["inputs"]["totalMemory"]})["m"]
    if v["function"] == "memoryRatioToBytes":
        got = memory_ratio_to_bytes(int(v["inputs"]["ratio"]), total)
        assert got == rl({"m": v["expected"]["bytes"]})["m"]
    else:
        got = memory_bytes_to_ratio(rl({"m": v["inputs"]["bytes"]})["m"], total)
        assert got == int(v["expected"]["ratio"])


def node_device_from_vector(raw: dict[str, Any]) -> NodeDevice:
    """A NodeDevice from a vector's injected ``nodeDevice`` (totals, used, device infos)."""
    totals = per_minor(raw.get("deviceTotal"))
    infos = []
    for device_type, rows in (raw.get("deviceInfos") or {}).items():
        for row in rows:
            minor = int(row["minor"])
            infos.append(
                DeviceInfo(
                    device_type, minor, health=True, resources=totals.get(device_type, {}).get(minor, {})
                )
            )
    if not infos:
        infos = [
            DeviceInfo(t, m, health=True, resources=res)
            for t, devs in totals.items()
            for m, res in devs.items()
        ]
    nd = NodeDevice()
    nd.used = per_minor(raw.get("deviceUsed"))
    nd.set_device(ParsedDevice("test-node", {}, tuple(infos), None))
    return nd


def state_for_requests(pod_requests: dict[str, dict[str, int]]) -> PodDeviceState:
    s = PodDeviceState(skip=False, pod_requests=pod_requests)
    gpu = pod_requests.get(n.GPU)
    if gpu:
        per, count, shared = calc_desired_requests_and_count_for_gpu(gpu)
        s.gpu_requirements = GPURequirements(count, per, shared)
    return s


def scorer_of(raw: dict[str, Any] | None) -> DeviceScorer | None:
    if raw is None:
        return None
    return DeviceScorer(raw["type"], {r["name"]: r["weight"] for r in raw["resources"]})


@pytest.mark.parametrize("v", by_function("AutopilotAllocator.Allocate(+fillGPUTotalMem)"))
def test_allocator(v: dict[str, Any]) -> None:
    inp = v["inputs"]
    nd = node_device_from_vector(inp["nodeDevice"])
    s = state_for_requests({t: rl(r) for t, r in inp["podDeviceRequests"].items()})
    allocator = AutopilotAllocator(s, nd, {}, scorer=scorer_of(inp["scoringStrategy"]))
    result, status = allocator.allocate(preemptible=per_minor(inp.get("preemptible")))
    assert status.code.label == v["expected"]["status"]["code"] == "Success", status
    assert result is not None
    wire_equal(to_wire(result), v["expected"]["allocations"])


@pytest.mark.parametrize("v", by_function("preparePod+AutopilotAllocator.Allocate(+fillGPUTotalMem)"))
def test_prepare_pod_and_allocate(v: dict[str, Any]) -> None:
    inp = v["inputs"]
    device = parse_device(inp["device"])
    nd = NodeDevice()
    nd.set_device(device)
    pod = PodInfo.from_manifest(inp["pod"])
    s = prepare_pod(pod.requests, pod.annotations)
    result, status = AutopilotAllocator(s, nd, {}).allocate()
    assert status.is_success, status
    assert result is not None
    wire_equal(to_wire(result), v["expected"]["allocations"])


@pytest.mark.parametrize("v", by_function("Score"))
def test_score(v: dict[str, Any]) -> None:
    inp = v["inputs"]
    raw = inp["nodeDevice"]
    nd = node_device_from_vector({"deviceTotal": raw["deviceTotal"], "deviceUsed": raw.get("deviceUsed")})
    # The vector's free must be what the cache derives from total and used (zeros aside).
    want_free = per_minor(raw["deviceFree"])
    for t, devs in nd.free.items():
        for m, r in devs.items():
            assert {k: x for k, x in r.items() if x} == {k: x for k, x in want_free[t][m].items() if x}
    pf = inp["preFilterState"]
    s = PodDeviceState(skip=pf["skip"], pod_requests={t: rl(r) for t, r in pf["podRequests"].items()})
    preemptible = per_minor((pf.get("preemptibleDevices") or {}).get("test-node"))
    allocator = AutopilotAllocator(s, nd, {}, scorer=scorer_of(inp["args"]["scoringStrategy"]))
    score, status = allocator.score(preemptible=preemptible)
    assert status.is_success
    assert score == v["expected"]["score"]


@pytest.mark.parametrize("v", by_function("PreFilter"))
def test_pre_filter_through_the_plugin(v: dict[str, Any]) -> None:
    harness = SchedulerHarness([DeviceShare])
    plugin = harness.plugin("DeviceShare")
    assert isinstance(plugin, DeviceShare)
    from koord_framework.scheduler.cycle_state import CycleState

    state = CycleState()
    pod = PodInfo.from_manifest(v["inputs"]["pod"])
    _, status = plugin.pre_filter(state, pod, [])
    assert status.code.label == v["expected"]["status"]["code"]
    want = v["expected"]["preFilterState"]
    s = state.read("DeviceShare")
    assert s.skip == want["skip"]
    if want["skip"]:
        return
    assert s.pod_requests == {t: rl(r) for t, r in want["podRequests"].items()}
    req = want["gpuRequirements"]
    assert s.gpu_requirements is not None
    assert s.gpu_requirements.number_of_gpus == req["numberOfGPUs"]
    assert s.gpu_requirements.requests_per_gpu == rl(req["requestsPerGPU"])
    assert s.gpu_requirements.gpu_shared == req["gpuShared"]
    assert s.pod_fits_secondary_device_well_planned == want["podFitsSecondaryDeviceWellPlanned"]
