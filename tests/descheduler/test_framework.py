"""The descheduler framework: profiles, call order, the evictor proxy, dry run, cycles and intervals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.descheduler import (
    BalancePlugin,
    DeschedulePlugin,
    Descheduler,
    DeschedulerPlugin,
    EvictOptions,
    FilterPlugin,
    PreEvictionFilterPlugin,
    ProfileSpec,
    Status,
)
from koord_framework.descheduler.descheduler import CLUSTER_TOO_SMALL
from koord_framework.errors import ValidationError
from koord_framework.metrics import render
from koord_framework.testing.builders import make_node, make_pod
from koord_framework.testing.descheduler import DeschedulerHarness, RecordingEvictor

T0 = 1_704_067_200.0
CALLS: list[str] = []


class EvictAll(DeschedulerPlugin, DeschedulePlugin):
    """Evicts every pod of every node it is given that the evictor's filters admit."""

    name: ClassVar[str] = "EvictAll"

    def deschedule(self, nodes: Sequence[NodeRecord]) -> Status | None:
        CALLS.append(f"{self.handle.profile_name}:Deschedule:{','.join(n.name for n in nodes)}")
        ev = self.handle.evictor()
        for node in nodes:
            for pod in self.handle.pods_on_node(node.name):
                if ev.filter(pod) and ev.pre_eviction_filter(pod):
                    ev.evict(pod, EvictOptions(reason=f"test evicts {pod.name}"))
        return None


class Recorder(DeschedulerPlugin, BalancePlugin):
    name: ClassVar[str] = "Recorder"

    def balance(self, nodes: Sequence[NodeRecord]) -> Status | None:
        CALLS.append(f"{self.handle.profile_name}:Balance:{','.join(n.name for n in nodes)}")
        return None


class Broken(DeschedulerPlugin, BalancePlugin):
    name: ClassVar[str] = "Broken"

    def balance(self, nodes: Sequence[NodeRecord]) -> Status | None:
        raise RuntimeError("boom")


class OnlyLabelled(DeschedulerPlugin, FilterPlugin, PreEvictionFilterPlugin):
    name: ClassVar[str] = "OnlyLabelled"

    def filter(self, pod: PodInfo) -> bool:
        return pod.labels.get("evictable") == "yes"

    def pre_eviction_filter(self, pod: PodInfo) -> bool:
        return pod.name != "last-minute"


def _spec(name: str, **points: tuple[str, ...]) -> ProfileSpec:
    classes = {c.name: c for c in (EvictAll, Recorder, Broken, OnlyLabelled, RecordingEvictor)}
    full = {"deschedule": (), "balance": (), "evict": ("RecordingEvictor",), "filter": ("RecordingEvictor",)}
    full.update(points)
    return ProfileSpec(name=name, points=full, classes=classes)


def _cluster(*objs: dict[str, object]) -> MemoryCluster:
    cluster = MemoryCluster(VirtualClock(T0))
    for obj in objs:
        cluster.create(dict(obj))
    return cluster


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


# --- profiles ----------------------------------------------------------------------------------------------
def test_exactly_one_evict_plugin() -> None:
    cluster = _cluster()
    with pytest.raises(ValidationError, match="no evict plugin is enabled"):
        Descheduler([_spec("p", evict=())], cluster)
    with pytest.raises(ValidationError, match="does not extend EvictPlugin"):
        Descheduler([_spec("p", evict=("RecordingEvictor", "Recorder"))], cluster)


def test_plugin_must_implement_its_point_and_appear_once() -> None:
    cluster = _cluster()
    with pytest.raises(ValidationError, match='plugin "Recorder" does not extend DeschedulePlugin'):
        Descheduler([_spec("p", deschedule=("Recorder",))], cluster)
    with pytest.raises(ValidationError, match='already registered as "BalancePlugin"'):
        Descheduler([_spec("p", balance=("Recorder", "Recorder"))], cluster)


def test_call_order_deschedule_of_all_profiles_then_balance() -> None:
    cluster = _cluster(make_node("a", labels={"pool": "x"}), make_node("b", labels={"pool": "y"}))
    first = _spec("first", deschedule=("EvictAll",), balance=("Recorder",))
    second = ProfileSpec(
        **{**first.__dict__, "name": "second", "node_selector": {"matchLabels": {"pool": "y"}}}
    )
    d = Descheduler([first, second], cluster)
    report = d.run_once()
    assert report.errors == []
    assert CALLS == [
        "first:Deschedule:a,b",
        "second:Deschedule:b",
        "first:Balance:a,b",
        "second:Balance:b",
    ]


