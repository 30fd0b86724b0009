"""Read-only constant arrays handed out as views, for vectorised answers that are the same on every row.

Most pods make most filters trivial (no ``nodeName``, no cordoned or tainted node): the answer is "every row
passes", and allocating it anew each cycle costs more than deciding it. The views share one buffer per
constant that grows as needed. They are read-only, so a caller that tried to modify one would fail loudly
instead of changing the answer for everybody else. The framework only reads what ``filter_all``,
``score_all`` and ``normalize_all`` return, so any plugin may answer with these.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from koord_framework.scheduler.table import BoolArray, Int64Array

_TRUE: list[BoolArray] = [np.zeros(0, dtype=np.bool_)]
_FILLED: dict[int, Int64Array] = {}
"""Buffers by value: only a few constants are ever asked for (0, MAX_NODE_SCORE)."""


def _frozen(n: int, value: int | bool, dtype: type[np.generic]) -> npt.NDArray[Any]:
    buf = np.full(max(n, 1024), value, dtype=dtype)
    buf.setflags(write=False)
    return buf


def all_pass(n: int) -> BoolArray:
    """``n`` times True (read-only)."""
    buf = _TRUE[0]
    if buf.shape[0] < n:
        buf = _TRUE[0] = _frozen(2 * n, True, np.bool_)
    return buf[:n]


def filled(n: int, value: int) -> Int64Array:
    """``n`` times ``value`` as int64 (read-only)."""
    buf = _FILLED.get(value)
    if buf is None or buf.shape[0] < n:
        buf = _FILLED[value] = _frozen(2 * n, value, np.int64)
    return buf[:n]
