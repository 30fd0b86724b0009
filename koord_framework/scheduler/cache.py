"""The scheduler cache and the per-cycle snapshot (kube-scheduler's ``backend/cache``).

``SchedulerCache`` holds one ``NodeInfo`` per node with the pods the scheduler counts there: pods the cluster
reports as bound, and pods the scheduler *assumed* (placed at Reserve, binding still in flight). It is fed by
the shared informer's typed caches (``PodCache``/``NodeCache`` listeners) and by the scheduler (assume,
forget, finish_binding), possibly from several threads, so every method takes the cache lock.

``Snapshot`` is what one scheduling cycle reads: ``NodeInfo`` clones plus the ``NodeTable`` that vectorised
plugins use, row for row the same numbers. It is refreshed at the start of every cycle by
``SchedulerCache.update_snapshot``, incrementally as kube-scheduler's ``UpdateSnapshot`` does: every change
stamps its node with a new cache generation and moves it to the end of a recency list, and the update walks
that list backwards only as far as the snapshot's generation. A cycle therefore costs O(nodes changed since
the last cycle), not O(cluster), and binding threads never change what a running cycle sees.

Assumed pods are confirmed by the informer (the pod appears bound), forgotten on a failed binding cycle, and
expire ``ttl`` seconds after ``finish_binding`` if never confirmed (``ttl`` 0, kube-scheduler's default,
means never).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.clock import Clock
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.table import Int64Array, NodeTable

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _PodState:
    """A pod the cache counts; an assumed one carries its binding's deadline."""

    pod: PodInfo
    deadline: float | None = None
    binding_finished: bool = False


def _placeholder(name: str) -> NodeRecord:
    """A node known only through pods bound to it (its Node object has not arrived, or is gone)."""
    return NodeRecord(name=name, uid="", labels={}, annotations={}, allocatable={}, capacity={})


