"""From the shared informer into the assign cache: Pod, NodeMetric and Node events.

The plugin learns what the cluster holds the way Koordinator's does, through informers: every pod with a node
(bound, or reserved by this scheduler) is counted with its estimate, every NodeMetric replaces its node's
report, and Node changes mark the node's row for rewriting. Handlers may run on watch threads (against a
real cluster), so everything they touch is guarded by ``lock``, which the scheduling cycle takes too.

Pods are re-read only when it can matter: Koordinator re-assigns a pod when its spec or conditions change,
and the most frequent such change, this scheduler's own bind, only moves the pod's timestamps; that case
skips parsing the pod again (``AssignCache.rebind``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from koord_framework.api.objects import PodInfo, condition_times
from koord_framework.cluster.port import Informer
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_plugin_loadaware.args import LoadAwareSchedulingArgs
from koord_plugin_loadaware.assign_cache import AssignCache
from koord_plugin_loadaware.estimator import Estimator
from koord_plugin_loadaware.metrics import LoadAwareMetrics
from koord_plugin_loadaware.nodemetric import NodeMetricError, parse_node_metric
from koord_plugin_loadaware.vectors import Vectorizer

__all__ = ["ClusterFeed"]

log = logging.getLogger(__name__)

_TERMINAL = ("Succeeded", "Failed")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def same_for_estimation(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when an update cannot change what the assign cache holds for the pod: same spec, same
    conditions, same phase (status-only churn such as container restarts is the common case)."""
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    return (
        old.get("spec") == new.get("spec")
        and old_status.get("conditions") == new_status.get("conditions")
        and old_status.get("phase") == new_status.get("phase")
    )


def same_spec_but_node(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The two specs are equal but for ``nodeName`` (same keys, equal values)."""
    # Two shallow copies and one comparison in C cost a third of a Python loop over the keys.
    return {**old, "nodeName": None} == {**new, "nodeName": None}


class ClusterFeed:
    """Owns the assign cache and the set of nodes whose columns need rewriting."""

    def __init__(
        self,
        args: LoadAwareSchedulingArgs,
        vectorizer: Vectorizer,
        estimator: Estimator,
        now: Callable[[], float],
        metrics: LoadAwareMetrics,
    ) -> None:
        self.lock = threading.RLock()
        self.dirty: set[str] = set()
        """Nodes whose row must be rewritten at the next sync."""
        self.node_pending: dict[str, str | None] = {}
        """Node events not yet visible in the snapshot: name -> announced resourceVersion (None: deleted)."""
        self.cache = AssignCache(args, vectorizer, estimator, now, self.dirty.add)
        self.vectorizer = vectorizer
        self.metrics = metrics
        self._removers: list[Callable[[], None]] = []

    def subscribe(self, informer: Informer) -> None:
        """Register the handlers; the informer replays what it already holds as adds."""
        self._removers += [
            informer.add_handler("NodeMetric", self.on_metric, self.on_metric_update, self.on_metric_delete),
            informer.add_handler("Pod", self.on_pod_add, self.on_pod_update, self.on_pod_delete),
            informer.add_handler("Node", self.on_node, self.on_node_update, self.on_node_delete),
        ]

    def unsubscribe(self) -> None:
        """Remove the handlers ``subscribe`` registered (the informer outlives the plugin)."""
        removers, self._removers = self._removers, []
        for remove in removers:
            remove()

    def take_dirty(self, node_info: Callable[[str], NodeInfo | None]) -> list[str]:
        """Nodes to rewrite now (call with ``lock`` held).

        Node events arrive before the cycle's snapshot shows them (and, against a real cluster, from another
        thread): such a node stays pending, and is rewritten again, until the snapshot has the version the
        event announced."""
        if self.node_pending:
            self._mark_pending_nodes(node_info)
        if not self.dirty:
            return []
        names = list(self.dirty)
        self.dirty.clear()
        return names

    def _mark_pending_nodes(self, node_info: Callable[[str], NodeInfo | None]) -> None:
        """Mark every pending node dirty; forget those the snapshot has caught up with."""
        for name, version in list(self.node_pending.items()):
            info = node_info(name)
            if version is None:
                caught_up = info is None
            else:
                caught_up = info is not None and (not version or info.node.resource_version == version)
            if caught_up:
                del self.node_pending[name]
            self.dirty.add(name)

    # --- NodeMetric -----------------------------------------------------------------------------------
    def on_metric(self, obj: Mapping[str, Any]) -> None:
        name = _name(obj)
        try:
            report = parse_node_metric(obj, self.vectorizer)
        except NodeMetricError as err:
            # The informer of a Go scheduler would not decode such an object at all: keep what we had.
            log.warning("LoadAwareScheduling: ignoring NodeMetric %s: %s", name, err)
            self.metrics.metric_error()
            return
        with self.lock:
            self.cache.set_metric(name, report)

    def on_metric_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self.on_metric(obj)

    def on_metric_delete(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            self.cache.set_metric(_name(obj), None)

    # --- Pod ------------------------------------------------------------------------------------------
    def on_pod_add(self, obj: Mapping[str, Any]) -> None:
        if not (obj.get("spec") or {}).get("nodeName"):
            return  # nothing to count until it is bound (or reserved by this scheduler)
        pod = PodInfo.from_manifest(obj)
        with self.lock:
            self.cache.on_pod_add(pod)

    def on_pod_update(self, old: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec") or {}
        node = str(spec.get("nodeName") or "")
        old_spec: Mapping[str, Any] = (old.get("spec") or {}) if old is not None else {}
        old_node = str(old_spec.get("nodeName") or "")
        just_bound = old is not None and bool(node) and not old_node
        # A pod that has just got its node differs in spec.nodeName, so only other updates can be no-ops.
        if old is not None and not just_bound and same_for_estimation(old, obj):
            return  # Koordinator re-assigns only on spec or condition changes; skip the parse too
        status = obj.get("status") or {}
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if node and status.get("phase") in _TERMINAL:
            with self.lock:
                self.cache.unassign(node, uid)
                if old_node and old_node != node:
                    self.cache.unassign(old_node, uid)
            return
        if just_bound and same_spec_but_node(old_spec, spec):
            # The common case: a pod this scheduler reserved has just been bound.
            scheduled, initialized = condition_times(status)
            labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
            with self.lock:
                if self.cache.rebind(uid, node, scheduled, initialized, labels, annotations):
                    return
        pod = PodInfo.from_manifest(obj)
        with self.lock:
            if old_node and old_node != pod.node_name:
                self.cache.unassign(old_node, pod.uid)
            self.cache.on_pod_update(None, pod)

    def on_pod_delete(self, obj: Mapping[str, Any]) -> None:
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        with self.lock:
            self.cache.unassign(node or self.cache.node_of(uid), uid)

    # --- Node -----------------------------------------------------------------------------------------
    def on_node(self, obj: Mapping[str, Any]) -> None:
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self.lock:
            self.node_pending[_name(obj)] = version

    def on_node_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self.on_node(obj)

    def on_node_delete(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            self.node_pending[_name(obj)] = None
