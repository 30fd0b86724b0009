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

A patch of a few rows reads each row's ``RowData`` (plain Python values), not the arrays, so a row write only
records its ``RowData`` and copies it into the arrays later, in one batch, when a whole-array computation
needs them (``flush``). Between two pods usually one row changes and no whole-array computation runs, which
would otherwise pay a dozen one-element NumPy writes per pod for nothing.
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

__all__ = ["NEVER_FAILS", "CachedResult", "LoadColumns", "NodeView", "ShapeCache", "usage_limit"]

Int64Array = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NEVER_FAILS: Final = 2**62
"""Room of a resource that has no threshold (or no allocatable): no estimate reaches it, and
``NEVER_FAILS - usage`` cannot overflow int64."""

_MATRICES: Final = ("alloc", "room_usage", "room_prod", "ex_score", "ex_prod")
_FLAGS: Final = ("gate_usage", "gate_prod", "prod_on", "is_agg", "has_metric", "has_info", "expired")
_ROW_FLAGS: Final = ("gate_usage", "gate_prod", "prod_on", "is_agg", "has_info")
"""The flags ``flush`` copies from ``RowData`` (the others are written as rows change)."""
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
        "update_time",
    )

    def __init__(
        self,
        view: NodeView,
        gate_usage: bool,
        gate_prod: bool,
        has_metric: bool,
        has_info: bool,
        update_time: float | None,
    ) -> None:
        self.alloc = view.alloc
        self.prod_on = view.prod_on
        self.is_agg = view.agg_type is not None
        self.gate_usage = gate_usage
        self.gate_prod = gate_prod
        self.has_metric = has_metric
        self.has_info = has_info
        self.update_time = update_time
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

    The matrices and the ``gate_*``, ``prod_on``, ``is_agg`` and ``has_info`` flags are current only after
    ``flush``; ``has_metric``, ``update_time``, ``expired`` and ``rows`` always are.
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
        self._unflushed: set[int] = set()
        """Rows whose ``RowData`` is newer than the arrays (see ``flush``)."""
        self._unlimited: Vec = [NEVER_FAILS] * resources
        """The room of every resource when no threshold applies (shared: ``RowData`` lists are read-only)."""
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
        if row >= self.capacity:
            self.ensure(row + 1)
        self.log.append(row)
        rows = self.rows
        if len(rows) <= row:
            rows.extend([None] * (row + 1 - len(rows)))
        metric = load.metric if load is not None else None
        if load is None or metric is None:
            data = RowData(view, False, False, False, False, None)
            data.room_usage = data.room_prod = self._unlimited
            data.ex_score = data.ex_prod = [0] * self.resources
        else:
            data = RowData(view, view.usage_on, view.prod_on, True, metric.has_info, metric.update_time)
            plain = load.existing_estimate(False)
            ex_prod = load.existing_estimate(True)
            assert plain is not None and ex_prod is not None  # None only without a NodeMetric
            usage = plain
            if view.agg_type is not None:
                usage = _known(load.existing_estimate(False, view.agg_type, view.agg_window_ns))
            data.ex_prod = ex_prod
            # Without thresholds of a kind every limit is NEVER_FAILS, and so is every room.
            data.room_usage = _room(view.limit_usage, usage) if view.usage_on else self._unlimited
            data.room_prod = _room(view.limit_prod, ex_prod) if view.prod_on else self._unlimited
            score = load.existing_estimate(False, *score_agg) if score_agg is not None else None
            data.ex_score = score if score is not None else plain
        previous = rows[row]
        rows[row] = data
        self._unflushed.add(row)
        gated_before = previous is not None and (previous.gate_usage or previous.gate_prod)
        self.gated_rows += int(data.gate_usage or data.gate_prod) - int(gated_before)
        update_time = data.update_time
        if (
            previous is not None
            and previous.has_metric == data.has_metric
            and previous.update_time == update_time
        ):
            # The usual write (a pod came or went): has_metric, update_time and expired already hold for
            # this row (refresh_expiry keeps expired current as time passes).
            return
        # The expiry inputs are kept current (refresh_expiry and the row-wise forms read them); the rest
        # waits for flush.
        self.has_metric[row] = data.has_metric
        self.update_time[row] = np.nan if update_time is None else update_time
        self._set_expiry(row, update_time)

    def flush(self) -> None:
        """Copy the rows written since the last flush from their ``RowData`` into the arrays."""
        if not self._unflushed:
            return
        written = list(self._unflushed)
        self._unflushed.clear()
        rows: list[RowData] = []
        for row in written:
            data = self.rows[row]
            assert data is not None  # write() records the RowData of every row it queues
            rows.append(data)
        at: Int64Array = np.array(written, dtype=np.int64)
        shape = (len(rows), self.resources)
        for attr in _MATRICES:
            values = np.array([getattr(d, attr) for d in rows], dtype=np.int64).reshape(shape)
            getattr(self, attr)[:, at] = values.T
        for attr in _ROW_FLAGS:
            getattr(self, attr)[at] = [getattr(d, attr) for d in rows]

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

    def expiry_current(self, now: float) -> bool:
        """True when no row's expiry can have changed between the last refresh and ``now`` (which then
        counts as refreshed); False when ``refresh_expiry`` has work to do."""
        if self._exp_now <= now < self._next_expiry:
            self._exp_now = now
            return True
        return False

    def refresh_expiry(self, now: float, size: int) -> None:
        """Bring ``expired`` to ``now``; cheap unless some row's NodeMetric may have expired since."""
        if self.expiry_current(now):
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
_NO_ROWS: Final[BoolArray] = np.zeros(0, dtype=np.bool_)
Compute = Callable[[Hashable, "Int64Array | None", int], AnyArray]
ComputeRow = Callable[[Hashable, int], int]
_SCALAR_PATCH: Final = 8
"""Up to this many changed rows are patched one by one in Python; more go through NumPy."""


