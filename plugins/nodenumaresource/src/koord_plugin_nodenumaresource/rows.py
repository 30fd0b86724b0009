"""Per-row facts about nodes, as NumPy columns, for the vectorised Filter and Score.

Most (pod, node) pairs need none of NodeNUMAResource's machinery: the node has no NUMA policy, no cpu
amplification ratio and no bind policy of its own, so a pod that does not pin CPUs passes and scores like
NodeResourcesFit's requested/allocatable, and a pinning pod with a merely preferred policy only needs a valid
CPU topology. These columns say which rows are such easy ones; every other row goes through the per-node
``filter``/``score``, so both forms always agree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from koord_framework.api.objects import NodeRecord
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.table import BoolArray, NodeTable
from koord_plugin_nodenumaresource.annotations import (
    LABEL_NUMA_TOPOLOGY_POLICY,
    NODE_BIND_NONE,
    AnnotationError,
    amplification_ratios,
    node_cpu_bind_policy,
)
from koord_plugin_nodenumaresource.topology_options import TopologyOptions, TopologyOptionsManager

__all__ = ["RowFacts"]


class RowFacts:
    """``plain``: no NUMA policy, no cpu ratio above 1 (and a readable one), no node bind policy.
    ``pinnable``: additionally a valid CPU topology that fits the node's capacity."""

    def __init__(self, topologies: TopologyOptionsManager, node_info: Callable[[str], NodeInfo | None]) -> None:
        self._topologies = topologies
        self._node_info = node_info
        self._seen: list[tuple[NodeRecord | None, TopologyOptions | None]] = []
        self.plain: BoolArray = np.zeros(0, dtype=np.bool_)
        self.pinnable: BoolArray = np.zeros(0, dtype=np.bool_)

    def refresh(self, table: NodeTable) -> None:
        size = table.size
        if len(self._seen) < size:
            grow = size - len(self._seen)
            self._seen.extend([(None, None)] * grow)
            self.plain = np.concatenate([self.plain, np.zeros(grow, dtype=np.bool_)])
            self.pinnable = np.concatenate([self.pinnable, np.zeros(grow, dtype=np.bool_)])
        get_info = self._node_info
        get_options = self._topologies.get
        seen = self._seen
        for row, name in enumerate(table.names):
            info = get_info(name)
            record = info.node if info is not None else None
            options = get_options(name)
            old_record, old_options = seen[row]
            if record is old_record and options is old_options:
                continue
            seen[row] = (record, options)
            plain, pinnable = self._facts(record, options)
            self.plain[row] = plain
            self.pinnable[row] = pinnable

    @staticmethod
    def _facts(record: NodeRecord | None, options: TopologyOptions) -> tuple[bool, bool]:
        if record is None:
            return False, False
        if record.labels.get(LABEL_NUMA_TOPOLOGY_POLICY, "") or options.numa_topology_policy:
            return False, False
        try:
            ratio = amplification_ratios(record.annotations, record.name).get("cpu", -1.0)
        except AnnotationError:
            return False, False
        if ratio > 1 or node_cpu_bind_policy(record.labels, options.policy) != NODE_BIND_NONE:
            return False, False
        topology = options.cpu_topology
        capacity = record.capacity.get("cpu", 0)
        pinnable = (
            topology is not None
            and topology.is_valid
            and not (capacity and topology.num_cpus * 1000 > capacity)
        )
        return True, pinnable
