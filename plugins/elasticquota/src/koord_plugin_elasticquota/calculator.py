"""The runtime calculation: how a parent's total is shared among its children, one resource at a time.

Koordinator's ``core/runtime_quota_calculator.go``. Every parent quota (and the root) owns one
``RuntimeQuotaCalculator`` holding, per resource dimension, a ``QuotaTree`` of its direct children. A child
whose (max-limited) request is at most its min gets its request (or its min when it does not lend); the others
start at min and then share what is left by shared weight, water-filling: whoever is satisfied returns the
surplus and the rest share it again. Each sharing round splits the amount with the largest-remainder
(Hamilton) method in exact integer arithmetic, so nothing is lost or created by rounding.

The calculator is lazy, as upstream: every change bumps ``version``; a quota's runtime is recomputed only when
the version it last saw differs. Values are ints in the resource's canonical unit (cpu milli-cores, the rest
``Value()``), exactly the int64s upstream works in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koord_plugin_elasticquota.quota_info import QuotaInfo

__all__ = ["ChangeCounter", "QuotaNode", "QuotaTree", "RuntimeQuotaCalculator", "hamilton_split"]


class ChangeCounter:
    """Counts changes of every calculator of one manager: while it stands still, no runtime can change, so
    a refresh can answer from the last result."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


@dataclass(slots=True)
class QuotaNode:
    """One child quota in one resource dimension."""

    name: str
    shared_weight: int
    request: int
    min: int
    guarantee: int
    allow_lent: bool
    runtime: int = 0


def hamilton_split(total: int, weights: list[tuple[str, int]]) -> list[int]:
    """Split ``total`` proportionally to the weights; the shares sum to ``total`` exactly when any weight is
    positive. Weights <= 0 get nothing. The residual of the floor division goes one unit at a time to the
    largest remainders, ties to the smaller name (the order must not depend on dict iteration)."""
    deltas = [0] * len(weights)
    weight_sum = sum(w for _, w in weights if w > 0)
    if weight_sum <= 0 or total <= 0 or not weights:
        return deltas
    remainders: list[tuple[int, str, int]] = []
    given = 0
    for i, (name, weight) in enumerate(weights):
        if weight <= 0:
            continue
        base, rem = divmod(weight * total, weight_sum)
        deltas[i] = base
        given += base
        remainders.append((rem, name, i))
    residual = total - given
    if residual <= 0:
        return deltas
    remainders.sort(key=lambda r: (-r[0], r[1]))
    for _, _, i in remainders[:residual]:
        deltas[i] += 1
    return deltas


class QuotaTree:
    """The children of one parent in one resource dimension."""

    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes: dict[str, QuotaNode] = {}

    def insert(
        self, name: str, shared_weight: int, request: int, min_: int, guarantee: int, allow_lent: bool
    ) -> None:
        if name not in self.nodes:
            self.nodes[name] = QuotaNode(name, shared_weight, request, min_, guarantee, allow_lent)

    def find(self, name: str) -> QuotaNode | None:
        return self.nodes.get(name)

    def erase(self, name: str) -> None:
        self.nodes.pop(name, None)

    def redistribution(self, total: int, record: list[dict[str, Any]] | None = None) -> None:
        """Set every node's runtime for a parent total of ``total``.

        Runtime is not capped by ``total``: mins are honoured even when they add up to more (min scaling is
        what keeps them within the total, when enabled). With ``record``, each step is appended to it
        (``koord explain quota``): round 0 the floors, then one entry per water-filling round."""
        remaining = total
        adjust: list[QuotaNode] = []
        weight_sum = 0
        floors: dict[str, dict[str, Any]] = {}
        for node in self.nodes.values():
            floor = max(node.min, node.guarantee)
            if node.request > floor:
                adjust.append(node)
                weight_sum += node.shared_weight
                node.runtime = floor
                why = "max(min, guaranteed): requests more, shares the rest"
            elif node.allow_lent:
                node.runtime = node.request
                why = "request: asks no more than its min and lends the rest"
            else:
                node.runtime = floor
                why = "max(min, guaranteed): does not lend (allowLentResource false)"
            remaining -= node.runtime
            floors[node.name] = {"runtime": node.runtime, "request": node.request, "why": why}
        if record is not None:
            record.append({"round": 0, "total": total, "nodes": floors, "remaining": remaining})
        if remaining > 0:
            self._iterate(remaining, weight_sum, adjust, record)

    def _iterate(
        self, total: int, weight_sum: int, nodes: list[QuotaNode], record: list[dict[str, Any]] | None = None
    ) -> None:
        while weight_sum > 0 and total > 0 and nodes:
            deltas = hamilton_split(total, [(n.name, n.shared_weight) for n in nodes])
            still: list[QuotaNode] = []
            surplus = 0
            still_weight = 0
            step: dict[str, dict[str, Any]] = {}
            for node, delta in zip(nodes, deltas, strict=True):
                node.runtime += delta
                capped = node.runtime >= node.request
                if not capped:
                    still.append(node)
                    still_weight += node.shared_weight
                else:
                    surplus += node.runtime - node.request
                    node.runtime = node.request
                step[node.name] = {
                    "weight": node.shared_weight,
                    "share": delta,
                    "runtime": node.runtime,
                    "request": node.request,
                    "satisfied": capped,
                }
            if record is not None:
                record.append(
                    {
                        "round": len(record),
                        "total": total,
                        "weightSum": weight_sum,
                        "nodes": step,
                        "surplus": surplus,
                    }
                )
            if surplus <= 0 or not still:
                return
            total, weight_sum, nodes = surplus, still_weight, still


