"""The descheduler's extension points: one ABC each, with the contract a plugin author relies on.

Modelled on Koordinator's ``pkg/descheduler/framework/types.go`` (itself a fork of the framework of
kubernetes-sigs/descheduler). A plugin class subclasses ``DeschedulerPlugin`` and the ABCs of the points it
implements; the framework constructs it once per profile as ``PluginClass(args, handle)``.

A profile names its plugins under four keys: ``deschedule``, ``balance``, ``evict`` and ``filter``. The
``filter`` key enables both ``Filter`` and ``PreEvictionFilter`` of a plugin (Koordinator's ``FilterPlugin``
carries both methods); here they are two ABCs so a plugin that has no pre-eviction check need not pretend.

Call order of one descheduling cycle (``Descheduler.run_once``)::

    list Ready nodes matching the global nodeSelector  (fewer than 2 nodes: the cycle fails, nothing runs)
    reset the eviction limiter
    for every profile, in order: its Deschedule plugins, in order, with the profile's nodes
    for every profile, in order: its Balance plugins, in order, with the profile's nodes

Deschedule/Balance plugins never evict on their own: they ask ``handle.evictor()``, whose ``evict`` checks
the limiter, honours the framework's dry run, then calls the profile's single Evict plugin. Before asking,
a plugin filters candidates with ``evictor().filter`` (all Filter plugins must agree) and, right before
evicting, may call ``evictor().pre_eviction_filter``.

Pods are the slim ``PodInfo`` records and nodes the ``NodeRecord`` records of
``koord_framework.api.objects``; plugins never mutate them.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.handle import BaseHandle
from koord_framework.plugin import ArgsT, ExtensionPoint, Plugin

if TYPE_CHECKING:
    from koord_framework.descheduler.node_usage import NodeMetricInfo, NodePods

PodFilter = Callable[[PodInfo], bool]
"""A predicate over pods: True keeps (or admits) the pod."""


# --- values passed between the framework and plugins ---------------------------------------------------
class EvictionFailed(Exception):
    """Raised by an Evict plugin to refuse an eviction with a reason the framework records."""


@dataclass(frozen=True, slots=True)
class EvictOptions:
    """Why and by whom a pod is evicted. ``plugin_name`` is filled by the framework when left empty."""

    plugin_name: str = ""
    reason: str = ""
    delete_options: Mapping[str, Any] | None = None
    """Passed on to the Eviction API / delete call (``gracePeriodSeconds``, ``preconditions``, ...)."""


@dataclass(frozen=True, slots=True)
class Status:
    """Result of a Deschedule/Balance call: ``error`` set means the plugin failed (the cycle reports it)."""

    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Evictor(abc.ABC):
    """What ``handle.evictor()`` returns: the profile's filters and its evict plugin behind the limiter."""

    @abc.abstractmethod
    def filter(self, pod: PodInfo) -> bool:
        """True when every Filter plugin of the profile admits the pod (stops at the first refusal)."""

    @abc.abstractmethod
    def pre_eviction_filter(self, pod: PodInfo) -> bool:
        """True when every PreEvictionFilter plugin admits the pod, right before eviction."""

    @abc.abstractmethod
    def evict(self, pod: PodInfo, options: EvictOptions) -> bool:
        """Evict the pod; False when refused (limiter, evict plugin, API). Never raises for a refusal.

        In the framework's dry run nothing is changed, yet True is returned and the eviction is counted, so
        a plugin behaves exactly as it would for real.
        """


class Handle(BaseHandle):
    """What the framework gives every plugin: cluster access (``BaseHandle``), shared caches, the evictor,
    the round report."""

    @property
    @abc.abstractmethod
    def dry_run(self) -> bool:
        """The framework's dry run: ``evictor().evict`` reports what it would do and changes nothing."""

    @property
    @abc.abstractmethod
    def descheduling_interval(self) -> float:
        """Seconds between cycles (0: one cycle); plugins keeping state across cycles size caches by it."""

    @property
    @abc.abstractmethod
    def node_selector(self) -> Mapping[str, Any] | None:
        """The profile's node LabelSelector (None: every node)."""

    @abc.abstractmethod
    def evictor(self) -> Evictor: ...

    @property
    def instance_name(self) -> str:
        """What names this descheduler across restarts and fail-overs: its Lease (``namespace/name``) when
        it is leader-elected, else "" (each process is a new instance). Work a plugin hands to the cluster
        and finishes later (a PodMigrationJob) is marked with it, so the next leader carries it on."""
        return ""

    @abc.abstractmethod
    def pods_on_node(self, node_name: str) -> list[PodInfo]:
        """Every pod bound to the node, in any phase (``GetPodsAssignedToNodeFunc``); callers that want
        only pods occupying resources drop Succeeded/Failed ones (``list_pods_on_node``)."""

    @abc.abstractmethod
    def ready_nodes(self, label_selector: str = "") -> list[NodeRecord]:
        """Ready nodes matching a label-selector string (``a=b,c!=d``), unschedulable ones included."""

    @abc.abstractmethod
    def node(self, name: str) -> NodeRecord | None: ...

    @abc.abstractmethod
    def node_metric(self, name: str) -> NodeMetricInfo | None:
        """The node's NodeMetric, parsed once per resourceVersion; None when there is none."""

    @abc.abstractmethod
    def node_pods(self, node_name: str) -> NodePods:
        """The node's pods that occupy resources, its prod pods, and the prod pods' measured usage from the
        node's NodeMetric: what load-aware plugins read per node, kept current by the cache."""

    @abc.abstractmethod
    def pods_owned_by(self, owner_uid: str) -> list[PodInfo]:
        """Pods having an ownerReference with this uid (any phase)."""

    @abc.abstractmethod
    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """Labels of a Namespace object; None when the cluster has no such Namespace."""

    @abc.abstractmethod
    def report_nodes(self, plugin: str, high: Sequence[str], low: Sequence[str]) -> None:
        """Tell the round report which nodes a balance plugin found over (high) and under (low) its
        thresholds; ``koord deschedule`` prints them. Optional for plugins; harmless to call twice."""

    def list_objects(self, kind: str, namespace: str | None = None) -> list[Mapping[str, Any]]:
        """Objects of ``kind`` (read-only), as Koordinator's listers give them: from the descheduler's shared
        informer, so that a plugin asking once per candidate pod (the MigrationController's PodMigrationJobs)
        costs no API call. Like any informer cache it may lag the cluster by the watch delay. This default
        lists from the cluster; the framework's handle reads its informer."""
        objs, _ = self.cluster.list(kind, namespace)
        return list(objs)


