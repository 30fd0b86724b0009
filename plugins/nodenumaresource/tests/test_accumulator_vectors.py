"""Koordinator's CPU-accumulator unit tests (``cpu_accumulator_test.go``), as data, through the allocator API.

``data/vectors.json`` is the NodeNUMAResource part of the shared scheduler vectors, copied so the tests need
nothing outside the repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_nodenumaresource.accumulator import Allocated, take_cpus, take_preferred_cpus
from koord_plugin_nodenumaresource.topology import CPUTopology, build_cpu_topology_for_test

from koord_framework.koordlet.cpuset import format_cpuset

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())[
    "vectors"
]


def _by(*functions: str) -> list[Any]:
    return [
        pytest.param(v, id=f"{v['id']} {v['description']}") for v in VECTORS if v["function"] in functions
    ]


def topology_of(spec: dict[str, Any]) -> CPUTopology:
    assert spec["builder"] == "buildCPUTopologyForTest"
    return build_cpu_topology_for_test(
        spec["numSockets"], spec["nodesPerSocket"], spec["coresPerNode"], spec["cpusPerCore"]
    )


@pytest.mark.parametrize("vector", _by("takeCPUs", "takePreferredCPUs"))
def test_take_cpus(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    topo = topology_of(inputs["topology"])
    held = inputs.get("allocatedCPUs") or []
    policy = inputs.get("allocatedCPUsExclusivePolicy", "")
    allocated = {cpu: Allocated(1, policy) for cpu in held}
    available = inputs["availableCPUs"]
    if isinstance(available, str):
        available = sorted(set(topo.details) - set(held))
    args = (
        topo,
        inputs["maxRefCount"],
    )
    tail = (
        allocated,
        inputs["numCPUsNeeded"],
        inputs["cpuBindPolicy"],
        inputs["cpuExclusivePolicy"],
        inputs["numaAllocateStrategy"],
    )
    if "preferredCPUs" in inputs:
        got = take_preferred_cpus(*args, available, inputs["preferredCPUs"] or [], *tail)
    else:
        got = take_cpus(*args, available, *tail)
    assert got == vector["expected"]["cpus"]
    if "cpuset" in vector["expected"]:
        assert format_cpuset(got) == vector["expected"]["cpuset"]


@pytest.mark.parametrize("vector", _by("takeCPUs(maxRefCount)"))
def test_take_cpus_with_max_ref_count(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    topo = topology_of(inputs["topology"])
    max_ref = inputs["maxRefCount"]
    allocated: dict[int, Allocated] = {}
    for step, want in zip(inputs["steps"], vector["expected"]["perStepCPUs"], strict=True):
        available = [c for c in topo.details if allocated.get(c, Allocated(0)).ref_count < max_ref]
        got = take_cpus(
            topo,
            max_ref,
            available,
            allocated,
            step["numCPUsNeeded"],
            step["cpuBindPolicy"],
            inputs["cpuExclusivePolicy"],
            inputs["numaAllocateStrategy"],
        )
        assert got == want
        for cpu in got:
            allocated[cpu] = Allocated(allocated.get(cpu, Allocated(0)).ref_count + 1, "PCPULevel")
