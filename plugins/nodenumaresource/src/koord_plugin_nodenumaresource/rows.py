"""Per-row facts about nodes, as NumPy columns, for the vectorised Filter and Score.

Most (pod, node) pairs need none of NodeNUMAResource's machinery: the node has no NUMA policy, no cpu
amplification ratio and no bind policy of its own, so a pod that does not pin CPUs passes and scores like
NodeResourcesFit's requested/allocatable, and a pinning pod with a merely preferred policy only needs a valid
CPU topology. These columns say which rows are such easy ones; every other row goes through the per-node
``filter``/``score``, so both forms always agree.
"""

from __future__ import annotations

import threading
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
    ``pinnable``: additionally a valid CPU topology that fits the node's capacity.

    Rows are recomputed only when something they depend on changed: a new row, a Node event (``touch``) or an
    NRT change (``TopologyOptionsManager.version``). A touched node stays dirty until the snapshot shows the
    version its event announced (events arrive before the cycle's snapshot has them).
    """

    def __init__(
        self, topologies: TopologyOptionsManager, node_info: Callable[[str], NodeInfo | None]
    ) -> None:
        self._topologies = topologies
        self._node_info = node_info
        self._rows = 0
        self._version = -1
        self._lock = threading.Lock()
        self._dirty: dict[str, str | None] = {}
        self.plain: BoolArray = np.zeros(0, dtype=np.bool_)
        self.pinnable: BoolArray = np.zeros(0, dtype=np.bool_)

    def touch(self, name: str, resource_version: str | None) -> None:
        """A Node event: look at ``name`` again until the snapshot has ``resource_version``."""
        with self._lock:
            self._dirty[name] = resource_version

    def refresh(self, table: NodeTable) -> None:
        size = table.size
        version = self._topologies.version
        if size == self._rows and version == self._version and not self._dirty:
            return
        if size > self.plain.size:
            grow = max(size, 2 * self.plain.size) - self.plain.size
            self.plain = np.concatenate([self.plain, np.zeros(grow, dtype=np.bool_)])
            self.pinnable = np.concatenate([self.pinnable, np.zeros(grow, dtype=np.bool_)])
        if version != self._version:
            names: list[str] = list(table.names)  # an NRT changed: every row (rare)
        else:
            with self._lock:
                names = [*table.names[self._rows : size], *self._dirty]
        self._rows, self._version = size, version
        for name in names:
            row = table.index.get(name)
            info = self._node_info(name)
            if row is None:
                continue
            record = info.node if info is not None else None
            self.plain[row], self.pinnable[row] = self._facts(record, self._topologies.get(name))
            with self._lock:
                expected = self._dirty.get(name, "")
                if name in self._dirty and (
                    (expected is None and record is None)
                    or (record is not None and (not expected or record.resource_version == expected))
                ):
                    del self._dirty[name]

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
