"""Node filters, spreading, inter-pod affinity, preemption, binding and hints; cases follow kube-scheduler's
plugin tests (named per test) and Koordinator's ``schedulinghint`` / ``defaultprebind`` tests."""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import numpy as np
import pytest
from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.defaultpreemption import (
    DefaultPreemption,
    filter_pods_with_pdb_violation,
    parse_pdbs,
)
from koord_plugin_kubernetes.interpodaffinity import InterPodAffinity
from koord_plugin_kubernetes.nodeaffinity import NodeAffinity
from koord_plugin_kubernetes.nodename import NodeName
from koord_plugin_kubernetes.nodeports import NodePorts
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_kubernetes.nodeunschedulable import NodeUnschedulable
from koord_plugin_kubernetes.podtopologyspread import PodTopologySpread
from koord_plugin_kubernetes.queuesort import PrioritySort
from koord_plugin_kubernetes.schedulinghint import ANNOTATION_SCHEDULING_HINT, STATE_KEY, SchedulingHint
from koord_plugin_kubernetes.tainttoleration import TaintToleration

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.interface import NodeScore, QueuedPodInfo
from koord_framework.scheduler.status import Code


def info(manifest: dict[str, Any]) -> PodInfo:
    return PodInfo.from_manifest({"apiVersion": "v1", "kind": "Pod", **manifest})


# --- PrioritySort (TestLess) -------------------------------------------------------------------------------
def test_priority_sort(k: Any) -> None:
    pl = k.World(with_cluster=False).plugin(PrioritySort)
    hi, lo = info(k.pod("hi", priority=100)), info(k.pod("lo", priority=10))
    assert pl.less(QueuedPodInfo(hi, 2.0), QueuedPodInfo(lo, 1.0))
    assert not pl.less(QueuedPodInfo(lo, 1.0), QueuedPodInfo(hi, 2.0))
    same = info(k.pod("same", priority=100))
    assert pl.less(QueuedPodInfo(hi, 1.0), QueuedPodInfo(same, 2.0))


