"""NumPy columns of every node's GPUs, for the vectorised Filter and Score of plain GPU pods.

Per table row: whether the node has device state at all, whether it must take the exact per-node path
(partition honored, a refused Device object, a minor too large for the columns), each GPU's free
``gpu-core`` / ``gpu-memory-ratio`` / ``gpu-memory`` (by minor; only healthy GPUs are usable), and the sums
over its GPUs of total and free of the scored resources. A plain GPU pod (see ``quick_fit``) fits a node
iff at least ``count`` usable GPUs each have free >= the per-GPU request, and its node score is
``score_sums`` of those sums: both become a few array operations over all rows. Rows are refreshed from
the node caches whenever the plugin marks a node changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
            self._refresh(row, node_device(name), exact(name, node_device(name)))

    def _refresh(self, row: int, nd: NodeDevice | None, exact: bool) -> None:
        self.usable[row, :] = False
        self.free[:, row, :] = 0
        self.total_sum[:, row] = 0
        self.free_sum[:, row] = 0
        self.has_device[row] = nd is not None
        self.exact[row] = exact
        if nd is None:
            return
        total = nd.total.get(n.GPU, {})
        free = nd.free.get(n.GPU, {})
        if total and max(total) >= _MAX_MINORS:
            self.exact[row] = True
            return
        if total:
            self._ensure(self._rows, max(total) + 1)
        for minor, res in total.items():
            if not any(res.values()):
                continue  # unhealthy (or empty): never usable
            self.usable[row, minor] = True
            left = free.get(minor, {})
            for i, name in enumerate(GPU_COLUMNS):
                self.free[i, row, minor] = left.get(name, 0)
        sum_total, sum_free = nd.summed(n.GPU) if total else ({}, {})
        for i, name in enumerate(self.scored):
            self.total_sum[i, row] = sum_total.get(name, 0)
            self.free_sum[i, row] = sum_free.get(name, 0)
            if sum_total.get(name, 0):
                self._scored_present[i] = True

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
