"""Per-row node attributes (labels, taints, unschedulable) as NumPy masks for the vectorised filters.

Scheduling one pod must not walk 5,000 nodes in Python, but node labels and taints change rarely. The index
keeps the ``NodeRecord`` of every table row and caches masks derived from them (``label == value``, ``key
present``, integer label values, taint signatures). It learns about node changes from the cluster's Node
watch events and reconciles a changed node from the scheduler snapshot at its next use; it only accepts the
snapshot's record once its resourceVersion caught up with the event, so a watch delivered before the cache
updated is retried rather than lost. A handle without a usable cluster falls back to comparing every row's
record identity on each refresh (correct, O(nodes); used by tests that build NodeInfos by hand).

Derived masks are updated in place when one node changes, and dropped when rows are added.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from koord_framework.api.objects import NodeRecord, Taint
from koord_framework.api.strconv import parse_int
from koord_framework.scheduler.interface import Handle
from koord_framework.scheduler.table import BoolArray, Int64Array


def node_index(handle: Handle) -> NodeAttributeIndex:
    """The index shared by every plugin of one handle (one per profile, through ``Handle.shared``)."""
    return handle.shared(NodeAttributeIndex, lambda: NodeAttributeIndex(handle))


class NodeAttributeIndex:
    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self.records: list[NodeRecord | None] = []
        self.epoch = 0
        """Bumped whenever any row's labels, taints or schedulability change (cache key for plugins)."""
        self._pending: dict[str, str | None] = {}
        """Node name -> resourceVersion the snapshot must reach (None: the node was deleted)."""
        self._mode: str = ""  # "events" or "scan"
        self._rows_by_name: dict[str, int] = {}
        self._value_masks: dict[tuple[str, str], BoolArray] = {}
        self._key_masks: dict[str, BoolArray] = {}
        self._int_values: dict[str, tuple[BoolArray, Int64Array]] = {}
        self._codes: dict[str, tuple[Int64Array, dict[str, int], list[str]]] = {}
        self._taint_sigs: dict[tuple[Taint, ...], int] = {(): 0}
        self.taint_sig_list: list[tuple[Taint, ...]] = [()]
        self.taint_sig: Int64Array = np.zeros(0, dtype=np.int64)
        self.unschedulable: BoolArray = np.zeros(0, dtype=np.bool_)
        self.unschedulable_count = 0
        """How many rows are cordoned: with none, NodeUnschedulable passes every row without looking."""
        self.tainted_count = 0
        """How many rows have taints (signature != 0): with none, TaintToleration needs no per-row work."""

    # --- maintenance ------------------------------------------------------------------------------------
    def _start(self) -> None:
        try:
            cluster = self._handle.cluster
            cluster.subscribe(["Node"], self._on_event)
            self._mode = "events"
        except Exception:  # no cluster behind this handle (unit tests): verify identities instead
            self._mode = "scan"
        self._rebuild()

    def _on_event(self, event: Any) -> None:
        meta = (event.obj or {}).get("metadata") or {}
        name = str(meta.get("name") or "")
        if event.type == "DELETED":
            self._pending[name] = None
        else:
            self._pending[name] = str(meta.get("resourceVersion") or "")

    def _rebuild(self) -> None:
        table = self._handle.table
        size = table.size
        self.records = [None] * size
        for info in self._handle.node_infos():
            if 0 <= info.row < size:
                self.records[info.row] = info.node
        self._rows_by_name = {n: i for i, n in enumerate(table.names)}
        self._pending.clear()
        self._reset_derived()

    def _reset_derived(self) -> None:
        size = len(self.records)
        self._value_masks.clear()
        self._key_masks.clear()
        self._int_values.clear()
        self._codes.clear()
        self.taint_sig = np.zeros(size, dtype=np.int64)
        self.unschedulable = np.zeros(size, dtype=np.bool_)
        for row, rec in enumerate(self.records):
            if rec is not None:
                self.taint_sig[row] = self._sig_of(rec.taints)
                self.unschedulable[row] = rec.unschedulable
        self.unschedulable_count = int(np.count_nonzero(self.unschedulable))
        self.tainted_count = int(np.count_nonzero(self.taint_sig))
        self.epoch += 1

    def _sig_of(self, taints: tuple[Taint, ...]) -> int:
        sig = self._taint_sigs.get(taints)
        if sig is None:
            sig = len(self.taint_sig_list)
            self._taint_sigs[taints] = sig
            self.taint_sig_list.append(taints)
        return sig

    def refresh(self) -> None:
        """Bring every row up to date with the scheduler snapshot (cheap when nothing changed)."""
        if not self._mode:
            self._start()
            return
        table = self._handle.table
        if table.size != len(self.records):
            self._rebuild()
            return
        if self._mode == "scan":
            changed = False
            for info in self._handle.node_infos():
                if 0 <= info.row < len(self.records) and self.records[info.row] is not info.node:
                    changed |= self._replace(info.row, info.node)
            if changed:
                self.epoch += 1
            return
        if not self._pending:
            return
        changed = False
        for name, rv in list(self._pending.items()):
            current = self._handle.node_info(name)
            row = self._rows_by_name.get(name)
            if rv is None:
                if current is not None:
                    continue  # the snapshot still has the node: retry later
                if row is not None:
                    changed |= self._replace(row, None)
            else:
                if current is None or (
                    rv and current.node.resource_version and current.node.resource_version != rv
                ):
                    continue
                if row is None or current.row != row:
                    self._rebuild()
                    return
                changed |= self._replace(row, current.node)
            del self._pending[name]
        if changed:
            self.epoch += 1

    def _replace(self, row: int, rec: NodeRecord | None) -> bool:
        old = self.records[row]
        self.records[row] = rec
        old_labels: Mapping[str, str] = old.labels if old is not None else {}
        new_labels: Mapping[str, str] = rec.labels if rec is not None else {}
        old_taints = old.taints if old is not None else ()
        new_taints = rec.taints if rec is not None else ()
        old_unsched = old.unschedulable if old is not None else False
        new_unsched = rec.unschedulable if rec is not None else False
        if old_labels == new_labels and old_taints == new_taints and old_unsched == new_unsched:
            return False
        sig = self._sig_of(new_taints)
        self.tainted_count += (sig != 0) - (int(self.taint_sig[row]) != 0)
        self.taint_sig[row] = sig
        self.unschedulable_count += int(new_unsched) - int(self.unschedulable[row])
        self.unschedulable[row] = new_unsched
        for key in set(old_labels) | set(new_labels):
            ov, nv = old_labels.get(key), new_labels.get(key)
            if ov == nv:
                continue
            if ov is not None and (key, ov) in self._value_masks:
                self._value_masks[(key, ov)][row] = False
            if nv is not None and (key, nv) in self._value_masks:
                self._value_masks[(key, nv)][row] = True
            if key in self._key_masks:
                self._key_masks[key][row] = nv is not None
            if key in self._int_values:
                has, vals = self._int_values[key]
                parsed = parse_int(nv) if nv is not None else None
                has[row] = parsed is not None
                vals[row] = parsed or 0
            if key in self._codes:
                codes, code_of, values = self._codes[key]
                if nv is None:
                    codes[row] = -1
                else:
                    code = code_of.get(nv)
                    if code is None:
                        code = len(values)
                        code_of[nv] = code
                        values.append(nv)
                    codes[row] = code
        return True

    # --- queries ----------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.records)

    def _mask(
        self, cache: dict[Any, Any], key: Any, build: Callable[[Mapping[str, str]], Any], dtype: Any
    ) -> Any:
        found = cache.get(key)
        if found is None:
            found = np.array(
                [build(r.labels) if r is not None else dtype() for r in self.records], dtype=dtype
            )
            cache[key] = found
        return found

    def value_mask(self, key: str, value: str) -> BoolArray:
        """Rows whose node has label ``key`` equal to ``value``."""
        return self._mask(self._value_masks, (key, value), lambda ls: ls.get(key) == value, np.bool_)  # type: ignore[no-any-return]

    def key_mask(self, key: str) -> BoolArray:
        """Rows whose node has label ``key``."""
        return self._mask(self._key_masks, key, lambda ls: key in ls, np.bool_)  # type: ignore[no-any-return]

    def int_values(self, key: str) -> tuple[BoolArray, Int64Array]:
        """(has an integer value, the value) of label ``key`` per row (for ``Gt``/``Lt``)."""
        found = self._int_values.get(key)
        if found is None:
            parsed = [
                (parse_int(r.labels[key]) if r is not None and key in r.labels else None)
                for r in self.records
            ]
            has = np.array([p is not None for p in parsed], dtype=np.bool_)
            vals = np.array([p or 0 for p in parsed], dtype=np.int64)
            found = (has, vals)
            self._int_values[key] = found
        return found

    def codes(self, key: str) -> tuple[Int64Array, dict[str, int], list[str]]:
        """Per row the code of the node's value of label ``key`` (-1 when absent), the code table, values."""
        found = self._codes.get(key)
        if found is None:
            code_of: dict[str, int] = {}
            values: list[str] = []
            codes = np.full(len(self.records), -1, dtype=np.int64)
            for row, rec in enumerate(self.records):
                if rec is None:
                    continue
                v = rec.labels.get(key)
                if v is None:
                    continue
                c = code_of.get(v)
                if c is None:
                    c = len(values)
                    code_of[v] = c
                    values.append(v)
                codes[row] = c
            found = (codes, code_of, values)
            self._codes[key] = found
        return found

    def name_mask(self, name: str) -> BoolArray:
        mask = np.zeros(len(self.records), dtype=np.bool_)
        row = self._rows_by_name.get(name)
        if row is not None and row < len(mask):
            mask[row] = True
        return mask