# --- NodeName / NodeUnschedulable / NodePorts --------------------------------------------------------------
def test_node_name_unschedulable_ports(k: Any) -> None:
    world = k.World(
        [k.node("n1"), k.node("n2", unschedulable=True)],
        [
            k.pod("web", "n1", containers=[{}])
            | {
                "spec": {
                    "nodeName": "n1",
                    "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                }
            }
        ],
    )
    n1, n2 = world.infos["n1"], world.infos["n2"]
    state = k.CycleState()
    named = info(k.pod("p", nodeName_unused=None) | {"spec": {"nodeName": "n2", "containers": []}})
    pl = world.plugin(NodeName)
    assert pl.filter(state, named, n1).code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pl.filter(state, named, n2).is_success
    assert pl.filter_all(state, named, world.table, world.rows()).tolist() == [False, True]
    uns = world.plugin(NodeUnschedulable)
    plain = info(k.pod("plain"))
    assert uns.filter(state, plain, n2).reasons == ("node(s) were unschedulable",)
    tolerant = info(
        k.pod(
            "t",
            tolerations=[
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
            ],
        )
    )
    assert uns.filter(state, tolerant, n2).is_success
    assert uns.filter_all(state, plain, world.table, world.rows()).tolist() == [True, False]
    ports = world.plugin(NodePorts)
    wants = info(
        {
            "metadata": {"name": "q", "uid": "q"},
            "spec": {
                "containers": [
                    {"name": "c", "ports": [{"containerPort": 1, "hostPort": 8080, "hostIP": "127.0.0.1"}]}
                ]
            },
        }
    )
    assert ports.filter(state, wants, n1).reasons == (
        "node(s) didn't have free ports for the requested pod ports",
    )
    assert ports.filter(state, wants, n2).is_success
    _, st = ports.pre_filter(state, plain, world.node_infos())
    assert st.is_skip


# --- TaintToleration (TestTaintTolerationFilter, TestTaintTolerationScore) ---------------------------------
def test_taint_toleration(k: Any) -> None:
    world = k.World(
        [
            k.node("a", taints=[{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]),
            k.node(
                "b",
                taints=[
                    {"key": "foo", "value": "bar", "effect": "PreferNoSchedule"},
                    {"key": "x", "value": "y", "effect": "PreferNoSchedule"},
                ],
            ),
            k.node("c"),
        ]
    )
    pl = world.plugin(TaintToleration)
    state = k.CycleState()
    pod = info(
        k.pod(
            "p",
            tolerations=[{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
        )
    )
    st = pl.filter(state, pod, world.infos["a"])
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == (
        "node(s) had untolerated taint {dedicated: user1}",
    )
    assert pl.filter_all(state, pod, world.table, world.rows()).tolist() == [False, True, True]
    pl.pre_score(state, pod, world.node_infos())
    raw = [pl.score(state, pod, i)[0] for i in world.node_infos()]
    assert raw == [0, 1, 0]
    assert pl.score_all(state, pod, world.table, world.rows()).tolist() == raw
    scores = [NodeScore(n, s) for n, s in zip("abc", raw, strict=True)]
    pl.normalize_score(state, pod, scores)
    assert [s.score for s in scores] == [100, 0, 100]


# --- NodeAffinity (TestNodeAffinity, TestNodeAffinityPriority) ----------------------------------------------
def _aff(
    required: list[dict[str, Any]] | None = None, preferred: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    na: dict[str, Any] = {}
    if required is not None:
        na["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred is not None:
        na["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return {"nodeAffinity": na}


def test_node_affinity_filter_prefilter_and_score(k: Any) -> None:
    world = k.World(
        [
            k.node("node1", labels={"foo": "bar", "zone": "z1", "gen": "5"}),
            k.node("node2", labels={"foo": "baz"}),
            k.node("node3"),
        ]
    )
    pl = world.plugin(NodeAffinity)
    state = k.CycleState()
    pod = info(k.pod("p", nodeSelector={"foo": "bar"}))
    res, st = pl.pre_filter(state, pod, world.node_infos())
    assert st.is_success and res is None
    assert [pl.filter(state, pod, i).is_success for i in world.node_infos()] == [True, False, False]
    assert pl.filter(state, pod, world.infos["node2"]).reasons == (
        "node(s) didn't match Pod's node affinity/selector",
    )
    assert pl.filter_all(state, pod, world.table, world.rows()).tolist() == [True, False, False]
    # matchFields on metadata.name narrows the candidates in PreFilter
    by_name = info(
        k.pod(
            "n",
            affinity=_aff(
                [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node2", "node3"]}]}]
            ),
        )
    )
    res, st = pl.pre_filter(k.CycleState(), by_name, world.node_infos())
    assert res is not None and res.node_names == {"node2", "node3"}
    conflict = info(
        k.pod(
            "c",
            affinity=_aff(
                [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node1"]},
                            {"key": "metadata.name", "operator": "In", "values": ["node2"]},
                        ]
                    }
                ]
            ),
        )
    )
    _, st = pl.pre_filter(k.CycleState(), conflict, world.node_infos())
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == ("pod affinity terms conflict",)
    _, st = pl.pre_filter(k.CycleState(), info(k.pod("none")), world.node_infos())
    assert st.is_skip
    # preferred terms: weights add, NormalizeScore scales to the maximum
    pref = info(
        k.pod(
            "pref",
            affinity=_aff(
                preferred=[
                    {
                        "weight": 2,
                        "preference": {
                            "matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]
                        },
                    },
                    {
                        "weight": 4,
                        "preference": {
                            "matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]
                        },
                    },
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}},
                ]
            ),
        )
    )
    state = k.CycleState()
    assert pl.pre_score(state, pref, world.node_infos()).is_success
    raw = [pl.score(state, pref, i)[0] for i in world.node_infos()]
    assert raw == [11, 5, 0]
    assert pl.score_all(state, pref, world.table, world.rows()).tolist() == raw
    scores = [NodeScore(n, s) for n, s in zip(["node1", "node2", "node3"], raw, strict=True)]
    pl.normalize_score(state, pref, scores)
    assert [s.score for s in scores] == [100, 45, 0]


def test_node_affinity_added_affinity(k: Any) -> None:
    world = k.World([k.node("node1", labels={"zone": "foo"}), k.node("node2", labels={"zone": "bar"})])
    pl = world.plugin(
        NodeAffinity,
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["foo"]}]}
                    ]
                }
            }
        },
    )
    state = k.CycleState()
    pod = info(k.pod("p"))
    _, st = pl.pre_filter(state, pod, world.node_infos())
    assert st.is_success  # added affinity makes the plugin relevant for every pod
    assert pl.filter(state, pod, world.infos["node2"]).reasons == (
        "node(s) didn't match scheduler-enforced node affinity",
    )
    assert pl.filter_all(state, pod, world.table, world.rows()).tolist() == [True, False]
    with pytest.raises(Exception, match="addedAffinity"):
        NodeAffinity.parse_args(
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Foo"}]}]
                    }
                }
            }
        )


