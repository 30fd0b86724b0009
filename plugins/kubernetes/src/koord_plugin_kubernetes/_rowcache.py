"""Whole-table results per pod shape, patched row by row from the snapshot's change log.

NodeResourcesFit's verdict or score for a node depends only on that node's ``NodeTable`` row and on the pod's
requests, and replicas request the same. So instead of evaluating the candidate rows for every pod (a dozen
NumPy calls over hundreds of rows), the result is computed once for every row of the table per distinct
request vector (the *key*) and kept; before each use only the rows the snapshot replaced since the last use
(``Snapshot.rows_changed_since``: usually the one node the previous pod went to) are recomputed, with the
plugin's per-node form, and the candidates are read with one gather. The functions given must be pure
functions of the rows' table values (equivalently, of the nodes' ``NodeInfo``) and of what the key
identifies.

Handles without a snapshot change log (hand-made test handles) compute over the asked rows directly.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from koord_framework.scheduler.interface import Handle, NodeInfo
from koord_framework.scheduler.table import Int64Array
from koord_plugin_kubernetes._podcounts import snapshot_of

RowFunction = Callable[[Int64Array], npt.NDArray[Any]]
NodeFunction = Callable[[NodeInfo], Any]
MAX_KEYS = 128
"""Distinct pod shapes kept per plugin (least recently used dropped); each costs one value per node."""

_CACHES: weakref.WeakKeyDictionary[Handle, dict[str, RowCache]] = weakref.WeakKeyDictionary()


class _Entry:
    __slots__ = ("seq", "snapshot", "values")

    def __init__(self, values: npt.NDArray[Any], seq: int, snapshot: Any) -> None:
        self.values = values
        self.seq = seq
        self.snapshot = snapshot


def row_cache(handle: Handle, owner: str) -> RowCache | None:
    """The cache of ``owner`` (a plugin name) on this handle, or None when the handle has no change log."""
    last_handle, per_handle = _LAST
    caches: dict[str, RowCache] = per_handle
    if last_handle is not handle:
        if snapshot_of(handle) is None:
            return None
        try:
            known = _CACHES.get(handle)
            if known is None:
                known = _CACHES[handle] = {}
        except TypeError:  # a handle that cannot be weakly referenced
            return RowCache(handle)
        caches = known
        _LAST[:] = [handle, caches]
    found = caches.get(owner)
    if found is None:
        found = caches[owner] = RowCache(handle)
    return found


class RowCache:
    """Whole-table results by key (see the module docstring)."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def take(
        self, key: Hashable, rows: Int64Array, compute: RowFunction, one: NodeFunction
    ) -> npt.NDArray[Any]:
        """``compute(rows)``, read from the whole-table result of ``key`` brought up to date.

        ``one(node)`` is the same function for a single node (the plugin's per-node form, which must agree
        with ``compute``): a few changed rows are patched with it, since one NumPy call costs as much as
        scoring a node in Python.
        """
        snap = snapshot_of(self._handle)
        assert snap is not None
        size = snap.table.size
        entry = self._entries.get(key)
        changed = None
        if entry is not None and entry.snapshot is snap and entry.values.shape[0] == size:
            changed = snap.rows_changed_since(entry.seq)
        if entry is None or changed is None or len(changed) > max(64, size // 8):
            values = compute(np.arange(size, dtype=np.int64)) if size else compute(rows[:0])
            entry = _Entry(values, snap.change_seq, snap)
            self._entries[key] = entry
        else:
            if changed:
                values, by_row = entry.values, snap.by_row
                for row in set(changed):
                    ni = by_row[row]
                    if ni is not None:
                        values[row] = one(ni)
            entry.seq = snap.change_seq
            self._entries.move_to_end(key)
        if len(self._entries) > MAX_KEYS:
            self._entries.popitem(last=False)
        return entry.values[rows]


_LAST: list[Any] = [None, {}]
"""[handle, its caches] of the last lookup, checked by identity before the weak dictionary."""
