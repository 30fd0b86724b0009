"""NodeResourcesFit and NodeResourcesBalancedAllocation, with cases from kube-scheduler's
``noderesources/{fit,least_allocated,most_allocated,requested_to_capacity_ratio,balanced_allocation}_test.go``."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from koord_plugin_kubernetes.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
from pydantic import ValidationError


def _scores(
    k: Any,
    plugin_cls: Any,
    args: dict[str, Any] | None,
    pod: dict[str, Any],
    nodes: list[dict[str, Any]],
    existing: list[dict[str, Any]],
) -> dict[str, int]:
    world = k.World(nodes, existing)
    pl = world.plugin(plugin_cls, args)
    p = (
        world.add_pod(pod)
        if False
        else __import__("koord_framework.api.objects", fromlist=["PodInfo"]).PodInfo.from_manifest(pod)
    )
    state = k.CycleState()
    st = pl.pre_score(state, p, world.node_infos())
    out = {}
    for info in world.node_infos():
        score, _ = pl.score(state, p, info) if not st.is_skip else (0, None)
        out[info.name] = score
    if not st.is_skip:
        vec = pl.score_all(state, p, world.table, world.rows())
        assert dict(zip(out, vec.tolist(), strict=True)) == out
    return out


def cap(name: str, **res: str) -> dict[str, Any]:
    alloc = dict(res)
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def p(node: str = "", *reqs: dict[str, str], name: str = "p") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"u-{name}-{random.random()}", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(reqs)],
        },
    }


# TestLeastAllocatedScoringStrategy
LEAST_CASES = [
    (
        "nothing scheduled, nothing requested",
        p(),
        [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="4000", memory="10000")],
        [],
        None,
        {"node1": 100, "node2": 100},
    ),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        p("", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}),
        [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="6000", memory="10000")],
        [],
        None,
        {"node1": 37, "node2": 50},
    ),
    (
        "no resources requested, pods scheduled with resources",
        p(),
        [cap("node1", cpu="10000", memory="20000"), cap("node2", cpu="10000", memory="20000")],
        [
            p("node1", {"cpu": "3000", "memory": "0"}, name="a"),
            p("node1", {"cpu": "3000", "memory": "0"}, name="b"),
            p("node2", {"cpu": "3000", "memory": "0"}, name="c"),
            p("node2", {"cpu": "3000", "memory": "5000"}, name="d"),
        ],
        None,
        {"node1": 70, "node2": 57},
    ),
    (
        "requested resources exceed node capacity",
        p("", {"cpu": "3000", "memory": "0"}),
        [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="4000", memory="10000")],
        [
            p("node1", {"cpu": "3000", "memory": "0"}, name="a"),
            p("node2", {"cpu": "3000", "memory": "5000"}, name="b"),
        ],
        None,
        {"node1": 50, "node2": 25},
    ),
    (
        "zero node resources, pods scheduled with resources",
        p(),
        [cap("node1"), cap("node2")],
        [
            p("node1", {"cpu": "3000", "memory": "0"}, name="a"),
            p("node2", {"cpu": "3000", "memory": "5000"}, name="b"),
        ],
        None,
        {"node1": 0, "node2": 0},
    ),
    (
        "different weight on CPU and memory",
        p("", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}),
        [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="6000", memory="10000")],
        [],
        [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}],
        {"node1": 41, "node2": 50},
    ),
    (
        "bypass extended resource if the pod does not request",
        p("", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}),
        [
            cap("node1", cpu="6000", memory="10000"),
            cap("node2", cpu="6000", memory="10000", **{"intel.com/foo": "4"}),
        ],
        [],
        [
            {"name": "cpu", "weight": 1},
            {"name": "memory", "weight": 1},
            {"name": "intel.com/foo", "weight": 1},
        ],
        {"node1": 50, "node2": 50},
    ),
    (
        "honor extended resource if the pod requests",
        p("", {"cpu": "3000", "memory": "5000", "intel.com/foo": "2"}),
        [
            cap("node1", cpu="6000", memory="10000", **{"intel.com/foo": "4"}),
            cap("node2", cpu="6000", memory="10000", **{"intel.com/foo": "10"}),
        ],
        [],
        [
            {"name": "cpu", "weight": 1},
            {"name": "memory", "weight": 1},
            {"name": "intel.com/foo", "weight": 1},
        ],
        {"node1": 50, "node2": 60},
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "nodes", "existing", "resources", "want"), LEAST_CASES, ids=[c[0] for c in LEAST_CASES]
)
def test_least_allocated(
    k: Any, name: str, pod: Any, nodes: Any, existing: Any, resources: Any, want: dict[str, int]
) -> None:
    args = {"scoringStrategy": {"type": "LeastAllocated", "resources": resources}} if resources else None
    assert _scores(k, NodeResourcesFit, args, pod, nodes, existing) == want


# TestMostAllocatedScoringStrategy
MOST_CASES = [
    (
        "nothing scheduled, resources requested, differently sized nodes",
        p("", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}),
        [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="6000", memory="10000")],
        [],
        None,
        {"node1": 62, "node2": 50},
    ),
    (
        "requests above capacity are capped at capacity",
        p("", {"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
        [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="6000", memory="20000")],
        [p("node1", {"cpu": "3000", "memory": "5000"}, name="a")],
        None,
        {"node1": 100, "node2": 64},
    ),
    (
        "nothing scheduled, resources requested with different weight on CPU and memory",
        p("", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}),
        [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="6000", memory="10000")],
        [],
        [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}],
        {"node1": 58, "node2": 50},
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "nodes", "existing", "resources", "want"), MOST_CASES, ids=[c[0] for c in MOST_CASES]
)
def test_most_allocated(
    k: Any, name: str, pod: Any, nodes: Any, existing: Any, resources: Any, want: dict[str, int]
) -> None:
    strategy: dict[str, Any] = {"type": "MostAllocated"}
    if resources:
        strategy["resources"] = resources
    assert _scores(k, NodeResourcesFit, {"scoringStrategy": strategy}, pod, nodes, existing) == want


# TestRequestedToCapacityRatioScoringStrategy ("nothing scheduled, nothing requested" / "... resources requested")  # noqa: E501
def test_requested_to_capacity_ratio(k: Any) -> None:
    shape = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
    args = {
        "scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": shape}}
    }
    nodes = [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="4000", memory="10000")]
    assert _scores(k, NodeResourcesFit, args, p(), nodes, []) == {"node1": 100, "node2": 100}
    nodes = [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="6000", memory="10000")]
    got = _scores(k, NodeResourcesFit, args, p("", {"cpu": "3000", "memory": "5000"}), nodes, [])
    assert got == {"node1": 38, "node2": 50}  # node1: round((25 + 50) / 2); node2: (50 + 50) / 2
    # bin packing of an extended resource (TestResourceBinPackingSingleExtended): shape 0->0, 100->10
    pack = {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "intel.com/foo", "weight": 1}],
            "requestedToCapacityRatio": {
                "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
            },
        }
    }
    nodes = [
        cap("node1", cpu="4000", memory="10000", **{"intel.com/foo": "4"}),
        cap("node2", cpu="4000", memory="10000", **{"intel.com/foo": "8"}),
    ]
    got = _scores(k, NodeResourcesFit, pack, p("", {"intel.com/foo": "2"}), nodes, [])
    assert got == {"node1": 50, "node2": 25}


# TestNodeResourcesBalancedAllocation
def test_balanced_allocation(k: Any) -> None:
    nodes = [cap("node1", cpu="4000", memory="10000"), cap("node2", cpu="6000", memory="10000")]
    # cpu 3000/4000 = 0.75, memory 5000/10000 = 0.5: std 0.125 -> 87; node2: 0.5, 0.5 -> 100
    got = _scores(
        k,
        NodeResourcesBalancedAllocation,
        None,
        p("", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}),
        nodes,
        [],
    )
    assert got == {"node1": 87, "node2": 100}
    # three resources use the population standard deviation
    nodes3 = [cap("node1", cpu="4000", memory="10000", **{"intel.com/foo": "4"})]
    args = {
        "resources": [
            {"name": "cpu", "weight": 1},
            {"name": "memory", "weight": 1},
            {"name": "intel.com/foo", "weight": 1},
        ]
    }
    got = _scores(
        k,
        NodeResourcesBalancedAllocation,
        args,
        p("", {"cpu": "1000", "memory": "5000", "intel.com/foo": "4"}),
        nodes3,
        [],
    )
    assert got == {"node1": 68}  # fractions .25 .5 1 -> std 0.3118 -> int(68.82)


def test_balanced_allocation_skips_best_effort_pods(k: Any) -> None:
    from koord_framework.api.objects import PodInfo

    world = k.World([cap("node1", cpu="4", memory="8Gi")])
    pl = world.plugin(NodeResourcesBalancedAllocation)
    assert pl.pre_score(k.CycleState(), PodInfo.from_manifest(p("", {})), world.node_infos()).is_skip


# TestEnoughRequests (fit_test.go); allocatable: cpu 10m, memory 20, pods 32, example.com/aaa 5, ephemeral 20
def _fit_node(name: str = "n") -> dict[str, Any]:
    return cap(
        name,
        cpu="10m",
        memory="20",
        pods="32",
        **{"example.com/aaa": "5", "ephemeral-storage": "20", "hugepages-2Mi": "5"},
    )


FIT_CASES: list[tuple[str, dict[str, str], list[dict[str, str]], list[str], dict[str, Any] | None]] = [
    ("no resources requested always fits", {}, [{"cpu": "10m", "memory": "20"}], [], None),
    (
        "too many resources fails",
        {"cpu": "1m", "memory": "1"},
        [{"cpu": "10m", "memory": "20"}],
        ["Insufficient cpu", "Insufficient memory"],
        None,
    ),
    ("both resources fit", {"cpu": "1m", "memory": "1"}, [{"cpu": "5m", "memory": "5"}], [], None),
    (
        "one resource memory fits",
        {"cpu": "2m", "memory": "1"},
        [{"cpu": "9m", "memory": "5"}],
        ["Insufficient cpu"],
        None,
    ),
    ("equal edge case", {"cpu": "5m", "memory": "4"}, [{"cpu": "5m", "memory": "16"}], [], None),
    ("extended resource fits", {"example.com/aaa": "1"}, [{"example.com/aaa": "0"}], [], None),
    (
        "extended resource capacity enforced",
        {"example.com/aaa": "10"},
        [{"example.com/aaa": "0"}],
        ["Insufficient example.com/aaa"],
        None,
    ),
    (
        "extended resource allocatable enforced",
        {"example.com/aaa": "1"},
        [{"example.com/aaa": "5"}],
        ["Insufficient example.com/aaa"],
        None,
    ),
    (
        "extended resource ignored by name",
        {"example.com/aaa": "10"},
        [],
        [],
        {"ignoredResources": ["example.com/aaa"]},
    ),
    (
        "extended resource ignored by group",
        {"example.com/aaa": "10"},
        [],
        [],
        {"ignoredResourceGroups": ["example.com"]},
    ),
    (
        "unknown extended resource is not allocatable",
        {"example.com/bbb": "1"},
        [],
        ["Insufficient example.com/bbb"],
        None,
    ),
    ("hugepages enforced", {"hugepages-2Mi": "10"}, [], ["Insufficient hugepages-2Mi"], None),
    ("ephemeral storage enforced", {"ephemeral-storage": "25"}, [], ["Insufficient ephemeral-storage"], None),
    (
        "prefixed native resource cannot be ignored",
        {"kubernetes.io/batch-cpu": "1"},
        [],
        ["Insufficient kubernetes.io/batch-cpu"],
        {"ignoredResources": ["kubernetes.io/batch-cpu"]},
    ),
]


@pytest.mark.parametrize(
    ("name", "req", "existing", "reasons", "args"), FIT_CASES, ids=[c[0] for c in FIT_CASES]
)
def test_fit_filter(
    k: Any, name: str, req: dict[str, str], existing: list[dict[str, str]], reasons: list[str], args: Any
) -> None:
    from koord_framework.api.objects import PodInfo

    world = k.World([_fit_node()], [p("n", r, name=f"e{i}") for i, r in enumerate(existing)])
    pl = world.plugin(NodeResourcesFit, args)
    pod = PodInfo.from_manifest(p("", req))
    state = k.CycleState()
    pl.pre_filter(state, pod, world.node_infos())
    st = pl.filter(state, pod, world.infos["n"])
    assert list(st.reasons) == reasons
    assert bool(pl.filter_all(state, pod, world.table, world.rows())[0]) == (not reasons)


def test_fit_too_many_pods(k: Any) -> None:
    from koord_framework.api.objects import PodInfo

    world = k.World([cap("n", cpu="1", memory="1Gi", pods="1")], [p("n", {}, name="a")])
    pl = world.plugin(NodeResourcesFit)
    pod = PodInfo.from_manifest(p("", {"cpu": "1m"}))
    state = k.CycleState()
    pl.pre_filter(state, pod, world.node_infos())
    assert pl.filter(state, pod, world.infos["n"]).reasons == ("Too many pods",)
    assert not pl.filter_all(state, pod, world.table, world.rows())[0]


def test_fit_args_validation() -> None:
    bad = [
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "memory", "weight": -1}]}},
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
        {"scoringStrategy": {"type": "Foo"}},
        {"ignoredResourceGroups": ["example.com/aaa"]},
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]
                },
            }
        },
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 11}]},
            }
        },
    ]
    for raw in bad:
        with pytest.raises(ValidationError):
            NodeResourcesFit.parse_args(raw)
    with pytest.raises(ValidationError, match=r"scoringStrategy.resources\[0\].weight"):
        NodeResourcesFit.parse_args(
            {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "memory", "weight": -1}]}}
        )
    args = NodeResourcesFit.parse_args(
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}]}}
    )
    assert args.scoring_strategy.resources[0].weight == 1  # type: ignore[attr-defined]
    default = NodeResourcesFit.parse_args(None)
    assert default.scoring_strategy.type == "LeastAllocated"  # type: ignore[attr-defined]
    assert [(r.name, r.weight) for r in default.scoring_strategy.resources] == [("cpu", 1), ("memory", 1)]  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="must be 1"):
        NodeResourcesBalancedAllocation.parse_args({"resources": [{"name": "cpu", "weight": 2}]})


# --- per-node and vectorised forms agree on random tables ---------------------------------------------------
RESOURCES = ["cpu", "memory", "ephemeral-storage", "example.com/gpu", "kubernetes.io/batch-cpu"]
STRATEGIES: list[dict[str, Any]] = [
    {
        "type": "LeastAllocated",
        "resources": [{"name": r, "weight": w} for r, w in zip(RESOURCES, [1, 2, 3, 1, 5], strict=True)],
    },
    {
        "type": "MostAllocated",
        "resources": [{"name": r, "weight": w} for r, w in zip(RESOURCES, [3, 1, 1, 4, 1], strict=True)],
    },
    {
        "type": "RequestedToCapacityRatio",
        "resources": [{"name": r, "weight": 1} for r in RESOURCES],
        "requestedToCapacityRatio": {
            "shape": [
                {"utilization": 0, "score": 0},
                {"utilization": 30, "score": 8},
                {"utilization": 100, "score": 3},
            ]
        },
    },
]


def _random_world(k: Any, rng: random.Random, n_nodes: int = 40) -> Any:
    nodes = []
    for i in range(n_nodes):
        res = {
            "cpu": f"{rng.randint(0, 8000)}m",
            "memory": str(rng.randint(0, 16) * 2**28),
            "pods": str(rng.randint(0, 6)),
        }
        if rng.random() < 0.5:
            res["example.com/gpu"] = str(rng.randint(0, 4))
        if rng.random() < 0.5:
            res["kubernetes.io/batch-cpu"] = str(rng.randint(0, 8000))
        if rng.random() < 0.3:
            res["ephemeral-storage"] = str(rng.randint(0, 10**10))
        nodes.append(cap(f"n{i}", **res))
    world = k.World(nodes)
    for i in range(n_nodes * 3):
        target = f"n{rng.randrange(n_nodes)}"
        world.add_pod(p(target, _random_req(rng), name=f"e{i}"))
    return world


def _random_req(rng: random.Random) -> dict[str, str]:
    req: dict[str, str] = {}
    if rng.random() < 0.8:
        req["cpu"] = f"{rng.randint(0, 3000)}m"
    if rng.random() < 0.8:
        req["memory"] = str(rng.randint(0, 4) * 2**27)
    if rng.random() < 0.3:
        req["example.com/gpu"] = str(rng.randint(0, 2))
    if rng.random() < 0.3:
        req["kubernetes.io/batch-cpu"] = str(rng.randint(0, 3000))
    if rng.random() < 0.2:
        req["ephemeral-storage"] = str(rng.randint(0, 10**9))
    return req


@pytest.mark.parametrize("seed", range(8))
def test_vectorised_forms_agree_on_random_tables(k: Any, seed: int) -> None:
    from koord_framework.api.objects import PodInfo

    rng = random.Random(seed)
    world = _random_world(k, rng)
    rows = world.rows()
    plugins = [world.plugin(NodeResourcesFit, {"scoringStrategy": s}) for s in STRATEGIES]
    plugins.append(
        world.plugin(
            NodeResourcesBalancedAllocation, {"resources": [{"name": r, "weight": 1} for r in RESOURCES]}
        )
    )
    plugins.append(world.plugin(NodeResourcesBalancedAllocation))
    for j in range(15):
        containers = [_random_req(rng) for _ in range(rng.randint(0, 2))]
        pod = PodInfo.from_manifest(p("", *containers, name=f"x{j}"))
        for pl in plugins:
            state = k.CycleState()
            if isinstance(pl, NodeResourcesFit):
                pl.pre_filter(state, pod, world.node_infos())
                per_node = [pl.filter(state, pod, i).is_success for i in world.node_infos()]
                assert pl.filter_all(state, pod, world.table, rows).tolist() == per_node
            if pl.pre_score(state, pod, world.node_infos()).is_skip:
                continue
            per_node_scores = [pl.score(state, pod, i)[0] for i in world.node_infos()]
            vec = pl.score_all(state, pod, world.table, rows)
            assert vec.dtype == np.int64
            assert vec.tolist() == per_node_scores