def test_vector_filters_follow_node_label_changes(k: Any) -> None:
    """The shared node index must pick up a relabelled node (watch event) before the next filter_all."""
    world = k.World([k.node("node1", labels={"foo": "bar"}), k.node("node2")])
    pl = world.plugin(NodeAffinity)
    pod = info(k.pod("p", nodeSelector={"foo": "bar"}))
    state = k.CycleState()
    pl.pre_filter(state, pod, world.node_infos())
    assert pl.filter_all(state, pod, world.table, world.rows()).tolist() == [True, False]
    world.update_node(
        k.node("node2", labels={"foo": "bar"}) | {"metadata": {"name": "node2", "labels": {"foo": "bar"}}}
    )
    assert pl.filter_all(state, pod, world.table, world.rows()).tolist() == [True, True]


@pytest.mark.parametrize("seed", range(5))
def test_label_and_taint_filters_agree_on_random_nodes(k: Any, seed: int) -> None:
    rng = random.Random(seed)
    keys, values = ["a", "b", "zone", "num"], ["x", "y", "1", "7", "z1"]
    nodes = []
    for i in range(30):
        labels = {kk: rng.choice(values) for kk in keys if rng.random() < 0.6}
        taints = [
            {
                "key": rng.choice(keys),
                "value": rng.choice(values),
                "effect": rng.choice(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
            }
            for _ in range(rng.randint(0, 2))
        ]
        nodes.append(k.node(f"n{i}", labels=labels, taints=taints, unschedulable=rng.random() < 0.2))
    world = k.World(nodes)
    plugins = [
        world.plugin(NodeAffinity),
        world.plugin(TaintToleration),
        world.plugin(NodeUnschedulable),
        world.plugin(NodeName),
    ]
    ops = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    for j in range(25):
        exprs = []
        for _ in range(rng.randint(1, 2)):
            op = rng.choice(ops)
            vals = (
                []
                if op in ("Exists", "DoesNotExist")
                else ([str(rng.randint(0, 9))] if op in ("Gt", "Lt") else rng.sample(values, 2))
            )
            exprs.append({"key": rng.choice(keys), "operator": op, "values": vals})
        spec: dict[str, Any] = {
            "affinity": _aff(
                [
                    {"matchExpressions": exprs},
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [f"n{rng.randrange(30)}"]}
                        ]
                    },
                ],
                [{"weight": rng.randint(1, 9), "preference": {"matchExpressions": exprs}}],
            )
        }
        if rng.random() < 0.5:
            spec["nodeSelector"] = {rng.choice(keys): rng.choice(values)}
        spec["tolerations"] = [
            {
                "key": rng.choice(keys),
                "operator": rng.choice(["Exists", "Equal"]),
                "value": rng.choice(values),
                "effect": rng.choice(["", "NoSchedule", "PreferNoSchedule"]),
            }
            for _ in range(rng.randint(0, 3))
        ]
        pod = info(k.pod(f"p{j}", **spec))
        for pl in plugins:
            state = k.CycleState()
            if hasattr(pl, "pre_filter"):
                pl.pre_filter(state, pod, world.node_infos())
            per_node = [pl.filter(state, pod, i).is_success for i in world.node_infos()]
            assert pl.filter_all(state, pod, world.table, world.rows()).tolist() == per_node, pl.name
            if hasattr(pl, "score_all"):
                pl.pre_score(state, pod, world.node_infos())
                assert pl.score_all(state, pod, world.table, world.rows()).tolist() == [
                    pl.score(state, pod, i)[0] for i in world.node_infos()
                ]


