"""Koordinator's CPUNormalization unit-test cases through the hook extension point, and the reconciler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from koord_plugin_cpunormalization import CPUNormalization, is_cpu_share_pod

from koord_framework.koordlet.runtimehooks import (
    ContainerResources,
    HookContext,
    HookManager,
    PodSandboxRequest,
    Stage,
)
from koord_framework.koordlet.states import NodeState
from koord_framework.testing.builders import make_pod
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import HookHarness, container_request, pod_request

RATIO = "node.koordinator.sh/cpu-normalization-ratio"
LS = {"koordinator.sh/qosClass": "LS"}


def manager(root: Path, enable: bool = True, ratio: float = 1.2) -> HookManager:
    tree = FakeHostTree(root)
    ctx = HookContext("test-node", tree.paths, tree.layout, lambda: NodeState("test-node"))
    m = HookManager(ctx, failure_policy="Fail")
    hook = CPUNormalization(CPUNormalization.parse_args(None), ctx)
    hook.enable, hook.ratio = enable, ratio
    m.register(hook)
    return m


def _pod(m: HookManager, labels: dict[str, str] | None, quota: int | None) -> int | None:
    req: PodSandboxRequest = pod_request(labels)
    if quota is not None:
        req.resources = ContainerResources(cpu_shares=1024, cpu_quota=quota)
    return m.run_pod(Stage.PRE_RUN_POD_SANDBOX, req).response.resources.cpu_quota


def _container(m: HookManager, labels: dict[str, str] | None, quota: int | None) -> int | None:
    req = container_request(labels)
    if quota is not None:
        req.resources = ContainerResources(cpu_shares=1024, cpu_quota=quota)
    return m.run_container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, req).response.resources.cpu_quota


@pytest.mark.parametrize("level", [_pod, _container])
@pytest.mark.parametrize(
    ("enable", "ratio", "labels", "quota", "want"),
    [
        (True, 1.2, LS, None, None),  # no resources to adjust
        (True, 1.2, {"koordinator.sh/qosClass": "LSR"}, 100000, None),  # not a CPU-share pod
        (False, -1.0, LS, 100000, None),  # rule disabled
        (True, 1.2, LS, 100000, 83334),  # adjust correctly
        (True, 1.0, LS, 100000, 100000),  # adjust correctly 1
        (True, 0.8, LS, 100000, 100000),  # skip illegal ratio (< 1)
        (True, 1.2, LS, -1, None),  # unlimited stays unlimited
    ],
)
def test_upstream_adjust_cases(
    level: Any,
    enable: bool,
    ratio: float,
    labels: dict[str, str],
    quota: int | None,
    want: int | None,
    tmp_path: Path,
) -> None:
    assert level(manager(tmp_path, enable, ratio), labels, quota) == want


@pytest.mark.parametrize(
    ("labels", "annotations", "want"),
    [
        (None, None, True),
        ({}, None, True),
        (LS, None, True),
        ({"koordinator.sh/qosClass": "LSE"}, None, False),
        ({"koordinator.sh/qosClass": "BE"}, None, False),
        ({"app": "x"}, {"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-1"}'}, False),
        ({"app": "x"}, {"scheduling.koordinator.sh/resource-status": "bad"}, True),
    ],
)
def test_upstream_is_cpu_share_pod(labels: Any, annotations: Any, want: bool) -> None:
    assert is_cpu_share_pod(labels, annotations) is want


def test_rule_from_the_node_and_a_bad_ratio_keeps_it(tmp_path: Path) -> None:
    m = manager(tmp_path, False, -1.0)
    hook = m.hook("CPUNormalization")
    assert isinstance(hook, CPUNormalization)
    node = {"metadata": {"name": "n", "annotations": {RATIO: "1.25"}}}
    assert m.update_rules(NodeState("n", node_manifest=node)) == ["CPUNormalization"]
    assert (hook.enable, hook.ratio) == (True, 1.25)
    assert m.update_rules(NodeState("n", node_manifest=node)) == []
    bad = {"metadata": {"name": "n", "annotations": {RATIO: "fast"}}}
    assert m.update_rules(NodeState("n", node_manifest=bad)) == []
    assert (hook.enable, hook.ratio) == (True, 1.25)


def test_reconciler_scales_from_the_spec_and_does_not_compound(tmp_path: Path) -> None:
    pod = make_pod(
        "web", uid="uid-web", qos="LS", cpu="1", memory="1Gi", limits={"cpu": "2", "memory": "1Gi"}, node="n"
    )
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "main", "containerID": "containerd://" + "b" * 64, "state": {"running": {}}}
        ],
    }
    tree = FakeHostTree(tmp_path, version=1, driver="cgroupfs")
    node = {"metadata": {"name": "test-node", "annotations": {RATIO: "2"}}, "status": {}}
    h = HookHarness(tree, [CPUNormalization], pods=[pod], node=node)
    now = h.qos.clock.now()
    for t in (now, now + 10, now + 20):
        report = h.reconciler.tick(t)
        assert report is not None and report.failures == []
    meta = h.qos.state.pods[0]
    assert tree.read("cpu.cfs_quota_us", meta.cgroup_dir) == "100000"
    assert tree.read("cpu.cfs_quota_us", meta.containers[0].cgroup_dir) == "100000"
