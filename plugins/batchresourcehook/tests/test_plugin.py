"""Koordinator's BatchResource unit-test cases the vectors lack, rules, bad input, and the reconciler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_batchresourcehook import BatchResource, milli_cpu_to_quota, milli_cpu_to_shares

from koord_framework.koordlet.nodeslo import NodeSLO
from koord_framework.koordlet.runtimehooks import HookContext, HookFailed, HookManager, Stage
from koord_framework.koordlet.states import NodeState
from koord_framework.testing.builders import make_pod
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import HookHarness, container_request, pod_request

SPEC = "node.koordinator.sh/extended-resource-spec"
BE = {"koordinator.sh/qosClass": "BE"}
ON = {"enableCFSQuota": True, "cpuNormalizationRatio": -1}
FULL = {
    "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "2Gi"},
    "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "2Gi"},
}


def manager(root: Path, rule: dict[str, Any] | None) -> HookManager:
    tree = FakeHostTree(root)
    ctx = HookContext("test-node", tree.paths, tree.layout, lambda: NodeState("test-node"))
    m = HookManager(ctx, failure_policy="Fail")
    hook = BatchResource(BatchResource.parse_args(None), ctx)
    if rule is not None:
        hook.enable_cfs_quota = rule["enableCFSQuota"]
        hook.ratio = rule["cpuNormalizationRatio"]
    m.register(hook)
    return m


def _spec(**containers: Any) -> dict[str, str]:
    return {SPEC: json.dumps({"containers": containers})}


def test_conversions() -> None:
    assert [milli_cpu_to_shares(m) for m in (-1, 0, 1, 500, 10**9)] == [2, 2, 2, 512, 262144]
    assert [milli_cpu_to_quota(m) for m in (-1, 0, 5, 500)] == [-1, -1, 1000, 50000]


def test_a_batch_pod_without_requests_is_left_alone(tmp_path: Path) -> None:
    m = manager(tmp_path, ON)
    result = m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request(BE, {SPEC: "{}"}))
    assert result.response.resources.is_empty()
    result_c = m.run_container(Stage.PRE_CREATE_CONTAINER, container_request(BE, {SPEC: "{}"}))
    assert result_c.response.resources.is_empty()


def test_a_batch_pod_with_no_limit(tmp_path: Path) -> None:
    m = manager(tmp_path, ON)
    ann = _spec(**{"container-0": {"requests": FULL["requests"]}})
    res = m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request(BE, ann)).response.resources
    assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == (512, -1, -1)


def test_a_batch_pod_scaled_with_ratio(tmp_path: Path) -> None:
    m = manager(tmp_path, {"enableCFSQuota": True, "cpuNormalizationRatio": 1.2})
    res = m.run_pod(
        Stage.PRE_RUN_POD_SANDBOX, pod_request(BE, _spec(**{"container-0": FULL}))
    ).response.resources
    assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == (512, 41667, 2 * 1024**3)


def test_a_container_not_in_the_spec_is_left_alone(tmp_path: Path) -> None:
    m = manager(tmp_path, ON)
    req = container_request(BE, _spec(**{"container-0": FULL}), container="container-1")
    assert m.run_container(Stage.PRE_CREATE_CONTAINER, req).response.resources.is_empty()


def test_a_batch_container_without_requests_gets_minimum_shares_and_no_limits(tmp_path: Path) -> None:
    m = manager(tmp_path, ON)
    req = container_request(BE, _spec(main={}), container="main")
    res = m.run_container(Stage.PRE_CREATE_CONTAINER, req).response.resources
    assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == (2, -1, -1)


@pytest.mark.parametrize("labels", [{}, {"koordinator.sh/qosClass": "LS"}, {"koordinator.sh/qosClass": "be"}])
def test_only_be_pods(labels: dict[str, str], tmp_path: Path) -> None:
    m = manager(tmp_path, ON)
    ann = _spec(**{"container-0": FULL})
    assert m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request(labels, ann)).response.resources.is_empty()


def test_rule_from_nodeslo_and_node(tmp_path: Path) -> None:
    m = manager(tmp_path, None)
    hook = m.hook("BatchResource")
    assert isinstance(hook, BatchResource)

    suppress = NodeSLO.from_spec(
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    )
    node = {"metadata": {"name": "n", "annotations": {"node.koordinator.sh/cpu-normalization-ratio": "1.5"}}}
    assert m.update_rules(NodeState("n", node_slo=suppress, node_manifest=node)) == ["BatchResource"]
    assert hook.cfs_quota_scale() == (False, -1.0)
    assert m.update_rules(NodeState("n", node_slo=suppress, node_manifest=node)) == []
    plain = NodeSLO.from_spec({})
    assert m.update_rules(NodeState("n", node_slo=plain, node_manifest=node)) == ["BatchResource"]
    assert hook.cfs_quota_scale() == (True, 1.5)


@pytest.mark.parametrize("ratio", ["abc", "0", "-2", "nan"])
def test_a_bad_ratio_keeps_the_previous_rule(ratio: str, tmp_path: Path) -> None:
    m = manager(tmp_path, ON)
    node = {"metadata": {"name": "n", "annotations": {"node.koordinator.sh/cpu-normalization-ratio": ratio}}}
    assert m.update_rules(NodeState("n", node_manifest=node)) == []
    hook = m.hook("BatchResource")
    assert isinstance(hook, BatchResource) and hook.ratio == -1


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("{oops", "is not JSON"),
        ('{"containers": []}', "containers must be an object"),
        (
            '{"containers": {"main": {"limits": {"kubernetes.io/batch-cpu": "lots"}}}}',
            "containers.main.limits",
        ),
        ('{"containers": {"main": 3}}', "containers.main must be an object"),
    ],
)
def test_a_malformed_spec_names_pod_container_hook_and_field(raw: str, field: str, tmp_path: Path) -> None:
    m = manager(tmp_path, ON)
    req = container_request(BE, {SPEC: raw}, name="job", namespace="batch", container="main")
    with pytest.raises(HookFailed) as err:
        m.run_container(Stage.PRE_CREATE_CONTAINER, req)
    text = str(err.value)
    assert "hook BatchResource" in text and "pod batch/job container main" in text
    assert SPEC in text and field in text


def test_reconciler_writes_pod_and_container_limits(tmp_path: Path) -> None:
    pod = make_pod("job", uid="uid-job", qos="BE", node="test-node", annotations=_spec(main=FULL))
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "main", "containerID": "containerd://" + "a" * 64, "state": {"running": {}}}
        ],
    }
    tree = FakeHostTree(tmp_path, version=1, driver="systemd")
    h = HookHarness(tree, [BatchResource], pods=[pod])
    report = h.reconciler.tick(h.qos.clock.now())
    assert report is not None and report.failures == []
    meta = h.qos.state.pods[0]
    for d in (meta.cgroup_dir, meta.containers[0].cgroup_dir):
        assert tree.read("cpu.shares", d) == "512"
        assert tree.read("cpu.cfs_quota_us", d) == "50000"
        assert tree.read("memory.limit_in_bytes", d) == str(2 * 1024**3)