# --- PodTopologySpread (TestSingleConstraint, TestPodTopologySpreadScore)
def _spread(key: str, skew: int = 1, when: str = "DoNotSchedule", **extra: Any) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
        **extra,
    }


def _zone_world(k: Any) -> Any:
    # zone1: node-a (2 foo pods), node-b (1); zone2: node-x (0), node-y (3)   -- "existing pods in a different namespace do not count"  # noqa: E501
    nodes = [
        k.node("node-a", labels={"zone": "zone1"}),
        k.node("node-b", labels={"zone": "zone1"}),
        k.node("node-x", labels={"zone": "zone2"}),
        k.node("node-y", labels={"zone": "zone2"}),
    ]
    pods = [
        k.pod("a1", "node-a", labels={"foo": ""}),
        k.pod("a2", "node-a", labels={"foo": ""}),
        k.pod("b1", "node-b", labels={"foo": ""}),
        k.pod("y1", "node-y", labels={"foo": ""}),
        k.pod("y2", "node-y", labels={"foo": ""}),
        k.pod("y3", "node-y", labels={"foo": ""}),
        k.pod("other", "node-x", labels={"foo": ""}, namespace="ns2"),
    ]
    return k.World(nodes, pods)


def test_pod_topology_spread_filter(k: Any) -> None:
    world = _zone_world(k)
    pl = world.plugin(PodTopologySpread)
    cases = [
        # zone: 3 vs 3 -> placing a matching pod anywhere gives skew 1: all fit
        ([_spread("zone")], [True, True, True, True]),
        # hostname: counts 2,1,0,3 -> min 0; fits where count + 1 - 0 <= 1
        ([_spread("kubernetes.io/hostname")], [False, False, True, False]),
        # both constraints
        ([_spread("zone"), _spread("kubernetes.io/hostname")], [False, False, True, False]),
        # maxSkew 2 on hostname
        ([_spread("kubernetes.io/hostname", 2)], [False, True, True, False]),
        # minDomains 5 > 4 domains: the global minimum counts as 0
        ([_spread("kubernetes.io/hostname", 3, minDomains=5)], [True, True, True, False]),
    ]
    for constraints, want in cases:
        pod = info(k.pod("p", labels={"foo": ""}, topologySpreadConstraints=constraints))
        state = k.CycleState()
        _, st = pl.pre_filter(state, pod, world.node_infos())
        assert st.is_success
        got = [pl.filter(state, pod, i).is_success for i in world.node_infos()]
        assert got == want, constraints
        assert pl.filter_all(state, pod, world.table, world.rows()).tolist() == want
    # a node without the topology key is unresolvable
    world.add_node(k.node("bare"))
    pod = info(k.pod("p", labels={"foo": ""}, topologySpreadConstraints=[_spread("zone")]))
    state = k.CycleState()
    pl.pre_filter(state, pod, world.node_infos())
    st = pl.filter(state, pod, world.infos["bare"])
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_pod_topology_spread_prefilter_extensions_keep_min_exact(k: Any) -> None:
    world = _zone_world(k)
    pl = world.plugin(PodTopologySpread)
    pod = info(k.pod("p", labels={"foo": ""}, topologySpreadConstraints=[_spread("kubernetes.io/hostname")]))
    state = k.CycleState()
    pl.pre_filter(state, pod, world.node_infos())
    victim = world.infos["node-b"].pods["uid-default-b1"]
    pl.remove_pod(state, pod, victim, world.infos["node-b"])
    assert pl.filter(state, pod, world.infos["node-b"]).is_success
    pl.add_pod(state, pod, victim, world.infos["node-x"])  # node-x now 1, minimum 0 on node-b
    assert not pl.filter(state, pod, world.infos["node-x"]).is_success


