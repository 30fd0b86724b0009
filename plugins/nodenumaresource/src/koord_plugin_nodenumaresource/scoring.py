"""LeastAllocated / MostAllocated over weighted resources (Koordinator's ``resourceAllocationScorer``).

``score(requested, allocatable, pod_requests)``: per resource of the weight map with a non-zero allocatable,
``requested + pod request`` against allocatable; an extended resource the pod does not ask for is skipped.
LeastAllocated: ``Σ w·(c−r)·100/c / Σw`` (0 when r > c); MostAllocated: ``Σ w·min(r,c)·100/c / Σw``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from koord_framework.scheduler.status import MAX_NODE_SCORE

__all__ = ["LEAST_ALLOCATED", "MOST_ALLOCATED", "ResourceScorer", "is_scalar_resource"]

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
_NATIVE: Final = frozenset({"cpu", "memory", "ephemeral-storage"})


def is_scalar_resource(name: str) -> bool:
    """kube-scheduler's ``IsScalarResourceName``: extended (domain-qualified, not kubernetes.io), hugepages,
    attachable volumes, or ``requests.``-prefixed names."""
    if name.startswith(("hugepages-", "attachable-volumes-", "requests.")):
        return True
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


class ResourceScorer:
    """One strategy type over one weight map."""

    __slots__ = ("most", "weights")

    def __init__(self, strategy: str, weights: Mapping[str, int]) -> None:
        self.most = strategy == MOST_ALLOCATED
        self.weights = dict(weights)

    def score(
        self, requested: Mapping[str, int], allocatable: Mapping[str, int], pod_requests: Mapping[str, int]
    ) -> int:
        node_score = 0
        weight_sum = 0
        for name, weight in self.weights.items():
            pod = pod_requests.get(name, 0)
            if pod == 0 and is_scalar_resource(name):
                continue
            if name not in _NATIVE and not is_scalar_resource(name):
                continue
            if is_scalar_resource(name) and name not in allocatable:
                continue
            cap = allocatable.get(name, 0)
            if cap == 0:
                continue
            req = requested.get(name, 0) + pod
            if self.most:
                part = min(req, cap) * MAX_NODE_SCORE // cap
            else:
                part = 0 if req > cap else (cap - req) * MAX_NODE_SCORE // cap
            node_score += part * weight
            weight_sum += weight
        return node_score // weight_sum if weight_sum else 0
