"""The SLO controllers of koord-manager: NodeSLO, NodeMetric and node resources, one key per node."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from koord_framework.api.resources import BATCH_CPU, format_resource
from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import ClusterError, NotFoundError
from koord_framework.featuregates import FeatureGates, gates_for
from koord_framework.manager.colocation import ColocationStrategy
from koord_framework.manager.noderesource import (
    ANNOTATION_CPU_NORMALIZATION_RATIO,
    NodeResourcePlugin,
    PodRecord,
    ResourceItem,
    ResourceMetrics,
)
from koord_framework.manager.sloconfig import SLOConfig

__all__ = ["NodeMetricReconciler", "NodeResourceReconciler", "NodeSLOReconciler"]

log = logging.getLogger("koord.manager")

SLO_API = "slo.koordinator.sh/v1alpha1"


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


class _PerNode:
    name = ""

    def __init__(self, cluster: ClusterPort, informer: SharedInformer, config: SLOConfig) -> None:
        self.cluster = cluster
        self.informer = informer
        self.config = config

    def all_keys(self) -> Iterable[str]:
        return [n["metadata"]["name"] for n in self.informer.list("Node")]

    def _ensure_spec(self, kind: str, name: str, spec: dict[str, Any], *, whole_spec: bool) -> None:
        """Create ``kind/name`` with ``spec``, or update its spec when it differs (status kept)."""
        current = self.informer.get(kind, name)
        if current is None:
            # Handed over: the spec's sections are the config's read-only strategies, shared by the
            # nodes they match; copying them for each of thousands of nodes was most of the NodeSLO pass.
            self.cluster.create_no_result(
                {"apiVersion": SLO_API, "kind": kind, "metadata": {"name": name}, "spec": spec},
                handover=True,
            )
            return
        old_spec = current.get("spec") or {}
        new_spec = spec if whole_spec else {**old_spec, **spec}
        if old_spec == new_spec:
            return
        if whole_spec:
            updated = {**current, "spec": new_spec}  # status and metadata shared, never mutated
            self.cluster.update(updated)
        else:  # a merge patch of the keys we own: the (large) status is neither copied nor sent
            self.cluster.patch_no_result(kind, name, "", {"spec": spec})

    def _delete_if_present(self, kind: str, name: str) -> None:
        if self.informer.get(kind, name) is not None:
            with contextlib.suppress(NotFoundError):  # gone already: the goal is reached
                self.cluster.delete(kind, name)


class NodeSLOReconciler(_PerNode):
    """Each node's NodeSLO: the ConfigMap's strategies merged for its labels (``nodeslo`` controller)."""

    name = "nodeslo"

    def reconcile(self, key: str) -> None:
        node = self.informer.get("Node", key)
        if node is None:
            self._delete_if_present("NodeSLO", key)
            return
        self._ensure_spec("NodeSLO", key, self.config.node_slo_spec(_labels(node)), whole_spec=True)


class NodeMetricReconciler(_PerNode):
    """Each node's NodeMetric spec: the collect policy of its colocation strategy (``nodemetric``)."""

    name = "nodemetric"

    def reconcile(self, key: str) -> None:
        node = self.informer.get("Node", key)
        if node is None:
            self._delete_if_present("NodeMetric", key)
            return
        policy = self.config.metric_collect_policy(_labels(node))
        self._ensure_spec("NodeMetric", key, {"metricCollectPolicy": policy}, whole_spec=False)


