"""NumPy columns over the scheduler's ``NodeTable`` rows: everything Filter and Score read, per node.

Filter and Score run for every node for every pod; reading Python objects there would cost a loop over a
thousand nodes per pod. Instead each node's inputs are kept as one row of these arrays (the same row index as
the ``NodeTable``) and rewritten only when something about that node changes: its Node object, its
NodeMetric, or a pod assigned to or removed from it. ``filter_all``/``score_all`` are then a few array
operations per tracked resource.

Two choices keep the per-pod work small:

* Arrays are resource-major (``[resource, row]``), so each resource is one contiguous vector and ``take``
  over the candidate rows is cheap; there are only a handful of resources, so loops run over resources.
* Filter's threshold test ``round(used / allocatable * 100) > threshold`` is monotonic in ``used``, so for
  each node and resource the smallest ``used`` that fails (the *limit*) is found once per Node object, and
  the row keeps ``room = limit - existing usage``. A pod then fails on a resource exactly when its estimate
  is ``>= room``: integer compares, bit-identical to the per-node float arithmetic.

Every row write is appended to a change log, and NodeMetric expiry is tracked incrementally (``expired``
holds each row's state at the last ``refresh_expiry``; rows whose state flips are logged too). The plugin uses
the log to patch per-pod-shape results instead of recomputing them for every node (``ShapeCache``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from koord_plugin_loadaware.assign_cache import NodeLoad
from koord_plugin_loadaware.estimator import go_round
from koord_plugin_loadaware.vectors import Vec

__all__ = ["NEVER_FAILS", "LoadColumns", "NodeView", "ShapeCache", "usage_limit"]

Int64Array = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NEVER_FAILS: Final = 2**62
"""Room of a resource that has no threshold (or no allocatable): no estimate reaches it, and
``NEVER_FAILS - usage`` cannot overflow int64."""

_MATRICES: Final = ("alloc", "room_usage", "room_prod", "ex_score", "ex_prod")
_FLAGS: Final = ("gate_usage", "gate_prod", "prod_on", "is_agg", "has_metric", "has_info", "expired")
_EXPIRY_MARGIN: Final = 1e-3
"""Seconds before a row's computed expiry at which expiry is re-evaluated (float rounding of t + exp)."""


def _fails(used: int, allocatable: int, threshold: int) -> bool:
    # Exactly the per-node test (Koordinator's filterNodeUsage): float64 division, x100, Go rounding.
    return go_round(float(used) / float(allocatable) * 100) > threshold


