"""Koordinator's CPUSetAllocator unit-test cases, the rule from NRT annotations, bad input, the reconciler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_cpusetallocator import CPUSetAllocator, CPUSetRule, parse_rule
from koord_plugin_cpusetallocator.rule import SharePool

from koord_framework.koordlet.runtimehooks import HookContext, HookFailed, HookManager, Stage
from koord_framework.koordlet.states import NodeState
from koord_framework.testing.builders import make_pod
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import HookHarness, container_request, pod_request

STATUS = "scheduling.koordinator.sh/resource-status"
POOLS = (SharePool(0, 0, "0-7"), SharePool(1, 1, "8-15"))
PARENT = "kubepods/test-pod/test-container/"


def manager(root: Path, rule: CPUSetRule | None, args: dict[str, Any] | None = None) -> HookManager:
    tree = FakeHostTree(root)
    ctx = HookContext("test-node", tree.paths, tree.layout, lambda: NodeState("test-node"))
    m = HookManager(ctx, failure_policy="Fail")
    hook = CPUSetAllocator(CPUSetAllocator.parse_args(args), ctx)
    hook.rule = rule
    m.register(hook)
    return m


def _container(
    m: HookManager,
    labels: dict[str, str] | None = None,
    status: dict[str, Any] | str | None = None,
    parent: str = PARENT,
) -> Any:
    ann = {} if status is None else {STATUS: status if isinstance(status, str) else json.dumps(status)}
    req = container_request(labels, ann, parent, name="web", namespace="ns", container="main")
    return m.run_container(Stage.PRE_CREATE_CONTAINER, req).response.resources


def test_bad_resource_status_is_an_error_naming_pod_container_and_hook(tmp_path: Path) -> None:
    with pytest.raises(
        HookFailed, match=r"hook CPUSetAllocator .* pod ns/web container main: annotation .*resource-status"
    ):
        _container(manager(tmp_path, None), status="bad-format")


@pytest.mark.parametrize(
    ("status", "field"),
    [
        ({"cpuset": "4-x"}, "cpuset"),
        ({"cpuset": 3}, "cpuset must be a string"),
        ({"numaNodeResources": {"node": 0}}, "numaNodeResources must be a list"),
        ({"numaNodeResources": [{"node": "a"}]}, "numaNodeResources[0]"),
        (
            {"numaNodeResources": [{"node": 0, "resources": {"cpu": "lots"}}]},
            "numaNodeResources[0].resources.cpu",
        ),
    ],
)
def test_malformed_resource_status_fields(status: dict[str, Any], field: str, tmp_path: Path) -> None:
    with pytest.raises(HookFailed) as err:
        _container(manager(tmp_path, CPUSetRule(POOLS)), status=status)
    assert field in str(err.value)


def test_pod_allocated_cpuset_wins_and_unsets_quota(tmp_path: Path) -> None:
    res = _container(manager(tmp_path, None), status={"cpuset": "2-4"})
    assert (res.cpuset_cpus, res.cpu_quota) == ("2-4", -1)


def test_numa_share_pool_with_nil_rule_leaves_the_cpuset(tmp_path: Path) -> None:
    res = _container(manager(tmp_path, None), status={"numaNodeResources": [{"node": 0}]})
    assert res.is_empty()


def test_system_pod_with_a_system_qos_cpuset(tmp_path: Path) -> None:
    m = manager(tmp_path, CPUSetRule(POOLS, system_qos_cpuset="0-3"))
    assert _container(m, {"koordinator.sh/qosClass": "SYSTEM"}).cpuset_cpus == "0-3"


def test_system_pod_without_system_qos_cpuset_gets_all_share_pools(tmp_path: Path) -> None:
    m = manager(tmp_path, CPUSetRule(POOLS))
    assert _container(m, {"koordinator.sh/qosClass": "SYSTEM"}).cpuset_cpus == "0-7,8-15"


def test_numa_aware_pod_gets_its_nodes_share_pools_and_keeps_quota(tmp_path: Path) -> None:
    m = manager(tmp_path, CPUSetRule(POOLS))
    res = _container(m, status={"numaNodeResources": [{"node": 0, "resources": {"cpu": "2"}}]})
    assert (res.cpuset_cpus, res.cpu_quota) == ("0-7", None)


def test_numa_aware_be_pod_uses_be_pools_only_with_be_cpu_manager(tmp_path: Path) -> None:
    rule = CPUSetRule(POOLS, (SharePool(0, 0, "1-7"), SharePool(1, 1, "9-15")))
    status = {"numaNodeResources": [{"node": 1, "resources": {"kubernetes.io/batch-cpu": "2000"}}]}
    be = {"koordinator.sh/qosClass": "BE"}
    on = manager(tmp_path / "on", rule, {"beCpuManager": True})
    assert _container(on, be, status, "kubepods/besteffort/pod/").cpuset_cpus == "9-15"
    off = manager(tmp_path / "off", rule)
    assert _container(off, be, status, "kubepods/besteffort/pod/").cpuset_cpus == ""


def test_origin_besteffort_pod_is_cleared(tmp_path: Path) -> None:
    m = manager(tmp_path, CPUSetRule(POOLS))
    assert _container(m, parent="kubepods/besteffort/test-pod/test-container/").cpuset_cpus == ""


def test_ls_pod_gets_every_share_pool(tmp_path: Path) -> None:
    m = manager(tmp_path, CPUSetRule(POOLS, kubelet_policy="static"))
    assert _container(m, {"koordinator.sh/qosClass": "LS"}).cpuset_cpus == "0-7,8-15"


def test_kubelet_static_policy_leaves_other_pods_alone(tmp_path: Path) -> None:
    assert _container(manager(tmp_path / "s", CPUSetRule(POOLS, kubelet_policy="static"))).cpuset_cpus is None
    assert (
        _container(manager(tmp_path / "n", CPUSetRule(POOLS, kubelet_policy="none"))).cpuset_cpus
        == "0-7,8-15"
    )


@pytest.mark.parametrize(("disable", "want"), [(False, -1), (True, None)])
def test_unset_pod_quota_follows_the_switch(disable: bool, want: int | None, tmp_path: Path) -> None:
    m = manager(tmp_path, None, {"disableUnsetCpuQuota": disable})
    req = pod_request({"koordinator.sh/qosClass": "LSR"}, {STATUS: '{"cpuset":"2-4"}'})
    assert m.run_pod(Stage.PRE_RUN_POD_SANDBOX, req).response.resources.cpu_quota == want
    assert _container(m, status={"cpuset": "2-4"}).cpu_quota == want


def test_share_pool_pod_keeps_its_pod_quota(tmp_path: Path) -> None:
    m = manager(tmp_path, CPUSetRule(POOLS))
    req = pod_request({}, {STATUS: '{"numaNodeResources":[{"node":0,"resources":{"cpu":"2"}}]}'})
    assert m.run_pod(Stage.PRE_RUN_POD_SANDBOX, req).response.resources.cpu_quota is None


def test_rule_from_topology_annotations() -> None:
    ann = {
        "node.koordinator.sh/cpu-shared-pools": json.dumps(
            [{"socket": 0, "node": 0, "cpuset": "0-7"}, {"socket": 1, "node": 1, "cpuset": "8-15"}]
        ),
        "node.koordinator.sh/be-cpu-shared-pools": '[{"socket":0,"node":0,"cpuset":"1-7"}]',
        "kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"static"}',
        "node.koordinator.sh/system-qos-resource": '{"cpuset":"0-1"}',
    }
    assert parse_rule(ann) == CPUSetRule(POOLS, (SharePool(0, 0, "1-7"),), "static", "0-1")
    from koord_framework.koordlet.runtimehooks import HookError

    with pytest.raises(HookError, match="system-qos-resource: cpuset"):
        parse_rule({"node.koordinator.sh/system-qos-resource": '{"cpuset":"z"}'})


def test_reconciler_pins_lsr_containers_and_spreads_ls_over_the_pools(tmp_path: Path) -> None:
    lsr = make_pod(
        "lsr",
        uid="uid-lsr",
        qos="LSR",
        cpu="2",
        memory="1Gi",
        limits={"cpu": "2", "memory": "1Gi"},
        node="test-node",
        annotations={STATUS: '{"cpuset":"2-3"}'},
    )
    ls = make_pod("ls", uid="uid-ls", qos="LS", cpu="1", memory="1Gi", node="test-node")
    for i, p in enumerate((lsr, ls)):
        p["status"] = {
            "phase": "Running",
            "containerStatuses": [
                {"name": "main", "containerID": f"containerd://{i + 1:064x}", "state": {"running": {}}}
            ],
        }
    tree = FakeHostTree(tmp_path, cpus=8)
    h = HookHarness(
        tree,
        [CPUSetAllocator],
        pods=[lsr, ls],
        topology_annotations={
            "node.koordinator.sh/cpu-shared-pools": '[{"socket":0,"node":0,"cpuset":"4-7"}]'
        },
    )
    report = h.reconciler.tick(h.qos.clock.now())
    assert report is not None and report.failures == []
    by = {p.pod.name: p for p in h.qos.state.pods}
    assert tree.read("cpuset.cpus", by["lsr"].containers[0].cgroup_dir) == "2-3"
    assert tree.read("cpu.cfs_quota_us", by["lsr"].cgroup_dir) == "-1"
    assert tree.read("cpuset.cpus", by["ls"].containers[0].cgroup_dir) == "4-7"
