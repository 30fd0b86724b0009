"""Metrics: every component owns a prometheus ``CollectorRegistry`` (never the global one).

Owning the registry keeps two schedulers in one test process from colliding and lets a test assert on exactly
the series one component emitted. Components serve ``/metrics`` with their health endpoints
(``koord_framework.health.HealthServer``).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest


def new_registry() -> CollectorRegistry:
    return CollectorRegistry(auto_describe=True)


def render(registry: CollectorRegistry) -> str:
    """The registry in the Prometheus text format (what ``/metrics`` serves)."""
    return generate_latest(registry).decode()