def usage_limit(threshold: int, allocatable: int) -> int:
    """The smallest usage that fails ``threshold`` percent of ``allocatable`` (``NEVER_FAILS`` if none).

    The test is monotonic in the usage, so an exponential search from the closed-form guess brackets the
    boundary and a binary search pins it; the guess is almost always exact, costing two or three tests.
    """
    if threshold == 0 or allocatable <= 0:
        return NEVER_FAILS
    # Rounding half away from zero: round(x) > t  <=>  x >= t + 0.5, i.e. used >= (2t + 1) * alloc / 200.
    guess = -(-(2 * threshold + 1) * allocatable // 200)
    step = 1
    if _fails(guess, allocatable, threshold):
        hi, lo = guess, guess - 1
        while _fails(lo, allocatable, threshold):
            hi, step = lo, step * 2
            lo = guess - step
            if lo <= -NEVER_FAILS:
                return -NEVER_FAILS
    else:
        lo, hi = guess, guess + 1
        while not _fails(hi, allocatable, threshold):
            lo, step = hi, step * 2
            hi = guess + step
            if hi >= NEVER_FAILS:
                return NEVER_FAILS
    while hi - lo > 1:  # not _fails(lo), _fails(hi)
        mid = (lo + hi) // 2
        if _fails(mid, allocatable, threshold):
            hi = mid
        else:
            lo = mid
    return hi


def limits(thresholds: Vec, allocatable: Vec) -> Vec:
    return [usage_limit(t, a) for t, a in zip(thresholds, allocatable)]


def _room(limit: Vec, existing: Vec) -> Vec:
    return [NEVER_FAILS if lim >= NEVER_FAILS else lim - e for lim, e in zip(limit, existing)]


class RowData:
    """One row's inputs as Python values, mirroring the arrays: patching a few rows reads these, which is
    far cheaper than a dozen NumPy calls on one-element arrays."""

    __slots__ = (
        "alloc",
        "ex_prod",
        "ex_score",
        "gate_prod",
        "gate_usage",
        "has_info",
        "has_metric",
        "is_agg",
        "prod_on",
        "room_prod",
        "room_usage",
    )

    def __init__(
        self, view: NodeView, gate_usage: bool, gate_prod: bool, has_metric: bool, has_info: bool
    ) -> None:
        self.alloc = view.alloc
        self.prod_on = view.prod_on
        self.is_agg = view.agg_type is not None
        self.gate_usage = gate_usage
        self.gate_prod = gate_prod
        self.has_metric = has_metric
        self.has_info = has_info
        self.room_usage: Vec = []
        self.room_prod: Vec = []
        self.ex_score: Vec = []
        self.ex_prod: Vec = []


class LoadColumns:
    """Per-row inputs of LoadAwareScheduling, resource-major: ``matrix[r, row]``.

    * ``alloc``: the estimator's node allocatable;
    * ``room_usage`` / ``room_prod``: per resource, how much more a pod may add before failing the node's
      thresholds for non-prod pods (instant or percentile usage) / for prod pods (prod usage);
    * ``gate_usage`` / ``gate_prod``: the row has a NodeMetric and some threshold of that kind is set (rows
      without pass Filter); ``prod_on``: prod thresholds apply on this node; ``is_agg``: the non-prod
      thresholds are percentile ones (only for the rejection reason);
    * ``ex_score`` / ``ex_prod``: the usage Score adds the pod to (node view / prod view);
    * ``has_metric``, ``has_info``, ``update_time`` (NaN when never reported).
    """

    def __init__(self, resources: int, expiration_seconds: float, capacity: int = 64) -> None:
        self.resources = resources
        self.expiration_seconds = float(expiration_seconds)
        self.capacity = 0
        self.log: list[int] = []
        """Rows written (or whose expiry flipped) since ``log_start``, in order."""
        self.log_start = 0
        self.gated_rows = 0
        """Rows with a NodeMetric and some threshold: while 0, Filter passes every node."""
        self.rows: list[RowData | None] = []
        """``RowData`` per row (None for rows never written)."""
        """Rows with a NodeMetric and some threshold: while 0, Filter passes every node."""
        self._exp_now = float("-inf")
        self._next_expiry = float("-inf")
        empty2: Int64Array = np.zeros((resources, 0), dtype=np.int64)
        empty1: BoolArray = np.zeros(0, dtype=np.bool_)
        self.alloc = empty2
        self.room_usage = empty2.copy()
        self.room_prod = empty2.copy()
        self.ex_score = empty2.copy()
        self.ex_prod = empty2.copy()
        self.gate_usage = empty1
        self.gate_prod = empty1.copy()
        self.prod_on = empty1.copy()
        self.is_agg = empty1.copy()
        self.has_metric = empty1.copy()
        self.has_info = empty1.copy()
        self.expired = empty1.copy()
        """Each row's expiry at the last ``refresh_expiry`` (rows without a NodeMetric count as expired)."""
        self.update_time: FloatArray = np.zeros(0, dtype=np.float64)
        self.ensure(capacity)

    def ensure(self, rows: int) -> None:
        """Make room for ``rows`` rows (new rows are unwritten: no metric, no thresholds)."""
        if rows <= self.capacity:
            return
        new = max(rows, self.capacity * 2, 1)
        for attr in _MATRICES:
            matrix = np.zeros((self.resources, new), dtype=np.int64)
            matrix[:, : self.capacity] = getattr(self, attr)
            setattr(self, attr, matrix)
        for attr in _FLAGS:
            flags = np.zeros(new, dtype=np.bool_)
            flags[: self.capacity] = getattr(self, attr)
            setattr(self, attr, flags)
        times = np.full(new, np.nan, dtype=np.float64)
        times[: self.capacity] = self.update_time
        self.update_time = times
        self.expired[self.capacity :] = True
        self.capacity = new

    def write(
        self,
        row: int,
        view: NodeView,
        load: NodeLoad | None,
        score_agg: tuple[str, int] | None,
    ) -> None:
        """Rewrite one row from the node's view (allocatable, limits) and its assign-cache entry."""
        self.ensure(row + 1)
        self.log.append(row)
        if len(self.rows) <= row:
            self.rows.extend([None] * (row + 1 - len(self.rows)))
        self.alloc[:, row] = view.alloc
        self.prod_on[row] = view.prod_on
        self.is_agg[row] = view.agg_type is not None
        metric = load.metric if load is not None else None
        if load is None or metric is None:
            data = RowData(view, False, False, False, False)
            data.room_usage = data.room_prod = [NEVER_FAILS] * self.resources
            data.ex_score = data.ex_prod = [0] * self.resources
            self.rows[row] = data
            self.has_metric[row] = self.has_info[row] = False
            self._set_gates(row, False, False)
            self.update_time[row] = np.nan
            self.expired[row] = True
            self.room_usage[:, row] = NEVER_FAILS
            self.room_prod[:, row] = NEVER_FAILS
            self.ex_score[:, row] = 0
            self.ex_prod[:, row] = 0
            return
        data = RowData(view, view.usage_on, view.prod_on, True, metric.has_info)
        plain = _known(load.existing_estimate(False))
        data.ex_prod = _known(load.existing_estimate(True))
        usage = plain
        if view.agg_type is not None:
            usage = _known(load.existing_estimate(False, view.agg_type, view.agg_window_ns))
        data.room_usage = _room(view.limit_usage, usage)
        data.room_prod = _room(view.limit_prod, data.ex_prod)
        score = load.existing_estimate(False, *score_agg) if score_agg is not None else None
        data.ex_score = score if score is not None else plain
        self.rows[row] = data
        self.has_metric[row] = True
        self.has_info[row] = metric.has_info
        self._set_gates(row, view.usage_on, view.prod_on)
        self.update_time[row] = np.nan if metric.update_time is None else metric.update_time
        self._set_expiry(row, metric.update_time)
        self.room_usage[:, row] = data.room_usage
        self.room_prod[:, row] = data.room_prod
        self.ex_prod[:, row] = data.ex_prod
        self.ex_score[:, row] = data.ex_score

    def _set_gates(self, row: int, usage: bool, prod: bool) -> None:
        before = bool(self.gate_usage[row] or self.gate_prod[row])
        self.gate_usage[row] = usage
        self.gate_prod[row] = prod
        self.gated_rows += int(usage or prod) - int(before)

    # --- expiry -----------------------------------------------------------------------------------------
    def _is_expired(self, update_time: float | None, now: float) -> bool:
        """Koordinator's ``isNodeMetricExpired`` (the plugin's per-node form computes the same)."""
        if update_time is None:
            return True
        return self.expiration_seconds > 0 and now - update_time >= self.expiration_seconds

    def _set_expiry(self, row: int, update_time: float | None) -> None:
        expired = self._is_expired(update_time, self._exp_now)
        self.expired[row] = expired
        if not expired and update_time is not None and self.expiration_seconds > 0:
            self._next_expiry = min(self._next_expiry, update_time + self.expiration_seconds - _EXPIRY_MARGIN)

    def refresh_expiry(self, now: float, size: int) -> None:
        """Bring ``expired`` to ``now``; cheap unless some row's NodeMetric may have expired since."""
        if self._exp_now <= now < self._next_expiry:
            self._exp_now = now
            return
        self._exp_now = now
        times = self.update_time[:size]
        with np.errstate(invalid="ignore"):
            if self.expiration_seconds > 0:
                fresh = (now - times) < self.expiration_seconds  # NaN (never updated) compares False
            else:
                fresh = ~np.isnan(times)
        expired = ~(fresh & self.has_metric[:size])
        changed = np.flatnonzero(expired != self.expired[:size])
        self.expired[:size] = expired
        self.log.extend(changed.tolist())
        if self.expiration_seconds > 0 and fresh.any():
            self._next_expiry = float(times[fresh].min()) + self.expiration_seconds - _EXPIRY_MARGIN
        else:
            self._next_expiry = float("inf")

    # --- change log ---------------------------------------------------------------------------------------
    @property
    def log_position(self) -> int:
        return self.log_start + len(self.log)

    def changed_since(self, position: int) -> list[int] | None:
        """Rows changed since ``position`` (None when the log no longer reaches back that far)."""
        if position < self.log_start:
            return None
        return self.log[position - self.log_start :]

    def trim_log(self) -> None:
        """Forget old entries once the log outgrows the table (caches then recompute in full once)."""
        if len(self.log) > 8 * max(self.capacity, 64):
            self.log_start += len(self.log)
            self.log = []


AnyArray = npt.NDArray[Any]
Compute = Callable[[Hashable, "Int64Array | None", int], AnyArray]
ComputeRow = Callable[[Hashable, int], int]
_SCALAR_PATCH: Final = 8
"""Up to this many changed rows are patched one by one in Python; more go through NumPy."""


class ShapeCache:
    """Whole-table results per pod shape (e.g. the estimate vector), patched row by row as rows change.

    Most workloads schedule many pods of few shapes, and between two pods only the rows of the nodes that
    changed (usually one: where the previous pod went) need recomputing. ``compute(key, rows, size)`` gives
    the result for ``rows`` (None: rows ``0..size-1``) with NumPy, ``compute_row(key, row)`` for one row from
    its ``RowData``; both are exact, the cache only avoids recomputing.
    """

    def __init__(
        self, compute: Compute, compute_row: ComputeRow, columns: LoadColumns, max_shapes: int = 16
    ) -> None:
        self._compute = compute
        self._compute_row = compute_row
        self._columns = columns
        self._max = max_shapes
        self._entries: OrderedDict[Hashable, tuple[AnyArray, int, int]] = OrderedDict()

    def get(self, key: Hashable, size: int) -> AnyArray:
        cols = self._columns
        position = cols.log_position
        entry = self._entries.get(key)
        if entry is not None and entry[2] == size:
            result, since, _ = entry
            changed = cols.changed_since(since)
            if changed is not None and len(changed) <= size // 4:
                if changed:
                    unique = sorted({row for row in changed if row < size})
                    if len(unique) <= _SCALAR_PATCH:
                        compute_row = self._compute_row
                        for row in unique:
                            result[row] = compute_row(key, row)
                    else:
                        rows = np.fromiter(unique, dtype=np.int64, count=len(unique))
                        result[rows] = self._compute(key, rows, size)
                self._entries[key] = (result, position, size)
                self._entries.move_to_end(key)
                return result
        result = self._compute(key, None, size)
        self._entries[key] = (result, position, size)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return result

    def clear(self) -> None:
        self._entries.clear()


class NodeView:
    """What a Node object (allocatable and threshold annotation) contributes to its row; built once per Node
    object, since the usage limits take a little search to find."""

    __slots__ = (
        "agg_type",
        "agg_window_ns",
        "alloc",
        "limit_prod",
        "limit_usage",
        "prod_on",
        "usage_on",
    )

    def __init__(
        self,
        alloc: Vec,
        usage_thresholds: Vec,
        prod_thresholds: Vec,
        agg_type: str | None,
        agg_window_ns: int,
    ) -> None:
        self.alloc = alloc
        self.usage_on = any(usage_thresholds)
        self.prod_on = any(prod_thresholds)
        self.limit_usage = limits(usage_thresholds, alloc)
        self.limit_prod = limits(prod_thresholds, alloc)
        self.agg_type = agg_type
        """Aggregation type of the non-prod thresholds; None when they apply to instant usage."""
        self.agg_window_ns = agg_window_ns


def _known(vec: Vec | None) -> Vec:
    # existing_estimate is None only without a NodeMetric, which the caller has ruled out.
    assert vec is not None
    return vec
