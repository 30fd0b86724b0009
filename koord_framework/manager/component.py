"""koord-manager as a ``koord_framework.component.Component``: the SLO controllers on one informer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from koord_framework.cluster.events import register_recorder_metrics
from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.port import ClusterPort, EventRecord
from koord_framework.featuregates import FeatureGates, gates_for
from koord_framework.manager.controller import Controller, ControllerLoop
from koord_framework.manager.controllerplugin import ManagerController
from koord_framework.manager.noderesource import NodeResourcePlugin
from koord_framework.manager.reconcilers import (
    NodeMetricReconciler,
    NodeResourceReconciler,
    NodeSLOReconciler,
)
from koord_framework.manager.sloconfig import CONFIG_MAP_NAME, ConfigProblem, SLOConfig

__all__ = ["KINDS", "ConfigReconciler", "ManagerComponent"]

log = logging.getLogger("koord.manager")

KINDS = ("Node", "Pod", "ConfigMap", "NodeSLO", "NodeMetric")
"""What the manager's controllers watch."""
DEFAULT_RESYNC = 60.0


class ConfigReconciler:
    """Reads ``slo-controller-config``; a change re-enqueues every node in the other controllers."""

    name = "sloconfig"

    def __init__(
        self,
        cluster: ClusterPort,
        informer: SharedInformer,
        config: SLOConfig,
        namespace: str,
        dependents: Sequence[Controller],
    ) -> None:
        self.cluster = cluster
        self.informer = informer
        self.config = config
        self.namespace = namespace
        self.dependents = dependents
        self.problems: list[ConfigProblem] = []

    def all_keys(self) -> Iterable[str]:
        return [CONFIG_MAP_NAME]

    def reconcile(self, key: str) -> None:
        cm = self.informer.get("ConfigMap", key, self.namespace)
        before = dict(self.config.values)
        problems = self.config.update((cm or {}).get("data") or {})
        for problem in problems:
            log.warning("%s", problem)
            self.cluster.record_event(
                EventRecord(
                    kind="ConfigMap",
                    namespace=self.namespace,
                    name=key,
                    reason="InvalidConfig",
                    message=str(problem),
                    type="Warning",
                    component="koord-manager",
                    time=self.cluster.clock.now(),
                )
            )
        self.problems = problems
        if self.config.values != before:
            for c in self.dependents:
                c.enqueue_all()


