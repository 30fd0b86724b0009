"""The shortcuts taken for speed give the results of the straightforward paths.

* ``find_feasible`` runs the vectorised filters over a prefix of the rotated candidates first: the nodes
  examined, found and their reasons equal a node-by-node search in rotated order.
* ``VectorFilterStatuses`` answers for all rejected rows at once: placements, messages and per-node
  statuses equal those of the per-node form, also when a per-node plugin precedes it, and a bulk answer
  that contradicts ``filter_all`` is handled as ``filter`` would be.
* The snapshot's change log, ``RowStatuses`` and ``NodeToStatus.codes`` say what they should.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.clock import VirtualClock
from koord_framework.scheduler.cache import SchedulerCache, Snapshot
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.framework import CodedStatuses, RowStatuses, VectorFilterStatuses
from koord_framework.scheduler.scheduler import NodeToStatus
from koord_framework.scheduler.status import Code, Status
from koord_framework.scheduler.table import Int64Array, NodeTable
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

from .test_scheduling import (
    RESOURCES,
    FitPerNode,
    FitVector,
    ZoneFilter,
    placements,
    random_cluster,
    run_cluster,
)


class FitStatuses(FitVector, VectorFilterStatuses):
    """FitVector with its rejections' statuses computed for all rows at once (shared Status objects)."""

    _by_reason: ClassVar[dict[str, Status]] = {
        r: Status.unschedulable(f"Insufficient {r}") for r in RESOURCES
    }

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> Sequence[Status]:
        out: list[Status] = [Status()] * rows.size
        for r in reversed(RESOURCES):  # the first failing resource wins, as in ``filter``
            want = pod.requests.get(r, 0)
            if want:
                bad = table.requested_of(r)[rows] + want > table.allocatable_of(r)[rows]
                for i in np.flatnonzero(bad).tolist():
                    out[i] = self._by_reason[r]
        return out


class FitCoded(FitVector, VectorFilterStatuses):
    """FitStatuses answering with reason codes (``CodedStatuses``) instead of a list of statuses."""

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> CodedStatuses:
        codes = np.zeros(rows.size, dtype=np.int64)  # 0 passes, 1 + r: resource r is short
        for r, name in reversed(list(enumerate(RESOURCES))):  # the first failing resource wins
            want = pod.requests.get(name, 0)
            if want:
                codes[table.requested_of(name)[rows] + want > table.allocatable_of(name)[rows]] = 1 + r
        return CodedStatuses.from_codes(
            codes, lambda c: Status() if c == 0 else FitStatuses._by_reason[RESOURCES[c - 1]]
        )


class BadIndexStatuses(FitVector, VectorFilterStatuses):
    """Its coded answer points past its distinct statuses."""

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> CodedStatuses:
        return CodedStatuses(np.full(rows.size, 5, dtype=np.int64), [Status.unschedulable("x")])


class LyingFilter(FitVector):
    """Its per-node ``filter`` accepts every node (contradicting ``filter_all``)."""

    def filter(self, state: CycleState, pod: PodInfo, node: Any) -> Status:
        return Status()


class LyingStatuses(FitVector, VectorFilterStatuses):
    """Its bulk statuses claim every rejected node passes (contradicting ``filter_all``)."""

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Int64Array
    ) -> Sequence[Status]:
        return [Status()] * rows.size


