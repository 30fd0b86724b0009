"""The node-resource extension point of koord-manager (Koordinator's ``noderesource/framework``).

A calculator plugin (entry-point group ``koord.manager.noderesource``) computes extended resources of a node
(batch-cpu / batch-memory, mid resources, ...) from the node, its pods and its NodeMetric. The
node-resource controller calls every enabled calculator per node, writes their items into the node's
status when one of them says the change is large enough (``need_sync``) or the node's update interval has
passed. Objects besides the node (the zone-level values on the node's NodeResourceTopology) are written by
the calculators themselves in ``pre_update``, which sees every calculator's items of the node (Koordinator's
``NodePreUpdatePlugin``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, cast

from koord_framework.manager.colocation import ColocationStrategy
from koord_framework.plugin import ArgsT, ExtensionPoint, Plugin

if TYPE_CHECKING:
    from koord_framework.cluster.port import ClusterPort

__all__ = [
    "GROUP",
    "ColocationStrategy",
    "NodeResourcePlugin",
    "ResourceItem",
    "ResourceMetrics",
    "is_resource_diff",
]

GROUP = "koord.manager.noderesource"
"""Entry-point group of node-resource calculators."""


@dataclass(frozen=True)
class ResourceItem:
    """One resource a calculator decided for a node (``framework.ResourceItem``).

    ``quantity`` is the integer value written to the node status (batch-cpu in milli-cores, memory in
    bytes); ``zone_quantity`` the per-NUMA-zone values (zone name -> value) for the NodeResourceTopology;
    ``reset`` removes the resource from the node instead.
    """

    name: str
    quantity: int | None = None
    zone_quantity: Mapping[str, int] = field(default_factory=dict)
    message: str = ""
    reset: bool = False


@dataclass(frozen=True)
class ResourceMetrics:
    """What the calculators read besides the node and its pods: the node's NodeMetric (manifest form,
    ``None`` when the node has none), the current time (seconds since the epoch) and the node's
    NodeResourceTopology from the manager's cache (``None`` when it has none)."""

    node_metric: Mapping[str, Any] | None
    now: float
    node_resource_topology: Mapping[str, Any] | None = None


class NodeResourcePlugin(Plugin[ArgsT], ExtensionPoint):
    """Base of a node-resource calculator (Koordinator's ``ResourceCalculatePlugin`` + ``NodeSyncPlugin``)."""

    extension_point: ClassVar[str] = "NodeResourceCalculator"
    resource_names: ClassVar[Sequence[str]] = ()
    """The node resources this calculator owns (reset and diffed by name)."""

    def __init__(self, args: ArgsT | Mapping[str, Any] | None = None) -> None:
        self.args = cast(ArgsT, type(self).parse_args(args if args is not None else {}))

    @abc.abstractmethod
    def calculate(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
    ) -> list[ResourceItem]:
        """The items for ``node``; raise ``ValueError`` naming the field on input it cannot use."""

    def reset(self, node: Mapping[str, Any], message: str) -> list[ResourceItem]:
        """Items removing this calculator's resources from the node (colocation off, degraded)."""
        return [ResourceItem(name, message=message, reset=True) for name in self.resource_names]

    def pre_update(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        items: Sequence[ResourceItem],
        cluster: ClusterPort,
    ) -> None:
        """Called once per reconcile of ``node`` with every calculator's ``items``, before its status is
        diffed and written (``NodePreUpdatePlugin.PreUpdate``): write objects besides the node through
        ``cluster``. A ``ClusterError`` or ``ValueError`` raised here is logged and leaves the node's
        status update going on, as in Koordinator. Default: nothing."""

    def need_sync(
        self, strategy: ColocationStrategy, old_node: Mapping[str, Any], new_node: Mapping[str, Any]
    ) -> tuple[bool, str]:
        """Whether the change from ``old_node`` to ``new_node`` must be written now: by default, any of
        ``resource_names`` in allocatable moved by more than ``resourceDiffThreshold``."""
        old = ((old_node.get("status") or {}).get("allocatable")) or {}
        new = ((new_node.get("status") or {}).get("allocatable")) or {}
        for name in self.resource_names:
            if is_resource_diff(old, new, name, strategy.resource_diff_threshold):
                return True, f"{name} diff is bigger than threshold {strategy.resource_diff_threshold}"
        return False, ""


def is_resource_diff(old: Mapping[str, Any], new: Mapping[str, Any], name: str, threshold: float) -> bool:
    """``util.IsResourceDiff``: present in one only, or ``|new - old| > old * threshold`` (milli units)."""
    from koord_framework.api.resources import to_int

    if (name in old) != (name in new):
        return True
    if name not in old:
        return False
    old_v, new_v = to_int(name, old[name]), to_int(name, new[name])
    return abs(new_v - old_v) > old_v * threshold
