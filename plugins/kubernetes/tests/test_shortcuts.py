"""The O(1) answers the plugins give when nothing in the cluster can matter, and that they stop as soon as
something does.

Trivial filters return a shared read-only all-True mask while no node is cordoned or tainted; Fit's filter
does the same while every node has room; InterPodAffinity skips when no pod anywhere has (anti-)affinity
terms; PodTopologySpread keeps the default constraints of a pod until a Service changes. Each test runs in
the scheduler harness (a real snapshot with its change log and Node watch), flips the cluster into the state
where the shortcut no longer holds and back, and compares with the per-node forms at every step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from koord_plugin_kubernetes import _rowcache
from koord_plugin_kubernetes.interpodaffinity import InterPodAffinity
from koord_plugin_kubernetes.nodename import NodeName
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_kubernetes.nodeunschedulable import NodeUnschedulable
from koord_plugin_kubernetes.podtopologyspread import SCHEDULE_ANYWAY, PodTopologySpread
from koord_plugin_kubernetes.tainttoleration import TaintToleration

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

ZONE = "topology.kubernetes.io/zone"


def _snapshot(h: SchedulerHarness) -> Any:
    h.scheduler.cache.update_snapshot(h.scheduler.snapshot)
    return h.scheduler.snapshot


def _set_node(h: SchedulerHarness, name: str, **spec: Any) -> None:
    node = h.cluster.get("Node", name)
    node["spec"] = {**(node.get("spec") or {}), **spec}
    h.cluster.update(node)


def _filter(h: SchedulerHarness, name: str, pod: PodInfo) -> tuple[list[bool], list[bool], Any]:
    """(filter_all over every row, filter node by node, the mask object) for plugin ``name``."""
    snap = _snapshot(h)
    plugin: Any = h.plugin(name)
    state = CycleState()
    if hasattr(plugin, "pre_filter"):
        plugin.pre_filter(state, pod, snap.node_list)
    mask = plugin.filter_all(state, pod, snap.table, snap.rows)
    per_node = [plugin.filter(state, pod, ni).is_success for ni in snap.node_list]
    return np.asarray(mask).tolist(), per_node, mask


def test_trivial_filters_pass_every_row_until_a_node_is_cordoned_or_tainted() -> None:
    h = SchedulerHarness([NodeUnschedulable, NodeName, TaintToleration])
    h.add(*(make_node(f"n{i}") for i in range(4)))
    pod = PodInfo.from_manifest(make_pod("p", cpu="100m"))
    for name in ("NodeUnschedulable", "NodeName", "TaintToleration"):
        got, per_node, mask = _filter(h, name, pod)
        assert got == per_node == [True] * 4
        assert not mask.flags.writeable  # the shared answer cannot be modified by a caller

    _set_node(h, "n1", unschedulable=True)
    _set_node(h, "n2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    _set_node(h, "n3", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    got, per_node, _ = _filter(h, "NodeUnschedulable", pod)
    assert got == per_node == [True, False, True, True]
    got, per_node, _ = _filter(h, "TaintToleration", pod)
    assert got == per_node == [True, True, False, True]
    tolerations = [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
        {"key": "k", "operator": "Exists"},
    ]
    tolerant = PodInfo.from_manifest(make_pod("t", cpu="100m", spec={"tolerations": tolerations}))
    for name in ("NodeUnschedulable", "TaintToleration"):
        got, per_node, _ = _filter(h, name, tolerant)
        assert got == per_node == [True] * 4

    taints: Any = h.plugin("TaintToleration")
    snap = _snapshot(h)
    state = CycleState()
    taints.pre_score(state, pod, snap.node_list)
    scores = taints.score_all(state, pod, snap.table, snap.rows).tolist()
    assert scores == [taints.score(state, pod, ni)[0] for ni in snap.node_list] == [0, 0, 0, 1]

    _set_node(h, "n1", unschedulable=False)
    _set_node(h, "n2", taints=[])
    _set_node(h, "n3", taints=[])
    for name in ("NodeUnschedulable", "TaintToleration"):
        got, per_node, mask = _filter(h, name, pod)
        assert got == per_node == [True] * 4
        assert not mask.flags.writeable
    snap = _snapshot(h)
    assert taints.score_all(state, pod, snap.table, snap.rows).tolist() == [0] * 4


def test_fit_filter_passes_every_row_only_while_every_node_has_room() -> None:
    h = SchedulerHarness([NodeResourcesFit])
    h.add(*(make_node(f"n{i}", cpu="2", pods=2) for i in range(3)))
    pod = PodInfo.from_manifest(make_pod("p", cpu="500m"))
    got, per_node, mask = _filter(h, "NodeResourcesFit", pod)
    assert got == per_node == [True] * 3 and not mask.flags.writeable

    h.add(make_pod("a", cpu="100m", node="n1"), make_pod("b", cpu="100m", node="n1"))  # n1: no pod slot
    h.add(make_pod("c", cpu="1800m", node="n2"))  # n2: no cpu left for 500m
    got, per_node, _ = _filter(h, "NodeResourcesFit", pod)
    assert got == per_node == [True, False, False]

    h.cluster.delete("Pod", "a", "default")
    h.cluster.delete("Pod", "c", "default")
    got, per_node, mask = _filter(h, "NodeResourcesFit", pod)
    assert got == per_node == [True] * 3 and not mask.flags.writeable


def test_row_cache_stays_exact_when_it_drops_shapes() -> None:
    h = SchedulerHarness([NodeResourcesFit])
    h.add(*(make_node(f"n{i}", cpu="2", pods=3) for i in range(3)))
    h.add(make_pod("a", cpu="1", node="n0"))
    fit: Any = h.plugin("NodeResourcesFit")
    shapes = [PodInfo.from_manifest(make_pod(f"p{m}", cpu=f"{m * 10 + 500}m")) for m in range(150)]
    for round_ in range(2):  # the second round finds the first shapes dropped, or patches the ones it kept
        for pod in shapes:
            got, per_node, _ = _filter(h, "NodeResourcesFit", pod)
            assert got == per_node
            snap = _snapshot(h)
            state = CycleState()
            fit.pre_score(state, pod, snap.node_list)
            scores = fit.score_all(state, pod, snap.table, snap.rows).tolist()
            assert scores == [fit.score(state, pod, ni)[0] for ni in snap.node_list]
        h.add(make_pod(f"b{round_}", cpu="300m", node="n1"))
    cache = _rowcache.row_cache(h.handle, "NodeResourcesFit")
    assert cache is not None and len(cache._entries) <= _rowcache.MAX_KEYS


def _anti(selector: dict[str, str], preferred: bool = False) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": selector}, "topologyKey": ZONE}
    if preferred:
        return {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]
            }
        }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _with_affinity(name: str, node: str, affinity: dict[str, Any]) -> dict[str, Any]:
    return make_pod(name, cpu="100m", node=node, spec={"affinity": affinity})


def test_inter_pod_affinity_skips_exactly_while_no_pod_has_terms() -> None:
    h = SchedulerHarness([InterPodAffinity])
    h.add(*(make_node(f"n{i}", labels={ZONE: f"z{i % 2}"}) for i in range(4)))
    h.add(make_pod("plain", cpu="100m", node="n0"))
    plugin: Any = h.plugin("InterPodAffinity")
    incoming = PodInfo.from_manifest(make_pod("web", cpu="100m", labels={"app": "web"}))

    def statuses() -> tuple[Any, Any, list[bool] | None]:
        snap = _snapshot(h)
        state = CycleState()
        _, pre_filter = plugin.pre_filter(state, incoming, snap.node_list)
        mask = None
        if pre_filter.is_success:
            mask = np.asarray(plugin.filter_all(state, incoming, snap.table, snap.rows)).tolist()
            assert mask == [plugin.filter(state, incoming, ni).is_success for ni in snap.node_list]
        return pre_filter, plugin.pre_score(CycleState(), incoming, snap.node_list), mask

    pre_filter, pre_score, _ = statuses()
    assert pre_filter.is_skip and pre_score.is_skip

    # An existing pod's required anti-affinity against app=web keeps web out of its zone.
    h.add(_with_affinity("guard", "n1", _anti({"app": "web"})))
    pre_filter, pre_score, mask = statuses()
    assert pre_filter.is_success and mask == [True, False, True, False]
    assert pre_score.is_skip  # required terms of existing pods do not score

    # Terms that match nobody: still computed, and kube-scheduler's answer is Skip again.
    h.cluster.delete("Pod", "guard", "default")
    h.add(_with_affinity("other", "n1", _anti({"app": "db"})))
    pre_filter, pre_score, _ = statuses()
    assert pre_filter.is_skip and pre_score.is_skip

    # An existing pod preferring app=web scores web's candidates.
    h.add(_with_affinity("fan", "n2", _anti({"app": "web"}, preferred=True)))
    _, pre_score, _ = statuses()
    assert pre_score.is_success

    for name in ("other", "fan"):
        h.cluster.delete("Pod", name, "default")
    pre_filter, pre_score, _ = statuses()
    assert pre_filter.is_skip and pre_score.is_skip


def test_spread_default_constraints_follow_services() -> None:
    h = SchedulerHarness([PodTopologySpread])
    h.add(*(make_node(f"n{i}", labels={ZONE: f"z{i % 2}"}) for i in range(2)))
    plugin: Any = h.plugin("PodTopologySpread")
    assert isinstance(plugin, PodTopologySpread)
    pod = PodInfo.from_manifest(make_pod("p", cpu="100m", labels={"app": "web"}))
    assert plugin.constraints_for(pod, SCHEDULE_ANYWAY) == []
    assert plugin.constraints_for(pod, SCHEDULE_ANYWAY) == []  # from the memo
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web"}},
    }
    h.cluster.create(service)
    constraints = plugin.constraints_for(pod, SCHEDULE_ANYWAY)
    assert [c.topology_key for c in constraints] == ["kubernetes.io/hostname", ZONE]
    assert all(c.selector.matches({"app": "web"}) and not c.selector.matches({}) for c in constraints)
    h.cluster.delete("Service", "web", "default")
    assert plugin.constraints_for(pod, SCHEDULE_ANYWAY) == []
