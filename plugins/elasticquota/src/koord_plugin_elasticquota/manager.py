"""``GroupQuotaManager``: one quota tree, its pods and their runtime (``core/group_quota_manager.go``).

The documented API of the plugin's quota state; the plugin, the controllers, the CLI and the tests all go
through it:

* quotas: ``update_quota(obj)`` (add or change, from an ElasticQuota manifest or ``ElasticQuotaSpec``),
  ``delete_quota(name)``, ``reset_quotas(specs)`` (rebuild from a full list, as after a restart);
* cluster size: ``update_cluster_total_resource(delta)``, ``on_node_add/update/delete``;
* pods: ``on_pod_add/update/delete(quota, pod)``, ``reserve_pod``/``unreserve_pod`` (assumed by the
  scheduler), ``migrate_pod``;
* reading: ``refresh_runtime(name)`` (recomputes lazily and returns the runtime masked to the quota's max
  names), ``get_quota_info(name)``, ``quota_names()``, ``children(name)``, ``summary(name)``.

Semantics follow upstream closely, quirks included: a request delta climbs the tree as the change of each
level's max-limited request; a quota that does not lend asks for at least its min; used climbs unchanged;
the root's total is the cluster minus what the system and default quotas use; runtimes are recomputed top
down from the quota's top ancestor only when something below a parent changed (the calculators' versions);
and min scaling, when enabled, is applied to each quota on the path as it is refreshed.

A manager is not thread-safe by itself: the plugin serialises calls with its lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import add, is_zero, mask, max_each, subtract
from koord_plugin_elasticquota.calculator import ChangeCounter, RuntimeQuotaCalculator
from koord_plugin_elasticquota.quota_info import PodEntry, QuotaInfo, add_non_negative
from koord_plugin_elasticquota.quota_object import (
    DEFAULT_QUOTA_NAME,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    ElasticQuotaSpec,
    is_pod_non_preemptible,
)
from koord_plugin_elasticquota.scale_min import ScaleMinQuotaManager

__all__ = ["GroupQuotaManager", "QuotaNotFoundError"]

_BUILTIN = (SYSTEM_QUOTA_NAME, DEFAULT_QUOTA_NAME)


class QuotaNotFoundError(KeyError):
    """A quota name the manager does not know."""


def _spec(quota: ElasticQuotaSpec | Mapping[str, Any]) -> ElasticQuotaSpec:
    return quota if isinstance(quota, ElasticQuotaSpec) else ElasticQuotaSpec.from_manifest(quota)


def _info_from_spec(spec: ElasticQuotaSpec) -> QuotaInfo:
    info = QuotaInfo(spec.name, spec.parent, spec.is_parent, spec.allow_lent_resource)
    info.calc.min = dict(spec.min)
    info.calc.max = dict(spec.max)
    info.calc.shared_weight = dict(spec.shared_weight)
    return info


def quota_pod_requests(pod: PodInfo, ignore_overhead: bool = False) -> dict[str, int]:
    """``core.PodRequests``: what a pod charges its quota, Kubernetes' pod requests, without the pod's
    overhead when the gate ``ElasticQuotaIgnorePodOverhead`` is on (``ignore_overhead``)."""
    if not ignore_overhead or not pod.overhead:
        return dict(pod.requests)
    out: dict[str, int] = {}
    for name, value in pod.requests.items():
        left = value - pod.overhead.get(name, 0)
        if left or name not in pod.overhead:  # a resource only the overhead asked for is not requested
            out[name] = left
    return out


def _pod_requests(pod: PodInfo | None, ignore_overhead: bool = False) -> dict[str, int]:
    return quota_pod_requests(pod, ignore_overhead) if pod is not None else {}


class GroupQuotaManager:
    def __init__(
        self,
        tree_id: str = "",
        *,
        scale_min_enabled: bool = True,
        system_max: Mapping[str, int] | None = None,
        default_max: Mapping[str, int] | None = None,
        ignore_pod_overhead: bool = False,
    ) -> None:
        self.tree_id = tree_id
        self.ignore_pod_overhead = ignore_pod_overhead
        """The gate ``ElasticQuotaIgnorePodOverhead``: pods charge their quota without their overhead."""
        self.scale_min_enabled = scale_min_enabled
        self.total: dict[str, int] = {}
        self.total_except_system_and_default: dict[str, int] = {}
        self.resource_keys: set[str] = set()
        self.infos: dict[str, QuotaInfo] = {}
        self.calculators: dict[str, RuntimeQuotaCalculator] = {}
        self.children_of: dict[str, set[str]] = {ROOT_QUOTA_NAME: set()}
        self.scale_min = ScaleMinQuotaManager()
        self.nodes: dict[str, dict[str, int]] = {}
        self.changes = ChangeCounter()
        """Bumped by every calculator change; a quota refreshed since the last bump has a current runtime."""
        self._deferred: dict[str, tuple[dict[str, int], dict[str, int]]] | None = None
        """Pod-request deltas per quota, collected while ``defer_requests`` is on."""
        # Only the default tree has the system and default quotas.
        if tree_id == "":
            for name, max_ in ((SYSTEM_QUOTA_NAME, system_max), (DEFAULT_QUOTA_NAME, default_max)):
                info = QuotaInfo(name, ROOT_QUOTA_NAME, False, True)
                info.calc.max = dict(max_ or {})
                self.infos[name] = info
        self.infos[ROOT_QUOTA_NAME] = QuotaInfo(ROOT_QUOTA_NAME, "", True, False)
        self.calculators[ROOT_QUOTA_NAME] = RuntimeQuotaCalculator(ROOT_QUOTA_NAME, self.changes)

    # --- reading -----------------------------------------------------------------------------------
    def get_quota_info(self, name: str) -> QuotaInfo | None:
        return self.infos.get(name)

    def quota_names(self) -> list[str]:
        return sorted(self.infos)

    def children(self, name: str) -> list[str]:
        return sorted(self.children_of.get(name, ()))

    def path_to_root(self, name: str) -> list[QuotaInfo]:
        """``name`` first, then its ancestors up to and including the root (stops early at a missing link)."""
        out: list[QuotaInfo] = []
        info = self.infos.get(name)
        seen: set[str] = set()
        while info is not None and info.name not in seen:
            out.append(info)
            seen.add(info.name)
            if info.name == ROOT_QUOTA_NAME:
                break
            info = self.infos.get(info.parent)
        return out

    def attached(self, name: str) -> bool:
        """Whether the quota's parents lead to the root (a missing parent or a cycle detaches it)."""
        path = self.path_to_root(name)
        return bool(path) and path[-1].name == ROOT_QUOTA_NAME

    # --- cluster total -----------------------------------------------------------------------------
    def update_cluster_total_resource(self, delta: Mapping[str, int]) -> None:
        self.total = add(self.total, delta)
        self._refresh_root_total()

    def set_total_resource_for_tree(self, total: Mapping[str, int]) -> dict[str, int]:
        delta = subtract(total, self.total)
        if not is_zero(delta):
            self.update_cluster_total_resource(delta)
        return delta

    def _refresh_root_total(self) -> None:
        used: dict[str, int] = {}
        for name in _BUILTIN:
            info = self.infos.get(name)
            if info is not None:
                used = add(used, info.calc.used)
        remaining = subtract(self.total, used)
        if not is_zero(subtract(remaining, self.total_except_system_and_default)):
            self.total_except_system_and_default = remaining
            self.calculators[ROOT_QUOTA_NAME].set_cluster_total(remaining)

    def on_node_add(self, name: str, allocatable: Mapping[str, int]) -> None:
        if name in self.nodes:
            return
        self.nodes[name] = dict(allocatable)
        self.update_cluster_total_resource(allocatable)

    def on_node_update(self, name: str, allocatable: Mapping[str, int]) -> None:
        old = self.nodes.get(name)
        if old is None:
            self.on_node_add(name, allocatable)
            return
        if old == dict(allocatable):
            return
        self.nodes[name] = dict(allocatable)
        self.update_cluster_total_resource(subtract(allocatable, old))

    def on_node_delete(self, name: str) -> None:
        old = self.nodes.pop(name, None)
        if old is not None:
            self.update_cluster_total_resource(subtract({}, old))

    # --- request / used propagation ------------------------------------------------------------------
    def _update_group_delta_request(
        self, name: str, delta: dict[str, int], delta_np: dict[str, int] | None, self_index: int
    ) -> None:
        path = self.path_to_root(name)
        if path:
            self._propagate_request(delta, delta_np, path, self_index)

    def _propagate_request(
        self,
        delta: dict[str, int],
        delta_np: dict[str, int] | None,
        path: list[QuotaInfo],
        self_index: int,
    ) -> None:
        for i, info in enumerate(path):
            old_limited = info.limited_request()
            info.add_request(delta, delta_np, i == self_index)
            if info.name == ROOT_QUOTA_NAME:
                return
            info.calc.child_request = add_non_negative(info.calc.child_request, delta)
            real = dict(info.calc.child_request)
            if not info.allow_lent_resource:
                # A quota that does not lend keeps its min for itself: it asks for at least that much.
                real = max_each(real, info.calc.min)
            info.calc.request = real
            delta = subtract(info.limited_request(), old_limited)
            if info.name in _BUILTIN:
                continue  # outside the water-filling: their runtime is their max
            calc = self.calculators.get(info.parent)
            if calc is None:
                return
            if calc.need_update_one_group_request(info):
                calc.update_one_group_request(info)

    def add_pod_request_delta(
        self, name: str, delta: Mapping[str, int], non_preemptible: Mapping[str, int] | None = None
    ) -> None:
        """Add ``delta`` to the quota's pod-request sum and propagate it up (UpdateGroupDeltaRequest)."""
        self._update_group_delta_request(name, dict(delta), dict(non_preemptible or {}), 0)

    def add_used_delta(
        self, name: str, delta: Mapping[str, int], non_preemptible: Mapping[str, int] | None = None
    ) -> None:
        """Add ``delta`` to the quota's used and every ancestor's (UpdateGroupDeltaUsed)."""
        self._update_group_delta_used(name, dict(delta), dict(non_preemptible or {}), 0)

    def _update_group_delta_used(
        self, name: str, delta: dict[str, int], delta_np: dict[str, int] | None, self_index: int
    ) -> None:
        path = self.path_to_root(name)
        if not path:
            return
        for i, info in enumerate(path):
            info.add_used(delta, delta_np, i == self_index)
        if name in _BUILTIN:
            self._refresh_root_total()

    # --- runtime -------------------------------------------------------------------------------------
    def refresh_runtime(self, name: str) -> dict[str, int] | None:
        """The quota's runtime (masked to its max names), recomputing what changed on its path."""
        info = self.infos.get(name)
        if info is None:
            return None
        if name == ROOT_QUOTA_NAME:
            return dict(self.total_except_system_and_default)
        if name in _BUILTIN:
            return dict(info.calc.max)
        if info.refreshed_at == self.changes.value and info.refreshed_at >= 0:
            return info.masked_runtime()  # nothing any runtime depends on changed since
        path = self.path_to_root(name)
        total: dict[str, int] = dict(self.total_except_system_and_default)
        for i in range(len(path) - 1, -1, -1):
            q = path[i]
            if q.name == ROOT_QUOTA_NAME:
                continue
            parent_calc = self.calculators.get(q.parent)
            own_calc = self.calculators.get(q.name)
            if parent_calc is None or own_calc is None:
                return None
            if self.scale_min_enabled:
                scaled = self.scale_min.scaled_min(total, q.parent, q.name)
                if scaled is not None and scaled != q.calc.auto_scale_min:
                    q.calc.auto_scale_min = scaled
                    parent_calc.update_one_group_min(q)
            if q.runtime_version != parent_calc.version:
                parent_calc.update_one_group_runtime(q)
            sub_total = dict(q.calc.runtime)
            if i >= 1:
                own_calc.set_cluster_total(sub_total)
            total = sub_total
        info.refreshed_at = self.changes.value
        return info.masked_runtime()

    # --- quotas --------------------------------------------------------------------------------------
    def update_quota(self, quota: ElasticQuotaSpec | Mapping[str, Any]) -> None:
        """Add a quota or apply a change of its spec/labels (UpdateQuota)."""
        spec = _spec(quota)
        new = _info_from_spec(spec)
        local = self.infos.get(spec.name)
        if spec.name == ROOT_QUOTA_NAME:
            return  # the root is the cluster; its object only makes it visible
        if spec.name in _BUILTIN and local is not None:
            # The system and default quotas stay outside the water-filling (their runtime is their max and
            # their used is taken off the root's total); only their limits follow the object.
            local.calc.max, local.calc.min = dict(new.calc.max), dict(new.calc.min)
            local.calc.shared_weight = dict(new.calc.shared_weight)
            return
        if local is None:
            self._update_quota_internal(new, None)
            return
        changed = (
            local.allow_lent_resource != new.allow_lent_resource
            or local.is_parent != new.is_parent
            or local.parent != new.parent
            or local.calc.max != new.calc.max
            or local.calc.min != new.calc.min
            or local.calc.shared_weight != new.calc.shared_weight
        )
        if not changed:
            return
        meta_changed = (
            local.allow_lent_resource != new.allow_lent_resource
            or local.is_parent != new.is_parent
            or local.parent != new.parent
        )
        if not meta_changed:
            self._update_quota_internal(new, local)
            return
        # Structure changed (parent, is-parent, lending): rebuild the tree from what every quota holds.
        local.calc.max = dict(new.calc.max)
        local.calc.min = dict(new.calc.min)
        local.calc.shared_weight = dict(new.calc.shared_weight) or dict(new.calc.max)
        local.allow_lent_resource = new.allow_lent_resource
        local.is_parent = new.is_parent
        local.parent = new.parent
        self._reset()

    def _update_quota_internal(self, new: QuotaInfo, old: QuotaInfo | None) -> None:
        if old is not None:
            self.children_of.get(old.parent, set()).discard(old.name)
        self.children_of.setdefault(new.parent, set()).add(new.name)
        self.children_of.setdefault(new.name, set())
        if old is None:
            self.calculators[new.name] = RuntimeQuotaCalculator(new.name, self.changes)
            self.calculators.setdefault(new.parent, RuntimeQuotaCalculator(new.parent, self.changes))
            self.infos[new.name] = QuotaInfo(new.name, new.parent, new.is_parent, new.allow_lent_resource)
        old_max = old.calc.max if old is not None else {}
        if new.calc.max != old_max:
            self._set_max(new.name, new.calc.max)
        self._update_resource_keys()
        old_min = old.calc.min if old is not None else {}
        if new.calc.min != old_min:
            self._set_min(new.name, new.calc.min)
        old_weight = old.calc.shared_weight if old is not None else {}
        if new.calc.shared_weight != old_weight:
            info = self.infos[new.name]
            info.calc.shared_weight = dict(new.calc.shared_weight)
            self.calculators[info.parent].update_one_group_shared_weight(info)

    def _set_max(self, name: str, new_max: dict[str, int]) -> None:
        path = self.path_to_root(name)
        if not path:
            return
        info = path[0]
        old_limited = info.limited_request()
        info.calc.max = dict(new_max)
        if len(path) > 1:
            calc = self.calculators.get(info.parent)
            if calc is None:
                return
            calc.update_one_group_max(info)
            delta = subtract(info.limited_request(), old_limited)
            self._propagate_request(delta, None, path[1:], -1)

    def _set_min(self, name: str, new_min: dict[str, int]) -> None:
        path = self.path_to_root(name)
        if not path:
            return
        info = path[0]
        info.calc.min = dict(new_min)
        info.calc.auto_scale_min = dict(new_min)
        self.scale_min.update(info.parent, name, dict(new_min), self.scale_min_enabled)
        old_limited = info.limited_request()
        real = dict(info.calc.child_request)
        if not info.allow_lent_resource:
            real = max_each(real, info.calc.min)
        info.calc.request = real
        if len(path) > 1:
            calc = self.calculators.get(info.parent)
            if calc is None:
                return
            calc.update_one_group_min(info)
            delta = subtract(info.limited_request(), old_limited)
            self._propagate_request(delta, None, path[1:], -1)

    def _update_resource_keys(self) -> None:
        all_keys: set[str] = set()
        for name, info in self.infos.items():
            if name == ROOT_QUOTA_NAME or name in _BUILTIN:
                continue
            keys = set(info.calc.max)
            all_keys |= keys
            calc = self.calculators.get(name)
            if calc is not None and keys != calc.resource_keys:
                calc.update_resource_keys(keys)
        if all_keys != self.resource_keys:
            self.resource_keys = all_keys
            self.calculators[ROOT_QUOTA_NAME].update_resource_keys(all_keys)

    def delete_quota(self, name: str) -> None:
        info = self.infos.pop(name, None)
        if info is None:
            raise QuotaNotFoundError(f"get quota info failed, quotaName:{name}")
        calc = self.calculators.get(info.parent)
        if calc is not None:
            calc.delete_one_group(info)
        self.calculators.pop(name, None)
        self.scale_min.remove(info.parent, name)
        self.children_of.pop(name, None)
        self.children_of.get(info.parent, set()).discard(name)
        self._update_resource_keys()
        delta_req = subtract({}, info.calc.request)
        delta_np_req = subtract({}, info.calc.non_preemptible_request)
        if not is_zero(delta_req) or not is_zero(delta_np_req):
            self._update_group_delta_request(info.parent, delta_req, delta_np_req, -1)
        delta_used = subtract({}, info.calc.used)
        delta_np_used = subtract({}, info.calc.non_preemptible_used)
        if not is_zero(delta_used) or not is_zero(delta_np_used):
            self._update_group_delta_used(info.parent, delta_used, delta_np_used, -1)

    def reset_quotas(self, quotas: Iterable[ElasticQuotaSpec | Mapping[str, Any]]) -> None:
        """Replace every quota by ``quotas`` and rebuild the tree (ReplaceQuotas + ResetQuota): what a
        restarted scheduler does with the list it reads; pods already known are kept in their quotas."""
        for quota in quotas:
            spec = _spec(quota)
            info = _info_from_spec(spec)
            old = self.infos.get(spec.name)
            if old is not None:
                info.pods = old.pods
                info.calc.used = old.calc.used
                info.calc.request = old.calc.request
                info.calc.child_request = old.calc.child_request
                info.calc.self_request = old.calc.self_request
                info.calc.self_used = old.calc.self_used
                info.calc.non_preemptible_used = old.calc.non_preemptible_used
                info.calc.non_preemptible_request = old.calc.non_preemptible_request
                info.calc.self_non_preemptible_used = old.calc.self_non_preemptible_used
                info.calc.self_non_preemptible_request = old.calc.self_non_preemptible_request
            self.infos[spec.name] = info
        self._reset()

    def _reset(self) -> None:
        # Rebuild the topology from every quota's parent.
        self.children_of = {ROOT_QUOTA_NAME: set()}
        for name, info in self.infos.items():
            if name == ROOT_QUOTA_NAME or name in _BUILTIN:
                continue
            self.children_of.setdefault(name, set())
            self.children_of.setdefault(info.parent, set()).add(name)
        pending: dict[str, tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, int]]] = {}
        for name, info in self.infos.items():
            if name == ROOT_QUOTA_NAME or name in _BUILTIN:
                continue
            ci = info.calc
            if not info.is_parent:
                pending[name] = (
                    dict(ci.child_request),
                    dict(ci.non_preemptible_request),
                    dict(ci.used),
                    dict(ci.non_preemptible_used),
                )
            else:
                pending[name] = (
                    dict(ci.self_request),
                    dict(ci.self_non_preemptible_request),
                    dict(ci.self_used),
                    dict(ci.self_non_preemptible_used),
                )
            info.clear_for_reset()
        self._reset_root_used_and_request()
        self.scale_min = ScaleMinQuotaManager()
        self.calculators = {ROOT_QUOTA_NAME: RuntimeQuotaCalculator(ROOT_QUOTA_NAME, self.changes)}
        self.calculators[ROOT_QUOTA_NAME].set_cluster_total(self.total_except_system_and_default)
        self._reset_recursive(ROOT_QUOTA_NAME, set())
        self.resource_keys = set()
        self._update_resource_keys()
        for name, (req, np_req, used, np_used) in pending.items():
            self._update_group_delta_request(name, req, np_req, 0)
            self._update_group_delta_used(name, used, np_used, 0)

    def _reset_recursive(self, parent: str, seen: set[str]) -> None:
        for name in sorted(self.children_of.get(parent, ())):
            if name in seen or name not in self.infos:
                continue  # a cycle or a dangling child: never walk it twice
            seen.add(name)
            info = self.infos[name]
            self.calculators[name] = RuntimeQuotaCalculator(name, self.changes)
            self.calculators.setdefault(info.parent, RuntimeQuotaCalculator(info.parent, self.changes))
            self.calculators[info.parent].update_one_group_max(info)
            info.calc.auto_scale_min = dict(info.calc.min)
            self.calculators[info.parent].update_one_group_min(info)
            self.scale_min.update(info.parent, name, dict(info.calc.min), self.scale_min_enabled)
            self.calculators[info.parent].update_one_group_shared_weight(info)
            self._reset_recursive(name, seen)

    def _reset_root_used_and_request(self) -> None:
        root = self.infos[ROOT_QUOTA_NAME]
        used: dict[str, int] = {}
        request: dict[str, int] = {}
        np_used: dict[str, int] = {}
        np_request: dict[str, int] = {}
        for name in _BUILTIN:
            info = self.infos.get(name)
            if info is not None:
                used = add(used, info.calc.used)
                request = add(request, info.calc.request)
                np_used = add(np_used, info.calc.non_preemptible_used)
                np_request = add(np_request, info.calc.non_preemptible_request)
        root.calc.used, root.calc.request = used, request
        root.calc.non_preemptible_used, root.calc.non_preemptible_request = np_used, np_request

    # --- pods ----------------------------------------------------------------------------------------
    def _update_pod_request(self, name: str, old: PodInfo | None, new: PodInfo | None) -> None:
        info = self.infos.get(name)
        if info is None:
            return
        old_req, new_req = (
            _pod_requests(old, self.ignore_pod_overhead),
            _pod_requests(new, self.ignore_pod_overhead),
        )
        old_np = old_req if old is not None and is_pod_non_preemptible(old) else {}
        new_np = new_req if new is not None and is_pod_non_preemptible(new) else {}
        names = info.calc.max
        delta = mask(subtract(new_req, old_req), names)
        delta_np = mask(subtract(new_np, old_np), names)
        if is_zero(delta) and is_zero(delta_np):
            return
        self._charge_request(name, delta, delta_np)

    def defer_requests(self) -> None:
        """Collect the pods' request changes per quota instead of propagating each one up the tree, until
        ``flush_requests``. The initial replay of thousands of pods then walks the tree once per quota, not
        once per pod (start-up, issue 22, gap 4). The result is the same: what the walk leaves behind (the
        sums, each quota's limited request, the calculators' view of it) depends on the sums alone, and only
        growing deltas are collected, so upstream's clamping at zero never cuts a step short. A delta that
        shrinks anything first flushes what was collected and is then propagated at once."""
        if self._deferred is None:
            self._deferred = {}

    def flush_requests(self) -> None:
        """Propagate what ``defer_requests`` collected, in the order the quotas were first charged, and stop
        collecting."""
        deferred, self._deferred = self._deferred, None
        for name, (delta, delta_np) in (deferred or {}).items():
            if name in self.infos:
                self._update_group_delta_request(name, delta, delta_np, 0)

    def _charge_request(self, name: str, delta: dict[str, int], delta_np: dict[str, int]) -> None:
        deferred = self._deferred
        if deferred is not None:
            if all(v >= 0 for v in delta.values()) and all(v >= 0 for v in delta_np.values()):
                pending = deferred.get(name)
                deferred[name] = (
                    (delta, delta_np)
                    if pending is None
                    else (
                        add(pending[0], delta),
                        add(pending[1], delta_np),
                    )
                )
                return
            self.flush_requests()
            self._deferred = {}
        self._update_group_delta_request(name, delta, delta_np, 0)

    def _update_pod_used(self, name: str, old: PodInfo | None, new: PodInfo | None) -> None:
        info = self.infos.get(name)
        if info is None:
            return
        if not info.is_pod_assigned(new) and not info.is_pod_assigned(old):
            return
        old_req, new_req = (
            _pod_requests(old, self.ignore_pod_overhead),
            _pod_requests(new, self.ignore_pod_overhead),
        )
        old_np = old_req if old is not None and is_pod_non_preemptible(old) else {}
        new_np = new_req if new is not None and is_pod_non_preemptible(new) else {}
        names = info.calc.max
        delta = mask(subtract(new_req, old_req), names)
        delta_np = mask(subtract(new_np, old_np), names)
        if is_zero(delta) and is_zero(delta_np):
            return
        self._update_group_delta_used(name, delta, delta_np, 0)

    def _set_assigned(self, name: str, pod: PodInfo, assigned: bool) -> None:
        info = self.infos.get(name)
        if info is None:
            return
        entry = info.pods.get(pod.key)
        if entry is not None:
            entry.assigned = assigned
            entry.pod = pod

    def _cache_pod(self, name: str, pod: PodInfo, present: bool) -> None:
        info = self.infos.get(name)
        if info is None:
            return
        if present:
            info.pods.setdefault(pod.key, PodEntry(pod))
        else:
            info.pods.pop(pod.key, None)

    def on_pod_add(self, name: str, pod: PodInfo) -> None:
        info = self.infos.get(name)
        if info is None:
            return
        key = pod.key
        if key in info.pods:
            return
        info.pods[key] = PodEntry(pod)
        # _update_pod_request(name, None, pod) without its general case: nothing to subtract, and the
        # non-preemptible part is all or nothing (thousands of adds replay at start-up).
        names = info.calc.max
        delta = {k: v for k, v in quota_pod_requests(pod, self.ignore_pod_overhead).items() if k in names}
        if not is_zero(delta):
            self._charge_request(name, delta, dict(delta) if is_pod_non_preemptible(pod) else {})
        # After a restart a bound pod arrives as an add: it is assigned from the start.
        if pod.node_name and not pod.is_terminal and not info.is_pod_assigned(pod):
            self._set_assigned(name, pod, True)
            self._update_pod_used(name, None, pod)

    def on_pod_update(self, new_name: str, old_name: str, new: PodInfo, old: PodInfo) -> None:
        if old_name == new_name:
            info = self.infos.get(new_name)
            if info is None:
                return
            same = old.requests == new.requests and is_pod_non_preemptible(old) == is_pod_non_preemptible(new)
            if new.key in info.pods:
                info.pods[new.key].pod = new
                if not same:  # a binding or a status change moves nothing
                    self._update_pod_request(new_name, old, new)
            else:
                self._cache_pod(new_name, new, True)
                self._update_pod_request(new_name, None, new)
            if info.is_pod_assigned(new):
                # As upstream, a pod that has finished keeps counting until it is deleted.
                if not same:
                    self._update_pod_used(new_name, old, new)
            elif new.node_name and not new.is_terminal:
                self._set_assigned(new_name, new, True)
                self._update_pod_used(new_name, None, new)
            return
        old_info = self.infos.get(old_name)
        if old_info is not None and old.key in old_info.pods:
            if old_info.is_pod_assigned(old):
                self._update_pod_used(old_name, old, None)
            self._update_pod_request(old_name, old, None)
            self._cache_pod(old_name, old, False)
        new_info = self.infos.get(new_name)
        if new_info is not None and new.key not in new_info.pods:
            self._cache_pod(new_name, new, True)
            self._update_pod_request(new_name, None, new)
            if new.node_name and not new.is_terminal:
                self._set_assigned(new_name, new, True)
                self._update_pod_used(new_name, None, new)

    def on_pod_delete(self, name: str, pod: PodInfo) -> None:
        info = self.infos.get(name)
        if info is None or pod.key not in info.pods:
            return
        cached = info.pods[pod.key].pod
        self._update_pod_request(name, cached, None)
        if info.is_pod_assigned(cached):
            self._update_pod_used(name, cached, None)
        self._cache_pod(name, cached, False)

    def reserve_pod(self, name: str, pod: PodInfo) -> None:
        info = self.infos.get(name)
        if info is None or pod.key not in info.pods or info.is_pod_assigned(pod):
            return
        self._set_assigned(name, pod, True)
        self._update_pod_used(name, None, pod)

    def unreserve_pod(self, name: str, pod: PodInfo) -> None:
        info = self.infos.get(name)
        if info is None or pod.key not in info.pods or not info.is_pod_assigned(pod):
            return
        self._update_pod_used(name, pod, None)
        self._set_assigned(name, pod, False)

    def migrate_pod(self, pod: PodInfo, out: str, into: str) -> None:
        out_info = self.infos.get(out)
        assigned = out_info is not None and out_info.is_pod_assigned(pod)
        self._update_pod_request(out, pod, None)
        if assigned:
            self._update_pod_used(out, pod, None)
        self._cache_pod(out, pod, False)
        self._cache_pod(into, pod, True)
        self._set_assigned(into, pod, assigned)
        self._update_pod_request(into, None, pod)
        if assigned:
            self._update_pod_used(into, None, pod)

    # --- summaries -----------------------------------------------------------------------------------
    def summary(self, name: str) -> dict[str, Any] | None:
        """Everything the status writer and the CLI show of one quota (QuotaInfoSummary)."""
        info = self.infos.get(name)
        if info is None:
            return None
        ci = info.calc
        return {
            "name": info.name,
            "parent": info.parent,
            "isParent": info.is_parent,
            "allowLentResource": info.allow_lent_resource,
            "tree": self.tree_id,
            "max": dict(ci.max),
            "min": dict(ci.min),
            "autoScaleMin": dict(ci.auto_scale_min),
            "sharedWeight": dict(ci.shared_weight),
            "runtime": dict(ci.runtime),
            "request": dict(ci.request),
            "childRequest": dict(ci.child_request),
            "used": dict(ci.used),
            "nonPreemptibleRequest": dict(ci.non_preemptible_request),
            "nonPreemptibleUsed": dict(ci.non_preemptible_used),
            "guaranteed": dict(ci.guaranteed),
            "allocated": dict(ci.allocated),
        }
