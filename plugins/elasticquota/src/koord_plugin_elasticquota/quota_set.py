"""Every quota tree the plugin follows, and which quota each pod belongs to (``plugin_helper.go``,
``quota_handler.go``, ``pod_handler.go``, ``node_handler.go``).

``QuotaSet`` owns one ``GroupQuotaManager`` per tree id (the default tree is ""), the quota -> tree map,
the quota objects by name (for the namespace fallbacks), and feeds them from object events. It holds no
scheduling state of its own: the plugin, the controllers and the CLI share it, under ``lock``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.resources import is_zero, subtract
from koord_framework.cluster.records import rebound
from koord_plugin_elasticquota.manager import GroupQuotaManager
from koord_plugin_elasticquota.quota_object import (
    DEFAULT_QUOTA_NAME,
    LABEL_QUOTA_NAME,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    ElasticQuotaSpec,
    QuotaObjectError,
    pod_quota_label,
)

__all__ = ["QuotaSet"]

log = logging.getLogger(__name__)


def _not_parsed(_obj: Mapping[str, Any]) -> None:
    return None


class QuotaSet:
    def __init__(
        self,
        *,
        scale_min_enabled: bool = True,
        system_max: Mapping[str, int] | None = None,
        default_max: Mapping[str, int] | None = None,
        ignore_pod_overhead: bool = False,
        disable_default_quota: bool = False,
    ) -> None:
        self.lock = threading.RLock()
        self.ignore_pod_overhead = ignore_pod_overhead
        """The gate ``ElasticQuotaIgnorePodOverhead`` (every tree's manager follows it)."""
        self.disable_default_quota = disable_default_quota
        """The gate ``DisableDefaultQuota``: a pod's quota is its quota-name label only, and a pod without
        one (or naming an unknown quota) is in no quota at all -- admitted without a quota check."""
        self.parsed_pod: Callable[[Mapping[str, Any]], PodInfo | None] = _not_parsed
        """The record another cache already parsed for a pod manifest (``Handle.parsed_pod``): 5,000
        pods listed at start-up are parsed once, not once more here."""
        self.parsed_node: Callable[[Mapping[str, Any]], NodeRecord | None] = _not_parsed
        self._scale = scale_min_enabled
        self._system_max = dict(system_max or {})
        self._default_max = dict(default_max or {})
        self.default = self._new_manager("")
        self.trees: dict[str, GroupQuotaManager] = {}
        self.quota_to_tree: dict[str, str] = {DEFAULT_QUOTA_NAME: "", SYSTEM_QUOTA_NAME: ""}
        self.specs: dict[str, ElasticQuotaSpec] = {}
        self.errors: dict[str, str] = {}
        """Quota objects that could not be read, by name: what the status/CLI report (never half-applied)."""

    def _new_manager(self, tree_id: str) -> GroupQuotaManager:
        return GroupQuotaManager(
            tree_id,
            scale_min_enabled=self._scale,
            system_max=self._system_max,
            default_max=self._default_max,
            ignore_pod_overhead=self.ignore_pod_overhead,
        )

    # --- managers ----------------------------------------------------------------------------------
    def managers(self) -> list[GroupQuotaManager]:
        return [self.default, *(self.trees[t] for t in sorted(self.trees))]

    def manager_for_tree(self, tree_id: str) -> GroupQuotaManager | None:
        return self.default if tree_id == "" else self.trees.get(tree_id)

    def manager_for_quota(self, name: str) -> GroupQuotaManager:
        tree = self.quota_to_tree.get(name, "")
        return self.trees.get(tree, self.default) if tree else self.default

    @contextlib.contextmanager
    def pods_in_bulk(self) -> Iterator[None]:
        """Around a replay of many pod adds (the informer's initial list): each tree propagates its pods'
        requests once per quota at the end instead of once per pod (``GroupQuotaManager.defer_requests``).
        The set stays locked meanwhile, so nothing reads a quota whose request is still on its way up."""
        with self.lock:
            managers = self.managers()
            for mgr in managers:
                mgr.defer_requests()
            try:
                yield
            finally:
                for mgr in managers:  # no tree comes or goes meanwhile: quota events wait for the lock
                    mgr.flush_requests()

    # --- pod -> quota --------------------------------------------------------------------------------
    def quota_name(self, pod: PodInfo) -> str:
        """GetQuotaName: the pod's label; else a quota named like the pod's namespace (in that namespace);
        else a quota whose namespaces annotation lists it; else the default quota."""
        return self.quota_name_for(pod.namespace, pod_quota_label(pod))

    def quota_name_for(self, namespace: str, label: str) -> str:
        if label or self.disable_default_quota:
            return label
        spec = self.specs.get(namespace)
        if spec is not None and spec.namespace == namespace:
            return spec.name
        for spec_name in sorted(self.specs):
            if namespace in self.specs[spec_name].namespaces:
                return spec_name
        return DEFAULT_QUOTA_NAME

    def quota_and_tree(self, pod: PodInfo) -> tuple[str, str]:
        """The quota the pod is charged to and its tree; an unknown quota name falls back to the default
        quota, as upstream."""
        name = self.quota_name(pod)
        tree = self.quota_to_tree.get(name)
        if tree is not None:
            return name, tree
        if self.disable_default_quota:
            return "", ""
        return DEFAULT_QUOTA_NAME, ""

    # --- quota events --------------------------------------------------------------------------------
    def _read(self, obj: Mapping[str, Any]) -> ElasticQuotaSpec | None:
        try:
            spec = ElasticQuotaSpec.from_manifest(obj)
        except QuotaObjectError as err:
            name = str((obj.get("metadata") or {}).get("name") or "?")
            self.errors[name] = str(err)
            log.warning("ignoring ElasticQuota: %s", err)
            return None
        self.errors.pop(spec.name, None)
        return spec

    def _manager_creating(self, tree_id: str) -> GroupQuotaManager:
        if tree_id == "":
            return self.default
        mgr = self.trees.get(tree_id)
        if mgr is None:
            mgr = self.trees[tree_id] = self._new_manager(tree_id)
        return mgr

    def _when_tree_root(self, spec: ElasticQuotaSpec, mgr: GroupQuotaManager, deleted: bool) -> None:
        # A tree's root quota says how much of the cluster the tree has; the default tree gives it up.
        if not spec.is_root or mgr.tree_id == "" or spec.total_resource is None:
            return
        if deleted:
            delta = subtract({}, spec.total_resource)
            self.trees.pop(mgr.tree_id, None)
        else:
            delta = mgr.set_total_resource_for_tree(spec.total_resource)
        if (
            not is_zero(delta)
            and spec.labels.get("quota.scheduling.koordinator.sh/ignore-default-tree") != "true"
        ):
            self.default.update_cluster_total_resource(subtract({}, delta))

    def on_quota_add(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            spec = self._read(obj)
            if spec is None or spec.deleting or spec.name == ROOT_QUOTA_NAME:
                return
            mgr = self._manager_creating(spec.tree_id)
            self.quota_to_tree.setdefault(spec.name, mgr.tree_id)
            self.specs[spec.name] = spec
            self._when_tree_root(spec, mgr, False)
            mgr.update_quota(spec)
            self._migrate_default_pods()

    def on_quota_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self.on_quota_add(obj)

    def on_quota_delete(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            spec = self._read(obj)
            if spec is None or spec.name in (ROOT_QUOTA_NAME, SYSTEM_QUOTA_NAME, DEFAULT_QUOTA_NAME):
                return
            self.specs.pop(spec.name, None)
            tree = self.quota_to_tree.pop(spec.name, "")
            mgr = self.manager_for_tree(tree)
            if mgr is None or mgr.get_quota_info(spec.name) is None:
                return
            # Its pods go to the default quota (upstream's migratePods), then the quota leaves the tree.
            info = mgr.get_quota_info(spec.name)
            assert info is not None
            for entry in list(info.pods.values()):
                if mgr.tree_id == "":
                    mgr.migrate_pod(entry.pod, spec.name, DEFAULT_QUOTA_NAME)
                else:
                    mgr.on_pod_delete(spec.name, entry.pod)
                    self.default.on_pod_add(DEFAULT_QUOTA_NAME, entry.pod)
            mgr.delete_quota(spec.name)
            self._when_tree_root(spec, mgr, True)

    def replace_quotas(self, objs: Iterable[Mapping[str, Any]]) -> None:
        """Rebuild every tree from a full list of quota objects (what a restart reads)."""
        with self.lock:
            specs = [s for s in (self._read(o) for o in objs) if s is not None and not s.deleting]
            for spec in specs:
                if spec.name == ROOT_QUOTA_NAME:
                    continue
                mgr = self._manager_creating(spec.tree_id)
                self.quota_to_tree.setdefault(spec.name, mgr.tree_id)
                self.specs[spec.name] = spec
                self._when_tree_root(spec, mgr, False)
            for mgr in self.managers():
                mgr.reset_quotas(
                    s
                    for s in specs
                    if s.name != ROOT_QUOTA_NAME and self.quota_to_tree.get(s.name) == mgr.tree_id
                )

    def _migrate_default_pods(self) -> None:
        """Pods that arrived before their quota sit in the default quota; move them (upstream runs this
        every few seconds; here on every quota change, which is when it can make a difference). With
        ``DisableDefaultQuota`` no pod is ever put there."""
        if self.disable_default_quota:
            return
        info = self.default.get_quota_info(DEFAULT_QUOTA_NAME)
        if info is None:
            return
        for entry in list(info.pods.values()):
            name, tree = self.quota_and_tree(entry.pod)
            if name == DEFAULT_QUOTA_NAME:
                continue
            mgr = self.manager_for_tree(tree)
            if mgr is None or mgr.get_quota_info(name) is None:
                continue
            if mgr.tree_id != "":
                self.default.on_pod_delete(DEFAULT_QUOTA_NAME, entry.pod)
                mgr.on_pod_add(name, entry.pod)
            else:
                mgr.migrate_pod(entry.pod, DEFAULT_QUOTA_NAME, name)

    # --- node events ---------------------------------------------------------------------------------
    def on_node_add(self, obj: Mapping[str, Any]) -> None:
        node = self._node(obj)
        with self.lock:
            self.default.on_node_add(node.name, node.allocatable)

    def on_node_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        node = self._node(obj)
        with self.lock:
            self.default.on_node_update(node.name, node.allocatable)

    def on_node_delete(self, obj: Mapping[str, Any]) -> None:
        node = self._node(obj)
        with self.lock:
            self.default.on_node_delete(node.name)

    def _node(self, obj: Mapping[str, Any]) -> NodeRecord:
        return self.parsed_node(obj) or NodeRecord.from_manifest(obj)

    # --- pod events ----------------------------------------------------------------------------------
    def _pod(self, obj: Mapping[str, Any] | PodInfo) -> PodInfo:
        if isinstance(obj, PodInfo):
            return obj
        return self.parsed_pod(obj) or PodInfo.from_manifest(obj)

    def on_pod_add(self, obj: Mapping[str, Any] | PodInfo) -> None:
        pod = self._pod(obj)
        with self.lock:
            name, tree = self.quota_and_tree(pod)
            mgr = self.manager_for_tree(tree)
            if mgr is not None:
                mgr.on_pod_add(name, pod)

    def _cached(self, obj: Mapping[str, Any]) -> PodInfo | None:
        """The record the manager holds for this pod manifest, if any."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        key = f"{namespace}/{meta.get('name') or ''}"
        label = (meta.get("labels") or {}).get(LABEL_QUOTA_NAME, "")
        name = label or self.quota_name_for(namespace, "")
        info = self.manager_for_quota(name).get_quota_info(name)
        if info is None:
            info = self.default.get_quota_info(DEFAULT_QUOTA_NAME)
        entry = info.pods.get(key) if info is not None else None
        return entry.pod if entry is not None else None

    def on_pod_update(self, old_obj: Mapping[str, Any] | PodInfo, obj: Mapping[str, Any] | PodInfo) -> None:
        new: PodInfo | None = obj if isinstance(obj, PodInfo) else None
        old: PodInfo | None = old_obj if isinstance(old_obj, PodInfo) else None
        if new is None and old is None and not isinstance(obj, PodInfo) and not isinstance(old_obj, PodInfo):
            # A binding changes nothing the quota reads but the node: derive the record, do not re-parse.
            with self.lock:
                cached = self._cached(old_obj)
            if cached is not None:
                new = rebound(cached, dict(old_obj), dict(obj))
                if new is not None:
                    old = cached
        if old is None:
            old = old_obj if isinstance(old_obj, PodInfo) else PodInfo.from_manifest(old_obj)
        if new is None:
            new = self._pod(obj)
        with self.lock:
            old_name, old_tree = self.quota_and_tree(old)
            new_name, new_tree = self.quota_and_tree(new)
            if old_tree == new_tree:
                mgr = self.manager_for_tree(new_tree)
                if mgr is not None:
                    mgr.on_pod_update(new_name, old_name, new, old)
                return
            old_mgr, new_mgr = self.manager_for_tree(old_tree), self.manager_for_tree(new_tree)
            if old_mgr is not None:
                old_mgr.on_pod_delete(old_name, old)
            if new_mgr is not None:
                new_mgr.on_pod_add(new_name, new)

    def on_pod_delete(self, obj: Mapping[str, Any] | PodInfo) -> None:
        pod = self._pod(obj)
        with self.lock:
            name, tree = self.quota_and_tree(pod)
            mgr = self.manager_for_tree(tree)
            if mgr is not None:
                mgr.on_pod_delete(name, pod)

    # --- reading -------------------------------------------------------------------------------------
    def summaries(self, *, refresh: bool = True) -> dict[str, dict[str, Any]]:
        """Every quota's summary (runtime refreshed first), root excluded, by name."""
        out: dict[str, dict[str, Any]] = {}
        with self.lock:
            for mgr in self.managers():
                for name in mgr.quota_names():
                    if name == ROOT_QUOTA_NAME:
                        continue
                    runtime = mgr.refresh_runtime(name) if refresh else None
                    summary = mgr.summary(name)
                    if summary is None:
                        continue
                    if name in (SYSTEM_QUOTA_NAME, DEFAULT_QUOTA_NAME) and runtime is not None:
                        summary["runtime"] = runtime  # their runtime is their max
                    out[name] = summary
        return out