def list_pods_on_node(handle: Handle, node_name: str, keep: PodFilter | None = None) -> list[PodInfo]:
    """``podutil.ListPodsOnANode``: pods on the node that occupy resources (not Succeeded/Failed)."""
    out = []
    for pod in handle.pods_on_node(node_name):
        if pod.phase in ("Succeeded", "Failed"):
            continue
        if keep is not None and not keep(pod):
            continue
        out.append(pod)
    return out


# --- extension points -----------------------------------------------------------------------------
class DeschedulerPlugin(Plugin[ArgsT]):
    """Base of descheduler plugins: constructed once per profile with validated args and the handle."""

    def __init__(self, args: ArgsT, handle: Handle) -> None:
        # Validated again when given raw (a mapping in a test): ``self.args`` is always ``Args``.
        self.args = cast(ArgsT, type(self).parse_args(args))
        self.handle = handle


class DeschedulePlugin(ExtensionPoint):
    """Look at each node on its own and evict pods that violate a rule (RemovePodsViolating..., PodLifeTime).

    Runs before every Balance plugin of every profile. ``nodes`` are the profile's Ready nodes. Return
    ``None`` or ``Status()`` on success; an error status is reported and ends the cycle (as Koordinator's
    ``deschedulerOnce`` does). Exceptions are turned into error statuses naming the plugin.
    """

    extension_point: ClassVar[str] = "Deschedule"

    @abc.abstractmethod
    def deschedule(self, nodes: Sequence[NodeRecord]) -> Status | None: ...


class BalancePlugin(ExtensionPoint):
    """Look at the nodes together and move load from some to others (LowNodeLoad, HighNodeUtilization).

    Runs after every Deschedule plugin of every profile. Same status contract as ``DeschedulePlugin``.
    A balance plugin should call ``handle.report_nodes`` with the nodes it classified.
    """

    extension_point: ClassVar[str] = "Balance"

    @abc.abstractmethod
    def balance(self, nodes: Sequence[NodeRecord]) -> Status | None: ...


class FilterPlugin(ExtensionPoint):
    """May this pod be evicted at all? Called for candidate pods, often for every pod of a node.

    Must be cheap and side-effect free: plugins call it while classifying pods, not only when evicting.
    All Filter plugins of the profile must admit a pod (``Evictor.filter``).
    """

    extension_point: ClassVar[str] = "Filter"

    @abc.abstractmethod
    def filter(self, pod: PodInfo) -> bool: ...


class PreEvictionFilterPlugin(ExtensionPoint):
    """A last, possibly more expensive check right before a pod is evicted (nodeFit, namespace labels).

    Enabled through the profile's ``filter`` key together with ``Filter``.
    """

    extension_point: ClassVar[str] = "PreEvictionFilter"

    @abc.abstractmethod
    def pre_eviction_filter(self, pod: PodInfo) -> bool: ...


class EvictPlugin(ExtensionPoint):
    """Carry an eviction out. Exactly one Evict plugin per profile.

    Called only through ``Evictor.evict`` after the limiter admitted the pod and outside dry run. Returns
    True when the eviction happened or was durably requested (a PodMigrationJob); False leaves the pod in
    place, and the framework neither counts it nor tells the calling plugin more than that. The plugin
    records the reason (an Event, a job status) so every eviction is explained.
    """

    extension_point: ClassVar[str] = "Evict"

    @abc.abstractmethod
    def evict(self, pod: PodInfo, options: EvictOptions) -> bool: ...


class BackgroundPlugin(abc.ABC):
    """A plugin with work outside the cycle (a controller reconciling jobs): the runner calls ``tick`` after
    every cycle and while waiting for the next, with the clock's current time. Not an extension point."""

    @abc.abstractmethod
    def tick(self, now: float) -> float | None:
        """Do the work due at ``now``; return when to be called next (None: nothing pending)."""


EXTENSION_POINTS: dict[str, type[ExtensionPoint]] = {
    cls.extension_point: cls
    for cls in (DeschedulePlugin, BalancePlugin, FilterPlugin, PreEvictionFilterPlugin, EvictPlugin)
}
"""Extension-point name -> ABC."""

PROFILE_KEYS: dict[str, tuple[str, ...]] = {
    "deschedule": ("Deschedule",),
    "balance": ("Balance",),
    "evict": ("Evict",),
    "filter": ("Filter", "PreEvictionFilter"),
}
"""Profile ``plugins`` key -> the extension points it enables (the first one is required)."""


__all__ = [
    "EXTENSION_POINTS",
    "PROFILE_KEYS",
    "BackgroundPlugin",
    "BalancePlugin",
    "DeschedulePlugin",
    "DeschedulerPlugin",
    "EvictOptions",
    "EvictPlugin",
    "EvictionFailed",
    "Evictor",
    "FilterPlugin",
    "Handle",
    "PodFilter",
    "PreEvictionFilterPlugin",
    "Status",
    "list_pods_on_node",
]