def _outcomes(s: Any) -> dict[str, Any]:
    return {
        uid: {n: (st.code, st.plugin, st.reasons) for n, st in (o.filter or {}).items()}
        for uid, o in s.outcomes.items()
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("explain", [False, True])
def test_bulk_statuses_give_the_per_node_results(seed: int, explain: bool) -> None:
    bulk = run_cluster([FitStatuses, ZoneFilter], seed, explain=explain)
    per = run_cluster([FitPerNode, ZoneFilter], seed, explain=explain)
    assert placements(bulk) == placements(per)
    assert _outcomes(bulk) == _outcomes(per)
    assert any(o.status == "Unschedulable" for o in bulk.outcomes.values())
    # A per-node plugin before the vectorised one: the chain starts at the beginning (no bulk answer).
    first = run_cluster([ZoneFilter, FitStatuses], seed, explain=explain)
    assert placements(first) == placements(run_cluster([ZoneFilter, FitPerNode], seed, explain=explain))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("explain", [False, True])
def test_coded_statuses_give_the_per_node_results(seed: int, explain: bool) -> None:
    coded = run_cluster([FitCoded, ZoneFilter], seed, explain=explain)
    per = run_cluster([FitPerNode, ZoneFilter], seed, explain=explain)
    assert placements(coded) == placements(per)
    assert _outcomes(coded) == _outcomes(per)
    assert any(o.status == "Unschedulable" for o in coded.outcomes.values())


def test_coded_statuses_read_as_a_sequence() -> None:
    a, b = Status.unschedulable("a"), Status.unschedulable("b")
    coded = CodedStatuses.from_codes(np.array([7, 3, 7, 7, 3], dtype=np.int64), {3: a, 7: b}.__getitem__)
    assert len(coded) == 5
    assert list(coded) == [b, a, b, b, a]
    assert coded[1] is a and coded[-1] is a
    assert list(coded[1:3]) == [a, b]
    assert coded.distinct == [a, b]  # one status per distinct code, in code order
    empty = CodedStatuses.from_codes(np.zeros(0, dtype=np.int64), lambda c: a)
    assert len(empty) == 0 and empty.distinct == []


def test_a_coded_answer_pointing_outside_its_statuses_is_an_error() -> None:
    s = run_cluster([BadIndexStatuses, ZoneFilter], 0)
    messages = [o.message for o in s.outcomes.values() if o.status == "Unschedulable"]
    assert messages and all("gave an index outside its 1 statuses" in m for m in messages)


def test_bulk_statuses_that_contradict_filter_all_are_checked_per_node() -> None:
    # Bulk statuses stand for ``filter``: saying "passes" where filter_all rejected is the same
    # disagreement as a lying ``filter``, settled the same way (later plugins, else an Error naming it).
    for explain in (False, True):
        bulk = run_cluster([LyingStatuses, ZoneFilter], 3, explain=explain)
        per_node = run_cluster([LyingFilter, ZoneFilter], 3, explain=explain)
        assert placements(bulk) == placements(per_node)
        assert _outcomes(bulk) == _outcomes(per_node)
        assert any("but filter accepts it" in o.message for o in bulk.outcomes.values())


def _reference_search(
    h: SchedulerHarness, pod: PodInfo, start: int, k: int
) -> tuple[list[int], int, dict[str, tuple[str, tuple[str, ...]]]]:
    """Node by node in rotated order until k fit: rows found, candidates examined, reasons of rejections."""
    snap = h.scheduler.snapshot
    rows = snap.rows.tolist()
    start %= len(rows)
    order = rows[start:] + rows[:start]
    k = min(max(k, 1), len(order))
    found: list[int] = []
    reasons: dict[str, tuple[str, tuple[str, ...]]] = {}
    examined = len(order)
    for i, row in enumerate(order):
        ni = snap.by_row[row]
        assert ni is not None
        s = h.framework.run_filter(CycleState(), pod, ni)
        if s.is_success:
            found.append(row)
            if len(found) == k:
                examined = i + 1
                break
        else:
            reasons[ni.name] = (s.plugin, s.reasons)
    return found, examined, reasons


def test_find_feasible_equals_a_node_by_node_search() -> None:
    rng = random.Random(5)
    for trial in range(40):
        objs, pending = random_cluster(500 + trial, nodes=rng.randrange(5, 120), pods=4)
        h = SchedulerHarness([FitStatuses, ZoneFilter])
        h.add(*objs)
        h.scheduler.cache.update_snapshot(h.scheduler.snapshot)
        snap = h.scheduler.snapshot
        for manifest in pending:
            pod = PodInfo.from_manifest(manifest)
            start, k = rng.randrange(200), rng.choice((1, 2, 5, 30, 1000))
            want_reasons = rng.random() < 0.5
            out = h.framework.find_feasible(
                CycleState(), pod, snap.rows, start=start, num_to_find=k, want_reasons=want_reasons
            )
            found, examined, reasons = _reference_search(h, pod, start, k)
            assert out.feasible.tolist() == found
            assert out.processed == examined
            if want_reasons or not found:
                assert {n: (s.plugin, s.reasons) for n, s in out.statuses.items()} == reasons


def test_snapshot_change_log_names_the_rows_that_changed() -> None:
    cache = SchedulerCache(VirtualClock(0.0))
    snap = Snapshot()
    for i in range(4):
        cache.add_node(NodeRecord.from_manifest(make_node(f"n{i}")))
    cache.update_snapshot(snap)
    seq = snap.change_seq
    assert snap.rows_changed_since(seq) == []
    pod = PodInfo.from_manifest(make_pod("p", cpu="1", node="n2"))
    cache.add_pod(pod)
    cache.update_snapshot(snap)
    assert snap.rows_changed_since(seq) == [snap.table.index["n2"]]
    cache.remove_node("n3")
    cache.update_snapshot(snap)
    assert set(snap.rows_changed_since(seq) or []) == {snap.table.index["n2"], snap.table.index["n3"]}
    assert snap.rows_changed_since(-1) is None  # before the start of the log: rebuild
    for i in range(5000):  # the log stays bounded; readers that fell behind are told to rebuild
        snap._log_change(i % 4)
    assert len(snap._changes) <= 4 * 1024 + 1
    assert snap.rows_changed_since(seq) is None


def test_row_statuses_is_a_mapping_over_arrays() -> None:
    table = NodeTable()
    for name in ("a", "b", "c", "d"):
        table.add_node(name, {"cpu": 1000})
    cpu = Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "Fit")
    taint = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("taint",), "Taint")
    rs = RowStatuses(table, np.array([3, 0, 1]), np.array([1, 0, 1]), [cpu, taint])
    assert list(rs) == ["d", "a", "b"] and len(rs) == 3
    assert rs["a"] is cpu and rs["d"] is taint and "c" not in rs
    with pytest.raises(KeyError):
        rs["zzz"]
    assert rs.counts() == [(cpu, 1), (taint, 2)]
    assert rs.codes(np.array([0, 1, 2, 3])).tolist() == [2, 3, -1, 3]
    nts = NodeToStatus(rs, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("absent",)), ["a", "b", "c", "d"])
    assert nts.codes(np.array([2, 0])).tolist() == [3, 2]
    plain = NodeToStatus({"b": cpu}, None, ["a", "b"], table.index)
    assert plain.codes(np.array([0, 1])).tolist() == [-1, 2]


def test_unschedulable_message_counts_every_rejected_node() -> None:
    h = SchedulerHarness([FitStatuses])
    h.add(*[make_node(f"n{i:03d}", cpu="1") for i in range(150)])
    result = h.schedule_one(make_pod("big", cpu="2"))
    assert result.node is None
    assert "0/150 nodes are available: 150 Insufficient cpu." in result.message