class ManagerComponent:
    """The NodeSLO, NodeMetric and node-resource controllers, level-triggered over a shared informer."""

    def __init__(
        self,
        cluster: ClusterPort,
        registry: CollectorRegistry,
        *,
        config_namespace: str,
        plugins: Sequence[NodeResourcePlugin[Any]],
        resync: float = DEFAULT_RESYNC,
        controllers: Collection[str] | None = None,
        gates: FeatureGates | None = None,
        controller_plugins: Sequence[ManagerController[Any]] = (),
    ) -> None:
        """``controllers``: the names (``nodeslo``, ``nodemetric``, ``noderesource``) to run, all when
        ``None`` (``--controllers``); the config controller always runs. ``gates``: ``--feature-gates``
        (Koordinator's defaults when ``None``), which the calculators read through their context.
        ``controller_plugins``: the controllers distributions add (``koord.manager.controllers``), already
        selected by ``--controllers``; they run after the built-in ones in each round."""
        self.cluster = cluster
        register_recorder_metrics(cluster, registry)
        self.config = SLOConfig()
        self.config_namespace = config_namespace
        self.informer = SharedInformer(cluster)
        # Kinds the calculators read besides ours (the NodeResourceTopology for cpu normalization, ...).
        self.plugin_kinds = sorted({k for p in plugins for k in p.watches} - set(KINDS))
        # Kinds the controller plugins read (Node and the others already followed included).
        self.controller_kinds = sorted({k for c in controller_plugins for k in c.watches})
        try:
            for kind in (*KINDS, *self.plugin_kinds, *self.controller_kinds):
                self.informer.ensure(kind)
        except BaseException:
            self.informer.stop()
            raise
        self.nodeslo = Controller(NodeSLOReconciler(cluster, self.informer, self.config))
        self.nodemetric = Controller(NodeMetricReconciler(cluster, self.informer, self.config))
        self.resources = NodeResourceReconciler(cluster, self.informer, self.config, plugins, gates)
        self.noderesource = Controller(self.resources)
        wanted = set(controllers) if controllers is not None else None
        per_node = [
            c
            for c in (self.nodeslo, self.nodemetric, self.noderesource)
            if wanted is None or c.name in wanted
        ]
        self.per_node = per_node
        self.config_reconciler = ConfigReconciler(
            cluster, self.informer, self.config, config_namespace, per_node
        )
        self.sloconfig = Controller(self.config_reconciler)
        self.controller_plugins = list(controller_plugins)
        context = _PluginContext(cluster, self.informer, gates if gates is not None else gates_for("manager"))
        for plugin in self.controller_plugins:
            plugin.bind(context)
        self.extra = [Controller(_PluginReconciler(p)) for p in self.controller_plugins]
        # The config controller runs first in each round, so nodes are reconciled with the current config.
        self.loop = ControllerLoop([self.sloconfig, *per_node, *self.extra], registry, resync)
        self.plugins = list(plugins)
        self._ready = threading.Event()
        self._remove: list[Any] = []

    # --- event handlers: only mark keys dirty (level-triggered) --------------------------------------------
    def _node(self, obj: Mapping[str, Any], *controllers: Controller) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name:
            for c in controllers:
                c.enqueue(str(name))
            self.loop.kick()

    def _watch(self) -> None:
        every = tuple(self.per_node)

        def on_node(*objs: Mapping[str, Any]) -> None:
            self._node(objs[-1], *every)

        def on_config(*objs: Mapping[str, Any]) -> None:
            meta = objs[-1].get("metadata") or {}
            if meta.get("name") == CONFIG_MAP_NAME and meta.get("namespace") == self.config_namespace:
                self.sloconfig.enqueue(CONFIG_MAP_NAME)
                self.loop.kick()

        def on_pod(*objs: Mapping[str, Any]) -> None:
            for obj in objs:
                node = (obj.get("spec") or {}).get("nodeName")
                if node:
                    self.noderesource.enqueue(str(node))
            self.loop.kick()

        def owned(controller: Controller) -> Any:
            if controller not in self.per_node:
                return None
            return lambda *objs: self._node(objs[-1], controller)

        def plugin_event(kind: str) -> Any:
            readers = [p for p in self.plugins if kind in p.watches]

            def on_object(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
                obj = new if new is not None else old
                if obj is not None and any(p.wants_event(kind, old, new) for p in readers):
                    self._node(obj, self.noderesource)

            return (
                lambda obj: on_object(None, obj),
                lambda old, new: on_object(old, new),
                lambda obj: on_object(obj, None),
            )

        def controller_event(kind: str) -> Any:
            readers = [(p, c) for p, c in zip(self.controller_plugins, self.extra) if kind in p.watches]

            def on_object(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
                marked = False
                for plugin, controller in readers:
                    for key in plugin.keys_for(kind, old, new):
                        controller.enqueue(key)
                        marked = True
                if marked:
                    self.loop.kick()

            return (
                lambda obj: on_object(None, obj),
                lambda old, new: on_object(old, new),
                lambda obj: on_object(obj, None),
            )

        for kind in self.plugin_kinds:
            self._remove.append(self.informer.add_handler(kind, *plugin_event(kind)))
        for kind in self.controller_kinds:
            self._remove.append(self.informer.add_handler(kind, *controller_event(kind)))
        self._remove += [
            self.informer.add_handler("Node", on_node, on_node, on_node),
            self.informer.add_handler("ConfigMap", on_config, on_config, on_config),
            self.informer.add_handler("Pod", on_pod, on_pod, on_pod),
            self.informer.add_handler(
                "NodeMetric", owned(self.noderesource), owned(self.noderesource), owned(self.nodemetric)
            ),
            self.informer.add_handler("NodeSLO", None, owned(self.nodeslo), owned(self.nodeslo)),
        ]

    def sync_once(self) -> None:
        """One full pass: the config, then every node in every controller (what ``--once`` runs)."""
        self.sloconfig.enqueue(CONFIG_MAP_NAME)
        self.sloconfig.process(self.loop.errors)
        for c in (*self.per_node, *self.extra):
            c.enqueue_all()
        self.loop.run_once()
        self._ready.set()

    # --- Component ------------------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        self.sync_once()
        self._watch()
        self.loop.run(stop)

    def ready(self) -> bool:
        return self._ready.is_set()

    def close(self) -> None:
        for remove in self._remove:
            remove()
        self._remove.clear()
        self.resources.remove_handler()
        self.informer.stop()
        for plugin in self.plugins:
            plugin.close()
        for controller in self.controller_plugins:
            controller.close()


class _PluginReconciler:
    """A controller plugin as the loop's ``Reconciler`` (its name is a class attribute there)."""

    def __init__(self, plugin: ManagerController[Any]) -> None:
        self.plugin = plugin
        self.name = plugin.name

    def all_keys(self) -> Iterable[str]:
        return self.plugin.all_keys()

    def reconcile(self, key: str) -> float | None:
        return self.plugin.reconcile(key)


class _PluginContext:
    """``ControllerContext`` over the manager's informer, its (fenced) cluster and feature gates."""

    def __init__(self, cluster: ClusterPort, informer: SharedInformer, gates: FeatureGates) -> None:
        self._cluster = cluster
        self.informer = informer
        self.gates = gates

    @property
    def cluster(self) -> ClusterPort:
        return self._cluster

    def get(self, kind: str, name: str, namespace: str = "") -> Mapping[str, Any] | None:
        return self.informer.get(kind, name, namespace)

    def list(self, kind: str, namespace: str | None = None) -> list[Mapping[str, Any]]:
        return list(self.informer.list(kind, namespace))

    def feature_enabled(self, name: str) -> bool:
        return self.gates.enabled(name)
