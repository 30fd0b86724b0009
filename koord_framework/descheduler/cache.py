"""The descheduler's view of the cluster: nodes, pods by node and by owner, parsed NodeMetrics, namespaces.

Koordinator's descheduler reads through shared informers (a pod indexer by node name, listers for nodes and
NodeMetrics). Here the platform's ``SharedInformer`` with its ``PodCache``/``NodeCache`` provides pods and
nodes; this cache adds what the descheduler needs on top: an index of pods by owner uid and NodeMetrics
parsed once per version into ``NodeMetricInfo``, so a round over 150,000 pods adds integers instead of
parsing quantity strings.

On the embedded cluster, watch events arrive synchronously after each write: an eviction removes the pod
from the cache before ``evict`` returns, as an informer would shortly after on a real cluster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.quantity import QuantityError
from koord_framework.cluster.informer import NodeCache, PodCache, SharedInformer
from koord_framework.cluster.port import ClusterPort
from koord_framework.descheduler.node_usage import NodeMetricInfo, NodePods, node_pods

log = logging.getLogger(__name__)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class DeschedulerCache:
    """Follows the cluster through a shared informer; accessors return fresh lists the caller may keep."""

    def __init__(self, source: ClusterPort | SharedInformer) -> None:
        self.informer = source if isinstance(source, SharedInformer) else SharedInformer(source)
        self._own_informer = not isinstance(source, SharedInformer)
        self.cluster: ClusterPort = self.informer.cluster
        self._lock = threading.Lock()
        self._by_owner: dict[str, dict[str, PodInfo]] = {}
        self._metrics: dict[str, NodeMetricInfo] = {}
        self.errors: list[str] = []
        """Objects that could not be parsed (they are left out)."""
        self._node_pods: dict[str, NodePods] = {}
        self._dirty: set[str] = set()
        self._generation = 0
        self.pod_cache = PodCache(self.informer)
        self.node_cache = NodeCache(self.informer)
        self.pod_cache.add_listener(self._pod_added, self._pod_updated, self._pod_deleted)
        for pod in self.pod_cache.all():
            self._pod_added(pod)
        self.informer.add_handler("NodeMetric", self._metric_set, self._metric_updated, self._metric_deleted)
        self.informer.ensure("Namespace")
        self.warm()

    # --- reads ----------------------------------------------------------------------------------------
    def nodes(self) -> list[NodeRecord]:
        return self.node_cache.all()

    def node(self, name: str) -> NodeRecord | None:
        return self.node_cache.get(name)

    def pods(self) -> list[PodInfo]:
        return self.pod_cache.all()

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        return self.pod_cache.get(namespace, name)

    def pods_on_node(self, node_name: str) -> list[PodInfo]:
        return self.pod_cache.on_node(node_name) if node_name else []

    def pods_owned_by(self, owner_uid: str) -> list[PodInfo]:
        with self._lock:
            return list(self._by_owner.get(owner_uid, {}).values())

    def node_metric(self, name: str) -> NodeMetricInfo | None:
        with self._lock:
            return self._metrics.get(name)

    def node_pods(self, name: str) -> NodePods:
        """The node's live pods, its prod pods and their measured usage, rebuilt only after a change of
        the node's pods or NodeMetric (like an informer's index, it follows events)."""
        with self._lock:
            current = self._node_pods.get(name)
            if current is not None and name not in self._dirty:
                return current
            self._dirty.discard(name)
            generation = self._generation
        fresh = node_pods(self.pods_on_node(name), self.node_metric(name))
        with self._lock:
            # A change that arrived while building marked the node dirty again: keep it dirty.
            if self._generation == generation or name not in self._dirty:
                self._node_pods[name] = fresh
        return fresh

    def warm(self) -> None:
        """Rebuild every node's ``NodePods`` that a change made stale (done after the initial sync, so the
        first cycle starts from built indexes, as a running descheduler would)."""
        for node in self.node_cache.names():
            with self._lock:
                stale = node not in self._node_pods or node in self._dirty
            if stale:
                self.node_pods(node)

    def _touch(self, node: str) -> None:
        if node:
            with self._lock:
                self._dirty.add(node)
                self._generation += 1

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        obj = self.informer.get("Namespace", name)
        if obj is None:
            return None
        return dict((obj.get("metadata") or {}).get("labels") or {})

    def close(self) -> None:
        if self._own_informer:
            self.informer.stop()

    # --- owner index --------------------------------------------------------------------------------
    def _pod_added(self, pod: PodInfo) -> None:
        self._touch(pod.node_name)
        with self._lock:
            for ref in pod.owner_refs:
                if ref.uid:
                    self._by_owner.setdefault(ref.uid, {})[pod.key] = pod

    def _pod_deleted(self, pod: PodInfo) -> None:
        self._touch(pod.node_name)
        with self._lock:
            for ref in pod.owner_refs:
                owned = self._by_owner.get(ref.uid)
                if owned is not None:
                    owned.pop(pod.key, None)
                    if not owned:
                        del self._by_owner[ref.uid]

    def _pod_updated(self, old: PodInfo, new: PodInfo) -> None:
        self._pod_deleted(old)
        self._pod_added(new)

    # --- NodeMetrics --------------------------------------------------------------------------------
    def _metric_set(self, obj: Mapping[str, Any]) -> None:
        try:
            info = NodeMetricInfo.from_manifest(obj)
        except (QuantityError, ValueError, TypeError) as err:
            message = f"NodeMetric {_name(obj)}: {err}"
            log.warning("%s (left out of the cache)", message)
            with self._lock:
                self.errors.append(message)
                self._metrics.pop(_name(obj), None)
            self._touch(_name(obj))
            return
        with self._lock:
            self._metrics[info.name] = info
        self._touch(info.name)

    def _metric_updated(self, old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        self._metric_set(obj)

    def _metric_deleted(self, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self._metrics.pop(_name(obj), None)
        self._touch(_name(obj))
