"""The node-resource extension point of koord-manager (Koordinator's ``noderesource/framework``).

A calculator plugin (entry-point group ``koord.manager.noderesource``) computes extended resources of a node
(batch-cpu / batch-memory, mid resources, ...) from the node, its pods and its NodeMetric. The
node-resource controller calls every enabled calculator per node, writes their items into the node's
status when one of them says the change is large enough (``need_sync``) or the node's update interval has
passed. Objects besides the node (the zone-level values on the node's NodeResourceTopology) are written by
the calculators themselves in ``pre_update``, which sees every calculator's items of the node (Koordinator's
``NodePreUpdatePlugin``).

Calculators that decide node *metadata* (Koordinator's ``NodePreparePlugin`` + ``NodeMetaCheckPlugin``:
the cpu-normalization and resource-amplification ratios) put annotations on their items; the controller
merges every item's annotations, lets each calculator write them onto a copy of the node
(``prepare_meta``) and patches the node's annotations when one of them says so (``need_sync_meta``).
Node *labels* (the GPU model and driver of the device calculators) go the same way: items carry
``labels``, each calculator writes its own with ``prepare_labels`` and the patch is sent when a
``need_sync_meta`` says so.

Calculators reading more than the node, its pods and its NodeMetric name those kinds in ``watches`` and
read them, the ``slo-controller-config`` keys and koord-manager's feature gates through the
``NodeResourceContext`` given to ``bind``.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from koord_framework.api.quantity import Quantity
from koord_framework.cluster.clock import parse_time
from koord_framework.manager.colocation import ColocationStrategy
from koord_framework.manager.podrecord import PodRecord
from koord_framework.plugin import ArgsT, ExtensionPoint, Plugin

if TYPE_CHECKING:
    from koord_framework.cluster.port import ClusterPort

__all__ = [
    "ANNOTATION_CPU_NORMALIZATION_RATIO",
    "GROUP",
    "ColocationStrategy",
    "NodeResourceContext",
    "NodeResourcePlugin",
    "PodRecord",
    "ResourceItem",
    "ResourceMetrics",
    "is_resource_diff",
]

GROUP = "koord.manager.noderesource"
"""Entry-point group of node-resource calculators."""

ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
"""The node annotation of the cpu-normalization ratio; the controller amplifies ``kubernetes.io/batch-cpu``
by the ratio an item sets here (``util.PrepareNodeForResource``), whichever calculator computed it."""


@dataclass(frozen=True)
class ResourceItem:
    """One resource a calculator decided for a node (``framework.ResourceItem``).

    ``quantity`` is the integer value written to the node status (batch-cpu in milli-cores, memory in
    bytes); ``zone_quantity`` the per-NUMA-zone values (zone name -> value) for the NodeResourceTopology;
    ``reset`` removes the resource from the node instead. ``annotations`` are node annotations the
    calculator decided (merged over every item; written by the calculators' ``prepare_meta``); an item that
    only carries annotations has ``quantity`` ``None`` and a name no resource uses (the plugin's name).
    """

    name: str
    quantity: int | None = None
    zone_quantity: Mapping[str, int] = field(default_factory=dict)
    message: str = ""
    reset: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    """Node labels the calculator decided (merged over every item; written by ``prepare_labels``)."""
    spelling: Quantity | None = field(default=None, compare=False)
    """The quantity as Koordinator's calculator builds it (value *and* suffix family, Go's
    ``resource.Quantity``), when it is not the one ``format_resource`` would give: the node gets its
    canonical text (``16Gi``, ``18k``), as Go serialises it. Its ``value()`` is ``quantity``. Left out of
    equality, as Go compares quantities by value. Build such an item with :meth:`of`."""

    def __post_init__(self) -> None:
        if self.spelling is not None and self.spelling.value() != self.quantity:
            raise ValueError(
                f"resource item {self.name!r}: spelling {self.spelling} is not quantity {self.quantity}"
            )

    @classmethod
    def of(cls, name: str, quantity: Quantity, message: str = "") -> ResourceItem:
        """The item setting ``name`` to ``quantity``, written to the node in the quantity's own spelling."""
        return cls(name, quantity=quantity.value(), message=message, spelling=quantity)

    def text(self) -> str | None:
        """What the node status gets: ``None`` for a reset or an item without a quantity."""
        if self.reset or self.quantity is None:
            return None
        if self.spelling is not None:
            return str(self.spelling)
        from koord_framework.api.resources import format_resource

        return format_resource(self.name, self.quantity)


@dataclass(frozen=True)
class ResourceMetrics:
    """What the calculators read besides the node and its pods: the node's NodeMetric (manifest form,
    ``None`` when the node has none), the current time (seconds since the epoch), the node's
    NodeResourceTopology from the manager's cache (``None`` when it has none) and, when the caller has
    them, the node's pods already parsed (``pod_records``: one ``PodRecord`` per pod given to
    ``calculate``, in the same order; the controller keeps them while a pod is unchanged)."""

    node_metric: Mapping[str, Any] | None
    now: float
    node_resource_topology: Mapping[str, Any] | None = None
    pod_records: Sequence[PodRecord] | None = None

    def records(self, pods: Sequence[Mapping[str, Any]]) -> Sequence[PodRecord]:
        """``pods`` as records: ``pod_records`` when the caller gave them, else parsed now (a malformed
        pod raises ``ValueError`` naming the field)."""
        if self.pod_records is not None:
            return self.pod_records
        return [PodRecord.from_manifest(p) for p in pods]

    def degraded(self, strategy: ColocationStrategy) -> bool:
        """Koordinator's ``isDegradeNeeded``: the NodeMetric is missing, has no ``status.updateTime`` or is
        older than the strategy's ``degradeTimeMinutes``; calculators then reset what they wrote."""
        nm = self.node_metric
        updated = parse_time(((nm or {}).get("status") or {}).get("updateTime")) if nm else None
        return updated is None or self.now > updated + strategy.degrade_time_minutes * 60


class NodeResourceContext(Protocol):
    """What ``bind`` gives a calculator (Koordinator's ``framework.Option``): cached reads of the cluster
    (the manager's shared informer) and the parsed ``slo-controller-config``."""

    def get(self, kind: str, name: str, namespace: str = "") -> Mapping[str, Any] | None:
        """The cached object, ``None`` when absent."""

    def slo_config(self, key: str) -> Mapping[str, Any]:
        """The JSON object of ``slo-controller-config``'s ``key`` (its last good value; ``{}`` when the key
        or the ConfigMap is absent)."""

    def feature_enabled(self, name: str) -> bool:
        """Whether koord-manager's feature gate ``name`` is on (``--feature-gates``; Koordinator's default
        when not given). Raises ``KeyError`` for a gate koord-manager does not register."""


class NodeResourcePlugin(Plugin[ArgsT], ExtensionPoint):
    """Base of a node-resource calculator (Koordinator's ``ResourceCalculatePlugin`` + ``NodeSyncPlugin``)."""

    extension_point: ClassVar[str] = "NodeResourceCalculator"
    resource_names: ClassVar[Sequence[str]] = ()
    """The node resources this calculator owns (reset and diffed by name)."""
    need_sync_message: ClassVar[str] = ""
    """What the default ``need_sync`` says when one of ``resource_names`` moved (Koordinator's message of
    this calculator); empty: a message naming the resource and the threshold."""
    annotation_names: ClassVar[Sequence[str]] = ()
    """The node annotations this calculator decides (put on its items' ``annotations``)."""
    watches: ClassVar[Sequence[str]] = ()
    """Kinds besides Node, Pod, NodeMetric and ConfigMap the calculator reads through its context; an
    event on one re-calculates the node of the same name when ``wants_event`` says so."""

    def __init__(self, args: ArgsT | Mapping[str, Any] | None = None) -> None:
        self.args = cast(ArgsT, type(self).parse_args(args if args is not None else {}))
        self.context: NodeResourceContext | None = None

    def bind(self, context: NodeResourceContext) -> None:
        """Called once by the controller before the first calculation (Koordinator's ``Setup``)."""
        self.context = context

    def wants_event(self, kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
        """Whether a change of a watched object (``old`` ``None``: created; ``new`` ``None``: deleted) must
        re-calculate its node. Default: any change."""
        return True

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
                return True, self.need_sync_message or (
                    f"{name} diff is bigger than threshold {strategy.resource_diff_threshold}"
                )
        return False, ""

    def prepare_meta(
        self, strategy: ColocationStrategy, node: dict[str, Any], annotations: Mapping[str, str]
    ) -> None:
        """Write this calculator's annotations (``annotations``: every item's, merged) onto ``node``, a
        copy whose ``metadata.annotations`` is a fresh dict (Koordinator's ``NodePreparePlugin`` for meta).
        Default: nothing."""

    def prepare_labels(
        self, strategy: ColocationStrategy, node: dict[str, Any], labels: Mapping[str, str]
    ) -> None:
        """Write this calculator's labels (``labels``: every item's, merged) onto ``node``, a copy whose
        ``metadata.labels`` is a fresh dict (the label half of ``NodePreparePlugin``). Default: nothing."""

    def need_sync_meta(
        self, strategy: ColocationStrategy, old_node: Mapping[str, Any], new_node: Mapping[str, Any]
    ) -> tuple[bool, str]:
        """Whether the annotations and labels this calculator prepared must be patched now
        (``NodeMetaCheckPlugin``).
        Default: never."""
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
