"""The eviction limiter: at most N evictions per node, per namespace and in total, per descheduling cycle.

Koordinator's ``evictions.EvictionLimiter``, exactly: ``allow_evict`` only checks (``count + 1 > limit``
refuses), ``done`` counts, ``reset`` starts a new cycle. ``node_limit_exceeded`` compares with ``==`` as
Koordinator does, so a limit lowered below the current count does not read as exceeded.
``None`` means unlimited.
"""

from __future__ import annotations

import threading
from typing import Protocol


class _PodLike(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def node_name(self) -> str: ...


class EvictionLimiter:
    def __init__(
        self,
        max_per_node: int | None = None,
        max_per_namespace: int | None = None,
        max_total: int | None = None,
    ) -> None:
        for name, value in (
            ("maxNoOfPodsToEvictPerNode", max_per_node),
            ("maxNoOfPodsToEvictPerNamespace", max_per_namespace),
            ("maxNoOfPodsToEvictTotal", max_total),
        ):
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        self.max_per_node = max_per_node
        self.max_per_namespace = max_per_namespace
        self.max_total = max_total
        self._lock = threading.Lock()
        self._total = 0
        self._per_node: dict[str, int] = {}
        self._per_namespace: dict[str, int] = {}

    def reset(self) -> None:
        """Forget every count: called at the start of each cycle."""
        with self._lock:
            self._total = 0
            self._per_node = {}
            self._per_namespace = {}

    def allow_evict(self, pod: _PodLike) -> bool:
        """Would one more eviction of this pod stay within every limit? Does not count it."""
        with self._lock:
            node = pod.node_name
            if node and self.max_per_node is not None and self._per_node.get(node, 0) + 1 > self.max_per_node:
                return False
            ns = pod.namespace
            if (
                self.max_per_namespace is not None
                and self._per_namespace.get(ns, 0) + 1 > self.max_per_namespace
            ):
                return False
            return not (self.max_total is not None and self._total + 1 > self.max_total)

    def done(self, pod: _PodLike) -> None:
        """Count one eviction of this pod (a pod without a node counts only per namespace and in total)."""
        with self._lock:
            if pod.node_name:
                self._per_node[pod.node_name] = self._per_node.get(pod.node_name, 0) + 1
            self._per_namespace[pod.namespace] = self._per_namespace.get(pod.namespace, 0) + 1
            self._total += 1

    def node_evicted(self, node: str) -> int:
        with self._lock:
            return self._per_node.get(node, 0)

    def namespace_evicted(self, namespace: str) -> int:
        with self._lock:
            return self._per_namespace.get(namespace, 0)

    def total_evicted(self) -> int:
        with self._lock:
            return self._total

    def node_limit_exceeded(self, node: str) -> bool:
        with self._lock:
            return self.max_per_node is not None and self._per_node.get(node, 0) == self.max_per_node

    def namespace_limit_exceeded(self, namespace: str) -> bool:
        with self._lock:
            return (
                self.max_per_namespace is not None
                and self._per_namespace.get(namespace, 0) == self.max_per_namespace
            )
