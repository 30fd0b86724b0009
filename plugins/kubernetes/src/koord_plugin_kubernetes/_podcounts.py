"""Per-node counts of the pods a selector matches, kept current from the snapshot's change log.

PodTopologySpread and InterPodAffinity count, for every pod they schedule, the pods of every node that match
some selector — kube-scheduler walks all nodes and all their pods for that in each PreFilter, on 16 threads.
Here the count of each distinct selector (a key: namespace, selector, ...) lives in one NumPy column indexed
by snapshot row and is brought up to date by recounting only the rows the snapshot replaced since the last
query (``SnapshotView.rows_changed_since``): usually the one node the previous pod went to. Replicas share the
key, so a workload of identical pods pays the full count once.

Handles without a snapshot change log (hand-made test handles) get None from ``pod_counts`` and the plugins
fall back to walking the nodes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.interface import Handle, SnapshotView
from koord_framework.scheduler.table import Int64Array

Match = Callable[[PodInfo], bool]
MAX_KEYS = 256
"""Distinct selectors kept (least recently used dropped); each costs 8 bytes per node."""


class _Entry:
    __slots__ = ("counts", "seq", "snapshot")

    def __init__(self, counts: Int64Array, seq: int, snapshot: SnapshotView) -> None:
        self.counts = counts
        self.seq = seq
        """The snapshot's ``change_seq`` the counts are current with."""
        self.snapshot = snapshot


def pod_counts(handle: Handle) -> PodCounts | None:
    """The counts shared by every plugin of one handle, or None when the handle has no snapshot."""
    if handle.snapshot is None:
        return None
    return handle.shared(PodCounts, lambda: PodCounts(handle))


class PodCounts:
    """Per-row pod counts by key (see the module docstring)."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def counts(self, key: Hashable, match: Match) -> Int64Array:
        """Per snapshot row, how many pods of that node ``match`` accepts (0 for rows without a node).

        ``key`` must identify ``match``'s behaviour: two calls with equal keys must pass predicates that
        accept the same pods. The array is shared: read it, do not modify it.
        """
        snap = self._handle.snapshot
        if snap is None:
            raise RuntimeError("pod counts need a handle with a snapshot (pod_counts checked it)")
        by_row = snap.by_row
        size = len(by_row)
        entry = self._entries.get(key)
        changed = None
        if entry is not None and entry.snapshot is snap:
            changed = snap.rows_changed_since(entry.seq)
        if entry is None or changed is None or len(changed) > max(64, size // 8):
            counts = np.zeros(size, dtype=np.int64)
            for row, ni in enumerate(by_row):
                if ni is not None and ni.pods:
                    counts[row] = sum(map(match, ni.pods.values()))
            entry = _Entry(counts, snap.change_seq, snap)
            self._entries[key] = entry
        else:
            counts = entry.counts
            if counts.shape[0] < size:
                grown = np.zeros(size, dtype=np.int64)
                grown[: counts.shape[0]] = counts
                counts = entry.counts = grown
            for row in set(changed):
                ni = by_row[row]
                counts[row] = sum(map(match, ni.pods.values())) if ni is not None else 0
            entry.seq = snap.change_seq
            self._entries.move_to_end(key)
        if len(self._entries) > MAX_KEYS:
            self._entries.popitem(last=False)
        return entry.counts
