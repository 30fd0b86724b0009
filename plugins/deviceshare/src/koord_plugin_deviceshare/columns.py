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

    def _clear(self, row: int) -> None:
        self.usable[row, :] = False
        self.free[:, row, :] = 0
        self.total_sum[:, row] = 0
        self.free_sum[:, row] = 0

    def _refresh(self, row: int, nd: NodeDevice | None, exact: bool) -> None:
        self.has_device[row] = nd is not None
        self.exact[row] = exact
        total = nd.total.get(n.GPU, {}) if nd is not None else {}
        if nd is None or not total or max(total) >= _MAX_MINORS:
            if total:
                self.exact[row] = True  # minors beyond the columns: the per-node path judges it
            self._clear(row)
            return
        free = nd.free.get(n.GPU, {})
        self._ensure(self._rows, max(total) + 1)
        # Built as lists and written with one assignment per array: cheaper than a NumPy scalar write
        # per device and resource.
        usable = [False] * self._minors
        values = [[0] * self._minors for _ in GPU_COLUMNS]
        for minor, res in total.items():
            if not any(res.values()):
                continue  # unhealthy (or empty): never usable
            usable[minor] = True
            left = free.get(minor, {})
            for i, name in enumerate(GPU_COLUMNS):
                values[i][minor] = left.get(name, 0)
        self.usable[row, :] = usable
        self.free[:, row, :] = values
        sum_total, sum_free = nd.summed(n.GPU)
        self.total_sum[:, row] = [sum_total.get(name, 0) for name in self.scored]
        self.free_sum[:, row] = [sum_free.get(name, 0) for name in self.scored]
        for i, name in enumerate(self.scored):
            if sum_total.get(name, 0) and not self._scored_present[i]:
                self._scored_present[i] = True
                self._epoch += 1  # every cached score now counts this resource

    def _cached(
        self, shape: Hashable, rows: Int64Array, compute: Callable[[Int64Array], npt.NDArray[Any]]
    ) -> npt.NDArray[Any]:
        """``compute(rows)`` from the shape's values per row, recomputing only rows refreshed since."""
        entry = self._shapes.get(shape)
        log = self._log
        if entry is None or entry[2] != self._epoch:
            if len(self._shapes) >= _MAX_SHAPES:
                self._shapes.clear()
            values = compute(np.arange(self._rows, dtype=np.int64))
        else:
            values, position, _ = entry
            if position < len(log):
                changed = np.unique(np.array(log[position:], dtype=np.int64))
                values[changed] = compute(changed)
        self._shapes[shape] = (values, len(log), self._epoch)
        out: npt.NDArray[Any] = values[rows]
        return out

    def fits_of(self, rows: Int64Array, per_gpu: Mapping[str, int], count: int) -> BoolArray:
        """``fits`` through the per-shape cache."""
        shape = ("fits", tuple(sorted(per_gpu.items())), count)
        return self._cached(shape, rows, lambda r: self.fits(r, per_gpu, count))

    def scores_of(self, rows: Int64Array, request: Mapping[str, int], scorer: DeviceScorer) -> Int64Array:
        """``scores`` through the per-shape cache (one scorer per plugin: the request is the shape)."""
        shape = ("scores", tuple(sorted(request.items())), scorer.strategy)
        return self._cached(shape, rows, lambda r: self.scores(r, request, scorer))

    def fits(self, rows: Int64Array, per_gpu: Mapping[str, int], count: int) -> BoolArray:
        """Plain-GPU-pod Filter verdicts of ``rows`` (rows without device state pass, as per node)."""
        ok = self.usable[rows]
        for i, name in enumerate(GPU_COLUMNS):
            want = per_gpu.get(name)
            if want:
                ok = ok & (self.free[i][rows] >= want)
        enough: BoolArray = np.count_nonzero(ok, axis=1) >= max(count, 1)
        return np.where(self.has_device[rows], enough, True)

    def scores(self, rows: Int64Array, request: Mapping[str, int], scorer: DeviceScorer) -> Int64Array:
        """``score_sums`` of the plain GPU pod's per-GPU request over ``rows`` (0 without device state)."""
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
