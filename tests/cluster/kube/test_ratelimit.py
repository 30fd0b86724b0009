"""The client's token bucket."""

from __future__ import annotations

import pytest

from koord_framework.cluster.kube.ratelimit import TokenBucket


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_burst_then_qps() -> None:
    t = FakeTime()
    bucket = TokenBucket(10, 5, monotonic=t.monotonic, sleep=t.sleep)
    for _ in range(5):
        bucket.wait()
    assert t.slept == [] and t.now == 0.0
    for _ in range(10):
        bucket.wait()
    assert t.now == pytest.approx(1.0), "ten more tokens at 10 per second take a second"


def test_concurrent_reservations_queue_up() -> None:
    t = FakeTime()
    bucket = TokenBucket(100, 1, monotonic=t.monotonic, sleep=t.sleep)
    delays = [bucket.reserve() for _ in range(4)]
    assert delays == pytest.approx([0.0, 0.01, 0.02, 0.03])
    assert bucket.waited == pytest.approx(0.06)


def test_refill_is_capped_at_burst() -> None:
    t = FakeTime()
    bucket = TokenBucket(1, 2, monotonic=t.monotonic, sleep=t.sleep)
    t.now = 1000.0
    assert bucket.try_take() and bucket.try_take()
    assert not bucket.try_take()


def test_disabled_and_invalid() -> None:
    bucket = TokenBucket(0, 0)
    assert all(bucket.reserve() == 0.0 for _ in range(1000))
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(5, 0)
