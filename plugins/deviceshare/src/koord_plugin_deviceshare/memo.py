"""Per-node verdicts of DeviceShare, memoised by pod shape and invalidated by a per-node generation.

A node's Filter verdict and Score for a pod depend only on the node (its Device object, the devices its
pods hold, its labels) and on the pod's *shape* (device requests, device annotations, the isolation-provider
label). A cluster sees few shapes and each scheduled pod changes one node, so ``filter_all``/``score_all``
recompute only the rows whose generation moved since that shape last looked at them; every other row is a
NumPy read. ``bump`` gives a node a new generation whenever anything it depends on changes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from koord_framework.scheduler.table import Int64Array, NodeTable

__all__ = ["RowMemo"]

_MAX_SHAPES = 256


def _grown(arr: Int64Array, size: int, fill: int) -> Int64Array:
    if arr.shape[0] >= size:
        return arr
    out = np.full(max(size, 2 * arr.shape[0], 64), fill, dtype=np.int64)
    out[: arr.shape[0]] = arr
    return out


class RowMemo:
    """Generations per table row, and per shape the value and generation each row was computed at."""

    def __init__(self) -> None:
        self._gens: Int64Array = np.zeros(64, dtype=np.int64)
        self._counter = 0
        self._pending: set[str] = set()
        """Nodes changed before they had a row: bumped once the row exists."""
        self._shapes: OrderedDict[Hashable, tuple[Int64Array, Int64Array]] = OrderedDict()

    def bump(self, table: NodeTable | None, name: str) -> None:
        row = table.index.get(name) if table is not None else None
        self._counter += 1
        if row is None:
            self._pending.add(name)
            return
        self._gens = _grown(self._gens, row + 1, 0)
        self._gens[row] = self._counter

    def _sync(self, table: NodeTable) -> Int64Array:
        if self._pending:
            for name in list(self._pending):
                row = table.index.get(name)
                if row is not None:
                    self._pending.discard(name)
                    self._counter += 1
                    self._gens = _grown(self._gens, row + 1, 0)
                    self._gens[row] = self._counter
        self._gens = _grown(self._gens, table.size, 0)
        return self._gens

    def values(
        self, table: NodeTable, rows: Int64Array, shape: Hashable, compute: Callable[[int], int]
    ) -> Int64Array:
        """The memoised values of ``rows`` for ``shape``; ``compute(row)`` for rows that are stale."""
        gens = self._sync(table)
        entry = self._shapes.get(shape)
        if entry is None:
            entry = (np.full(gens.shape[0], -1, dtype=np.int64), np.zeros(gens.shape[0], dtype=np.int64))
            self._shapes[shape] = entry
            if len(self._shapes) > _MAX_SHAPES:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(shape)
        seen, value = entry
        if seen.shape[0] < gens.shape[0]:
            seen, value = _grown(seen, gens.shape[0], -1), _grown(value, gens.shape[0], 0)
            self._shapes[shape] = (seen, value)
        now = gens[rows]
        stale = rows[seen[rows] != now]
        for row in stale.tolist():
            value[row] = compute(row)
            seen[row] = gens[row]
        return value[rows]

    def clear(self) -> None:
        self._shapes.clear()
