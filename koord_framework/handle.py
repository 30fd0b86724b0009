"""What every component's framework hands its plugins, whatever the component.

The scheduler's ``Handle`` (``koord_framework.scheduler.interface``) and the descheduler's
(``koord_framework.descheduler.interface``) both extend ``BaseHandle``: a plugin that only needs the cluster,
the clock and the metrics registry can be written against this one and run in either component.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from koord_framework.cluster.clock import Clock
    from koord_framework.cluster.port import ClusterPort

T = TypeVar("T")


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

    def shared(
        self, key: Hashable, factory: Callable[[], T], *, scope: Literal["profile", "component"] = "profile"
    ) -> T:
        """The value stored under ``key``, made by ``factory()`` on first use.

        Where plugins share what they derive from the cluster or the snapshot (an index of node labels,
        per-row pod counts) instead of a module-global cache keyed by handle: the value lives and dies with
        the handle. ``scope="profile"`` (the default) shares it between the plugins of this profile only
        (right for anything that depends on a plugin's args); ``scope="component"`` between every profile of
        the component (right for metric collectors, since all profiles share one registry). Use a key your
        distribution owns (a class of yours, or a string starting with your package name).
        """
        slots = self._component_slots() if scope == "component" else self._shared_slots()
        try:
            return cast(T, slots[key])
        except KeyError:
            value = slots[key] = factory()
            return value

    def _shared_slots(self) -> dict[Hashable, Any]:
        """The dictionary behind ``shared`` (per handle); a component may override it."""
        try:
            slots: dict[Hashable, Any] = self.__dict__["_koord_shared_slots"]
        except KeyError:
            slots = self.__dict__["_koord_shared_slots"] = {}
        return slots

    def _component_slots(self) -> dict[Hashable, Any]:
        """The dictionary behind ``shared(scope="component")``; a component with several profiles
        overrides it with one dictionary for all of them."""
        return self._shared_slots()
