"""All or nothing, on random clusters and gangs: the invariant Strict gang scheduling exists for.

After every scheduling run: each Strict gang has at least its minimum of members bound, or none; nothing of a
gang that did not bind holds resources (no pod is left assumed or waiting at Permit); and gangs competing for
the same nodes never deadlock (the run ends with every gang bound or rejected). Random clusters mix
PodGroup gangs and annotation gangs, gang groups, sizes above the minimum, and plain pods; some runs add a
node afterwards and schedule again.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from koord_plugin_coscheduling import Coscheduling
from koord_plugin_coscheduling.testing import Fit, all_or_nothing_violations, member, pod_group

from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness


def _random_world(rng: random.Random) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        make_node(f"n{i}", cpu=str(rng.choice([1, 2, 3, 4])), memory="64Gi") for i in range(rng.randint(1, 6))
    ]
    names = [f"g{i}" for i in range(rng.randint(2, 6))]
    grouped = rng.random() < 0.3 and len(names) >= 2
    group_of: dict[str, str] = {}
    if grouped:
        pair = names[:2]
        text = json.dumps([f"default/{n}" for n in pair])
        group_of = {n: text for n in pair}
    for name in names:
        size = rng.randint(1, 5)
        minimum = rng.randint(1, size)
        cpu = rng.choice(["500m", "1", "2"])
        if rng.random() < 0.6:
            annotations = {"gang.scheduling.koordinator.sh/total-number": str(size)}
            if name in group_of:
                annotations["gang.scheduling.koordinator.sh/groups"] = group_of[name]
            objects.append(
                pod_group(name, minimum, timeout=rng.choice([5, 30, 600]), annotations=annotations)
            )
            objects += [member(f"{name}-{k}", name, cpu=cpu) for k in range(size)]
        else:
            annotations = {
                "gang.scheduling.koordinator.sh/name": name,
                "gang.scheduling.koordinator.sh/min-available": str(minimum),
                "gang.scheduling.koordinator.sh/waiting-time": rng.choice(["5s", "1m"]),
            }
            if name in group_of:
                annotations["gang.scheduling.koordinator.sh/groups"] = group_of[name]
            objects += [
                make_pod(f"{name}-{k}", cpu=cpu, memory="1Gi", annotations=annotations) for k in range(size)
            ]
    objects += [
        make_pod(f"solo-{k}", cpu=rng.choice(["500m", "1"]), memory="1Gi") for k in range(rng.randint(0, 4))
    ]
    rng.shuffle(objects)
    # Nodes first, so that the interleaving of pods and PodGroups is what varies.
    return sorted(objects, key=lambda o: o["kind"] != "Node")


def _check(h: SchedulerHarness) -> None:
    pods = h.cluster.list("Pod")[0]
    objects = [*pods, *h.cluster.list("PodGroup")[0]]
    assert all_or_nothing_violations(objects) == []
    assert not h.scheduler.waiting.list(), "a run ends with nobody waiting at Permit"
    bound = {p["metadata"]["uid"] for p in pods if p["spec"].get("nodeName")}
    for ni in h.scheduler.cache.node_infos():
        assert set(ni.pods) <= bound, f"{ni.name} holds resources for pods that are not bound"
    for ni in h.scheduler.cache.node_infos():
        used = sum(p.requests.get("cpu", 0) for p in ni.pods.values())
        assert used <= ni.allocatable.get("cpu", 0)


@pytest.mark.parametrize("seed", range(40))
def test_strict_gangs_bind_all_or_nothing_on_random_clusters(seed: int) -> None:
    rng = random.Random(seed)
    h = SchedulerHarness([Coscheduling, Fit], seed=seed)
    h.add(*_random_world(rng))
    h.run_until_idle()
    _check(h)
    if rng.random() < 0.5:
        h.add(make_node("extra", cpu=str(rng.choice([2, 4, 8])), memory="64Gi"))
        h.run_until_idle()
        _check(h)


@pytest.mark.parametrize("seed", range(10))
def test_two_gangs_competing_for_the_same_nodes_both_finish(seed: int) -> None:
    """Room for one of two equal gangs: exactly one binds entirely, the other binds nothing, none waits."""
    rng = random.Random(seed)
    size = rng.randint(2, 5)
    nodes = rng.randint(1, size)
    per_node = -(-size // nodes)  # ceil: the nodes hold one gang, never two
    objects: list[dict[str, Any]] = [
        make_node(f"n{i}", cpu=str(per_node), memory="64Gi") for i in range(nodes)
    ]
    for name in ("x", "y"):
        objects.append(pod_group(name, size))
        objects += [member(f"{name}-{k}", name) for k in range(size)]
    rng.shuffle(objects)
    h = SchedulerHarness([Coscheduling, Fit], seed=seed)
    h.add(*sorted(objects, key=lambda o: o["kind"] != "Node"))
    h.run_until_idle()
    _check(h)
    bound = [p["metadata"]["name"] for p in h.cluster.list("Pod")[0] if p["spec"].get("nodeName")]
    assert len(bound) == size and len({b[0] for b in bound}) == 1
