"""Small exact pieces of Go the MigrationController relies on: IntOrString scaling, the max-unavailable
rule, and the token bucket of ``golang.org/x/time/rate`` (used for the eviction QPS and object limiters).
"""

from __future__ import annotations

import math
import re

IntOrString = int | str

_PERCENT = re.compile(r"^(-?\d+)%$")


class IntOrStringError(ValueError):
    pass


def scaled_value(value: IntOrString, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int as is; ``"N%"`` of ``total`` rounded down (or up).

    Any other string is an error, as in Kubernetes.
    """
    if isinstance(value, bool):
        raise IntOrStringError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    m = _PERCENT.match(value)
    if m is None:
        raise IntOrStringError(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}"
        )
    percent = int(m.group(1))
    exact = percent * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def max_unavailable(replicas: int, value: IntOrString | None) -> int:
    """``GetMaxUnavailable`` (and ``GetMaxMigrating``): the configured value scaled to ``replicas`` (rounded
    down; a result of 0 counts as 1); unset: 10% of replicas above 10, 2 for 4..10, else 1; at most
    ``replicas``."""
    result = 0
    if value is not None:
        result = scaled_value(value, replicas, False)
        if result == 0:
            result = 1
    if result == 0:
        if replicas > 10:
            result = scaled_value("10%", replicas, False)
        elif 4 <= replicas <= 10:
            result = 2
        else:
            result = 1
    return min(result, replicas)


max_migrating = max_unavailable


def limiter_burst(burst: int) -> int:
    """``GetLimiterBurst``: 0 means 1."""
    return burst or 1


class TokenBucket:
    """``rate.Limiter``: ``limit`` tokens per second accumulate up to ``burst``; it starts full."""

    def __init__(self, limit: float, burst: int, now: float) -> None:
        self.limit = limit
        self.burst = burst
        self._tokens = float(burst)
        self._last = now

    def _advance(self, now: float) -> float:
        if now < self._last:
            now = self._last
        if math.isinf(self.limit):
            return float(self.burst)
        return min(float(self.burst), self._tokens + (now - self._last) * self.limit)

    def tokens(self, now: float) -> float:
        return self._advance(now)

    def allow(self, now: float, n: int = 1) -> bool:
        """``AllowN``: take ``n`` tokens when available (the clock never runs backwards here)."""
        tokens = self._advance(now)
        self._last = max(now, self._last)
        if tokens >= n:
            self._tokens = tokens - n
            return True
        self._tokens = tokens
        return False

    def set_limit(self, limit: float, now: float) -> None:
        self._tokens = self._advance(now)
        self._last = max(now, self._last)
        self.limit = limit
