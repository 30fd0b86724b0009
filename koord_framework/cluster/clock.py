"""Clocks. Everything that reads time takes a ``Clock`` so that simulations and tests run on virtual time."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def sleep(self, seconds: float) -> None: ...


class WallClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class VirtualClock:
    """A clock that only moves when told to. ``sleep`` advances it instantly."""

    def __init__(self, start: float | datetime | None = None) -> None:
        if start is None:
            start = time.time()
        self._now = start.timestamp() if isinstance(start, datetime) else float(start)

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a virtual clock does not go backwards")
        self._now += seconds

    def set(self, when: float | datetime) -> None:
        value = when.timestamp() if isinstance(when, datetime) else float(when)
        if value < self._now:
            raise ValueError("a virtual clock does not go backwards")
        self._now = value


def parse_time(value: str | datetime | None) -> float | None:
    """An RFC 3339 timestamp (as Kubernetes writes them) to epoch seconds; ``None`` stays ``None``."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    else:
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def format_time(epoch: float) -> str:
    """Epoch seconds to RFC 3339 in UTC with a ``Z``, second precision (Kubernetes' metav1.Time)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
