"""NumPy columns of every node's GPUs, for the vectorised Filter and Score of plain GPU pods.

Per table row: whether the node has device state at all, whether it must take the exact per-node path
(partition honored, a refused Device object, a minor too large for the columns), each GPU's free
``gpu-core`` / ``gpu-memory-ratio`` / ``gpu-memory`` (by minor; only healthy GPUs are usable), and the sums
over its GPUs of total and free of the scored resources. A plain GPU pod (see ``quick_fit``) fits a node
iff at least ``count`` usable GPUs each have free >= the per-GPU request, and its node score is
``score_sums`` of those sums: both become a few array operations over all rows. Rows are refreshed from
the node caches whenever the plugin marks a node changed.

Pods come in few shapes and each placement changes one node, so ``fits_of``/``scores_of`` keep, per
request shape, the verdicts and scores of every row and bring them up to date from the log of refreshed
rows: a pod pays a gather over its candidate rows plus the rows that changed since its shape last looked.
A refresh keeps the row's values as Python lists (``_RowValues``) and the few changed rows are judged from
them in plain Python (a NumPy call costs more than the arithmetic on one row); the arrays take the pending
rows only when a whole column is computed again (a new shape, regrown arrays).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from koord_framework.scheduler.status import MAX_NODE_SCORE
from koord_framework.scheduler.table import BoolArray, Int64Array, NodeTable
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.nodedevice import NodeDevice
from koord_plugin_deviceshare.scoring import LEAST_ALLOCATED, DeviceScorer

__all__ = ["GPU_COLUMNS", "GPUColumns"]

GPU_COLUMNS = (n.GPU_CORE, n.GPU_MEMORY_RATIO, n.GPU_MEMORY)
"""The per-GPU resources a plain GPU request can name."""
_MAX_MINORS = 64
_MAX_SHAPES = 256
_MAX_LOG = 100_000
_PYTHON_ROWS = 32
"""Up to this many changed rows are recomputed in Python, more with the arrays."""


class _RowValues:
    """One row as refreshed: usable GPUs and their free per ``GPU_COLUMNS`` by minor, scored sums."""

    __slots__ = ("free", "free_refs", "free_sum", "has_device", "total_ref", "total_sum", "usable")

    def __init__(
        self,
        has_device: bool,
        usable: list[bool],
        free: list[list[int]],
        total_sum: list[int],
        free_sum: list[int],
        total_ref: object = None,
        free_refs: list[object] | None = None,
    ) -> None:
        self.has_device = has_device
        self.usable = usable
        self.free = free
        self.total_sum = total_sum
        self.free_sum = free_sum
        self.total_ref = total_ref
        """The node's GPU totals map these values were read from (None: nothing to compare with)."""
        self.free_refs = free_refs or []
        """Per minor, the free map read (the node cache replaces a device's map whenever it changes)."""


