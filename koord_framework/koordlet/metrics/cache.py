"""The koordlet's metric cache: recent samples of every series in NumPy ring buffers, answering averages,
percentiles and last values over time windows (Koordinator's ``metriccache``, which keeps a TSDB).

A series is a metric kind (``node_cpu_usage``, ``pod_memory_usage``...) plus an id (a pod uid, a container
id, a host application name; ``""`` for node-level series). Each series holds at most
``retention_seconds / interval_seconds`` samples -- enough for the longest aggregation window the NodeMetric
report asks for (30 minutes by default) -- in two preallocated float64 arrays that start small and double
up to that bound, so memory stays flat however long the agent runs. Series nobody appended to for
``expire_seconds`` (a pod that left) are dropped by ``gc``.

Aggregations follow Koordinator exactly: ``avg`` is the mean, ``last`` the sample with the latest
timestamp, and ``pNN`` the element at index ``int(float32(n) * float32(p)) - 1`` (at least 0) of the sorted
samples -- a lower nearest-rank percentile, not an interpolation.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "Aggregation",
    "MetricCache",
    "MetricKind",
    "Window",
]

FloatArray = npt.NDArray[np.float64]


class MetricKind(StrEnum):
    NODE_CPU_USAGE = "node_cpu_usage"
    """Node CPU in use, cores."""
    NODE_MEMORY_USAGE = "node_memory_usage"
    """Node memory in use without page cache, bytes."""
    NODE_MEMORY_WITH_PAGE_CACHE = "node_memory_usage_with_page_cache"
    POD_CPU_USAGE = "pod_cpu_usage"
    POD_MEMORY_USAGE = "pod_memory_usage"
    CONTAINER_CPU_USAGE = "container_cpu_usage"
    CONTAINER_MEMORY_USAGE = "container_memory_usage"
    CONTAINER_CPU_THROTTLED = "container_cpu_throttled_ratio"
    """Share of CFS periods the container was throttled in since the previous sample."""
    BE_CPU_USAGE = "be_cpu_usage"
    """Best-effort QoS dir CPU in use, milli-cores."""
    BE_CPU_REQUEST = "be_cpu_request"
    """Sum of batch-cpu requests of BE pods, milli-cores."""
    BE_CPU_REAL_LIMIT = "be_cpu_real_limit"
    """CPU the BE dir may use now (cpuset size, capped by cfs quota), milli-cores."""
    SYSTEM_CPU_USAGE = "system_cpu_usage"
    SYSTEM_MEMORY_USAGE = "system_memory_usage"
    HOST_APP_CPU_USAGE = "host_app_cpu_usage"
    HOST_APP_MEMORY_USAGE = "host_app_memory_usage"


class Aggregation(StrEnum):
    AVG = "avg"
    P50 = "p50"
    P90 = "p90"
    P95 = "p95"
    P99 = "p99"
    LAST = "last"
    COUNT = "count"


_PERCENTILES: Final[dict[Aggregation, float]] = {
    Aggregation.P50: 0.5,
    Aggregation.P90: 0.9,
    Aggregation.P95: 0.95,
    Aggregation.P99: 0.99,
}


def percentile_index(n: int, p: float) -> int:
    """Koordinator's ``int(float32(n)*percentile) - 1`` clamped at 0 (float32 on purpose: it decides ties
    like 10 x 0.9 the same way Go does)."""
    idx = int(np.float32(n) * np.float32(p)) - 1
    return max(idx, 0)


@dataclass(frozen=True, slots=True)
class Window:
    """The samples of one series inside [start, end], oldest first."""

    times: FloatArray
    values: FloatArray

    @property
    def count(self) -> int:
        return int(self.values.shape[0])

    def __bool__(self) -> bool:
        return self.count > 0

    @property
    def duration(self) -> float:
        """Seconds between the first and last sample (``TimeRangeDuration``); 0 for fewer than two."""
        if self.count < 2:
            return 0.0
        return float(self.times.max() - self.times.min())

    def avg(self) -> float:
        self._require()
        return float(self.values.mean())

    def last(self) -> float:
        self._require()
        return float(self.values[int(np.argmax(self.times))])

    def percentile(self, p: float) -> float:
        if not 0 < p <= 1:
            raise ValueError(f"percentile must be in (0, 1], got {p}")
        self._require()
        ordered = np.sort(self.values)
        return float(ordered[percentile_index(self.count, p)])

    def value(self, aggregation: Aggregation | str) -> float:
        agg = Aggregation(aggregation)
        if agg is Aggregation.COUNT:
            return float(self.count)
        if agg is Aggregation.AVG:
            return self.avg()
        if agg is Aggregation.LAST:
            return self.last()
        return self.percentile(_PERCENTILES[agg])

    def _require(self) -> None:
        if self.count == 0:
            raise LookupError("no samples in the query window")


_EMPTY: Final = Window(np.empty(0), np.empty(0))


class _Ring:
    """One series: parallel time/value arrays used as a ring once they reach their bound."""

    __slots__ = ("bound", "head", "size", "times", "values")

    def __init__(self, bound: int) -> None:
        self.bound = bound
        initial = min(bound, 16)
        self.times: FloatArray = np.empty(initial)
        self.values: FloatArray = np.empty(initial)
        self.head = 0  # next write position
        self.size = 0

    def append(self, t: float, v: float) -> None:
        cap = self.times.shape[0]
        if self.size == cap and cap < self.bound:
            grown = min(self.bound, cap * 2)
            self.times = np.concatenate((self.times, np.empty(grown - cap)))
            self.values = np.concatenate((self.values, np.empty(grown - cap)))
            self.head = self.size
            cap = grown
        self.times[self.head] = t
        self.values[self.head] = v
        self.head = (self.head + 1) % cap
        self.size = min(self.size + 1, cap)

    def latest(self) -> tuple[float, float]:
        i = (self.head - 1) % self.times.shape[0]
        return float(self.times[i]), float(self.values[i])

    def window(self, start: float, end: float) -> Window:
        if self.size == 0:
            return _EMPTY
        cap = self.times.shape[0]
        if self.size < cap:
            t, v = self.times[: self.size], self.values[: self.size]
        else:
            t = np.concatenate((self.times[self.head :], self.times[: self.head]))
            v = np.concatenate((self.values[self.head :], self.values[: self.head]))
        mask = (t >= start) & (t <= end)
        if not mask.any():
            return _EMPTY
        return Window(t[mask], v[mask])


class MetricCache:
    """Thread-safe store of recent samples plus a small key/value store (node CPU info and the like)."""

    def __init__(
        self,
        *,
        retention_seconds: float = 1800.0,
        interval_seconds: float = 1.0,
        expire_seconds: float = 1800.0,
    ) -> None:
        if retention_seconds <= 0 or interval_seconds <= 0:
            raise ValueError("retention_seconds and interval_seconds must be positive")
        self.retention_seconds = retention_seconds
        self.interval_seconds = interval_seconds
        self.expire_seconds = expire_seconds
        self.bound = math.ceil(retention_seconds / interval_seconds) + 1
        self._series: dict[tuple[str, str], _Ring] = {}
        self._kv: dict[str, Any] = {}
        self._lock = threading.Lock()

    # --- writes -------------------------------------------------------------------------------------------
    def append(self, kind: MetricKind | str, t: float, value: float, id: str = "") -> None:
        key = (str(kind), id)
        with self._lock:
            ring = self._series.get(key)
            if ring is None:
                ring = self._series[key] = _Ring(self.bound)
            ring.append(t, value)

    def append_many(self, kind: MetricKind | str, t: float, values: Mapping[str, float]) -> None:
        with self._lock:
            for id_, value in values.items():
                key = (str(kind), id_)
                ring = self._series.get(key)
                if ring is None:
                    ring = self._series[key] = _Ring(self.bound)
                ring.append(t, value)

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self._kv[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            return self._kv.get(key, default)

    # --- reads --------------------------------------------------------------------------------------------
    def query(self, kind: MetricKind | str, start: float, end: float, id: str = "") -> Window:
        with self._lock:
            ring = self._series.get((str(kind), id))
            return ring.window(start, end) if ring is not None else _EMPTY

    def aggregate(
        self, kind: MetricKind | str, aggregation: Aggregation | str, start: float, end: float, id: str = ""
    ) -> float | None:
        """One aggregated value, or None when the window holds no sample."""
        w = self.query(kind, start, end, id)
        return w.value(aggregation) if w else None

    def last(self, kind: MetricKind | str, now: float, window: float, id: str = "") -> float | None:
        """The newest sample within ``window`` seconds before ``now`` (``GenerateQueryParamsLast``)."""
        with self._lock:
            ring = self._series.get((str(kind), id))
            if ring is None or ring.size == 0:
                return None
            t, v = ring.latest()
            if now - window <= t <= now:
                return v
            w = ring.window(now - window, now)
        return w.last() if w else None

    def ids(self, kind: MetricKind | str) -> list[str]:
        k = str(kind)
        with self._lock:
            return sorted(i for (kk, i) in self._series if kk == k)

    def series_count(self) -> int:
        with self._lock:
            return len(self._series)

    # --- housekeeping -------------------------------------------------------------------------------------
    def gc(self, now: float) -> int:
        """Drop series whose newest sample is older than ``expire_seconds``; returns how many."""
        cutoff = now - self.expire_seconds
        with self._lock:
            stale = [k for k, ring in self._series.items() if ring.size == 0 or ring.latest()[0] < cutoff]
            for key in stale:
                del self._series[key]
            return len(stale)

    def nbytes(self) -> int:
        with self._lock:
            return sum(r.times.nbytes + r.values.nbytes for r in self._series.values())


def last_many(
    cache: MetricCache, kind: MetricKind, ids: Iterable[str], now: float, window: float
) -> dict[str, float]:
    """``id -> last value`` for the ids that have a sample in the window (``CollectAllPodMetricsLast``)."""
    out: dict[str, float] = {}
    for id_ in ids:
        v = cache.last(kind, now, window, id_)
        if v is not None:
            out[id_] = v
    return out
