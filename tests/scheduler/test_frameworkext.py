"""Koordinator's framework extensions (``koord_framework.scheduler.frameworkext``) as the runner applies them.

* A transformer's ``NodeRestore`` changes what Filter and Score see for that pod only, identically for the
  per-node and the vectorised forms (restored rows are answered per node), and never the cache.
* A profile whose plugins implement no extension schedules exactly as before.
* The reservation hooks run over every plugin that implements them: a ReservationScorePlugin steers the
  nomination, a ReservationFilterPlugin vetoes a reservation.
* The batched PreBind patch of a reserve pod lands on its Reservation, written only by the plugins that
  implement ``ReservationPreBindPlugin``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest
from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.testing import make_reservation

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.framework import PluginLayout
from koord_framework.scheduler.frameworkext import (
    NodeRestore,
    PreFilterTransformer,
    ReservationFilterPlugin,
    ReservationInfo,
    ReservationPreAllocationRestorePlugin,
    ReservationPreBindPlugin,
    ReservationScorePlugin,
    has_pre_allocation_nomination,
    nominated_pre_allocation,
    nominated_reservation,
    set_nominated_reservation,
    set_pre_allocation_nominator,
    set_reservation_nominator,
)
from koord_framework.scheduler.interface import (
    FilterPlugin,
    NodeInfo,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    SchedulerPlugin,
    VectorFilter,
)
from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler
from koord_framework.scheduler.status import Code, Status
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort, SchedulerHarness

from .test_scheduling import FitPerNode, FitVector, placements, random_cluster

GIVE = "test.koord.sh/give-back"


class GiveBack(SchedulerPlugin, PreFilterTransformer, PreFilterPlugin):
    """For a pod labelled ``give-back: <pod name>``, takes that bound pod off its node for the pod's cycle."""

    name: ClassVar[str] = "GiveBack"

    def before_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[NodeRestore | None, Status]:
        wanted = pod.labels.get(GIVE)
        if not wanted:
            return None, Status()
        restore = NodeRestore()
        for ni in self.handle.node_infos():
            for other in ni.pods.values():
                if other.name == wanted:
                    restore.add(ni.name, other)
        return restore, Status()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        return None, Status()


def _run(plugins: list[Any], objects: list[dict[str, Any]], explain: bool = True) -> Scheduler:
    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    for o in objects:
        cluster.create(o)
    layout = PluginLayout.every_point([*plugins, HarnessQueueSort, HarnessBinder])
    s = Scheduler(cluster, [ProfileSpec("default-scheduler", layout)], explain=explain, record_outcomes=True)
    s.run_until_idle()
    return s


def _restore_cluster() -> list[dict[str, Any]]:
    nodes = [make_node(f"n{i}", cpu="4", memory="8Gi") for i in range(6)]
    hogs = [make_pod(f"hog{i}", cpu="3", memory="1Gi", node=f"n{i}") for i in range(6)]
    # Each pod fits only where its named hog is given back.
    pending = [make_pod(f"p{i}", cpu="2", memory="1Gi", labels={GIVE: f"hog{(i * 5) % 6}"}) for i in range(3)]
    return nodes + hogs + pending


@pytest.mark.parametrize("fit", [FitPerNode, FitVector])
def test_a_restore_is_seen_by_filter_and_score_for_that_pod_only(fit: Any) -> None:
    s = _run([GiveBack, fit], _restore_cluster())
    got = {o.pod.name: o.node for o in s.outcomes.values()}
    assert got == {"p0": "n0", "p1": "n5", "p2": "n4"}
    # The cache still counts every hog: the restore lived for one cycle.
    counted = {ni.name: sorted(p.name for p in ni.pods.values()) for ni in s.cache.node_infos()}
    assert counted["n0"] == ["hog0", "p0"]


def test_vectorised_and_per_node_forms_agree_under_restores() -> None:
    vec = _run([GiveBack, FitVector], _restore_cluster())
    per = _run([GiveBack, FitPerNode], _restore_cluster())
    assert placements(vec) == placements(per)
    for uid, o in vec.outcomes.items():
        other = per.outcomes[uid]
        assert o.scores == other.scores and o.totals == other.totals
        assert {n: (st.code, st.reasons) for n, st in (o.filter or {}).items()} == {
            n: (st.code, st.reasons) for n, st in (other.filter or {}).items()
        }


class EvenOnly(SchedulerPlugin, FilterPlugin):
    """Rejects the odd-numbered nodes (``n1``, ``n3``, ...): it drops rows ahead of restored ones."""

    name: ClassVar[str] = "EvenOnly"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return Status.unschedulable("odd node") if int(node.name[1:]) % 2 else Status()


class EvenOnlyVector(EvenOnly, VectorFilter):
    def filter_all(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array) -> BoolArray:
        return np.array([int(table.names[int(r)][1:]) % 2 == 0 for r in rows.tolist()], dtype=np.bool_)


