"""What every component's framework hands its plugins, whatever the component.

The scheduler's ``Handle`` (``koord_framework.scheduler.interface``) and the descheduler's
(``koord_framework.descheduler.interface``) both extend ``BaseHandle``: a plugin that only needs the cluster,
the clock and the metrics registry can be written against this one and run in either component.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from koord_framework.cluster.clock import Clock
    from koord_framework.cluster.port import ClusterPort


class BaseHandle(abc.ABC):
    """Cluster access, time and metrics, shared by the scheduler's and the descheduler's handles."""

    profile_name: str
    """The profile the plugin was configured in (``schedulerName`` or the descheduler profile's name)."""

    @property
    @abc.abstractmethod
    def cluster(self) -> ClusterPort:
        """The cluster port: the embedded cluster or a real one (``koord_framework.cluster``)."""

    @property
    @abc.abstractmethod
    def clock(self) -> Clock:
        """The component's clock (virtual in simulations and tests): read time only through it."""

    @property
    @abc.abstractmethod
    def metrics(self) -> CollectorRegistry:
        """The component's own prometheus registry (never the global one)."""
