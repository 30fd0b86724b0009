"""Anomaly detection: a node counts as overloaded only after being seen over its thresholds repeatedly.

Koordinator's ``pkg/descheduler/utils/anomaly`` ``BasicDetector``, a small circuit-breaker-like state
machine: state OK or Anomaly; every ``mark`` feeds one observation; leaving a state starts a new
*generation* (counters cleared); an Anomaly expires back to OK after ``timeout``. Time comes from a
``Clock`` so simulations run on virtual time.

``DetectorCache`` is the go-cache Koordinator keeps detectors in: an entry expires when not ``set`` again
within the cache timeout, so a node that stopped being overloaded for long starts afresh.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from koord_framework.cluster.clock import Clock

DEFAULT_TIMEOUT = 60.0
"""Seconds an Anomaly lasts without being confirmed (a timeout <= 0 means this)."""


class State(enum.Enum):
    OK = "ok"
    ANOMALY = "anomaly"

    def __str__(self) -> str:
        return self.value


@dataclass
class Counter:
    total_detects: int = 0
    total_normalities: int = 0
    total_abnormalities: int = 0
    consecutive_normalities: int = 0
    consecutive_abnormalities: int = 0

    def on_mark(self) -> None:
        self.total_detects += 1

    def on_normality(self) -> None:
        self.total_normalities += 1
        self.consecutive_normalities += 1
        self.consecutive_abnormalities = 0

    def on_abnormality(self) -> None:
        self.total_abnormalities += 1
        self.consecutive_abnormalities += 1
        self.consecutive_normalities = 0

    def clear(self) -> None:
        self.total_detects = self.total_normalities = self.total_abnormalities = 0
        self.consecutive_normalities = self.consecutive_abnormalities = 0


Condition = Callable[[Counter], bool]


def default_anomaly_condition(counter: Counter) -> bool:
    return counter.consecutive_abnormalities > 5


def default_normal_condition(counter: Counter) -> bool:
    return counter.consecutive_normalities > 3


class BasicDetector:
    """One node's detector. ``mark(False)`` records an abnormal observation, ``mark(True)`` a normal one."""

    def __init__(
        self,
        name: str,
        clock: Clock,
        *,
        timeout: float = 0.0,
        anomaly_condition: Condition | None = None,
        normal_condition: Condition | None = None,
        on_state_change: Callable[[str, State, State], None] | None = None,
    ) -> None:
        self.name = name
        self._clock = clock
        self.timeout = timeout if timeout > 0 else DEFAULT_TIMEOUT
        self._anomaly = anomaly_condition or default_anomaly_condition
        self._normal = normal_condition or default_normal_condition
        self._on_state_change = on_state_change
        self._state = State.OK
        self.counter = Counter()
        self._expiration: float | None = None
        self._new_generation(clock.now())

    @property
    def state(self) -> State:
        return self._current_state(self._clock.now())

    def mark(self, normality: bool) -> State:
        """Feed one observation; returns the state after it."""
        now = self._clock.now()
        state = self._current_state(now)
        self.counter.on_mark()
        if normality:
            self.counter.on_normality()
            if state is State.ANOMALY and self._normal(self.counter):
                self._set_state(State.OK, now)
        else:
            self.counter.on_abnormality()
            # In Anomaly an abnormal observation keeps it (setting the same state is a no-op).
            if state is State.OK and self._anomaly(self.counter):
                self._set_state(State.ANOMALY, now)
        return self._current_state(now)

    def reset(self) -> None:
        """Back to OK with fresh counters when in Anomaly (a node found underloaded). A detector already OK
        keeps its counters: as Go's ``Reset``, this sets the state, and setting the current state is a
        no-op, so abnormal marks seen so far still count toward the next Anomaly."""
        self._set_state(State.OK, self._clock.now())

    # --- internals ----------------------------------------------------------------------------------
    def _current_state(self, now: float) -> State:
        if self._state is State.OK:
            if self._expiration is not None and self._expiration < now:
                self._new_generation(now)
        elif (self._expiration is not None and self._expiration < now) or self._normal(self.counter):
            self._set_state(State.OK, now)
        return self._state

    def _set_state(self, state: State, now: float) -> None:
        if self._state is state:
            return
        previous, self._state = self._state, state
        self._new_generation(now)
        if self._on_state_change is not None:
            self._on_state_change(self.name, previous, state)

    def _new_generation(self, now: float) -> None:
        self.counter.clear()
        self._expiration = now + self.timeout if self._state is State.ANOMALY else None


class DetectorCache:
    """Detectors by node name; an entry lives ``ttl`` seconds after its last ``set`` (go-cache semantics)."""

    def __init__(self, clock: Clock, ttl: float) -> None:
        self._clock = clock
        self.ttl = ttl
        self._entries: dict[str, tuple[BasicDetector, float | None]] = {}

    def get(self, name: str) -> BasicDetector | None:
        entry = self._entries.get(name)
        if entry is None:
            return None
        detector, expires = entry
        if expires is not None and self._clock.now() > expires:
            del self._entries[name]
            return None
        return detector

    def set(self, name: str, detector: BasicDetector) -> None:
        expires = self._clock.now() + self.ttl if self.ttl > 0 else None
        self._entries[name] = (detector, expires)

    def __len__(self) -> int:
        return len(self._entries)