def test_restored_rows_are_found_after_an_earlier_filter_drops_rows() -> None:
    """The framework tracks where the restored rows sit while vectorised filters narrow the rows."""
    objects = _restore_cluster()
    vec = _run([GiveBack, EvenOnlyVector, FitVector], objects)
    per = _run([GiveBack, EvenOnly, FitPerNode], _restore_cluster())
    assert placements(vec) == placements(per)
    got = {o.pod.name: o.node for o in vec.outcomes.values()}
    assert got == {"p0": "n0", "p1": None, "p2": "n4"}  # p1's hog is on n5, which EvenOnly rejects
    for uid, o in vec.outcomes.items():
        other = per.outcomes[uid]
        assert o.scores == other.scores and o.totals == other.totals
        assert {n: (st.code, st.reasons) for n, st in (o.filter or {}).items()} == {
            n: (st.code, st.reasons) for n, st in (other.filter or {}).items()
        }


@pytest.mark.parametrize("seed", [0, 1])
def test_a_transformer_that_restores_nothing_changes_nothing(seed: int) -> None:
    objs, pending = random_cluster(seed)
    with_t = _run([GiveBack, FitVector], objs + pending)
    objs, pending = random_cluster(seed)
    without = _run([FitVector], objs + pending)
    assert placements(with_t) == placements(without)


# --- reservation hooks ------------------------------------------------------------------------------
class PreferByName(SchedulerPlugin, ReservationScorePlugin, ReservationFilterPlugin):
    """Scores reservation ``r-b`` highest and vetoes ``r-veto``."""

    name: ClassVar[str] = "PreferByName"

    def score_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node_name: str
    ) -> tuple[int, Status]:
        return (100 if reservation.name == "r-b" else 0), Status()

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, reservation: ReservationInfo, node: NodeInfo
    ) -> Status:
        if reservation.name == "r-veto":
            return Status(Code.UNSCHEDULABLE, ("vetoed",))
        return Status()


def test_reservation_score_and_filter_hooks_steer_the_nomination() -> None:
    h = SchedulerHarness(
        [Reservation, NodeResourcesFit, PreferByName, DefaultBinder], now="2024-01-01T00:00:00Z"
    )
    h.add(make_node("n1", cpu="16", memory="32Gi"), make_node("n2", cpu="16", memory="32Gi"))
    for name in ("r-a", "r-b"):
        h.add(make_reservation(name, cpu="2", owner_labels={"app": "x"}, node="n1", allocate_once=False))
    h.add(make_reservation("r-veto", cpu="2", owner_labels={"app": "y"}, node="n2", allocate_once=False))
    h.add(make_pod("x", cpu="1", memory="1Gi", labels={"app": "x"}))
    h.add(make_pod("y", cpu="1", memory="1Gi", labels={"app": "y"}))
    h.run_until_idle()
    assert (
        h.result(make_pod("x")).annotations["scheduling.koordinator.sh/reservation-allocated"].find('"r-b"')
        > 0
    )
    y = h.result(make_pod("y"))
    # The only reservation y could use is vetoed: y runs beside it, on the node's own capacity.
    assert "scheduling.koordinator.sh/reservation-allocated" not in y.annotations


class StampReservation(SchedulerPlugin, PreBindPlugin, ReservationPreBindPlugin):
    name: ClassVar[str] = "StampReservation"

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        state.pod_mutation.annotations["test.koord.sh/pod-stamp"] = node_name
        return Status()

    def pre_bind_reservation(self, state: CycleState, reservation: Any, node_name: str) -> Status:
        state.pod_mutation.annotations["test.koord.sh/reservation-stamp"] = reservation["metadata"]["name"]
        return Status()


class PodOnlyStamp(SchedulerPlugin, PreBindPlugin):
    name: ClassVar[str] = "PodOnlyStamp"

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        state.pod_mutation.annotations["test.koord.sh/pod-only"] = "yes"
        return Status()


def test_reserve_pod_prebind_patch_lands_on_the_reservation() -> None:
    h = SchedulerHarness(
        [Reservation, NodeResourcesFit, StampReservation, PodOnlyStamp, DefaultBinder],
        now="2024-01-01T00:00:00Z",
    )
    h.add(make_node("n1", cpu="8", memory="8Gi"), make_reservation("r", cpu="1"))
    h.add(make_pod("plain", cpu="1", memory="1Gi"))
    h.run_until_idle()
    r = h.cluster.get("Reservation", "r")
    assert r["status"]["phase"] == "Available"
    assert r["metadata"]["annotations"] == {"test.koord.sh/reservation-stamp": "r"}
    pod = h.cluster.get("Pod", "plain", "default")
    assert pod["metadata"]["annotations"]["test.koord.sh/pod-stamp"] == "n1"
    assert pod["metadata"]["annotations"]["test.koord.sh/pod-only"] == "yes"