def test_pod_topology_spread_score(k: Any) -> None:
    world = _zone_world(k)
    pl = world.plugin(PodTopologySpread)
    pod = info(
        k.pod("p", labels={"foo": ""}, topologySpreadConstraints=[_spread("zone", when="ScheduleAnyway")])
    )
    state = k.CycleState()
    assert pl.pre_score(state, pod, world.node_infos()).is_success
    raw = [pl.score(state, pod, i)[0] for i in world.node_infos()]
    # both zones hold 3 matching pods: 3 * log(2 + 2) rounds to 4 everywhere
    assert raw == [4, 4, 4, 4]
    scores = [NodeScore(i.name, s) for i, s in zip(world.node_infos(), raw, strict=True)]
    pl.normalize_score(state, pod, scores)
    assert [s.score for s in scores] == [100, 100, 100, 100]
    host = info(
        k.pod(
            "h",
            labels={"foo": ""},
            topologySpreadConstraints=[_spread("kubernetes.io/hostname", when="ScheduleAnyway")],
        )
    )
    state = k.CycleState()
    pl.pre_score(state, host, world.node_infos())
    raw = [pl.score(state, host, i)[0] for i in world.node_infos()]
    weight = np.log(4 + 2)
    assert raw == [round(2 * weight), round(1 * weight), 0, round(3 * weight)]
    scores = [NodeScore(i.name, s) for i, s in zip(world.node_infos(), raw, strict=True)]
    pl.normalize_score(state, host, scores)
    assert [s.score for s in scores] == [100 * (raw[3] - r) // raw[3] for r in raw]
    # a pod without constraints and nothing selecting it is skipped (system defaults need a selector)
    assert pl.pre_score(k.CycleState(), info(k.pod("plain")), world.node_infos()).is_skip


def test_pod_topology_spread_system_defaults_use_services(k: Any) -> None:
    world = _zone_world(k)
    world.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc", "namespace": "default"},
            "spec": {"selector": {"foo": ""}},
        }
    )
    pl = world.plugin(PodTopologySpread)
    pod = info(k.pod("p", labels={"foo": ""}))
    state = k.CycleState()
    _, st = pl.pre_filter(state, pod, world.node_infos())
    assert st.is_skip  # system defaults are soft only
    assert pl.pre_score(state, pod, world.node_infos()).is_success
    raw = {i.name: pl.score(state, pod, i)[0] for i in world.node_infos()}
    assert raw["node-x"] < raw["node-b"] < raw["node-a"] < raw["node-y"]


# --- InterPodAffinity (TestRequiredAffinitySingleNode, TestPreferredAffinity)
def _pa(key: str, labels: dict[str, str], anti: bool = False, weight: int | None = None) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    kind = "podAntiAffinity" if anti else "podAffinity"
    if weight is None:
        return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": term}]
        }
    }


def test_inter_pod_affinity_filter(k: Any) -> None:
    nodes = [
        k.node("n1", labels={"region": "r1", "zone": "z1"}),
        k.node("n2", labels={"region": "r1", "zone": "z2"}),
        k.node("n3", labels={"region": "r2", "zone": "z3"}),
    ]
    world = k.World(
        nodes,
        [
            k.pod("s1", "n1", labels={"service": "securityscan"}),
            k.pod("guard", "n3", labels={"app": "guard"}, affinity=_pa("region", {"team": "red"}, anti=True)),
        ],
    )
    pl = world.plugin(InterPodAffinity)
    cases = [
        # affinity to securityscan within the region: r1 nodes only
        (k.pod("a", affinity=_pa("region", {"service": "securityscan"})), [True, True, False]),
        # anti-affinity to securityscan within the zone
        (k.pod("b", affinity=_pa("zone", {"service": "securityscan"}, anti=True)), [False, True, True]),
        # existing pod's anti-affinity keeps red pods off region r2
        (k.pod("c", labels={"team": "red"}), [True, True, False]),
        # no matching pod anywhere, but the pod matches its own term: the first of a group may go anywhere
        (k.pod("d", labels={"grp": "x"}, affinity=_pa("zone", {"grp": "x"})), [True, True, True]),
        # no matching pod and not self-matching: nowhere
        (k.pod("e", affinity=_pa("zone", {"grp": "x"})), [False, False, False]),
    ]
    for manifest, want in cases:
        pod = info(manifest)
        state = k.CycleState()
        _, st = pl.pre_filter(state, pod, world.node_infos())
        assert st.is_success, manifest["metadata"]["name"]
        assert [pl.filter(state, pod, i).is_success for i in world.node_infos()] == want, manifest[
            "metadata"
        ]["name"]
        assert pl.filter_all(state, pod, world.table, world.rows()).tolist() == want
    _, st = pl.pre_filter(k.CycleState(), info(k.pod("free")), world.node_infos())
    assert st.is_skip


