"""``NodeTable``: NumPy columns over every node, for plugins' vectorised ``filter_all`` / ``score_all``.

Row ``i`` is ``NodeInfo.row``. Resource columns hold canonical integers (cpu milli-cores, else ``Value()``),
so a vectorised plugin does the same integer arithmetic as its per-node form and both give identical results.
The cache keeps the table current on every add/remove/assume/forget; plugins with their own per-node data
(e.g. estimated load) keep their own arrays indexed by the same rows and watch ``generation``/``size``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class NodeTable:
    """Columns per resource r: ``allocatable[:, r]``, ``requested[:, r]``; pod counts; non-zero requests."""

    def __init__(self, capacity: int = 64) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.resources: dict[str, int] = {}
        self._cap = max(1, capacity)
        self._rcap = 8
        self.allocatable: Int64Array = np.zeros((self._cap, self._rcap), dtype=np.int64)
        self.requested: Int64Array = np.zeros((self._cap, self._rcap), dtype=np.int64)
        self.pod_count: Int64Array = np.zeros(self._cap, dtype=np.int64)
        self.non_zero_cpu: Int64Array = np.zeros(self._cap, dtype=np.int64)
        self.non_zero_memory: Int64Array = np.zeros(self._cap, dtype=np.int64)
        self.present: BoolArray = np.zeros(self._cap, dtype=np.bool_)
        """False for rows whose node was removed (rows are never reused while pods reference them)."""
        self.generation = 0

    @property
    def size(self) -> int:
        """Number of rows in use (including removed nodes' rows; see ``present``)."""
        return len(self.names)

    # --- columns ------------------------------------------------------------------------------------
    def resource_col(self, name: str) -> int:
        """Column of a resource, created on first use (zeros for every node)."""
        col = self.resources.get(name)
        if col is None:
            col = len(self.resources)
            if col >= self._rcap:
                self._grow_resources()
            self.resources[name] = col
        return col

    def allocatable_of(self, name: str) -> Int64Array:
        """Allocatable column of ``name`` over the used rows (a view; zeros if no node has it)."""
        return self.allocatable[: self.size, self.resource_col(name)]

    def requested_of(self, name: str) -> Int64Array:
        return self.requested[: self.size, self.resource_col(name)]

    # --- maintenance (the cache calls these) --------------------------------------------------------
    def add_node(self, name: str, allocatable: Mapping[str, int]) -> int:
        row = self.index.get(name)
        if row is None:
            row = len(self.names)
            if row >= self._cap:
                self._grow_rows()
            self.names.append(name)
            self.index[name] = row
        self.set_allocatable(row, allocatable)
        self.present[row] = True
        self.generation += 1
        return row

    def remove_node(self, name: str) -> None:
        row = self.index.get(name)
        if row is not None:
            self.present[row] = False
            self.generation += 1

    def set_allocatable(self, row: int, allocatable: Mapping[str, int]) -> None:
        self.allocatable[row, :] = 0
        for res, value in allocatable.items():
            col = self.resource_col(res)  # first: a new column may grow (replace) the arrays
            self.allocatable[row, col] = value

    def add_requests(
        self, row: int, requests: Mapping[str, int], non_zero: tuple[int, int], sign: int
    ) -> None:
        """Add (sign=1) or subtract (sign=-1) one pod's requests on a row."""
        for res, value in requests.items():
            col = self.resource_col(res)  # first: a new column may grow (replace) the arrays
            self.requested[row, col] += sign * value
        self.non_zero_cpu[row] += sign * non_zero[0]
        self.non_zero_memory[row] += sign * non_zero[1]
        self.pod_count[row] += sign
        self.generation += 1

    def rows_of(self, names: Iterable[str]) -> Int64Array:
        return np.fromiter((self.index[n] for n in names), dtype=np.int64)

    # --- growth -------------------------------------------------------------------------------------
    def _grow_rows(self) -> None:
        new = self._cap * 2
        self.allocatable = _grow2(self.allocatable, new, self._rcap)
        self.requested = _grow2(self.requested, new, self._rcap)
        for attr in ("pod_count", "non_zero_cpu", "non_zero_memory", "present"):
            old = getattr(self, attr)
            arr = np.zeros(new, dtype=old.dtype)
            arr[: self._cap] = old
            setattr(self, attr, arr)
        self._cap = new

    def _grow_resources(self) -> None:
        self._rcap *= 2
        self.allocatable = _grow2(self.allocatable, self._cap, self._rcap)
        self.requested = _grow2(self.requested, self._cap, self._rcap)


def _grow2(arr: Int64Array, rows: int, cols: int) -> Int64Array:
    out = np.zeros((rows, cols), dtype=arr.dtype)
    out[: arr.shape[0], : arr.shape[1]] = arr
    return out