def test_cycle_needs_two_ready_nodes_and_honours_the_node_selector() -> None:
    cluster = _cluster(make_node("a"), make_node("b", ready=False))
    d = Descheduler([_spec("p", balance=("Recorder",))], cluster)
    assert d.run_once().errors == [CLUSTER_TOO_SMALL]
    assert CALLS == []
    cluster.create(make_node("c", labels={"zone": "z1"}))
    cluster.create(make_node("d", labels={"zone": "z1"}))
    d2 = Descheduler(
        [_spec("p", balance=("Recorder",))], cluster, node_selector={"matchLabels": {"zone": "z1"}}
    )
    assert d2.run_once().errors == []
    assert CALLS == ["p:Balance:c,d"]


def test_plugin_error_is_reported_and_ends_the_cycle() -> None:
    cluster = _cluster(make_node("a"), make_node("b"))
    d = Descheduler([_spec("p", balance=("Broken", "Recorder"))], cluster)
    report = d.run_once()
    assert report.errors == ["profile p: Broken: RuntimeError: boom"]
    # Koordinator runs the remaining plugins of the profile, then aborts the cycle with the aggregate.
    assert CALLS == ["p:Balance:a,b"]
    assert (
        "koord_descheduler_plugin_duration_seconds_count"
        '{extension_point="Balance",plugin="Broken",status="Error"} 1.0' in render(d.services.registry)
    )


# --- the evictor proxy ------------------------------------------------------------------------------------
def _pods_cluster() -> DeschedulerHarness:
    harness = DeschedulerHarness([EvictAll, OnlyLabelled], now=T0)
    harness.add(
        make_node("a"),
        make_node("b"),
        make_pod("keep", node="a", owner_kind="ReplicaSet"),
        make_pod("go", node="a", owner_kind="ReplicaSet", labels={"evictable": "yes"}),
        make_pod("last-minute", node="b", owner_kind="ReplicaSet", labels={"evictable": "yes"}),
    )
    return harness


def test_filters_and_pre_eviction_filters_decide_what_is_evicted() -> None:
    harness = _pods_cluster()
    report = harness.run_once()
    assert [(e.pod, e.plugin, e.reason, e.result) for e in report.evictions] == [
        ("default/go", "EvictAll", "test evicts go", "evicted")
    ]
    assert [e.pod for e in harness.recorder.evictions] == ["default/go"]
    assert harness.recorder.evictions[0].plugin == "EvictAll"


def test_limiter_resets_every_cycle() -> None:
    harness = DeschedulerHarness([EvictAll], max_total=1, now=T0)
    harness.add(
        make_node("a"),
        make_node("b"),
        *[make_pod(f"p{i}", node="a", owner_kind="ReplicaSet") for i in range(3)],
    )
    first = harness.run_once()
    assert len(first.evictions) == 1
    assert [f.result for f in first.failures] == ["refused", "refused"]
    second = harness.run_once()
    assert len(second.evictions) == 1  # the recording evictor leaves pods in place: a new cycle, a new budget


def test_dry_run_counts_but_never_calls_the_evict_plugin() -> None:
    harness = DeschedulerHarness([EvictAll], dry_run=True, max_total=2, now=T0)
    harness.add(
        make_node("a"),
        make_node("b"),
        *[make_pod(f"p{i}", node="a", owner_kind="ReplicaSet") for i in range(3)],
    )
    report = harness.run_once()
    assert [e.result for e in report.evictions] == ["dry-run", "dry-run"]
    assert [f.result for f in report.failures] == ["refused"]  # the limiter still applies
    assert harness.recorder.evictions == []


def test_evictions_are_counted_in_metrics() -> None:
    harness = _pods_cluster()
    harness.run_once()
    text = render(harness.descheduler.services.registry)
    assert (
        "koord_descheduler_pods_evicted_total"
        '{namespace="default",node="a",result="success",strategy="EvictAll"} 1.0' in text
    )


def test_run_repeats_every_interval_on_the_clock() -> None:
    harness = DeschedulerHarness([Recorder], descheduling_interval=10, now=T0)
    harness.add(make_node("a"), make_node("b"))
    reports = harness.run(3)
    assert [r.round for r in reports] == [1, 2, 3]
    assert [r.time - T0 for r in reports] == [0, 10, 20]
