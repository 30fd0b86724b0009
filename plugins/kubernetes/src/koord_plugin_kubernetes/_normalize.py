"""kube-scheduler's ``helper.DefaultNormalizeScore``."""

from __future__ import annotations

from koord_framework.scheduler.interface import NodeScore


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
