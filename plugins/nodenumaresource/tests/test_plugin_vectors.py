"""Koordinator's NodeNUMAResource plugin tests (``plugin_test.go``, ``scoring_test.go``), as data, through the
plugin's extension points.

Vectors that inject Koordinator's internal state (``preFilterState``, ``topologyOptions``, ``nodeAllocation``)
get the same state injected here (the cycle state, the plugin's topology options, its node allocation);
the others run PreFilter first. Objects go into the harness's in-memory cluster, so existing pods reach the
plugin through the informer as they would in a cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_nodenumaresource.annotations import ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS
from koord_plugin_nodenumaresource.node_allocation import PodAllocation
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource, append_resource_spec_if_missed
from koord_plugin_nodenumaresource.state import STATE_KEY, PreFilterState
from koord_plugin_nodenumaresource.testing import options_of
from koord_plugin_nodenumaresource.topology_options import TopologyOptions

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.koordlet.cpuset import format_cpuset, parse_cpuset
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.status import Status
from koord_framework.scheduler.topologymanager import AffinityStore, bits
from koord_framework.testing.scheduler import SchedulerHarness

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())[
    "vectors"
]


def _by(*functions: str) -> list[Any]:
    return [
        pytest.param(v, id=f"{v['id']} {v['description']}") for v in VECTORS if v["function"] in functions
    ]


def test_every_vector_is_covered() -> None:
    covered = {
        "takeCPUs",
        "takePreferredCPUs",
        "takeCPUs(maxRefCount)",
        "PreFilter",
        "Filter",
        "PreFilter+Filter",
        "PreFilter+Filter(topology manager)",
        "Reserve",
        "Score",
        "PreBind",
        "appendResourceSpecIfMissed",
    }
    assert len(VECTORS) == 57
    assert {v["function"] for v in VECTORS} == covered


def _status_json(status: Status) -> dict[str, Any]:
    out: dict[str, Any] = {"code": status.code.label}
    if not status.is_success:
        out["reasons"] = list(status.reasons)
    return out


def _harness(inputs: dict[str, Any]) -> tuple[SchedulerHarness, NodeNUMAResource]:
    h = SchedulerHarness([(NodeNUMAResource, inputs.get("args") or {})])
    plugin = h.plugin("NodeNUMAResource")
    assert isinstance(plugin, NodeNUMAResource)
    if inputs.get("node"):
        node = json.loads(json.dumps(inputs["node"]))
        node["metadata"].setdefault("name", "test-node-1")
        h.add(node)
    options = options_of(inputs.get("topologyOptions"))
    name = (inputs.get("node") or {}).get("metadata", {}).get("name", "test-node-1")
    if options is not None:
        plugin.topologies.set(name, options)
    for i, pod in enumerate(inputs.get("existingPods") or ()):
        pod = json.loads(json.dumps(pod))
        pod["metadata"].setdefault("uid", f"uid-existing-{i}")
        h.add(pod)
    held = (inputs.get("nodeAllocation") or {}).get("allocatedCPUs") or []
    if held:
        policy = (inputs.get("nodeAllocation") or {}).get("allocatedExclusivePolicy", "")
        plugin.resources.update(
            name, PodAllocation("allocated", cpuset=frozenset(held), exclusive_policy=policy)
        )
    for i, entry in enumerate(inputs.get("existingNUMAAllocations") or ()):
        res = parse_resource_list(entry["resources"])
        plugin.resources.update(
            name, PodAllocation(f"numa-{i}", numa_node_resources=((int(entry["numaNode"]), res),))
        )
    return h, plugin


def _injected_state(inputs: dict[str, Any]) -> CycleState:
    raw = inputs["preFilterState"]
    requests = parse_resource_list(raw.get("requests") or {})
    needed = int(raw.get("numCPUsNeeded") or 0)
    if needed > 0 and not requests:
        requests = {"cpu": needed * 1000}
    st = PreFilterState(
        request_cpu_bind=bool(raw.get("requestCPUBind")),
        requests=requests,
        required_cpu_bind_policy=raw.get("requiredCPUBindPolicy") or "",
        preferred_cpu_bind_policy=raw.get("preferredCPUBindPolicy") or "",
        preferred_cpu_exclusive_policy=raw.get("preferredCPUExclusivePolicy") or "",
        pod_numa_topology_policy=raw.get("podNUMATopologyPolicy") or "",
        pod_numa_exclusive=raw.get("podNUMAExclusive") or "",
        num_cpus_needed=needed,
    )
    if raw.get("allocation"):
        st.allocation = PodAllocation("uid-1", cpuset=parse_cpuset(raw["allocation"].get("cpuset") or ""))
    state = CycleState()
    state.write(STATE_KEY, st)
    AffinityStore.init(state)
    return state


def _pod(inputs: dict[str, Any]) -> PodInfo:
    pod = json.loads(json.dumps(inputs["pod"]))
    pod["metadata"].setdefault("name", "pod")
    pod["metadata"].setdefault("namespace", "default")
    pod["metadata"].setdefault("uid", "uid-pod")
    return PodInfo.from_manifest(pod)


@pytest.mark.parametrize("vector", _by("PreFilter"))
def test_pre_filter(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    _, plugin = _harness(inputs)
    state = CycleState()
    _, status = plugin.pre_filter(state, _pod(inputs), [])
    want = vector["expected"]
    assert _status_json(status) == want["status"]
    if want["preFilterState"] is None:
        return
    st = state.read(STATE_KEY)
    expected = want["preFilterState"]
    assert st.skip == expected["skip"]
    assert st.request_cpu_bind == expected["requestCPUBind"]
    assert dict(st.requests) == parse_resource_list(expected["requests"])
    assert st.required_cpu_bind_policy == expected["requiredCPUBindPolicy"]
    assert st.preferred_cpu_bind_policy == expected["preferredCPUBindPolicy"]
    assert st.preferred_cpu_exclusive_policy == expected["preferredCPUExclusivePolicy"]
    assert st.num_cpus_needed == expected["numCPUsNeeded"]
    assert st.pod_numa_topology_policy == expected["podNUMATopologyPolicy"]
    assert st.pod_numa_exclusive == expected["podNUMAExclusive"]


@pytest.mark.parametrize("vector", _by("Filter"))
def test_filter(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    h, plugin = _harness(inputs)
    state = _injected_state(inputs)
    node = h.node_info(inputs["node"]["metadata"]["name"])
    status = plugin.filter(state, _pod(inputs), node)
    assert _status_json(status) == vector["expected"]["status"]


@pytest.mark.parametrize("vector", _by("PreFilter+Filter"))
def test_pre_filter_and_filter(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    h, _ = _harness(inputs)
    status = h.filter(_pod(inputs), inputs["node"]["metadata"]["name"])
    assert _status_json(status) == vector["expected"]["status"]


@pytest.mark.parametrize("vector", _by("PreFilter+Filter(topology manager)"))
def test_filter_with_numa_scoring(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    h, plugin = _harness(inputs)
    pod = _pod(inputs)
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, [])
    assert status.is_success
    name = inputs["node"]["metadata"]["name"]
    status = plugin.filter(state, pod, h.node_info(name))
    assert _status_json(status) == vector["expected"]["filterStatus"]
    hint = AffinityStore.of(state).get(name)
    assert hint is not None and hint.affinity is not None
    assert bits(hint.affinity) == vector["expected"]["numaAffinity"]


@pytest.mark.parametrize("vector", _by("Reserve"))
def test_reserve(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    h, plugin = _harness(inputs)
    state = _injected_state(inputs)
    pod = _pod(inputs)
    h.node_info(inputs["node"]["metadata"]["name"])  # the cycle's snapshot, as the scheduler takes it
    status = plugin.reserve(state, pod, inputs["node"]["metadata"]["name"])
    assert _status_json(status) == vector["expected"]["status"]
    st = state.read(STATE_KEY)
    cpus = sorted(st.allocation.cpuset) if st.allocation is not None else []
    assert cpus == vector["expected"]["allocation"]["cpus"]
    assert format_cpuset(cpus) == vector["expected"]["allocation"]["cpuset"]
    if cpus:
        assert plugin.resources.allocated_cpuset(inputs["node"]["metadata"]["name"], pod.uid) == frozenset(
            cpus
        )


@pytest.mark.parametrize("vector", _by("Score"))
def test_score(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    h, plugin = _harness(inputs)
    state = _injected_state(inputs)
    score, status = plugin.score(state, _pod(inputs), h.node_info(inputs["node"]["metadata"]["name"]))
    assert _status_json(status) == vector["expected"]["status"]
    assert score == vector["expected"]["score"]


@pytest.mark.parametrize("vector", _by("PreBind"))
def test_pre_bind(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    h, plugin = _harness(inputs)
    state = _injected_state(inputs)
    pod = _pod(inputs)
    h.node_info(inputs["node"]["metadata"]["name"])
    status = plugin.pre_bind(state, pod, inputs["node"]["metadata"]["name"])
    assert _status_json(status) == vector["expected"]["status"]
    assert state.pod_mutation.annotations == vector["expected"]["podAnnotations"]


@pytest.mark.parametrize("vector", _by("appendResourceSpecIfMissed"))
def test_append_resource_spec_if_missed(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    raw = inputs["preFilterState"]
    st = PreFilterState(
        required_cpu_bind_policy=raw.get("requiredCPUBindPolicy") or "",
        preferred_cpu_bind_policy=raw.get("preferredCPUBindPolicy") or "",
    )
    annotations = inputs["pod"]["metadata"].get("annotations") or {}
    spec = append_resource_spec_if_missed(
        annotations, st, inputs["node"]["metadata"].get("labels") or {}, TopologyOptions()
    )
    written = (
        json.loads(spec.to_json()) if spec is not None else json.loads(annotations[ANNOTATION_RESOURCE_SPEC])
    )
    assert written == vector["expected"]["resourceSpec"]
    assert ANNOTATION_RESOURCE_STATUS not in written