class CachedResult:
    """One pod shape's whole-table result, as of change-log ``position``, for rows ``0..size-1``.

    With ``ShapeCache(value_range=k)`` (integer results in ``0..k-1``) it also keeps how many rows hold each
    value and which rows hold 0, so that a Filter (0: the node passes) answers "does any node fail?" without
    a pass over the table and its per-call mask with a single ``take``.
    """

    __slots__ = ("_present", "counts", "is_zero", "position", "size", "values")

    def __init__(self, values: AnyArray, position: int, size: int, value_range: int) -> None:
        self.values = values
        self.position = position
        self.size = size
        self.counts: list[int] = []
        """How many rows hold each value (empty without a value range)."""
        self.is_zero: BoolArray = _NO_ROWS
        """Per row: the value is 0 (empty without a value range)."""
        self._present: list[int] | None = None
        if value_range:
            self.counts = np.bincount(values, minlength=value_range).tolist()
            self.is_zero = values == 0

    def present(self) -> list[int]:
        """The values some row holds, ascending."""
        if self._present is None:
            self._present = [value for value, count in enumerate(self.counts) if count]
        return self._present


class ShapeCache:
    """Whole-table results per pod shape (e.g. the estimate vector), patched row by row as rows change.

    Most workloads schedule many pods of few shapes, and between two pods only the rows of the nodes that
    changed (usually one: where the previous pod went) need recomputing. ``compute(key, rows, size)`` gives
    the result for ``rows`` (None: rows ``0..size-1``) with NumPy, ``compute_row(key, row)`` for one row from
    its ``RowData``; both are exact, the cache only avoids recomputing.

    With ``value_range=k`` the results are integers in ``0..k-1`` and each entry also keeps how many rows
    hold each value, so a caller can tell without a pass over the table, e.g., that no row fails a filter.
    """

    def __init__(
        self,
        compute: Compute,
        compute_row: ComputeRow,
        columns: LoadColumns,
        max_shapes: int = 16,
        value_range: int = 0,
    ) -> None:
        self._compute = compute
        self._compute_row = compute_row
        self._columns = columns
        self._max = max_shapes
        self._range = value_range
        self._entries: OrderedDict[Hashable, CachedResult] = OrderedDict()

    def get(self, key: Hashable, size: int) -> CachedResult:
        cols = self._columns
        log, log_start = cols.log, cols.log_start
        position = log_start + len(log)
        entry = self._entries.get(key)
        if entry is not None and entry.size == size:
            since = entry.position
            if since == position:
                self._entries.move_to_end(key)
                return entry
            if since >= log_start and position - since <= size // 4:
                self._patch(key, entry, {row for row in log[since - log_start :] if row < size})
                entry.position = position
                self._entries.move_to_end(key)
                return entry
        entry = CachedResult(self._compute(key, None, size), position, size, self._range)
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return entry

    def _patch(self, key: Hashable, entry: CachedResult, changed: set[int]) -> None:
        values = entry.values
        if len(changed) > _SCALAR_PATCH:
            rows = np.fromiter(changed, dtype=np.int64, count=len(changed))
            values[rows] = self._compute(key, rows, entry.size)
            if self._range:
                entry.counts = np.bincount(values, minlength=self._range).tolist()
                entry.is_zero[rows] = values[rows] == 0
                entry._present = None
            return
        compute_row = self._compute_row
        for row in changed:
            value = compute_row(key, row)
            if self._range:
                old = int(values[row])
                if old != value:
                    entry.counts[old] -= 1
                    entry.counts[value] += 1
                    entry.is_zero[row] = value == 0
                    entry._present = None
            values[row] = value

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
