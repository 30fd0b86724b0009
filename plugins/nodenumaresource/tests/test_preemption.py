"""Preemption what-ifs (Koordinator's ``preempt.go``): a victim removed from a node gives its cpuset and NUMA
resources back for that what-if only, to its reservation when it was allocated in a NUMA-aware one; a pod put
back takes them again; the resource manager's real allocations are untouched."""

from __future__ import annotations

import json
from typing import Any

from koord_plugin_nodenumaresource.annotations import ANNOTATION_RESOURCE_STATUS
from koord_plugin_nodenumaresource.plugin import NodeNUMAResource
from koord_plugin_nodenumaresource.preemption import PreemptibleAlloc, PreemptibleNodeState
from koord_plugin_nodenumaresource.state import STATE_KEY, PreFilterState
from koord_plugin_nodenumaresource.testing import lsr_pod, node, nrt

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.status import Code
from koord_framework.testing.scheduler import SchedulerHarness


# --- the accumulator (preemptibleAlloc) ---------------------------------------------------------------------
def test_removed_then_added_back_cancels_out_whichever_comes_first() -> None:
    a = PreemptibleAlloc()
    a.accumulate(frozenset({0, 1}), {0: {"cpu": 2000}})
    assert a.append_cpus({5}) == {0, 1, 5}
    assert a.append_numa({0: {"cpu": 1000}, 1: {"cpu": 500}}) == {0: {"cpu": 3000}, 1: {"cpu": 500}}
    a.subtract(frozenset({0, 1}), {0: {"cpu": 2000}})
    assert a.append_cpus({5}) == {5} and a.append_numa(None) == {0: {"cpu": 0}}

    b = PreemptibleAlloc()
    b.subtract(frozenset({3}), {1: {"memory": 10}})  # added back before anything was removed
    assert b.append_cpus({3, 4}) == {4}  # the caller's CPU 3 is taken again
    assert b.append_numa({1: {"memory": 30}}) == {1: {"memory": 20}}  # negative, as upstream's Subtract
    b.accumulate(frozenset({3}), {1: {"memory": 10}})
    assert b.append_cpus({3, 4}) == {3, 4} and b.cpus_to_add == frozenset()


def test_node_state_clones_deeply_and_routes_by_reservation() -> None:
    ns = PreemptibleNodeState()
    ns.alloc_for(None).accumulate(frozenset({1}), {})
    ns.alloc_for("r-uid").accumulate(frozenset({2}), {0: {"cpu": 1000}})
    copy = ns.clone()
    copy.alloc_for(None).subtract(frozenset({1}), {})
    copy.alloc_for("r-uid").numa_resources[0]["cpu"] = 0
    assert ns.node_alloc is not None and ns.node_alloc.append_cpus() == {1}
    assert ns.reservations_alloc["r-uid"].numa_resources == {0: {"cpu": 1000}}