def test_inter_pod_affinity_score(k: Any) -> None:
    nodes = [
        k.node("n1", labels={"region": "china"}),
        k.node("n2", labels={"region": "india"}),
        k.node("n3", labels={"region": "china"}),
    ]
    world = k.World(
        nodes, [k.pod("s1", "n1", labels={"security": "S1"}), k.pod("s2", "n2", labels={"security": "S2"})]
    )
    pl = world.plugin(InterPodAffinity)
    pod = info(
        k.pod(
            "p",
            affinity={
                **_pa("region", {"security": "S1"}, weight=5),
                **_pa("region", {"security": "S2"}, anti=True, weight=3),
            },
        )
    )
    state = k.CycleState()
    assert pl.pre_score(state, pod, world.node_infos()).is_success
    raw = [pl.score(state, pod, i)[0] for i in world.node_infos()]
    assert raw == [5, -3, 5]
    assert pl.score_all(state, pod, world.table, world.rows()).tolist() == raw
    scores = [NodeScore(n, s) for n, s in zip(["n1", "n2", "n3"], raw, strict=True)]
    pl.normalize_score(state, pod, scores)
    assert [s.score for s in scores] == [100, 0, 100]
    # hard affinity of an existing pod pulls a matching incoming pod with hardPodAffinityWeight
    world.add_pod(k.pod("hard", "n2", affinity=_pa("region", {"x": "y"})))
    state = k.CycleState()
    pl.pre_score(state, info(k.pod("m", labels={"x": "y"})), world.node_infos())
    assert [pl.score(state, info(k.pod("m", labels={"x": "y"})), i)[0] for i in world.node_infos()] == [
        0,
        1,
        0,
    ]


