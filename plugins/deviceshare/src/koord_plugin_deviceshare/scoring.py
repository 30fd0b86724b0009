"""Device scoring: LeastAllocated / MostAllocated over weighted device resources (Koordinator ``scoring.go``).

``score_device`` rates one device for a per-instance request; ``score_node`` rates a node by summing each
resource over all its devices of a type. For every weighted resource the device (or node) has:
``requested = (total - free) + request`` (or ``total`` if free somehow exceeds total); the per-resource score
is LeastAllocated ``(total - requested) * 100 / total`` (0 when over) or MostAllocated
``min(requested, total) * 100 / total``, integer math; the result is the weight-averaged score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from koord_framework.scheduler.status import MAX_NODE_SCORE

__all__ = ["LEAST_ALLOCATED", "MOST_ALLOCATED", "DeviceScorer", "sum_resources"]

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"


def _least(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def _most(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


class DeviceScorer:
    """One scoring strategy with its resource weights."""

    __slots__ = ("_per_resource", "strategy", "weights")

    def __init__(self, strategy: str, weights: Mapping[str, int]) -> None:
        if strategy not in (LEAST_ALLOCATED, MOST_ALLOCATED):
            raise ValueError(f"scoring strategy {strategy} is not supported")
        self.strategy = strategy
        self.weights = dict(weights)
        self._per_resource = _least if strategy == LEAST_ALLOCATED else _most

    def score_device(
        self, request: Mapping[str, int], total: Mapping[str, int], free: Mapping[str, int]
    ) -> int:
        # The allocator scores every candidate device of every shared-GPU pod: one pass, no pair list, the
        # per-resource formula inlined (``_least``/``_most``; a zero capacity is skipped before).
        score = 0
        weight_sum = 0
        least = self._per_resource is _least
        for name, weight in self.weights.items():
            t = total.get(name, 0)
            if t == 0:
                continue
            f = free.get(name, 0)
            requested = (t - f + request.get(name, 0)) if t >= f else t
            if least:
                score += (0 if requested > t else (t - requested) * MAX_NODE_SCORE // t) * weight
            else:
                score += (requested if requested < t else t) * MAX_NODE_SCORE // t * weight
            weight_sum += weight
        return score // weight_sum if weight_sum else 0

    def score_node(
        self,
        request: Mapping[str, int],
        totals: Mapping[int, Mapping[str, int]],
        frees: Mapping[int, Mapping[str, int]],
    ) -> int:
        return self.score_sums(request, sum_resources(totals.values()), sum_resources(frees.values()))

    def score_sums(
        self, request: Mapping[str, int], total: Mapping[str, int], free: Mapping[str, int]
    ) -> int:
        """``score_node`` from the per-resource sums over a node's devices of one type."""
        return self.score_device(request, total, free)


def sum_resources(lists: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for res in lists:
        for name, value in res.items():
            out[name] = out.get(name, 0) + value
    return out
