"""Testing kit for runtime hooks: a hook harness on a fake host tree and the conformance base class."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from koord_framework.koordlet.nodeslo import NodeSLO, NodeSLOSpec
from koord_framework.koordlet.runtimehooks import (
    ContainerMeta,
    ContainerRequest,
    HookContext,
    HookManager,
    PodSandboxMeta,
    PodSandboxRequest,
    Reconciler,
    RuntimeHook,
    Stage,
)
from koord_framework.koordlet.runtimehooks.hookspecs import PROJECT
from koord_framework.koordlet.states import NodeState
from koord_framework.testing.builders import make_pod
from koord_framework.testing.conformance import PluginConformance
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness

__all__ = [
    "HookHarness",
    "RuntimeHookConformance",
    "container_request",
    "pod_request",
    "state_with_merged_slo",
]


def pod_request(
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    cgroup_parent: str = "kubepods/pod-uid",
    *,
    name: str = "pod",
    uid: str = "pod-uid",
    namespace: str = "default",
) -> PodSandboxRequest:
    return PodSandboxRequest(
        PodSandboxMeta(name, uid, namespace), dict(labels or {}), dict(annotations or {}), cgroup_parent
    )


def container_request(
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    cgroup_parent: str = "kubepods/pod-uid",
    *,
    container: str = "main",
    name: str = "pod",
    uid: str = "pod-uid",
    namespace: str = "default",
) -> ContainerRequest:
    return ContainerRequest(
        PodSandboxMeta(name, uid, namespace),
        ContainerMeta(container),
        pod_labels=dict(labels or {}),
        pod_annotations=dict(annotations or {}),
        cgroup_parent=cgroup_parent,
    )


def state_with_merged_slo(merged: Mapping[str, Any], node_name: str = "test-node") -> NodeState:
    """A node state whose NodeSLO's *merged* spec is exactly ``merged`` (a vector's input, defaults already
    applied by the test that produced it)."""
    spec = NodeSLOSpec.model_validate(dict(merged))
    return NodeState(node_name, node_slo=NodeSLO(node_name, spec, dict(merged), None))


class HookHarness:
    """Hooks on a fake host: a ``QOSHarness`` (state, executor, clock) plus a ``HookManager`` and its
    ``Reconciler`` built over them."""

    def __init__(
        self,
        tree: FakeHostTree,
        hooks: Sequence[type[RuntimeHook[Any]]] = (),
        *,
        args: Mapping[str, Mapping[str, Any] | None] | None = None,
        failure_policy: str = "Ignore",
        **state: Any,
    ) -> None:
        self.qos = QOSHarness(tree, **state)
        self.tree = tree
        self.context = HookContext(
            node_name=self.qos.node_name,
            host=tree.paths,
            layout=tree.layout,
            state_provider=lambda: self.qos.state,
            clock=self.qos.clock,
            registry=self.qos.registry,
        )
        self.manager = HookManager(self.context, failure_policy=failure_policy)
        for cls in hooks:
            self.manager.register(cls(cls.parse_args((args or {}).get(cls.name)), self.context))
        self.reconciler = Reconciler(self.manager, self.qos.executor, lambda: self.qos.state)


class RuntimeHookConformance(PluginConformance):
    """Adds behavioural checks of a hook provider: it registers in a ``HookManager``, implements a stage,
    accepts a plain pod of every QoS class without raising, is idempotent, and the reconciler runs it over
    a fake host without a failure."""

    group: ClassVar[str] = "runtimehooks"
    harness_args: ClassVar[dict[str, Any] | None] = None

    def _manager(self, root: Path) -> HookHarness:
        cls = self.plugin_class
        assert issubclass(cls, RuntimeHook), f"{cls.__name__} is not a RuntimeHook"
        pods = [
            make_pod(
                f"p-{qos.lower()}", uid=f"uid-{qos.lower()}", cpu="1", memory="1Gi", qos=qos, node="test-node"
            )
            for qos in ("LSR", "LS", "BE")
        ]
        for i, pod in enumerate(pods):
            pod["status"] = {
                "phase": "Running",
                "containerStatuses": [
                    {"name": "main", "containerID": f"containerd://{i:064x}", "state": {"running": {}}}
                ],
            }
        return HookHarness(
            FakeHostTree(root), [cls], args={cls.name: self.harness_args}, pods=pods, failure_policy="Fail"
        )

    def test_implements_a_stage(self) -> None:
        names = {s.hook_name for s in Stage} | {"reconcile_kube_qos", "update_rule"}
        impls = [
            n
            for n in names
            if getattr(getattr(self.plugin_class, n, None), PROJECT + "_impl", None) is not None
        ]
        assert impls, f"{self.plugin_class.__name__} marks no method @hookimpl"

    def test_plain_pods_and_idempotence(self, tmp_path: Path) -> None:
        h = self._manager(tmp_path)
        h.manager.update_rules(h.qos.state)
        for pod in h.qos.state.pods:
            for stage in (Stage.PRE_RUN_POD_SANDBOX,):
                req = pod_request(pod.pod.labels, pod.pod.annotations, pod.cgroup_dir, uid=pod.uid)
                first = h.manager.run_pod(stage, req).response
                second = h.manager.run_pod(stage, req).response
                assert dataclasses.asdict(first) == dataclasses.asdict(second)
            for stage in (Stage.PRE_CREATE_CONTAINER, Stage.PRE_UPDATE_CONTAINER_RESOURCES):
                creq = container_request(pod.pod.labels, pod.pod.annotations, pod.cgroup_dir, uid=pod.uid)
                first_c = h.manager.run_container(stage, creq).response
                second_c = h.manager.run_container(stage, creq).response
                assert dataclasses.asdict(first_c) == dataclasses.asdict(second_c)

    def test_reconciler_runs_without_failures(self, tmp_path: Path) -> None:
        h = self._manager(tmp_path)
        report = h.reconciler.tick(h.qos.clock.now())
        assert report is not None
        assert report.failures == []
        assert all(w.ok for w in report.writes), [w for w in report.writes if not w.ok]
