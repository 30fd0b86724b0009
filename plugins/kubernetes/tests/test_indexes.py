"""The indexed forms of the plugins agree with kube-scheduler's node walk, under churn.

InterPodAffinity and PodTopologySpread count pods through indexes kept current from the snapshot's change
log (``_podcounts``, ``_ExistingTerms``); NodeResourcesFit and DefaultPreemption read whole-table results
patched from it (``_rowcache``). Each test builds a random cluster in the scheduler harness (a real
``Scheduler`` snapshot), compares the indexed result with the walk over every node after each round of
random changes (pods bound, deleted, relabelled; nodes relabelled), so both the full builds and the
incremental patches are checked.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from koord_plugin_kubernetes.defaultpreemption import DefaultPreemption
from koord_plugin_kubernetes.interpodaffinity import (
    _NO_TERMS,
    _PRE_SCORE_KEY,
    InterPodAffinity,
    PreFilterState,
    _has_pod_affinity,
)
from koord_plugin_kubernetes.nodeaffinity import NodeAffinity
from koord_plugin_kubernetes.nodename import NodeName
from koord_plugin_kubernetes.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
from koord_plugin_kubernetes.nodeunschedulable import NodeUnschedulable
from koord_plugin_kubernetes.podtopologyspread import (
    DO_NOT_SCHEDULE,
    PodTopologySpread,
)
from koord_plugin_kubernetes.podtopologyspread import (
    PreFilterState as SpreadState,
)
from koord_plugin_kubernetes.tainttoleration import TaintToleration

from koord_framework.api.objects import PodInfo
from koord_framework.api.selectors import RequiredNodeAffinity
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import NodeScore, VectorFilter, VectorFilterStatuses
from koord_framework.testing import make_node
from koord_framework.testing.scheduler import SchedulerHarness

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
HOST = "kubernetes.io/hostname"
KEYS = (ZONE, RACK, HOST)
APPS = ("a", "b", "c")
NAMESPACES = ("default", "other")


def _node(rng: random.Random, i: int) -> dict[str, Any]:
    labels = {}
    if rng.random() < 0.9:
        labels[ZONE] = rng.choice(("z1", "z2", "z3"))
    if rng.random() < 0.7:
        labels[RACK] = rng.choice(("r1", "r2", "r3", "r4"))
    taints = ["dedicated=x:NoSchedule"] if rng.random() < 0.15 else None
    return make_node(
        f"n{i:02d}",
        cpu=rng.choice(("2", "4", "8")),
        memory=rng.choice(("4Gi", "8Gi")),
        pods=rng.choice((4, 8, 110)),
        labels=labels,
        taints=taints,
        unschedulable=rng.random() < 0.1,
    )


def _term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
        "topologyKey": rng.choice(KEYS),
    }
    if rng.random() < 0.2:
        term["namespaces"] = list(NAMESPACES)
    return term


def _affinity(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() < 0.4:
        return None
    aff: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        part: dict[str, Any] = {}
        if rng.random() < 0.4:
            part["requiredDuringSchedulingIgnoredDuringExecution"] = [
                _term(rng) for _ in range(rng.randint(1, 2))
            ]
        if rng.random() < 0.4:
            part["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng)}
                for _ in range(rng.randint(1, 2))
            ]
        if part:
            aff[kind] = part
    return aff or None


def _spread(rng: random.Random) -> list[dict[str, Any]] | None:
    if rng.random() < 0.3:
        return None
    out = []
    for key in rng.sample(KEYS, rng.randint(1, 2)):
        c: dict[str, Any] = {
            "maxSkew": rng.randint(1, 3),
            "topologyKey": key,
            "whenUnsatisfiable": rng.choice(("DoNotSchedule", "ScheduleAnyway")),
            "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
        }
        if rng.random() < 0.3:
            c["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
        if rng.random() < 0.3:
            c["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
        out.append(c)
    return out


def _pod(rng: random.Random, name: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": rng.choice(("100m", "500m", "1"))}}}]
    }
    if node:
        spec["nodeName"] = node
    aff = _affinity(rng)
    if aff:
        spec["affinity"] = aff
    spread = _spread(rng)
    if spread:
        spec["topologySpreadConstraints"] = spread
    if rng.random() < 0.2:
        spec["nodeSelector"] = {ZONE: rng.choice(("z1", "z2"))}
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": rng.choice(NAMESPACES),
        "labels": {"app": rng.choice(APPS)},
    }
    if node and rng.random() < 0.1:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        meta["finalizers"] = ["example.com/keep"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _world(seed: int) -> tuple[SchedulerHarness, random.Random, int]:
    rng = random.Random(seed)
    h = SchedulerHarness(
        [
            NodeUnschedulable,
            NodeName,
            TaintToleration,
            NodeAffinity,
            NodeResourcesFit,
            NodeResourcesBalancedAllocation,
            PodTopologySpread,
            InterPodAffinity,
            DefaultPreemption,
        ]
    )
    nodes = [_node(rng, i) for i in range(rng.randint(8, 24))]
    h.add(*nodes)
    count = 0
    for _ in range(rng.randint(10, 50)):
        h.add(_pod(rng, f"p{count}", rng.choice(nodes)["metadata"]["name"]))
        count += 1
    return h, rng, count


def _churn(h: SchedulerHarness, rng: random.Random, count: int) -> int:
    """Bind, delete and relabel some pods, relabel a node; returns the next pod number."""
    names = [n for n, _ in ((ni.name, ni) for ni in h.scheduler.snapshot.node_list)]
    for _ in range(rng.randint(1, 6)):
        h.add(_pod(rng, f"p{count}", rng.choice(names)))
        count += 1
    pods = [p for p in h.scheduler.pod_cache.all() if p.node_name]
    for p in rng.sample(pods, min(len(pods), rng.randint(0, 3))):
        h.cluster.delete("Pod", p.name, p.namespace)
    pods = [p for p in h.scheduler.pod_cache.all() if p.node_name]
    if pods:
        p = rng.choice(pods)
        h.cluster.patch("Pod", p.name, p.namespace, {"metadata": {"labels": {"app": rng.choice(APPS)}}})
    node = h.cluster.get("Node", rng.choice(names))
    node["metadata"]["labels"][RACK] = rng.choice(("r1", "r2", "r5"))
    h.cluster.update(node)
    return count


def _refresh(h: SchedulerHarness) -> Any:
    h.scheduler.cache.update_snapshot(h.scheduler.snapshot)
    return h.scheduler.snapshot


@pytest.mark.parametrize("seed", range(6))
def test_inter_pod_affinity_indexed_counts_agree_with_the_walk(seed: int) -> None:
    h, rng, count = _world(seed)
    plugin = h.plugin("InterPodAffinity")
    assert isinstance(plugin, InterPodAffinity)
    for _ in range(5):
        snap = _refresh(h)
        for i in range(8):
            pod = PodInfo.from_manifest(_pod(rng, f"incoming-{i}", None))
            terms = plugin._incoming_terms(pod) if _has_pod_affinity(pod) else _NO_TERMS
            ns_labels = plugin._namespace_labels(pod.namespace)
            indexed, walked = PreFilterState(terms, ns_labels), PreFilterState(terms, ns_labels)
            plugin._pre_filter_indexed(indexed, pod, snap)
            plugin._pre_filter_walk(walked, pod, snap.node_list)
            assert indexed.existing_anti == walked.existing_anti
            assert indexed.affinity == walked.affinity
            assert indexed.anti == walked.anti
            # The vectorised Filter reads the counts as arrays, the per-node one as dicts: same verdicts.
            vector_state, node_state = CycleState(), CycleState()
            _, st = plugin.pre_filter(vector_state, pod, snap.node_list)
            plugin.pre_filter(node_state, pod, snap.node_list)
            if st.is_success:
                mask = plugin.filter_all(vector_state, pod, snap.table, snap.rows).tolist()
                per_node = [plugin.filter(node_state, pod, ni).is_success for ni in snap.node_list]
                assert mask == per_node
            aff = pod.affinity or {}
            pref = "preferredDuringSchedulingIgnoredDuringExecution"
            has_constraints = bool((aff.get("podAffinity") or {}).get(pref)) or bool(
                (aff.get("podAntiAffinity") or {}).get(pref)
            )
            assert plugin._pre_score_indexed(pod, terms, ns_labels, snap) == plugin._pre_score_walk(
                pod, terms, ns_labels, has_constraints
            )
        count = _churn(h, rng, count)


@pytest.mark.parametrize("seed", range(6))
def test_pod_topology_spread_indexed_counts_agree_with_the_walk(seed: int) -> None:
    h, rng, count = _world(100 + seed)
    plugin = h.plugin("PodTopologySpread")
    assert isinstance(plugin, PodTopologySpread)
    for _ in range(5):
        snap = _refresh(h)
        for i in range(8):
            pod = PodInfo.from_manifest(_pod(rng, f"incoming-{i}", None))
            constraints = plugin.constraints_for(pod, DO_NOT_SCHEDULE)
            if not constraints:
                continue
            required = RequiredNodeAffinity.of(pod)
            indexed = SpreadState(constraints, [{} for _ in constraints])
            walked = SpreadState(constraints, [{} for _ in constraints])
            plugin._count_indexed(indexed, pod, required, snap)
            plugin._count_walk(walked, pod, required, snap.node_list)
            assert indexed.tp_counts == walked.tp_counts
        count = _churn(h, rng, count)


@pytest.mark.parametrize("seed", range(4))
def test_whole_table_caches_agree_with_direct_evaluation(seed: int) -> None:
    h, rng, count = _world(200 + seed)
    fit = h.plugin("NodeResourcesFit")
    balanced = h.plugin("NodeResourcesBalancedAllocation")
    preemption = h.plugin("DefaultPreemption")
    assert isinstance(fit, NodeResourcesFit) and isinstance(balanced, NodeResourcesBalancedAllocation)
    assert isinstance(preemption, DefaultPreemption)
    for _ in range(6):
        snap = _refresh(h)
        table, rows = snap.table, snap.rows
        for i in range(4):
            pod = PodInfo.from_manifest(_pod(rng, f"incoming-{i}", None))
            state = CycleState()
            fit.pre_filter(state, pod, snap.node_list)
            fit.pre_score(state, pod, snap.node_list)
            balanced.pre_score(state, pod, snap.node_list)
            req = fit._request(state, pod)
            assert fit.filter_all(state, pod, table, rows).tolist() == fit._fits(table, rows, req).tolist()
            shape = fit._score_shape(state, pod)
            assert fit.score_all(state, pod, table, rows).tolist() == fit._scores(table, rows, shape).tolist()
            b_shape = balanced._score_shape(state, pod)
            if b_shape is not None:
                got = balanced.score_all(state, pod, table, rows).tolist()
                assert got == balanced._scores(table, rows, b_shape).tolist()
            lowest = preemption._lowest_priorities(snap.node_list)
            assert lowest == [
                min((p.priority_value for p in ni.pods.values()), default=2**63 - 1) for ni in snap.node_list
            ]
        count = _churn(h, rng, count)


@pytest.mark.parametrize("seed", range(6))
def test_filter_statuses_equal_filter_node_by_node(seed: int) -> None:
    h, rng, _ = _world(300 + seed)
    snap = _refresh(h)
    checked = 0
    for i in range(10):
        pod = PodInfo.from_manifest(_pod(rng, f"incoming-{i}", rng.choice((None, "n01", "n99"))))
        state = CycleState()
        h.framework.run_pre_filter(state, pod)
        for f in h.framework.filters:
            plugin = f.plugin
            if f.name in state.skip_filter or not isinstance(plugin, VectorFilterStatuses):
                continue
            assert isinstance(plugin, VectorFilter)
            mask = np.asarray(plugin.filter_all(state, pod, snap.table, snap.rows))
            rejected = snap.rows[~mask]
            bulk = plugin.filter_statuses(state, pod, snap.table, rejected)
            per_node = [plugin.filter(state, pod, snap.by_row[r]) for r in rejected.tolist()]
            assert [(s.code, s.reasons) for s in bulk] == [(s.code, s.reasons) for s in per_node]
            checked += len(bulk)
    assert checked > 0


@pytest.mark.parametrize("seed", range(5))
def test_vectorised_normalize_equals_per_node_normalize(seed: int) -> None:
    rng = random.Random(seed)
    h = SchedulerHarness([TaintToleration, NodeAffinity, InterPodAffinity])
    for name in ("TaintToleration", "NodeAffinity", "InterPodAffinity"):
        plugin: Any = h.plugin(name)
        for _ in range(20):
            n = rng.randint(0, 12)
            raw = [rng.choice((0, 0, rng.randint(-50, 300))) for _ in range(n)]
            state = CycleState()
            if rng.random() < 0.8:
                state.write(_PRE_SCORE_KEY, {"k": {"v": 1}})
            scores = [NodeScore(f"n{i}", v) for i, v in enumerate(raw)]
            plugin.normalize_score(state, None, scores)
            arr = np.array(raw, dtype=np.int64)
            got = plugin.normalize_all(state, None, np.arange(n, dtype=np.int64), arr.copy())
            assert np.asarray(got).tolist() == [s.score for s in scores], (name, raw)


def test_priority_sort_key_orders_as_less() -> None:
    from koord_plugin_kubernetes.queuesort import PrioritySort

    from koord_framework.scheduler.interface import QueuedPodInfo

    rng = random.Random(3)
    plugin = PrioritySort(None, None)  # type: ignore[arg-type]
    infos = []
    for i in range(60):
        manifest = _pod(rng, f"q{i}", None)
        if rng.random() < 0.7:
            manifest["spec"]["priority"] = rng.choice((-5, 0, 10, 1000))
        infos.append(QueuedPodInfo(PodInfo.from_manifest(manifest), float(rng.randint(0, 5)), 0, 0.0))
    for a in infos:
        for b in infos:
            assert plugin.less(a, b) == (plugin.sort_key(a) < plugin.sort_key(b))


def _preemption_run(hopeless: bool) -> tuple[str, Any]:
    from koord_framework.testing import make_pod

    h = SchedulerHarness([TaintToleration, NodeResourcesFit, DefaultPreemption])
    for i in range(12):
        h.add(make_node(f"n{i}", cpu="2", taints=["x=y:NoSchedule"] if i % 3 == 0 else None))
        h.add(make_pod(f"r{i}", cpu="1500m", node=f"n{i}", priority=100))
    plugin = h.plugin("DefaultPreemption")
    assert isinstance(plugin, DefaultPreemption)
    if not hopeless:
        plugin._hopeless = lambda *args: None  # type: ignore[method-assign]
    messages = []
    for i in range(3):
        # Nobody to preempt: every node's pods are as important as the incoming one.
        result = h.schedule_one(make_pod(f"big{i}", cpu="1", priority=100))
        assert result.node is None
        messages.append(result.message)
    return "\n".join(messages), plugin._rng.getstate()


def test_preemption_shortcut_gives_the_dry_run_answer() -> None:
    fast, fast_rng = _preemption_run(hopeless=True)
    slow, slow_rng = _preemption_run(hopeless=False)
    assert fast == slow and fast_rng == slow_rng
    assert "No preemption victims found for incoming pod" in fast
    assert "Preemption is not helpful for scheduling" in fast