# --- DefaultPreemption (TestSelectNodesForPreemption, TestPickOneNodeForPreemption, TestFilterPodsWithPDBViolation)  # noqa: E501
def test_pdb_violation_grouping() -> None:
    pods = [
        info(
            {"metadata": {"name": f"p{i}", "uid": str(i), "labels": {"app": "a"}}, "spec": {"containers": []}}
        )
        for i in range(3)
    ]
    pdbs = parse_pdbs(
        [
            {
                "metadata": {"namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "a"}}},
                "status": {"disruptionsAllowed": 1, "disruptedPods": {"p0": "2024-01-01T00:00:00Z"}},
            }
        ]
    )
    violating, ok = filter_pods_with_pdb_violation(pods, pdbs)
    assert [p.name for p in ok] == ["p0", "p1"]  # p0 is already disrupted, p1 spends the budget
    assert [p.name for p in violating] == ["p2"]


def _preemption_world(k: Any) -> Any:
    nodes = [
        k.node("node1", cpu="5", memory="10Gi"),
        k.node("node2", cpu="5", memory="10Gi"),
        k.node("node3", cpu="5", memory="10Gi"),
    ]
    pods = [
        k.pod("p1.1", "node1", {"cpu": "2", "memory": "1Gi"}, priority=10, start="2024-01-01T00:00:01Z"),
        k.pod("p1.2", "node1", {"cpu": "2", "memory": "1Gi"}, priority=10, start="2024-01-01T00:00:02Z"),
        k.pod("p2.1", "node2", {"cpu": "3", "memory": "1Gi"}, priority=50, start="2024-01-01T00:00:01Z"),
        k.pod("p3.1", "node3", {"cpu": "4", "memory": "1Gi"}, priority=10, start="2024-01-01T00:00:01Z"),
    ]
    world = k.World(nodes, pods)
    world.filter_plugins = [world.plugin(NodeResourcesFit)]
    return world


def test_select_victims_and_pick_node(k: Any) -> None:
    world = _preemption_world(k)
    pl = world.plugin(DefaultPreemption)
    preemptor = info(k.pod("hi", requests={"cpu": "4", "memory": "1Gi"}, priority=100))
    state = k.CycleState()
    world.filter_plugins[0].pre_filter(state, preemptor, world.node_infos())
    victims, violations, st = pl.select_victims_on_node(
        state.clone(), preemptor, world.infos["node1"].clone(), []
    )
    assert st.is_success and violations == 0
    assert sorted(v.name for v in victims) == ["p1.1", "p1.2"]
    victims, _, st = pl.select_victims_on_node(state.clone(), preemptor, world.infos["node3"].clone(), [])
    assert [v.name for v in victims] == ["p3.1"]
    # node2's only pod has priority 50 < 100: it can be preempted too
    filtered = {n: world.filter_plugins[0].filter(state, preemptor, i) for n, i in world.infos.items()}
    result, st = pl.post_filter(state, preemptor, filtered)
    assert st.is_success and result is not None
    # one victim of priority 10 on node3 beats two on node1 (sum) and priority 50 on node2 (highest priority)
    assert result.nominated_node == "node3"
    assert world.cluster.try_get("Pod", "p3.1", "default") is None
    assert any(e.reason == "Preempted" and e.name == "p3.1" for e in world.cluster.events)


def test_preemption_respects_policy_and_unresolvable_nodes(k: Any) -> None:
    world = _preemption_world(k)
    pl = world.plugin(DefaultPreemption)
    never = info(k.pod("never", requests={"cpu": "4"}, priority=100, preemptionPolicy="Never"))
    _, st = pl.post_filter(k.CycleState(), never, {})
    assert st.code is Code.UNSCHEDULABLE and "preemptionPolicy=Never" in st.message
    preemptor = info(k.pod("hi", requests={"cpu": "4"}, priority=100))
    state = k.CycleState()
    world.filter_plugins[0].pre_filter(state, preemptor, world.node_infos())
    from koord_framework.scheduler.status import Status

    all_unresolvable = {n: Status.unresolvable("x") for n in world.infos}
    result, st = pl.post_filter(state, preemptor, all_unresolvable)
    assert result is None and st.code is Code.UNSCHEDULABLE
    assert st.message.startswith("preemption: 0/3 nodes are available")


def test_preemption_args_validation() -> None:
    with pytest.raises(Exception, match="cannot be zero at the same time"):
        DefaultPreemption.parse_args({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0})
    with pytest.raises(Exception, match=r"not in valid range \[0, 100\]"):
        DefaultPreemption.parse_args({"minCandidateNodesPercentage": 101})


# --- DefaultBinder / DefaultPreBind / SchedulingHint
def test_binder_and_prebind(k: Any) -> None:
    world = k.World([k.node("n1")])
    manifest = k.pod("p")
    world.add_pod(manifest)
    pod = info(world.cluster.get("Pod", "p", "default"))
    state = k.CycleState()
    state.pod_mutation.annotations["scheduling.koordinator.sh/reservation-allocated"] = '{"name":"r1"}'
    assert world.plugin(DefaultPreBind).pre_bind(state, pod, "n1").is_success
    assert state.pod_mutation.is_empty()
    stored = world.cluster.get("Pod", "p", "default")
    assert (
        stored["metadata"]["annotations"]["scheduling.koordinator.sh/reservation-allocated"]
        == '{"name":"r1"}'
    )
    binder = world.plugin(DefaultBinder)
    assert binder.bind(state, pod, "n1").is_success
    assert world.cluster.get("Pod", "p", "default")["spec"]["nodeName"] == "n1"
    st = binder.bind(state, pod, "n1")  # already bound: ConflictError -> Error
    assert st.code is Code.ERROR


def test_scheduling_hint(k: Any, caplog: pytest.LogCaptureFixture) -> None:
    world = k.World([k.node("node-1"), k.node("node-2"), k.node("node-3")])
    pl = world.plugin(SchedulingHint)
    state = k.CycleState()
    res, st = pl.pre_filter(state, info(k.pod("plain")), world.node_infos())
    assert res is None and st.is_success and STATE_KEY not in state
    hint = {
        "nodeNames": ["node-1", "node-2"],
        "preferredNodeNames": ["node-3", "node-2"],
        "extensions": {"key": "value"},
    }
    pod = info(
        k.pod("h")
        | {
            "metadata": {
                "name": "h",
                "uid": "h",
                "annotations": {ANNOTATION_SCHEDULING_HINT: json.dumps(hint)},
            }
        }
    )
    state = k.CycleState()
    res, st = pl.pre_filter(state, pod, world.node_infos())
    assert st.is_success and res is not None and res.node_names == {"node-1", "node-2"}
    assert state.read(STATE_KEY).extensions == {"key": "value"}
    preferred, st = pl.prefer_nodes(state, pod, res)
    assert preferred == ["node-2"] and st.is_success  # node-3 was filtered out by PreFilter
    bad = info(
        k.pod("b")
        | {"metadata": {"name": "b", "uid": "b", "annotations": {ANNOTATION_SCHEDULING_HINT: "invalid-json"}}}
    )
    with caplog.at_level(logging.WARNING, logger="koord_framework.cluster.events"):
        for _ in range(3):
            _, st = pl.pre_filter(k.CycleState(), bad, world.node_infos())
    assert st.code is Code.ERROR
    assert st.message.startswith(f"annotation {ANNOTATION_SCHEDULING_HINT}: Expecting value")
    said = [r.getMessage() for r in caplog.records if ANNOTATION_SCHEDULING_HINT in r.getMessage()]
    assert said == [
        f"pod default/b: malformed annotation {ANNOTATION_SCHEDULING_HINT}: {st.message.split(': ', 1)[1]}"
    ]
    with pytest.raises(Exception, match="must be a positive value"):
        SchedulingHint.parse_args({"maxHintNodes": 0})


def test_entry_points_match_class_names() -> None:
    from koord_framework.registry import PluginRegistry

    registry = PluginRegistry.discover("scheduler")
    for name in [
        "PrioritySort",
        "SchedulingGates",
        "NodeName",
        "NodeUnschedulable",
        "NodeAffinity",
        "TaintToleration",
        "NodePorts",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "PodTopologySpread",
        "InterPodAffinity",
        "DefaultPreemption",
        "DefaultBinder",
        "DefaultPreBind",
        "SchedulingHint",
    ]:
        assert registry.get(name).name == name


def test_preemption_exports_victims_histogram_next_to_the_framework_attempts() -> None:
    """The plugin's histogram and the framework's attempts counter live on one registry without clashing."""
    from koord_plugin_kubernetes.defaultbinder import DefaultBinder
    from koord_plugin_kubernetes.defaultpreemption import DefaultPreemption
    from koord_plugin_kubernetes.noderesources import NodeResourcesFit
    from koord_plugin_kubernetes.queuesort import PrioritySort

    from koord_framework.metrics import render
    from koord_framework.testing import make_node, make_pod
    from koord_framework.testing.scheduler import SchedulerHarness

    h = SchedulerHarness([PrioritySort, NodeResourcesFit, DefaultPreemption, DefaultBinder])
    h.add(
        make_node("n1", cpu="2"),
        make_pod("victim", cpu="2", node="n1", priority=1),
        make_pod("vip", cpu="2", priority=50),
    )
    h.run_until_idle()
    assert h.cluster.try_get("Pod", "victim", "default") is None
    text = render(h.handle.metrics)
    assert "koord_scheduler_preemption_victims_count 1.0" in text
    assert "koord_scheduler_preemption_victims_sum 1.0" in text