class Snapshot:
    """The nodes one scheduling cycle sees: ``NodeInfo`` clones and their ``NodeTable`` rows."""

    def __init__(self) -> None:
        self.table = NodeTable()
        self.infos: dict[str, NodeInfo] = {}
        self.by_row: list[NodeInfo | None] = []
        """Row → the node's ``NodeInfo`` (None for rows of removed nodes)."""
        self.node_list: list[NodeInfo] = []
        """Present nodes in row order (the order the Filter search rotates through)."""
        self.rows: Int64Array = np.zeros(0, dtype=np.int64)
        """Rows of ``node_list``."""
        self.generation = 0
        self._changes: list[int] = []
        self._change_base = 0
        self._positions: dict[str, int] = {}
        self._affinity_dirty = True
        self._with_affinity: list[NodeInfo] = []
        self._with_required_anti: list[NodeInfo] = []

    def __len__(self) -> int:
        return len(self.node_list)

    def get(self, name: str) -> NodeInfo | None:
        return self.infos.get(name)

    def have_pods_with_affinity(self) -> list[NodeInfo]:
        """Nodes with at least one pod that has pod (anti-)affinity (InterPodAffinity reads only these)."""
        self._refresh_affinity()
        return self._with_affinity

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        self._refresh_affinity()
        return self._with_required_anti

    # --- the change log: what per-row caches of plugins read to stay current ---------------------------
    @property
    def change_seq(self) -> int:
        """Position in the change log after the last change (every node copy or removal appends its row)."""
        return self._change_base + len(self._changes)

    def rows_changed_since(self, seq: int) -> list[int] | None:
        """Rows whose ``NodeInfo`` was replaced or removed since ``change_seq`` was ``seq`` (repeats
        possible); None when that part of the log was dropped (rebuild from scratch then).

        A plugin that keeps per-row aggregates over the pods of each node (pods matching a selector, say)
        brings them up to date by recounting just these rows, instead of walking every node each cycle.
        """
        start = seq - self._change_base
        if start < 0:
            return None
        return self._changes[start:]

    def _log_change(self, row: int) -> None:
        changes = self._changes
        changes.append(row)
        # Keep the log bounded: a reader that fell this far behind rebuilds anyway.
        if len(changes) > 4 * max(len(self.by_row), 1024):
            drop = len(changes) // 2
            del changes[:drop]
            self._change_base += drop

    def rows_of(self, names: Iterable[str]) -> Int64Array:
        """Rows of the present nodes among ``names``, in row order (unknown names are dropped)."""
        index, present = self.table.index, self.table.present
        rows = [r for r in (index.get(n) for n in names) if r is not None and present[r]]
        arr = np.fromiter(rows, dtype=np.int64, count=len(rows))
        arr.sort()
        return arr

    # --- maintenance (the cache calls these, under its lock) ----------------------------------------
    def _upsert(self, source: NodeInfo) -> bool:
        """Copy one node in; returns whether the set of nodes changed."""
        clone = source.clone()
        name = clone.name
        table = self.table
        prev = self.infos.get(name)
        row = table.index.get(name)
        membership = prev is None
        if row is None:
            row = table.add_node(name, clone.node.allocatable)
            self.by_row.extend([None] * (table.size - len(self.by_row)))
        elif prev is None or prev.node is not clone.node:
            table.set_allocatable(row, clone.node.allocatable)
            if not table.present[row]:
                table.present[row] = True
            table.generation += 1
        clone.row = row
        self._write_usage(row, clone)
        self.infos[name] = clone
        self.by_row[row] = clone
        self._log_change(row)
        if not membership:
            self.node_list[self._positions[name]] = clone
        if (prev is not None and prev.pods_with_affinity) or clone.pods_with_affinity:
            self._affinity_dirty = True
        return membership

    def _remove(self, name: str) -> bool:
        prev = self.infos.pop(name, None)
        if prev is None:
            return False
        row = self.table.index[name]
        self.table.remove_node(name)
        self.by_row[row] = None
        self._affinity_dirty = True
        self._log_change(row)
        return True

    def _write_usage(self, row: int, ni: NodeInfo) -> None:
        t = self.table
        cols = [(t.resource_col(res), value) for res, value in ni.requested.items()]
        requested = t.requested  # after resource_col, which may have grown the arrays
        requested[row, :] = 0
        for col, value in cols:
            requested[row, col] = value
        t.pod_count[row] = len(ni.pods)
        t.non_zero_cpu[row] = ni.non_zero_cpu
        t.non_zero_memory[row] = ni.non_zero_memory
        t.generation += 1

    def _rebuild_list(self) -> None:
        by_row = self.by_row
        self.node_list = [ni for ni in by_row if ni is not None]
        self._positions = {ni.name: i for i, ni in enumerate(self.node_list)}
        self.rows = np.fromiter((ni.row for ni in self.node_list), dtype=np.int64, count=len(self.node_list))

    def _refresh_affinity(self) -> None:
        if not self._affinity_dirty:
            return
        self._with_affinity = [ni for ni in self.node_list if ni.pods_with_affinity]
        self._with_required_anti = [ni for ni in self.node_list if ni.pods_with_required_anti_affinity]
        self._affinity_dirty = False