class NodeResourceReconciler(_PerNode):
    """Extended resources of each node from the calculator plugins (``noderesource`` controller).

    The node status is written when a plugin says the change is large enough (``need_sync``) or when
    ``updateTimeThresholdSeconds`` passed since the last write of that node.
    """

    name = "noderesource"

    def __init__(
        self,
        cluster: ClusterPort,
        informer: SharedInformer,
        config: SLOConfig,
        plugins: Sequence[NodeResourcePlugin[Any]],
        gates: FeatureGates | None = None,
    ) -> None:
        super().__init__(cluster, informer, config)
        self.plugins = list(plugins)
        self.last_sync: dict[str, float] = {}
        self.last_messages: dict[str, list[str]] = {}
        # Pods by node, kept by the informer's events: a pass over every node reads each pod once. Each entry
        # is [manifest, its PodRecord or None until a calculation parsed it]; an event replaces the entry,
        # so a record lives exactly as long as the pod version it was parsed from.
        self._pods: dict[str, dict[tuple[str, str], list[Any]]] = {}
        self._pods_lock = threading.Lock()
        self._topology_retry_at = float("-inf")
        self.remove_handler = informer.add_handler(
            "Pod", self._pod_added, self._pod_updated, self._pod_deleted
        )
        context = _Context(informer, config, gates if gates is not None else gates_for("manager"))
        for plugin in self.plugins:
            plugin.bind(context)

    @staticmethod
    def _pod_key(pod: Mapping[str, Any]) -> tuple[str, str]:
        meta = pod.get("metadata") or {}
        return str(meta.get("namespace") or "default"), str(meta.get("name") or "")

    def _pod_added(self, pod: Mapping[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            with self._pods_lock:
                self._pods.setdefault(str(node), {})[self._pod_key(pod)] = [pod, None]

    def _pod_deleted(self, pod: Mapping[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            with self._pods_lock:
                self._pods.get(str(node), {}).pop(self._pod_key(pod), None)

    def _pod_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self._pod_deleted(old)
        self._pod_added(new)

    def pods_on(self, node: str) -> list[Mapping[str, Any]]:
        with self._pods_lock:
            return [entry[0] for entry in self._pods.get(node, {}).values()]

    def pod_records_on(self, node: str) -> tuple[list[Mapping[str, Any]], list[PodRecord] | None]:
        """The node's pods and their records (parsed once per pod version and shared by every calculator);
        records ``None`` when a pod cannot be parsed, so that each calculator meets the error itself."""
        with self._pods_lock:
            entries = list(self._pods.get(node, {}).values())
        pods: list[Mapping[str, Any]] = []
        records: list[PodRecord] = []
        for entry in entries:
            pod, record = entry
            if record is None:
                try:
                    record = PodRecord.from_manifest(pod)
                except ValueError:
                    return [e[0] for e in entries], None
                entry[1] = record  # an event since replaced the entry, not this list: no harm
            pods.append(pod)
            records.append(record)
        return pods, records

    def items_for(self, node: Mapping[str, Any], now: float) -> list[ResourceItem]:
        name = node["metadata"]["name"]
        strategy = self.config.colocation(_labels(node))
        items: list[ResourceItem] = []
        if not strategy.enable:
            for plugin in self.plugins:
                items += plugin.reset(node, "node colocation is not enabled, reset node resources")
            return items
        metric = self.informer.get("NodeMetric", name)
        pods, records = self.pod_records_on(name)
        metrics = ResourceMetrics(metric, now, self._topology(name), records)
        for plugin in self.plugins:
            try:
                items += plugin.calculate(strategy, node, pods, metrics)
            except ValueError as exc:  # bad input on this node: its resources are left as they are
                log.warning("noderesource: %s on node %s: %s", plugin.name, name, exc)
        return items

    def _topology(self, name: str) -> Mapping[str, Any] | None:
        now = self.cluster.clock.now()
        if now < self._topology_retry_at:
            return None
        try:
            return self.informer.get("NodeResourceTopology", name)
        except (ValueError, ClusterError) as exc:  # the kind is not served (no CRD): no zone-level values
            # Asked again a minute later, not once per node: following an unserved kind lists it.
            self._topology_retry_at = now + 60.0
            log.info("noderesource: NodeResourceTopology not readable, zone values skipped: %s", exc)
            return None

    def _pre_update(self, node: Mapping[str, Any], items: Sequence[ResourceItem]) -> None:
        strategy = self.config.colocation(_labels(node))
        for plugin in self.plugins:
            try:
                plugin.pre_update(strategy, node, items, self.cluster)
            except (ValueError, ClusterError) as exc:  # the node's own status is still written
                log.warning(
                    "noderesource: %s pre-update of node %s: %s", plugin.name, node["metadata"]["name"], exc
                )

    def reconcile(self, key: str) -> None:
        node = self.informer.get("Node", key)
        if node is None:
            self.last_sync.pop(key, None)
            return
        now = self.cluster.clock.now()
        items = self.items_for(node, now)
        strategy = self.config.colocation(_labels(node))
        annotations: dict[str, str] = {}
        labels: dict[str, str] = {}
        for item in items:
            annotations.update(item.annotations)
            labels.update(item.labels)
        self.last_messages[key] = [i.message for i in items if i.message]
        self._pre_update(node, items)
        self._sync_status(key, node, items, annotations, strategy, now)
        self._sync_meta(key, node, annotations, labels, strategy)

    def _sync_status(
        self,
        key: str,
        node: Mapping[str, Any],
        items: Sequence[ResourceItem],
        annotations: Mapping[str, str],
        strategy: ColocationStrategy,
        now: float,
    ) -> None:
        ratio = _normalization_ratio(annotations)
        old_status = node.get("status") or {}
        status = {
            **old_status,
            "capacity": dict(old_status.get("capacity") or {}),
            "allocatable": dict(old_status.get("allocatable") or {}),
        }
        new = {**node, "status": status}  # only the two resource maps are new; the rest is shared
        patch: dict[str, dict[str, str | None]] = {"capacity": {}, "allocatable": {}}
        changed = False  # only the two resource maps differ from ``node``: compared entry by entry
        for item in items:
            if not self._owned(item.name):
                continue  # an item carrying only annotations
            quantity = item.quantity
            if quantity is not None and item.name == BATCH_CPU and ratio > 1.0 and not item.reset:
                # batch-cpu is advertised in normalized cores (``util.PrepareNodeForResource``)
                text: str | None = format_resource(item.name, int(quantity * ratio))
            else:
                text = item.text()  # a Go quantity's own spelling when the calculator gave one
            for section in ("capacity", "allocatable"):
                res = status[section]
                if text is None:
                    if item.name in res:
                        res.pop(item.name)
                        patch[section][item.name] = None  # a merge patch's null removes the key
                        changed = True
                else:
                    changed = changed or res.get(item.name) != text
                    res[item.name] = patch[section][item.name] = text
        if not changed:
            self.last_sync.setdefault(key, now)
            return
        due = now - self.last_sync.get(key, float("-inf")) >= strategy.update_time_threshold_seconds
        needed = any(p.need_sync(strategy, node, new)[0] for p in self.plugins)
        if not (due or needed):
            return
        self.cluster.patch_no_result("Node", key, "", {"status": patch}, status=True)
        self.last_sync[key] = now
        log.info("noderesource: node %s updated: %s", key, "; ".join(self.last_messages[key]))

    def _owned(self, name: str) -> bool:
        return any(name in p.resource_names for p in self.plugins)

    def _sync_meta(
        self,
        key: str,
        node: Mapping[str, Any],
        annotations: Mapping[str, str],
        labels: Mapping[str, str],
        strategy: ColocationStrategy,
    ) -> None:
        """The calculators' node annotations and labels (``NodePrepare`` + ``NodeMetaCheck``): patched when
        one of the calculators says the prepared metadata must be written."""
        meta = node.get("metadata") or {}
        old = {f: dict(meta.get(f) or {}) for f in ("annotations", "labels")}
        new_meta = {**meta, "annotations": dict(old["annotations"]), "labels": dict(old["labels"])}
        new_node: dict[str, Any] = {**node, "metadata": new_meta}
        for plugin in self.plugins:
            plugin.prepare_meta(strategy, new_node, annotations)
            plugin.prepare_labels(strategy, new_node, labels)
        new = {f: new_node["metadata"].get(f) or {} for f in ("annotations", "labels")}
        if new == old:
            return
        if not any(p.need_sync_meta(strategy, node, new_node)[0] for p in self.plugins):
            return
        meta_patch: dict[str, dict[str, str | None]] = {}
        for f in ("annotations", "labels"):
            patch: dict[str, str | None] = {k: v for k, v in new[f].items() if old[f].get(k) != v}
            patch.update({k: None for k in old[f] if k not in new[f]})
            if patch:
                meta_patch[f] = patch
        self.cluster.patch_no_result("Node", key, "", {"metadata": meta_patch})
        log.info(
            "noderesource: node %s metadata updated: %s",
            key,
            "; ".join(f"{f} {sorted(p)}" for f, p in meta_patch.items()),
        )


def _normalization_ratio(annotations: Mapping[str, str]) -> float:
    """The cpu-normalization ratio the calculators decided (-1 when none or unreadable, as
    ``getCPUNormalizationRatio`` of Koordinator's plugin util)."""
    text = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if text is None:
        return -1.0
    try:
        return float(text)
    except ValueError:
        log.warning("noderesource: unreadable %s %r", ANNOTATION_CPU_NORMALIZATION_RATIO, text)
        return -1.0


class _Context:
    """What the calculators read besides their inputs (``NodeResourceContext``)."""

    def __init__(self, informer: SharedInformer, config: SLOConfig, gates: FeatureGates) -> None:
        self.informer = informer
        self.config = config
        self.gates = gates

    def get(self, kind: str, name: str, namespace: str = "") -> Mapping[str, Any] | None:
        return self.informer.get(kind, name, namespace)

    def slo_config(self, key: str) -> Mapping[str, Any]:
        return self.config.values.get(key, {})

    def feature_enabled(self, name: str) -> bool:
        return self.gates.enabled(name)