def _get(d: Mapping[str, int], key: str) -> int:
    return d.get(key, 0)


class RuntimeQuotaCalculator:
    """The runtime of every child of one parent (``tree_name``), for every resource key of the parent."""

    def __init__(self, tree_name: str, changes: ChangeCounter | None = None) -> None:
        self.tree_name = tree_name
        self.changes = changes if changes is not None else ChangeCounter()
        self.version = 1
        self.resource_keys: set[str] = set()
        self.group_req_limit: dict[str, dict[str, int]] = {}
        self.group_guaranteed: dict[str, dict[str, int]] = {}
        self.trees: dict[str, QuotaTree] = {}
        self.total: dict[str, int] = {}

    def _bump(self) -> None:
        self.version += 1
        self.changes.value += 1

    # --- dimensions -----------------------------------------------------------------------------------
    def update_resource_keys(self, keys: Iterable[str]) -> None:
        self.resource_keys = set(keys)
        for key in list(self.trees):
            if key not in self.resource_keys:
                del self.trees[key]
        for key in self.resource_keys:
            self.trees.setdefault(key, QuotaTree())

    def _insert(self, info: QuotaInfo, key: str, req_limit: Mapping[str, int]) -> None:
        ci = info.calc
        self.trees[key].insert(
            info.name,
            _get(ci.shared_weight, key),
            _get(req_limit, key),
            _get(ci.auto_scale_min, key),
            _get(ci.guaranteed, key),
            info.allow_lent_resource,
        )

    # --- updates from the manager ---------------------------------------------------------------------
    def update_one_group_max(self, info: QuotaInfo) -> None:
        for key in info.calc.max:
            self.resource_keys.add(key)
            self.trees.setdefault(key, QuotaTree())
        local = self.group_req_limit.setdefault(info.name, {})
        limit = info.limited_request()
        for key in self.resource_keys:
            node = self.trees[key].find(info.name)
            if node is not None:
                node.request = _get(limit, key)
            else:
                self._insert(info, key, limit)
            local[key] = _get(limit, key)
        self._bump()

    def update_one_group_min(self, info: QuotaInfo) -> None:
        limit = info.limited_request()
        for key in self.resource_keys:
            node = self.trees[key].find(info.name)
            if node is not None:
                node.min = _get(info.calc.auto_scale_min, key)
            else:
                self._insert(info, key, limit)
        self._bump()

    def update_one_group_shared_weight(self, info: QuotaInfo) -> None:
        limit = info.limited_request()
        for key in self.resource_keys:
            node = self.trees[key].find(info.name)
            if node is not None:
                node.shared_weight = _get(info.calc.shared_weight, key)
            else:
                self._insert(info, key, limit)
        self._bump()

    def need_update_one_group_request(self, info: QuotaInfo) -> bool:
        old = self.group_req_limit.setdefault(info.name, {})
        new = info.limited_request()
        return any(_get(old, key) != _get(new, key) for key in self.resource_keys)

    def update_one_group_request(self, info: QuotaInfo) -> None:
        local = self.group_req_limit.setdefault(info.name, {})
        limit = info.limited_request()
        for key in self.resource_keys:
            node = self.trees[key].find(info.name)
            if node is not None:
                node.request = _get(limit, key)
            else:
                self._insert(info, key, limit)
            local[key] = _get(limit, key)
        self._bump()

    def need_update_one_group_guaranteed(self, info: QuotaInfo) -> bool:
        old = self.group_guaranteed.setdefault(info.name, {})
        return any(_get(old, key) != _get(info.calc.guaranteed, key) for key in self.resource_keys)

    def update_one_group_guaranteed(self, info: QuotaInfo) -> None:
        local = self.group_guaranteed.setdefault(info.name, {})
        limit = info.limited_request()
        for key in self.resource_keys:
            node = self.trees[key].find(info.name)
            if node is not None:
                node.guarantee = _get(info.calc.guaranteed, key)
            else:
                self._insert(info, key, limit)
            local[key] = _get(info.calc.guaranteed, key)
        self._bump()

    def set_cluster_total(self, total: Mapping[str, int]) -> None:
        # Upstream bumps the version on every call (each refresh of a child sets its parent's total); the
        # same total gives the same runtimes, so only a change invalidates them here.
        if dict(total) == self.total:
            return
        self.total = dict(total)
        self._bump()

    def delete_one_group(self, info: QuotaInfo) -> None:
        for key in self.resource_keys:
            self.trees[key].erase(info.name)
        self.group_req_limit.pop(info.name, None)
        self.group_guaranteed.pop(info.name, None)
        self._bump()

    # --- the calculation ------------------------------------------------------------------------------
    def update_one_group_runtime(self, info: QuotaInfo) -> None:
        """Recompute (if anything changed since ``info`` last looked) and copy ``info``'s runtime out."""
        if info.runtime_version == self.version:
            return
        for key in self.resource_keys:
            self.trees[key].redistribution(_get(self.total, key))
        for key in self.resource_keys:
            node = self.trees[key].find(info.name)
            if node is not None:
                info.calc.runtime[key] = node.runtime
        info.runtime_version = self.version