# --- pre-allocation restore hooks (Koordinator's ReservationPreAllocationRestorePlugin) -------------------
class RecordPreAllocation(SchedulerPlugin, ReservationPreAllocationRestorePlugin):
    """Records the hook calls; fails them when told to (``TestRunReservationExtensionPreRestore
    ReservationPreAllocation``'s fake plugin)."""

    name: ClassVar[str] = "RecordPreAllocation"
    pre_restore_error: ClassVar[str] = ""
    restore_error: ClassVar[str] = ""
    calls: ClassVar[list[tuple[str, str, tuple[str, ...], str]]] = []

    def pre_restore_reservation_pre_allocation(
        self, state: CycleState, reservation: ReservationInfo
    ) -> Status:
        self.calls.append(("pre", reservation.name, (), ""))
        if self.pre_restore_error:
            raise RuntimeError(self.pre_restore_error)
        return Status()

    def restore_reservation_pre_allocation(
        self,
        state: CycleState,
        reservation: ReservationInfo,
        pre_allocatable: Sequence[PodInfo],
        node: NodeInfo,
    ) -> Status:
        self.calls.append(("restore", reservation.name, tuple(p.name for p in pre_allocatable), node.name))
        if self.restore_error:
            return Status(Code.ERROR, (self.restore_error,))
        return Status()


def _pre_allocating_cluster() -> list[dict[str, Any]]:
    r = make_reservation(
        "r", cpu="2", owner_labels={"app": "a"}, allocate_once=False, allocate_policy="Restricted"
    )
    r["spec"]["preAllocation"] = True
    return [
        make_node("n1", cpu="2", memory="8Gi"),
        make_node("n2", cpu="2", memory="8Gi"),
        make_pod("old", cpu="2", memory="1Gi", node="n1", phase="Running", labels={"app": "a"}),
        r,
    ]


@pytest.mark.parametrize(
    ("pre_error", "error", "placed"),
    [
        pytest.param("", "", True, id="store successfully"),
        pytest.param("pre restore err", "", False, id="pre restore err"),
        pytest.param("", "restore err", False, id="restore err"),
    ],
)
def test_pre_allocation_restore_hooks_run_over_the_candidates(
    pre_error: str, error: str, placed: bool
) -> None:
    """``TestRunReservationExtensionPreRestoreReservationPreAllocation`` through the Reservation plugin:
    once per cycle, then per node with the candidates there; a failing hook fails the cycle, named."""
    RecordPreAllocation.calls = []
    RecordPreAllocation.pre_restore_error = pre_error
    RecordPreAllocation.restore_error = error
    h = SchedulerHarness(
        [Reservation, RecordPreAllocation, NodeResourcesFit, DefaultBinder], now="2024-01-01T00:00:00Z"
    )
    h.add(*_pre_allocating_cluster())
    h.run_until_idle()
    calls = RecordPreAllocation.calls
    assert calls[0] == ("pre", "r", (), "")
    if pre_error:
        assert all(c[0] == "pre" for c in calls)
    else:
        assert calls[1] == ("restore", "r", ("old",), "n1")
    status = h.cluster.get("Reservation", "r").get("status") or {}
    assert (status.get("phase") == "Available") is placed
    if not placed:
        uid = h.cluster.get("Reservation", "r")["metadata"]["uid"]
        assert "RecordPreAllocation" in h.scheduler.outcomes[uid].message


def test_nominations_are_asked_of_the_nominator_once() -> None:
    """The nominator registered in BeforePreFilter answers the first reader; later readers (and the
    nominator's own Reserve) get the same answer; a reader asking while it nominates gets nothing."""
    state = CycleState()
    asked: list[str] = []
    pod = PodInfo.from_manifest(make_pod("p", node="n1"))
    r = ReservationInfo("r", "uid-r", "n1", "Available", {"cpu": 1000})

    def nominate_pods(node: str) -> list[PodInfo]:
        asked.append(node)
        assert nominated_pre_allocation(state, node) == ()  # no re-entry
        return [pod]

    assert nominated_pre_allocation(state, "n1") == ()
    set_pre_allocation_nominator(state, nominate_pods)
    assert nominated_pre_allocation(state, "n1") == (pod,)
    assert nominated_pre_allocation(state, "n1") == (pod,)
    assert has_pre_allocation_nomination(state, "n1") and asked == ["n1"]

    def nominate(node: str) -> ReservationInfo | None:
        asked.append(node)
        assert nominated_reservation(state, node) is None  # no re-entry
        set_nominated_reservation(state, node, r if node == "n1" else None)
        return r if node == "n1" else None

    set_reservation_nominator(state, nominate)
    assert nominated_reservation(state, "n1") is r
    assert nominated_reservation(state, "n1") is r
    assert nominated_reservation(state, "n2") is None
    assert asked == ["n1", "n1", "n2"]
