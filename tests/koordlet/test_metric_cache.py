"""The metric cache: windows, Koordinator's percentile rule, last values, the ring bound and expiry."""

from __future__ import annotations

import numpy as np
import pytest

from koord_framework.koordlet.metrics.cache import Aggregation, MetricCache, MetricKind, percentile_index

K = MetricKind.NODE_CPU_USAGE


def filled(values: list[float], start: float = 100.0) -> MetricCache:
    cache = MetricCache(retention_seconds=3600, interval_seconds=1)
    for i, v in enumerate(values):
        cache.append(K, start + i, v)
    return cache


def test_window_bounds_are_inclusive() -> None:
    cache = filled([1, 2, 3, 4, 5])  # t = 100..104
    w = cache.query(K, 101, 103)
    assert list(w.values) == [2, 3, 4]
    assert w.count == 3 and w.duration == 2.0
    assert not cache.query(K, 200, 300)
    assert cache.aggregate(K, Aggregation.AVG, 200, 300) is None
    assert not cache.query(K, 0, 1000, id="other")


def test_avg_last_count() -> None:
    cache = filled([4, 8, 6])
    w = cache.query(K, 0, 1000)
    assert w.avg() == 6.0
    assert w.last() == 6.0
    assert w.value(Aggregation.COUNT) == 3.0


def test_last_is_the_newest_timestamp_not_the_last_append() -> None:
    cache = MetricCache()
    cache.append(K, 10.0, 1.0)
    cache.append(K, 12.0, 3.0)
    cache.append(K, 11.0, 2.0)  # late sample
    assert cache.query(K, 0, 20).last() == 3.0


def test_koordinator_percentile_rule() -> None:
    w = filled([float(v) for v in range(1, 11)]).query(K, 0, 1000)  # 1..10, shuffled order irrelevant
    # index int(float32(n) * p) - 1: p50 -> 4, p90 -> 8 (float32 10 x 0.9 == 9.0), p95 -> 8, p99 -> 8
    assert [w.value(a) for a in (Aggregation.P50, Aggregation.P90, Aggregation.P95, Aggregation.P99)] == [
        5,
        9,
        9,
        9,
    ]
    assert percentile_index(1, 0.5) == 0
    assert percentile_index(100, 0.95) == 94
    assert percentile_index(3, 0.5) == 0  # int(1.5) - 1
    big = filled([float(v) for v in range(1, 101)]).query(K, 0, 10_000)
    assert big.percentile(0.95) == 95.0
    # a lower nearest rank, never interpolated
    assert big.percentile(0.95) != pytest.approx(float(np.percentile(np.arange(1, 101), 95)))
    with pytest.raises(ValueError, match="percentile"):
        big.percentile(0)


def test_percentile_ignores_insertion_order() -> None:
    values = [5.0, 1.0, 9.0, 3.0, 7.0]
    w = filled(values).query(K, 0, 1000)
    assert w.percentile(0.5) == sorted(values)[percentile_index(5, 0.5)]


def test_last_within_window() -> None:
    cache = filled([1, 2, 3])  # t = 100..102
    assert cache.last(K, 102.0, 2.0) == 3.0
    assert cache.last(K, 110.0, 2.0) is None
    assert cache.last(K, 101.5, 2.0) == 2.0  # the newest sample not after "now"


def test_ring_is_bounded_by_retention() -> None:
    cache = MetricCache(retention_seconds=10, interval_seconds=1)
    assert cache.bound == 11
    for i in range(100):
        cache.append(K, float(i), float(i))
    w = cache.query(K, 0, 1000)
    assert list(w.values) == [float(v) for v in range(89, 100)]
    assert w.last() == 99.0
    assert cache.nbytes() == 2 * 8 * 11


def test_ring_grows_lazily() -> None:
    cache = MetricCache(retention_seconds=1800, interval_seconds=1)
    cache.append(K, 0.0, 1.0)
    assert cache.nbytes() == 2 * 8 * 16
    for i in range(1, 40):
        cache.append(K, float(i), float(i))
    assert cache.query(K, 0, 100).count == 40
    assert cache.nbytes() == 2 * 8 * 64


def test_series_ids_and_gc() -> None:
    cache = MetricCache(expire_seconds=60)
    cache.append(MetricKind.POD_CPU_USAGE, 0.0, 1.0, "pod-a")
    cache.append(MetricKind.POD_CPU_USAGE, 100.0, 1.0, "pod-b")
    assert cache.ids(MetricKind.POD_CPU_USAGE) == ["pod-a", "pod-b"]
    assert cache.gc(120.0) == 1
    assert cache.ids(MetricKind.POD_CPU_USAGE) == ["pod-b"]
    cache.set("k", {"x": 1})
    assert cache.get("k") == {"x": 1} and cache.get("missing", 5) == 5


def test_empty_window_refuses_aggregation() -> None:
    w = MetricCache().query(K, 0, 1)
    with pytest.raises(LookupError):
        w.avg()
