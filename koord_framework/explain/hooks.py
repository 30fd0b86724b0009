"""The ``koord explain`` hooks: how a plugin adds its own section to ``koord explain node`` / ``quota``.

A plugin implements a hook by also subclassing its class (a mixin, as ``CycleExplainer``); the hook is
optional, and only the plugins the profile enables are asked. A section is a title, the lines of the text
form and a JSON-able ``data`` mapping (the ``sections[].data`` of ``-o json``; ``docs/explain.md``):

* ``NodeExplainer.explain_node(node_name)``: a scheduler plugin says what it sees on the node (LoadAware
  its usage against its thresholds, NodeNUMAResource the free CPUs per NUMA zone, ...). It runs on the
  plugin instance of a scheduler built over a copy of the cluster and started (its caches filled), after
  nothing was scheduled, and reads only.
* ``QuotaExplainer.explain_quota(quota_name)``: the same for a quota (ElasticQuota: min / max / runtime /
  used / request and the rounds of the runtime computation). Return ``None`` for a quota the plugin does
  not know.
* ``NodeResourceExplainer.explain_resources(strategy, node, pods, metrics)``: a koord-manager node-resource
  calculator shows its calculation (BatchResource: Koordinator's formula with the node's numbers), on the
  inputs ``calculate`` gets. Calculators without the hook still show the items ``calculate`` returns.

* ``PodExplainer.explain_pod(plugin, cycle)``: a section of ``koord explain pod`` about one scheduler
  plugin's part in the pod's dry cycle (Reservation: the reservation the pod would use, or why each
  candidate was rejected). Unlike the mixins above it is a class of its own, registered in the
  ``koord.explain.pod`` entry-point group under the name of the plugin it explains, so that a distribution
  adds it without touching the plugin class; it is asked only when that plugin is enabled in the pod's
  profile, after the cycle, with the plugin instance and the cycle (``PodCycle``).

A hook that raises does not stop the others: its section reports the failure.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState

if TYPE_CHECKING:  # koord-scheduler imports this module with Reservation; the manager's is not its to load
    from koord_framework.manager.noderesource import ColocationStrategy, ResourceMetrics

__all__ = [
    "POD_EXPLAINERS",
    "ExplainSection",
    "NodeExplainer",
    "NodeResourceExplainer",
    "PodCycle",
    "PodExplainer",
    "QuotaExplainer",
]

POD_EXPLAINERS: Final = "koord.explain.pod"
"""The entry-point group of ``PodExplainer`` classes (entry name: the scheduler plugin explained)."""


@dataclass
class ExplainSection:
    """One plugin's part of an explanation."""

    title: str
    """A short heading (the plugin's name by default, when empty)."""
    lines: list[str] = field(default_factory=list)
    """The text form, one line each (no trailing newline; the renderer indents them)."""
    data: dict[str, Any] = field(default_factory=dict)
    """The JSON form: plain values, lists and mappings only."""


class NodeExplainer(abc.ABC):
    """A scheduler plugin's section of ``koord explain node``. Must not change any state."""

    @abc.abstractmethod
    def explain_node(self, node_name: str) -> ExplainSection | None:
        """What the plugin sees on ``node_name`` (None: nothing to say about this node)."""


class QuotaExplainer(abc.ABC):
    """A scheduler plugin's section of ``koord explain quota``. Must not change any state."""

    @abc.abstractmethod
    def explain_quota(self, quota_name: str) -> ExplainSection | None:
        """What the plugin knows of quota ``quota_name`` (None: not a quota it manages)."""


class NodeResourceExplainer(abc.ABC):
    """A koord-manager node-resource calculator's section of ``koord explain node``."""

    @abc.abstractmethod
    def explain_resources(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
    ) -> ExplainSection:
        """The calculation of the node's resources on the inputs ``calculate`` gets, step by step."""


@dataclass(frozen=True)
class PodCycle:
    """One pod's dry scheduling cycle as ``koord explain pod`` ran it (read only)."""

    pod: PodInfo
    """The pod as the cycle saw it."""
    state: CycleState
    """The cycle's state after the cycle (what each plugin wrote in it)."""
    node: str | None
    """The chosen node (None: unschedulable)."""
    rejected: Mapping[str, str]
    """Node -> ``Plugin: reason`` of the plugin that rejected it (PreFilter or Filter)."""
    annotations: Mapping[str, str]
    """What Reserve / PreBind wrote on the pod."""


class PodExplainer(abc.ABC):
    """A section of ``koord explain pod`` about one scheduler plugin's part in the pod's cycle (entry-point
    group ``POD_EXPLAINERS``; constructed without arguments). Must not change any state."""

    @abc.abstractmethod
    def explain_pod(self, plugin: Any, cycle: PodCycle) -> ExplainSection | None:
        """What ``plugin`` (the instance of the profile that scheduled the pod) decided for the pod (None:
        nothing to say about this pod)."""
