"""Whole-table results per pod shape, patched row by row from the snapshot's change log.

NodeResourcesFit's verdict or score for a node depends only on that node's ``NodeTable`` row and on the pod's
requests, and replicas request the same. So instead of evaluating the candidate rows for every pod (a dozen
NumPy calls over hundreds of rows), the result is computed once for every row of the table per distinct
request vector (the *key*) and kept; before each use only the rows the snapshot replaced since the last use
(``SnapshotView.rows_changed_since``: usually the one node the previous pod went to) are recomputed, with the
plugin's per-node form, and the candidates are read with one gather. The functions given must be pure
functions of the rows' table values (equivalently, of the nodes' ``NodeInfo``) and of what the key
identifies. They take that as a separate argument rather than as closures: a take runs several times per
scheduling cycle, and every closure made and every frame called shows there. For a boolean (filter) result
the cache also keeps which rows are False, so that while none is it answers without a gather.

Handles without a snapshot change log (hand-made test handles) compute over the asked rows directly.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from koord_framework.scheduler.constant_arrays import all_pass
from koord_framework.scheduler.interface import Handle, NodeInfo, NodeTable, SnapshotView
from koord_framework.scheduler.table import Int64Array

A = TypeVar("A")
MAX_KEYS = 128
"""Distinct pod shapes kept per plugin (the one computed longest ago dropped first); each costs one value
per node."""
PATCH_LIMIT = 64
"""Changed rows patched one by one at most (or an eighth of the table, if more): beyond that one whole-table
NumPy pass is cheaper."""


class _Entry:
    __slots__ = ("rejected", "seq", "snapshot", "values")

    def __init__(self, values: npt.NDArray[Any], seq: int, snapshot: SnapshotView) -> None:
        self.values = values
        self.seq = seq
        self.snapshot = snapshot
        self.rejected: set[int] | None = (
            set(np.flatnonzero(~values).tolist()) if values.dtype == np.bool_ else None
        )
        """For a boolean result, the rows that are False (None otherwise)."""


def row_cache(handle: Handle, owner: str) -> RowCache | None:
    """The cache of ``owner`` (a plugin name) on this handle, or None when the handle has no snapshot."""
    if handle.snapshot is None:
        return None
    return handle.shared((RowCache, owner), lambda: RowCache(handle))


class RowCache:
    """Whole-table results by key (see the module docstring)."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._entries: dict[Hashable, _Entry] = {}

    def take(
        self,
        key: Hashable,
        rows: Int64Array,
        compute: Callable[[NodeTable, Int64Array, A], npt.NDArray[Any]],
        one: Callable[[NodeInfo, A], Any],
        arg: A,
    ) -> npt.NDArray[Any]:
        """``compute(table, rows, arg)``, read from the whole-table result of ``key`` brought up to date.

        ``one(node, arg)`` is the same function for a single node (the plugin's per-node form, which must
        agree with ``compute``): a few changed rows are patched with it, since one NumPy call costs as much
        as evaluating a node in Python. ``key`` must identify ``arg``.
        """
        return self._current(key, rows, compute, one, arg).values[rows]

    def take_mask(
        self,
        key: Hashable,
        rows: Int64Array,
        compute: Callable[[NodeTable, Int64Array, A], npt.NDArray[np.bool_]],
        one: Callable[[NodeInfo, A], bool],
        arg: A,
    ) -> npt.NDArray[np.bool_]:
        """``take`` for a boolean (filter) result; a shared all-True answer while no row of the table is
        False (a filter most nodes pass needs no gather then)."""
        entry = self._current(key, rows, compute, one, arg)
        if not entry.rejected:
            return all_pass(rows.shape[0])
        found: npt.NDArray[np.bool_] = entry.values[rows]
        return found

    def _current(
        self,
        key: Hashable,
        rows: Int64Array,
        compute: Callable[[NodeTable, Int64Array, A], npt.NDArray[Any]],
        one: Callable[[NodeInfo, A], Any],
        arg: A,
    ) -> _Entry:
        snap = self._handle.snapshot
        if snap is None:
            raise RuntimeError("a row cache needs a handle with a snapshot (row_cache checked it)")
        entry = self._entries.get(key)
        if entry is not None and entry.snapshot is snap:
            seq = snap.change_seq
            if entry.seq == seq:  # nothing replaced since the last use (a second Filter pass, say)
                return entry
            values = entry.values
            changed = snap.rows_changed_since(entry.seq)
            if (
                changed is not None
                and values.shape[0] == snap.table.size
                and (len(changed) <= PATCH_LIMIT or len(changed) <= values.shape[0] // 8)
            ):
                by_row = snap.by_row
                rejected = entry.rejected
                for row in set(changed) if len(changed) > 1 else changed:
                    ni = by_row[row]
                    if ni is None:
                        continue
                    value = one(ni, arg)
                    values[row] = value
                    if rejected is not None:
                        if value:
                            rejected.discard(row)
                        else:
                            rejected.add(row)
                entry.seq = seq
                return entry
        table = snap.table
        size = table.size
        values = compute(table, np.arange(size, dtype=np.int64) if size else rows[:0], arg)
        self._entries.pop(key, None)
        if len(self._entries) >= MAX_KEYS:
            del self._entries[next(iter(self._entries))]
        entry = self._entries[key] = _Entry(values, snap.change_seq, snap)
        return entry