# --- through the framework's PreFilter extensions ----------------------------------------------------------
def _bound(name: str, cpus: str, count: str, priority: int = 0) -> dict[str, Any]:
    pod = lsr_pod(name, count)
    pod["spec"]["nodeName"] = "n1"
    pod["spec"]["priority"] = priority
    pod["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = json.dumps({"cpuset": cpus})
    return pod


def _world() -> tuple[SchedulerHarness, NodeNUMAResource]:
    # 8 CPUs (4 cores x 2 threads), all pinned by two low-priority LSR pods.
    h = SchedulerHarness([(NodeNUMAResource, {})])
    h.add(node("n1", 16), nrt("n1", 1, 1, 4, 2), _bound("low-a", "0-3", "4"), _bound("low-b", "4-7", "4"))
    plugin = h.plugin("NodeNUMAResource")
    assert isinstance(plugin, NodeNUMAResource)
    return h, plugin


def _preemptor() -> PodInfo:
    # A required bind policy: Filter itself tries the cpuset allocation (a preferred one waits for Reserve).
    return PodInfo.from_manifest(lsr_pod("high", "4", spec={"requiredCPUBindPolicy": "FullPCPUs"}))


def _cycle(h: SchedulerHarness, pod: PodInfo) -> CycleState:
    state = CycleState()
    state.record_metrics = False
    _, status = h.framework.run_pre_filter(state, pod)
    assert status.is_success, status
    return state


def _victim(h: SchedulerHarness, name: str) -> PodInfo:
    found = h.scheduler.pod_cache.get("default", name)
    assert found is not None
    return found


def test_a_removed_victims_cpus_make_the_node_feasible_for_that_what_if_only() -> None:
    h, plugin = _world()
    preemptor = _preemptor()
    state = _cycle(h, preemptor)
    info = h.node_info("n1")
    assert h.framework.run_filter(state, preemptor, info).code is Code.UNSCHEDULABLE

    what_if = state.clone()
    trial = info.clone()
    victim = _victim(h, "low-a")
    trial.remove_pod(victim)
    assert h.framework.run_pre_filter_extension_remove_pod(what_if, preemptor, victim, trial).is_success
    assert h.framework.run_filter(what_if, preemptor, trial).is_success

    # The original cycle and the resource manager are untouched.
    assert h.framework.run_filter(state, preemptor, info).code is Code.UNSCHEDULABLE
    assert plugin.resources.allocated_cpuset("n1", victim.uid) == frozenset(range(4))

    # Putting the victim back (kube's reprieve) takes its CPUs again.
    trial.add_pod(victim)
    assert h.framework.run_pre_filter_extension_add_pod(what_if, preemptor, victim, trial).is_success
    assert h.framework.run_filter(what_if, preemptor, trial).code is Code.UNSCHEDULABLE


def test_reserve_in_a_what_if_allocates_exactly_the_victims_cpus() -> None:
    h, _ = _world()
    preemptor = PodInfo.from_manifest(lsr_pod("high", "4"))
    state = _cycle(h, preemptor)
    trial = h.node_info("n1").clone()
    victim = _victim(h, "low-b")
    trial.remove_pod(victim)
    h.framework.run_pre_filter_extension_remove_pod(state, preemptor, victim, trial)
    st = state.read(STATE_KEY)
    assert isinstance(st, PreFilterState)
    freed = st.preemptible["n1"].node_alloc
    assert freed is not None and freed.append_cpus() == frozenset(range(4, 8))


def test_a_skipped_pod_and_a_pod_without_cpuset_change_nothing() -> None:
    h, _ = _world()
    no_requests = lsr_pod("empty", "0")
    no_requests["spec"]["containers"][0]["resources"] = {}
    empty = PodInfo.from_manifest(no_requests)
    state = CycleState()
    h.framework.run_pre_filter(state, empty)
    info = h.node_info("n1")
    st = state.get(STATE_KEY)
    assert isinstance(st, PreFilterState) and st.skip
    plugin = h.plugin("NodeNUMAResource")
    assert isinstance(plugin, NodeNUMAResource)
    assert plugin.remove_pod(state, empty, _victim(h, "low-a"), info).is_success
    assert st.preemptible == {}

    preemptor = PodInfo.from_manifest(lsr_pod("high", "4"))
    state = _cycle(h, preemptor)
    unpinned = PodInfo.from_manifest(lsr_pod("ls", "1", qos="LS"))
    assert plugin.remove_pod(state, preemptor, unpinned, info).is_success
    st = state.read(STATE_KEY)
    assert isinstance(st, PreFilterState) and st.preemptible == {}


def test_without_pre_filter_state_the_extension_reports_an_error() -> None:
    h, plugin = _world()
    status = plugin.add_pod(
        CycleState(), PodInfo.from_manifest(lsr_pod("x", "1")), _victim(h, "low-a"), h.node_info("n1")
    )
    assert status.code is Code.ERROR


def test_a_victim_allocated_in_a_numa_aware_reservation_gives_back_to_that_reservation() -> None:
    from koord_plugin_nodenumaresource.node_allocation import PodAllocation

    h, plugin = _world()
    preemptor = _preemptor()
    state = _cycle(h, preemptor)
    info = h.node_info("n1")
    # A reservation holding CPUs 0-3 (its reserve pod's allocation), and one holding nothing pinned.
    plugin.resources.update("n1", PodAllocation("r-pinned", cpuset=frozenset(range(4))))
    plugin.resources.update("n1", PodAllocation("r-plain"))
    in_pinned = _bound("owner-a", "0-3", "4")
    in_pinned["metadata"]["annotations"]["scheduling.koordinator.sh/reservation-allocated"] = json.dumps(
        {"name": "pinned", "uid": "r-pinned"}
    )
    in_plain = _bound("owner-b", "4-7", "4")
    in_plain["metadata"]["annotations"]["scheduling.koordinator.sh/reservation-allocated"] = json.dumps(
        {"name": "plain", "uid": "r-plain"}
    )
    for manifest, cpus in ((in_pinned, range(4)), (in_plain, range(4, 8))):
        plugin.resources.update("n1", PodAllocation(manifest["metadata"]["uid"], cpuset=frozenset(cpus)))
        assert plugin.remove_pod(state, preemptor, PodInfo.from_manifest(manifest), info).is_success
    st = state.read(STATE_KEY)
    assert isinstance(st, PreFilterState)
    ns = st.preemptible["n1"]
    assert ns.reservations_alloc["r-pinned"].append_cpus() == frozenset(range(4))
    assert ns.node_alloc is not None and ns.node_alloc.append_cpus() == frozenset(range(4, 8))
    assert "r-plain" not in ns.reservations_alloc  # not NUMA-aware: its owner's CPUs are the node's