class GPUColumns:
    def __init__(self, scored: Sequence[str]) -> None:
        self.scored = tuple(scored)
        self._rows = 0
        self._minors = 8
        self.has_device: BoolArray = np.zeros(0, dtype=np.bool_)
        self.exact: BoolArray = np.zeros(0, dtype=np.bool_)
        self.usable = np.zeros((0, self._minors), dtype=np.bool_)
        self.free = np.zeros((len(GPU_COLUMNS), 0, self._minors), dtype=np.int64)
        self.total_sum = np.zeros((len(self.scored), 0), dtype=np.int64)
        self.free_sum = np.zeros((len(self.scored), 0), dtype=np.int64)
        self.dirty: set[str] = set()
        self._scored_present = [False] * len(self.scored)
        self._values: dict[int, _RowValues] = {}
        """Row -> its values as last refreshed (the arrays may lag: see ``_unsynced``)."""
        self._unsynced: set[int] = set()
        """Rows refreshed since the arrays last took them (``usable``, ``free``, the sums)."""
        self._log: list[int] = []
        """Rows refreshed, in order: what the per-shape caches replay."""
        self._epoch = 0
        """Moves when every cached value may be stale (arrays regrown, a scored resource first seen)."""
        self._shapes: dict[Hashable, tuple[npt.NDArray[Any], int, int]] = {}
        """shape -> (value per row, log position and epoch it is valid at)."""

    def _ensure(self, rows: int, minors: int) -> None:
        if rows <= self._rows and minors <= self._minors:
            return
        new_rows = max(rows, 2 * self._rows, 64) if rows > self._rows else self._rows
        new_minors = max(minors, self._minors)

        def grow(arr: npt.NDArray[Any], shape: tuple[int, ...]) -> npt.NDArray[Any]:
            out = np.zeros(shape, dtype=arr.dtype)
            out[tuple(slice(0, s) for s in arr.shape)] = arr
            return out

        self.has_device = grow(self.has_device, (new_rows,))
        self.exact = grow(self.exact, (new_rows,))
        self.usable = grow(self.usable, (new_rows, new_minors))
        self.free = grow(self.free, (len(GPU_COLUMNS), new_rows, new_minors))
        self.total_sum = grow(self.total_sum, (len(self.scored), new_rows))
        self.free_sum = grow(self.free_sum, (len(self.scored), new_rows))
        self._rows, self._minors = new_rows, new_minors
        self._epoch += 1

    def flush(
        self,
        table: NodeTable,
        node_device: Callable[[str], NodeDevice | None],
        exact: Callable[[str, NodeDevice | None], bool],
    ) -> None:
        """Refresh the rows of nodes marked changed (those without a row yet stay marked)."""
        self._ensure(table.size, self._minors)
        for name in list(self.dirty):
            row = table.index.get(name)
            if row is None:
                continue
            self.dirty.discard(name)
            nd = node_device(name)
            self._refresh(row, nd, exact(name, nd))
            self._log.append(row)
        if len(self._log) > _MAX_LOG:
            self._log.clear()
            self._shapes.clear()

    def _refresh(self, row: int, nd: NodeDevice | None, exact: bool) -> None:
        width = self._minors
        scored = len(self.scored)
        total = nd.total.get(n.GPU, {}) if nd is not None else {}
        if total and max(total) >= _MAX_MINORS:
            exact = True  # minors beyond the columns: the per-node path judges the node
        self.has_device[row] = nd is not None
        self.exact[row] = exact
        if nd is None or not total or max(total) >= _MAX_MINORS:
            self._values[row] = _RowValues(
                nd is not None,
                [False] * width,
                [[0] * width for _ in GPU_COLUMNS],
                [0] * scored,
                [0] * scored,
            )
            self._unsynced.add(row)
            return
        if max(total) >= width:
            self._ensure(self._rows, max(total) + 1)
            width = self._minors
        free = nd.free.get(n.GPU, {})
        sum_total, sum_free = nd.summed(n.GPU)
        prev = self._values.get(row)
        if prev is not None and prev.total_ref is total and len(prev.usable) == width:
            # Same Device object: only the GPUs whose free map was replaced (an allocation touches one or a
            # few of them) are read again.
            refs, values = prev.free_refs, prev.free
            for minor in total:
                left = free.get(minor)
                if left is refs[minor] or not prev.usable[minor]:
                    continue
                refs[minor] = left
                for i, name in enumerate(GPU_COLUMNS):
                    values[i][minor] = left.get(name, 0) if left is not None else 0
            prev.free_sum = [sum_free.get(name, 0) for name in self.scored]
            self._unsynced.add(row)
            return
        usable = [False] * width
        values = [[0] * width for _ in GPU_COLUMNS]
        free_refs: list[object] = [None] * width
        for minor, res in total.items():
            if not any(res.values()):
                continue  # unhealthy (or empty): never usable
            usable[minor] = True
            left = free.get(minor)
            free_refs[minor] = left
            for i, name in enumerate(GPU_COLUMNS):
                values[i][minor] = left.get(name, 0) if left is not None else 0
        totals = [sum_total.get(name, 0) for name in self.scored]
        for i, t in enumerate(totals):
            if t and not self._scored_present[i]:
                self._scored_present[i] = True
                self._epoch += 1  # every cached score now counts this resource
        self._values[row] = _RowValues(
            True, usable, values, totals, [sum_free.get(name, 0) for name in self.scored], total, free_refs
        )
        self._unsynced.add(row)

    def _sync(self) -> None:
        """Write the rows refreshed since into the arrays (before a computation over many rows)."""
        for row in self._unsynced:
            v = self._values[row]
            width = len(v.usable)
            self.usable[row, :] = False
            self.free[:, row, :] = 0
            self.usable[row, :width] = v.usable
            self.free[:, row, :width] = v.free
            self.total_sum[:, row] = v.total_sum
            self.free_sum[:, row] = v.free_sum
        self._unsynced.clear()

    def _cached(
        self,
        shape: Hashable,
        rows: Int64Array,
        compute: Callable[[Int64Array], npt.NDArray[Any]],
        one: Callable[[int], int | bool],
    ) -> npt.NDArray[Any]:
        """``compute(rows)`` from the shape's values per row, recomputing only rows refreshed since (with
        ``one(row)`` when they are few)."""
        entry = self._shapes.get(shape)
        log = self._log
        if entry is None or entry[2] != self._epoch:
            if len(self._shapes) >= _MAX_SHAPES:
                self._shapes.clear()
            self._sync()
            values = compute(np.arange(self._rows, dtype=np.int64))
        else:
            values, position, _ = entry
            if position < len(log):
                changed = set(log[position:])
                if len(changed) <= _PYTHON_ROWS and all(r in self._values for r in changed):
                    for row in changed:
                        values[row] = one(row)
                else:
                    self._sync()
                    at = np.fromiter(changed, dtype=np.int64, count=len(changed))
                    values[at] = compute(at)
        self._shapes[shape] = (values, len(log), self._epoch)
        out: npt.NDArray[Any] = values[rows]
        return out

    def fits_of(self, rows: Int64Array, per_gpu: Mapping[str, int], count: int) -> BoolArray:
        """``fits`` through the per-shape cache."""
        shape = ("fits", tuple(sorted(per_gpu.items())), count)
        wants = [(i, per_gpu[name]) for i, name in enumerate(GPU_COLUMNS) if per_gpu.get(name)]
        need = max(count, 1)

        def one(row: int) -> bool:
            v = self._values[row]
            if not v.has_device:
                return True
            fit = 0
            free = v.free
            for minor, ok in enumerate(v.usable):
                if not ok:
                    continue
                for i, want in wants:
                    if free[i][minor] < want:
                        break
                else:
                    fit += 1
                    if fit >= need:
                        return True
            return False

        return self._cached(shape, rows, lambda r: self.fits(r, per_gpu, count), one)

    def scores_of(self, rows: Int64Array, request: Mapping[str, int], scorer: DeviceScorer) -> Int64Array:
        """``scores`` through the per-shape cache (one scorer per plugin: the request is the shape)."""
        shape = ("scores", tuple(sorted(request.items())), scorer.strategy)
        least = scorer.strategy == LEAST_ALLOCATED
        terms = [
            (i, scorer.weights[name], request.get(name, 0))
            for i, name in enumerate(self.scored)
            if self._scored_present[i]
        ]

        def one(row: int) -> int:
            # ``scores`` for one row, in Python integers.
            v = self._values[row]
            if not v.has_device:
                return 0
            node_score = weight_sum = 0
            for i, weight, want in terms:
                t, f = v.total_sum[i], v.free_sum[i]
                if t == 0:
                    continue
                requested = t - f + want if t >= f else t
                if least:
                    score = 0 if requested > t else (t - requested) * MAX_NODE_SCORE // t
                else:
                    score = min(requested, t) * MAX_NODE_SCORE // t
                node_score += score * weight
                weight_sum += weight
            return node_score // weight_sum if weight_sum > 0 else 0

        return self._cached(shape, rows, lambda r: self.scores(r, request, scorer), one)

    def fits(self, rows: Int64Array, per_gpu: Mapping[str, int], count: int) -> BoolArray:
        """Plain-GPU-pod Filter verdicts of ``rows`` (rows without device state pass, as per node)."""
        self._sync()
        ok = self.usable[rows]
        for i, name in enumerate(GPU_COLUMNS):
            want = per_gpu.get(name)
            if want:
                ok = ok & (self.free[i][rows] >= want)
        enough: BoolArray = np.count_nonzero(ok, axis=1) >= max(count, 1)
        return np.where(self.has_device[rows], enough, True)

    def scores(self, rows: Int64Array, request: Mapping[str, int], scorer: DeviceScorer) -> Int64Array:
        """``score_sums`` of the plain GPU pod's per-GPU request over ``rows`` (0 without device state)."""
        self._sync()
        node_score = np.zeros(rows.size, dtype=np.int64)
        weight_sum = np.zeros(rows.size, dtype=np.int64)
        for i, name in enumerate(self.scored):
            if not self._scored_present[i]:
                continue  # no node has this resource on its GPUs (rdma, fpga): it never scores
            weight = scorer.weights[name]
            t = self.total_sum[i][rows]
            f = self.free_sum[i][rows]
            present = t != 0
            requested = np.where(t >= f, t - f + request.get(name, 0), t)
            safe = np.where(present, t, 1)
            if scorer.strategy == LEAST_ALLOCATED:
                score = np.where(requested > t, 0, (t - requested) * MAX_NODE_SCORE // safe)
            else:
                score = np.minimum(requested, t) * MAX_NODE_SCORE // safe
            node_score += np.where(present, score * weight, 0)
            weight_sum += np.where(present, weight, 0)
        out: Int64Array = np.where(weight_sum > 0, node_score // np.maximum(weight_sum, 1), 0)
        return np.where(self.has_device[rows], out, 0)
