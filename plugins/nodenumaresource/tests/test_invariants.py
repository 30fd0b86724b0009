"""Randomised invariants over topologies and pod mixes (hypothesis), checked on what the scheduler wrote:

* no CPU is held by more pods than ``maxRefCount`` (1: never two pods on one CPU);
* a FullPCPUs pod gets whole physical cores;
* a SingleNUMANode pod never spans NUMA nodes (cpuset and NUMA resources);
* every cpuset lies inside the node's CPUs minus the reserved ones.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from koord_plugin_nodenumaresource.annotations import ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.testing import lsr_pod, node, nrt

from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.testing.scheduler import SchedulerHarness

machines = st.tuples(
    st.integers(1, 2),  # sockets
    st.integers(1, 2),  # NUMA nodes per socket
    st.integers(1, 6),  # cores per NUMA node
    st.sampled_from([1, 2]),  # threads per core
)

pod_kinds = st.tuples(
    st.integers(1, 10),  # cpus
    st.sampled_from(["FullPCPUs", "SpreadByPCPUs", "Default", ""]),  # policy
    st.booleans(),  # required?
    st.sampled_from(["", "SingleNUMANode", "Restricted"]),  # pod NUMA policy
    st.sampled_from(["", "PCPULevel", "NUMANodeLevel"]),  # exclusive
    st.sampled_from(["LSR", "LSE", "LS"]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    machine=machines,
    reserved=st.integers(0, 2),
    kinds=st.lists(pod_kinds, min_size=1, max_size=14),
    full_pcpus_only=st.booleans(),
)
def test_scheduled_cpusets_respect_the_invariants(
    machine: tuple[int, int, int, int], reserved: int, kinds: list[Any], full_pcpus_only: bool
) -> None:
    sockets, per_socket, cores, threads = machine
    total = sockets * per_socket * cores * threads
    reserved_cpus = set(range(reserved)) if reserved < total else set()
    kubelet: dict[str, Any] = {"policy": "static", "reservedCPUs": ",".join(map(str, sorted(reserved_cpus)))}
    if full_pcpus_only:
        kubelet["options"] = {"full-pcpus-only": "true"}
    h = SchedulerHarness([NodeNUMAResource])
    h.add(
        node("n1", total, "64Gi"),
        nrt("n1", sockets, per_socket, cores, threads, memory_per_numa="16Gi", kubelet=kubelet),
    )
    numa_of = {
        cpu: cpu // (cores * threads) for cpu in range(total)
    }  # the builder's layout: NUMA node i holds a contiguous block
    pods = []
    for i, (cpus, policy, required, numa, exclusive, qos) in enumerate(kinds):
        spec: dict[str, str] = {}
        if policy:
            spec["requiredCPUBindPolicy" if required else "preferredCPUBindPolicy"] = policy
        if exclusive:
            spec["preferredCPUExclusivePolicy"] = exclusive
        pod = lsr_pod(
            f"p{i}",
            str(cpus),
            "1Gi",
            spec=spec or None,
            numa={"numaTopologyPolicy": numa} if numa else None,
            qos=qos,
        )
        pods.append((pod, policy if required else "", numa))
        h.schedule_one(pod)

    held: Counter[int] = Counter()
    for pod, required_policy, numa in pods:
        got = h.cluster.get("Pod", pod["metadata"]["name"], "default")
        if not got["spec"].get("nodeName"):
            continue
        annotations = got["metadata"].get("annotations") or {}
        raw = annotations.get(ANNOTATION_RESOURCE_STATUS)
        if raw is None:
            continue
        status = json.loads(raw)
        cpus = parse_cpuset(status.get("cpuset", ""))
        held.update(cpus)
        event("a pod got a cpuset" if cpus else "a pod got NUMA resources only")
        assert cpus <= set(range(total)) - reserved_cpus
        effective = json.loads(annotations.get(ANNOTATION_RESOURCE_SPEC, "{}")).get("requiredCPUBindPolicy")
        if (required_policy == "FullPCPUs" or full_pcpus_only or effective == "FullPCPUs") and threads > 1:
            assert all(c ^ 1 in cpus for c in cpus), (pod["metadata"]["name"], sorted(cpus))
        if numa == "SingleNUMANode":
            assert len({numa_of[c] for c in cpus}) <= 1
            assert len(status.get("numaNodeResources") or []) <= 1
    assert all(count <= 1 for count in held.values()), held


@settings(max_examples=60, deadline=None)
@given(
    machine=machines,
    taken=st.sets(st.integers(0, 47), max_size=30),
    offline=st.sets(st.integers(0, 47), max_size=4),
)
def test_whole_core_fast_path_matches_the_general_one(
    machine: tuple[int, int, int, int], taken: set[int], offline: set[int]
) -> None:
    """``_whole_free_cores`` (the common case) must group exactly as ``_full_cores`` + ``_grouped_cores``."""
    from koord_plugin_nodenumaresource.accumulator import _Accumulator
    from koord_plugin_nodenumaresource.topology import build_cpu_topology_for_test, topology_from_details

    full_topo = build_cpu_topology_for_test(*machine)
    topo = topology_from_details(
        {c: i for c, i in full_topo.details.items() if c not in offline} or full_topo.details
    )
    free = [c for c in topo.details if c not in taken]
    acc = _Accumulator(topo, 1, free, {}, 1, "None", "MostAllocated")
    fast, fast_sockets = acc._whole_free_cores()
    _, node_of, _ = topo.ids()
    full, sockets = acc._full_cores(False)
    assert fast == acc._grouped_cores(full, node_of)
    assert fast_sockets == sockets
