"""``NodeNUMAResourceArgs``: Koordinator's v1 args type with its defaults and validation.

Defaults (``SetDefaults_NodeNUMAResourceArgs``): ``defaultCPUBindPolicy: FullPCPUs``; both scoring strategies
``LeastAllocated`` over cpu and memory, weight 1 each. Validation (``ValidateNodeNUMAResourceArgs`` and the
plugin's constructor): the default bind policy is empty, FullPCPUs or SpreadByPCPUs; strategy types are
LeastAllocated or MostAllocated; weights are within [1, 100].
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from koord_framework.config.common import ConfigModel
from koord_framework.plugin import PluginArgs

__all__ = ["NodeNUMAResourceArgs", "ResourceWeight", "ScoringStrategy"]

DEFAULT_CPU_BIND_POLICY: Final = "FullPCPUs"


class ResourceWeight(ConfigModel):
    """One resource of a scoring strategy (kube-scheduler's ``ResourceSpec``)."""

    name: str
    """Resource name, e.g. ``cpu``."""
    weight: Annotated[int, Field(ge=1, le=100)] = 1
    """Weight of this resource in the score, 1..100."""


def _cpu_memory() -> list[ResourceWeight]:
    return [ResourceWeight(name="cpu", weight=1), ResourceWeight(name="memory", weight=1)]


class ScoringStrategy(ConfigModel):
    """How nodes (or NUMA nodes) are ranked."""

    type: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"
    """LeastAllocated spreads, MostAllocated packs. (BalancedAllocation is not supported by this plugin.)"""
    resources: list[ResourceWeight] = Field(default_factory=_cpu_memory)
    """Weighted resources. Default: cpu 1, memory 1."""

    def weights(self) -> dict[str, int]:
        return {r.name: r.weight for r in self.resources}


class NodeNUMAResourceArgs(PluginArgs):
    """Arguments of NodeNUMAResource."""

    default_cpu_bind_policy: Literal["", "FullPCPUs", "SpreadByPCPUs"] = Field(
        default=DEFAULT_CPU_BIND_POLICY, alias="defaultCPUBindPolicy"
    )
    """Bind policy of an LSE/LSR pod that names none (or ``Default``). Empty: such pods get no cpuset.
    Default: FullPCPUs."""
    scoring_strategy: ScoringStrategy = Field(default_factory=ScoringStrategy)
    """Node-level scoring. Default: LeastAllocated over cpu and memory (weight 1 each). Its resource
    weights also weigh the NUMA-hint scores (as upstream)."""
    numa_scoring_strategy: ScoringStrategy = Field(
        default_factory=ScoringStrategy, alias="numaScoringStrategy"
    )
    """NUMA-level scoring: its type picks among NUMA nodes (MostAllocated also makes the default NUMA allocate
    strategy MostAllocated). Default: LeastAllocated over cpu and memory."""

    @property
    def default_numa_allocate_strategy(self) -> str:
        """``GetDefaultNUMAAllocateStrategy``."""
        return "MostAllocated" if self.numa_scoring_strategy.type == "MostAllocated" else "LeastAllocated"