class SchedulerCache:
    """Nodes with their bound and assumed pods. Thread-safe."""

    def __init__(self, clock: Clock, *, ttl: float = 0.0) -> None:
        self._clock = clock
        self.ttl = float(ttl)
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeInfo] = {}
        self._placeholders: set[str] = set()
        self._pods: dict[str, _PodState] = {}
        self._assumed: set[str] = set()
        self._generation = 0
        self._recent: OrderedDict[str, int] = OrderedDict()
        """Node name → cache generation of its last change; most recent last."""
        self._arrival: dict[str, int] = {}
        """Node name → when the cache first heard of it, so snapshot rows follow the order nodes came."""

    # --- bookkeeping --------------------------------------------------------------------------------
    def _touch(self, name: str) -> None:
        if name not in self._arrival:
            self._arrival[name] = len(self._arrival)
        self._generation += 1
        self._recent[name] = self._generation
        self._recent.move_to_end(name)

    def _node_for(self, name: str) -> NodeInfo:
        ni = self._nodes.get(name)
        if ni is None:
            ni = self._nodes[name] = NodeInfo(_placeholder(name))
            self._placeholders.add(name)
        return ni

    def _add_to_node(self, pod: PodInfo) -> None:
        self._node_for(pod.node_name).add_pod(pod)
        self._touch(pod.node_name)

    def _remove_from_node(self, pod: PodInfo) -> None:
        ni = self._nodes.get(pod.node_name)
        if ni is None or pod.uid not in ni.pods:
            log.warning("pod %s is not counted on node %s", pod.key, pod.node_name)
            return
        ni.remove_pod(ni.pods[pod.uid])
        self._touch(pod.node_name)
        if pod.node_name in self._placeholders and not ni.pods:
            del self._nodes[pod.node_name]
            self._placeholders.discard(pod.node_name)

    # --- nodes --------------------------------------------------------------------------------------
    def add_node(self, node: NodeRecord) -> None:
        with self._lock:
            ni = self._nodes.get(node.name)
            if ni is None:
                self._nodes[node.name] = NodeInfo(node)
            else:
                ni.node = node
                ni.generation += 1
            self._placeholders.discard(node.name)
            self._touch(node.name)

    def update_node(self, old: NodeRecord | None, new: NodeRecord) -> None:
        self.add_node(new)

    def remove_node(self, name: str) -> None:
        """The Node object is gone; pods still bound to it keep a placeholder until they go too."""
        with self._lock:
            ni = self._nodes.get(name)
            if ni is None:
                return
            if ni.pods:
                ni.node = _placeholder(name)
                self._placeholders.add(name)
            else:
                del self._nodes[name]
            self._touch(name)

    # --- pods the cluster reports -------------------------------------------------------------------
    def add_pod(self, pod: PodInfo) -> None:
        """A bound pod appeared (or our binding was confirmed): count it, replacing the assumed copy."""
        if not pod.node_name:
            return
        with self._lock:
            state = self._pods.get(pod.uid)
            self._assumed.discard(pod.uid)
            self._pods[pod.uid] = _PodState(pod)
            if state is not None and self._swap_record(state.pod, pod):
                return
            if state is not None:
                self._remove_from_node(state.pod)
            self._add_to_node(pod)

    def _swap_record(self, old: PodInfo, new: PodInfo) -> bool:
        """Replace a pod's record on its node when nothing the aggregates count changed.

        The common case: the informer confirms our own binding (same node, same requests) with a record
        that also carries what PreBind wrote. Recomputing the node's sums would give the same numbers.
        """
        if (
            old.node_name != new.node_name
            or old.requests != new.requests
            or old.host_ports != new.host_ports
            or old.affinity != new.affinity
            or old.overhead != new.overhead
        ):
            return False
        ni = self._nodes.get(new.node_name)
        if ni is None or old.uid not in ni.pods:
            return False
        ni.pods[new.uid] = new
        if new.uid in ni.pods_with_affinity:
            ni.pods_with_affinity[new.uid] = new
        if new.uid in ni.pods_with_required_anti_affinity:
            ni.pods_with_required_anti_affinity[new.uid] = new
        ni.generation += 1
        self._touch(new.node_name)
        return True

    def update_pod(self, old: PodInfo | None, new: PodInfo) -> None:
        if not new.node_name:
            return
        self.add_pod(new)

    def remove_pod(self, pod: PodInfo) -> None:
        with self._lock:
            state = self._pods.pop(pod.uid, None)
            self._assumed.discard(pod.uid)
            if state is not None:
                self._remove_from_node(state.pod)

    # --- pods the scheduler places ------------------------------------------------------------------
    def assume_pod(self, pod: PodInfo) -> None:
        """Count ``pod`` (with ``node_name`` set) on its node before it is bound."""
        if not pod.node_name:
            raise ValueError(f"cannot assume pod {pod.key} without a node name")
        with self._lock:
            if pod.uid in self._pods:
                raise ValueError(f"pod {pod.key} is in the cache, so can't be assumed")
            self._pods[pod.uid] = _PodState(pod)
            self._assumed.add(pod.uid)
            self._add_to_node(pod)

    def finish_binding(self, pod: PodInfo) -> None:
        """The binding call returned: an unconfirmed assumption now expires after ``ttl`` (if set)."""
        with self._lock:
            state = self._pods.get(pod.uid)
            if state is not None and pod.uid in self._assumed:
                state.binding_finished = True
                if self.ttl > 0:
                    state.deadline = self._clock.now() + self.ttl

    def forget_pod(self, pod: PodInfo) -> bool:
        """Undo an assumption (failed binding cycle); returns False if the pod is not assumed any more."""
        with self._lock:
            if pod.uid not in self._assumed:
                return False
            state = self._pods.pop(pod.uid)
            self._assumed.discard(pod.uid)
            self._remove_from_node(state.pod)
            return True

    def is_assumed(self, uid: str) -> bool:
        with self._lock:
            return uid in self._assumed

    def get_pod(self, uid: str) -> PodInfo | None:
        with self._lock:
            state = self._pods.get(uid)
            return state.pod if state is not None else None

    def cleanup_expired(self) -> list[PodInfo]:
        """Drop assumed pods whose binding finished more than ``ttl`` ago and was never confirmed."""
        now = self._clock.now()
        out: list[PodInfo] = []
        with self._lock:
            for uid in list(self._assumed):
                state = self._pods[uid]
                if state.binding_finished and state.deadline is not None and now >= state.deadline:
                    out.append(state.pod)
                    self._assumed.discard(uid)
                    del self._pods[uid]
                    self._remove_from_node(state.pod)
        return out

    # --- reads --------------------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._generation

    def node_count(self) -> int:
        with self._lock:
            return len(self._nodes) - len(self._placeholders)

    def pod_count(self) -> int:
        with self._lock:
            return len(self._pods)

    def assumed_count(self) -> int:
        with self._lock:
            return len(self._assumed)

    def node_infos(self) -> list[NodeInfo]:
        """Clones of every real node's ``NodeInfo`` (for reports; a scheduling cycle uses the snapshot)."""
        with self._lock:
            return [ni.clone() for name, ni in self._nodes.items() if name not in self._placeholders]

    # --- the snapshot -------------------------------------------------------------------------------
    def update_snapshot(self, snap: Snapshot) -> int:
        """Bring ``snap`` up to date with the cache; returns how many nodes were copied."""
        with self._lock:
            if snap.generation == self._generation:
                return 0
            changed: list[str] = []
            for name, gen in reversed(self._recent.items()):
                if gen <= snap.generation:
                    break
                changed.append(name)
            membership = False
            if len(changed) > 1:
                arrival = self._arrival
                changed.sort(key=lambda n: arrival.get(n, 0))  # new rows follow the order nodes came
            for name in changed:
                ni = self._nodes.get(name)
                if ni is None or name in self._placeholders:
                    membership |= snap._remove(name)
                else:
                    membership |= snap._upsert(ni)
            if membership:
                snap._rebuild_list()
            snap.generation = self._generation
            self._trim_recent()
            return len(changed)

    def _trim_recent(self) -> None:
        # Entries of nodes that no longer exist would otherwise accumulate forever; once a snapshot has
        # seen their removal they carry no information.
        if len(self._recent) > 2 * max(len(self._nodes), 64):
            for name in [n for n in self._recent if n not in self._nodes]:
                del self._recent[name]
                self._arrival.pop(name, None)
