"""kube-scheduler's ``helper.DefaultNormalizeScore``, per node and over an array of scores."""

from __future__ import annotations

import numpy as np

from koord_framework.scheduler.constant_arrays import filled
from koord_framework.scheduler.interface import NodeScore, VectorNormalize
from koord_framework.scheduler.table import Int64Array

__all__ = ["VectorNormalize", "default_normalize_array", "default_normalize_score"]


def default_normalize_score(max_priority: int, reverse: bool, scores: list[NodeScore]) -> None:
    """Scale [0, max(scores)] to [0, max_priority] (integer division); ``reverse`` flips the result.

    When every score is 0, the scores stay 0, or all become ``max_priority`` when reversed.
    """
    top = max((s.score for s in scores), default=0)
    if top <= 0:
        if reverse:
            for s in scores:
                s.score = max_priority
        return
    for s in scores:
        value = max_priority * s.score // top
        s.score = max_priority - value if reverse else value


def default_normalize_array(max_priority: int, reverse: bool, scores: Int64Array) -> Int64Array:
    """``default_normalize_score`` over an array, element for element the same integers."""
    # All zeros is the common case (no taint, no preference anywhere): counting non-zeros is the cheapest
    # reduction NumPy has, and then the maximum is 0 without computing it.
    top = int(scores.max()) if np.count_nonzero(scores) else 0
    if top <= 0:
        return filled(scores.shape[0], max_priority) if reverse else scores
    value = (scores * max_priority) // top  # floor division, as Python's ``//`` in the per-node form
    return max_priority - value if reverse else value
