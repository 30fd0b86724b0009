"""The runtime-hook extension point: selection, order, isolation, failure policy, timing, reconciler."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from prometheus_client import CollectorRegistry

from koord_framework.api.qos import KubeQoS
from koord_framework.errors import UnknownPluginError
from koord_framework.koordlet.runtimehooks import (
    ContainerRequest,
    ContainerResponse,
    FailurePolicy,
    HookContext,
    HookFailed,
    HookManager,
    KubeQOSRequest,
    KubeQOSResponse,
    PodSandboxRequest,
    PodSandboxResponse,
    RuntimeHook,
    RuntimeHookArgs,
    Stage,
    hookimpl,
)
from koord_framework.koordlet.states import NodeState
from koord_framework.registry import PluginRegistry
from koord_framework.testing.builders import make_pod
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import HookHarness, container_request, pod_request


class Shares(RuntimeHook[RuntimeHookArgs]):
    """Sets pod shares to 100 and appends its name to an annotation (to see the call order)."""

    name: ClassVar[str] = "Shares"
    Args = RuntimeHookArgs

    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        response.resources.cpu_shares = 100
        response.annotations["order"] = response.annotations.get("order", "") + self.name

    @hookimpl
    def pre_update_container_resources(self, request: ContainerRequest, response: ContainerResponse) -> None:
        response.resources.cpu_shares = 50

    @hookimpl
    def reconcile_kube_qos(self, request: KubeQOSRequest, response: KubeQOSResponse) -> None:
        if request.kube_qos == "BestEffort":
            response.resources.cpu_shares = 2


class Broken(RuntimeHook[RuntimeHookArgs]):
    """Edits the response and then raises: its edit must be dropped."""

    name: ClassVar[str] = "Broken"
    Args = RuntimeHookArgs

    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        response.resources.cpu_quota = 1
        response.annotations["order"] = response.annotations.get("order", "") + self.name
        raise ValueError("bad annotation koordinator.sh/x")

    @hookimpl
    def pre_create_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        raise ValueError("boom")


class Zeta(RuntimeHook[RuntimeHookArgs]):
    name: ClassVar[str] = "Zeta"
    Args = RuntimeHookArgs

    def __init__(self, args: Any, context: HookContext) -> None:
        super().__init__(args, context)
        self.rule = 0

    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        response.annotations["order"] = response.annotations.get("order", "") + self.name
        response.resources.cpu_quota = 100_000 * self.rule if self.rule else None

    @hookimpl
    def update_rule(self, state: NodeState) -> bool:
        new = 2 if state.node_slo is not None else 0
        changed, self.rule = new != self.rule, new
        return changed


def _context(tmp_path: Path) -> HookContext:
    tree = FakeHostTree(tmp_path)
    return HookContext("node", tree.paths, tree.layout, lambda: NodeState("node"))


def _manager(tmp_path: Path, *hooks: type[RuntimeHook[Any]], **kw: Any) -> HookManager:
    ctx = _context(tmp_path)
    m = HookManager(ctx, **kw)
    for cls in hooks:
        m.register(cls(cls.parse_args(None), ctx))
    return m


def test_hooks_run_sorted_by_name_whatever_the_registration_order(tmp_path: Path) -> None:
    m = _manager(tmp_path, Zeta, Shares)
    result = m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request())
    assert result.response.annotations["order"] == "SharesZeta"
    assert result.ran == ["Shares", "Zeta"]
    assert m.hooks_for(Stage.PRE_RUN_POD_SANDBOX) == ["Shares", "Zeta"]
    assert m.hooks_for(Stage.PRE_CREATE_CONTAINER) == []


def test_ignore_policy_drops_the_failing_hooks_edits_and_names_pod_and_hook(tmp_path: Path) -> None:
    m = _manager(tmp_path, Zeta, Broken, Shares, failure_policy="Ignore")
    result = m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request(name="web", namespace="ns"))
    assert result.response.resources.cpu_quota is None
    assert result.response.resources.cpu_shares == 100
    assert result.response.annotations["order"] == "SharesZeta"
    [failure] = result.failures
    assert (failure.hook, failure.stage, failure.pod) == ("Broken", "PreRunPodSandbox", "ns/web")
    assert "runtime hook Broken failed at PreRunPodSandbox for pod ns/web" in str(failure)
    assert "koordinator.sh/x" in str(failure)


def test_none_policy_behaves_like_ignore(tmp_path: Path) -> None:
    m = _manager(tmp_path, Broken, Shares, failure_policy=FailurePolicy.NONE)
    result = m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request())
    assert result.response.resources.cpu_shares == 100
    assert [f.policy for f in result.failures] == [FailurePolicy.NONE]


def test_fail_policy_stops_the_chain_and_names_pod_container_and_hook(tmp_path: Path) -> None:
    m = _manager(tmp_path, Broken, Shares, failure_policy="Fail")
    response = PodSandboxResponse()
    with pytest.raises(HookFailed) as err:
        m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request(name="web", namespace="ns"), response)
    assert err.value.failure.hook == "Broken"
    # Broken sorts first: Shares never ran and Broken's own edits were dropped.
    assert response.resources.cpu_shares is None and response.resources.cpu_quota is None
    with pytest.raises(HookFailed, match="pod ns/web container sidecar: boom"):
        m.run_container(
            Stage.PRE_CREATE_CONTAINER, container_request(name="web", namespace="ns", container="sidecar")
        )


def test_a_hooks_own_policy_overrides_the_koordlet_default(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    m = HookManager(ctx, failure_policy="Fail")
    m.register(Broken(Broken.parse_args({"failurePolicy": "Ignore"}), ctx))
    result = m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request())
    assert [f.policy for f in result.failures] == [FailurePolicy.IGNORE]


def test_a_disabled_hook_does_not_run(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    m = HookManager(ctx)
    m.register(Shares(Shares.parse_args({"enable": False}), ctx))
    result = m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request())
    assert result.ran == [] and result.response.resources.cpu_shares is None


def test_latency_is_recorded_per_hook_stage_and_status_on_the_given_registry(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    m = _manager(tmp_path, Broken, Shares, registry=registry)
    m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request())
    metric = "koordlet_runtime_hook_invoked_duration_milliseconds_count"
    ok = {"hook": "Shares", "stage": "PreRunPodSandbox", "status": "succeeded"}
    bad = {"hook": "Broken", "stage": "PreRunPodSandbox", "status": "failed"}
    assert registry.get_sample_value(metric, ok) == 1
    assert registry.get_sample_value(metric, bad) == 1


def test_each_manager_has_its_own_plugin_manager(tmp_path: Path) -> None:
    a = _manager(tmp_path / "a", Shares)
    b = _manager(tmp_path / "b", Zeta)
    assert a.pm is not b.pm
    assert a.hooks_for(Stage.PRE_RUN_POD_SANDBOX) == ["Shares"]
    assert b.hooks_for(Stage.PRE_RUN_POD_SANDBOX) == ["Zeta"]


def test_a_hook_is_registered_once(tmp_path: Path) -> None:
    m = _manager(tmp_path, Shares)
    with pytest.raises(ValueError, match="already registered"):
        m.register(Shares(Shares.parse_args(None), m.context))


def test_stage_kind_is_checked(tmp_path: Path) -> None:
    m = _manager(tmp_path, Shares)
    with pytest.raises(ValueError, match="container stage"):
        m.run_pod(Stage.PRE_CREATE_CONTAINER, pod_request())
    with pytest.raises(ValueError, match="pod stage"):
        m.run_container(Stage.PRE_RUN_POD_SANDBOX, container_request())


def test_from_config_selects_by_name_and_a_typo_lists_what_is_installed(tmp_path: Path) -> None:
    plugins = PluginRegistry.from_classes("runtimehooks", [Shares, Zeta, Broken])
    ctx = _context(tmp_path)
    m = HookManager.from_config(
        ["Zeta", "Shares"], ctx, args={"Shares": {"failurePolicy": "Fail"}}, plugin_registry=plugins
    )
    assert [h.name for h in m.hooks] == ["Shares", "Zeta"]
    assert m.policy_of(m.hook("Shares")) is FailurePolicy.FAIL
    with pytest.raises(UnknownPluginError, match="installed: Broken, Shares, Zeta"):
        HookManager.from_config(["Sahres"], ctx, plugin_registry=plugins)


def _running(name: str, uid: str, qos: str, n: int) -> dict[str, Any]:
    pod = make_pod(name, uid=uid, cpu="1", memory="1Gi", qos=qos, node="test-node")
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "main", "containerID": f"containerd://{n:064x}", "state": {"running": {}}}
        ],
    }
    return pod


def test_reconciler_applies_pod_container_and_kube_qos_levels_through_the_executor(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, version=1, driver="cgroupfs")
    h = HookHarness(tree, [Shares, Zeta], pods=[_running("a", "uid-a", "LS", 1)])
    report = h.reconciler.tick(h.qos.clock.now())
    assert report is not None and report.reason == "interval" and report.failures == []
    pod = h.qos.state.pods[0]
    assert tree.read("cpu.shares", pod.cgroup_dir) == "100"
    assert tree.read("cpu.shares", pod.containers[0].cgroup_dir) == "50"
    assert tree.read("cpu.shares", tree.layout.qos_dir(KubeQoS.BEST_EFFORT)) == "2"
    audit = h.qos.executor.audit
    assert {r.owner for r in audit} == {"RuntimeHooksReconciler"}


def test_reconciler_is_driven_by_tick_interval_rules_and_pod_events(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path)
    h = HookHarness(
        tree, [Shares, Zeta], pods=[_running("a", "uid-a", "LS", 1), _running("b", "uid-b", "BE", 2)]
    )
    now = h.qos.clock.now()
    assert h.reconciler.tick(now) is not None
    assert h.reconciler.tick(now + 1) is None
    h.reconciler.pod_event("uid-b")
    report = h.reconciler.tick(now + 2)
    assert report is not None and report.reason == "pod event"
    h.qos.set_state(
        pods=[_running("a", "uid-a", "LS", 1)], node_slo={"resourceUsedThresholdWithBE": {"enable": True}}
    )
    report = h.reconciler.tick(now + 3)
    assert report is not None and report.reason == "rule changed: Zeta"
    pod_a = h.qos.state.pods[0]
    assert tree.read("cpu.cfs_quota_us", pod_a.cgroup_dir) == "200000"
    assert h.reconciler.tick(now + 11) is None
    assert h.reconciler.tick(now + 13) is not None


def test_reconciler_records_failures_and_goes_on(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path)
    h = HookHarness(tree, [Broken, Shares], pods=[_running("a", "uid-a", "LS", 1)], failure_policy="Fail")
    report = h.reconciler.reconcile(h.qos.state, h.qos.clock.now(), reason="test")
    assert [f.hook for f in report.failures] == ["Broken"]
    # The pod level failed (Fail policy): nothing was written for that pod, the kubeQOS level still was.
    pod = h.qos.state.pods[0]
    assert report.writes
    assert not any(w.key.startswith(pod.cgroup_dir.strip("/")) for w in report.writes)


def test_reconciler_rejects_a_bad_interval(tmp_path: Path) -> None:
    h = HookHarness(FakeHostTree(tmp_path))
    with pytest.raises(ValueError):
        type(h.reconciler)(h.manager, h.qos.executor, lambda: h.qos.state, interval_seconds=0)
