"""A token bucket, client-go's ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)`` in Python.

Every request to the API server takes one token. ``burst`` tokens are available at once and the bucket
refills at ``qps`` per second; a request that finds it empty waits for its turn (first come, first
served), so a burst of binds is smoothed rather than refused. kube-scheduler's defaults (50 / 100) cap it
at about 50 binds per second; the platform's defaults are far higher, since one bind costs the API server
a few milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """Thread-safe. ``qps <= 0`` disables limiting."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 when qps is set, got {burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = monotonic()
        self.waited = 0.0
        """Total seconds callers spent waiting for tokens (exported as a metric by the adapter)."""

    def reserve(self) -> float:
        """Take a token now, possibly on credit; returns how long the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            if self._tokens >= 0:
                return 0.0
            # In debt: this caller's token arrives once the refill has paid back what earlier callers took.
            delay = -self._tokens / self.qps
            self.waited += delay
            return delay

    def wait(self) -> None:
        """Block until a token is available, then take it."""
        delay = self.reserve()
        if delay > 0:
            self._sleep(delay)

    def try_take(self) -> bool:
        """Take a token only if one is available now."""
        if self.qps <= 0:
            return True
        with self._lock:
            now = self._monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False
