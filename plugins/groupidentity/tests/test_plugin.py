"""Koordinator's GroupIdentity unit-test cases the vectors lack, bad input, the reconciler on a fake host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from koord_plugin_groupidentity import BvtRule, GroupIdentity

from koord_framework.koordlet.cgroups import CPU_BVT_WARP_NS
from koord_framework.koordlet.runtimehooks import HookFailed, KubeQOSRequest, Stage
from koord_framework.testing.builders import make_pod
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import HookHarness, pod_request, state_with_merged_slo

DEFAULT_RULE = {
    "enable": True,
    "podQOSParams": {"LSR": 2, "LS": 2, "BE": -1},
    "kubeQOSDirParams": {"Guaranteed": 0, "Burstable": 2, "BestEffort": -1},
    "kubeQOSPodParams": {"Guaranteed": 2, "Burstable": 2, "BestEffort": -1},
}
ENABLED = {
    "policies": {"cpuPolicy": "groupIdentity"},
    "lsrClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}},
}
LS = {"koordinator.sh/qosClass": "LS"}
BE = {"koordinator.sh/qosClass": "BE"}


def harness(root: Path, *, bvt_file: bool = True, sysctl: str | None = None, **kw: Any) -> HookHarness:
    """Hooks on a cgroup v1 cgroupfs host; ``bvt_file`` gives the kubepods dirs ``cpu.bvt_warp_ns``."""
    tree = FakeHostTree(root, version=1, driver="cgroupfs")
    if bvt_file:
        for d in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
            tree.ensure_cgroup(d, {CPU_BVT_WARP_NS: "0"})
    if sysctl is not None:
        path = tree.paths.proc / "sys/kernel/sched_group_identity_enabled"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sysctl + "\n")
    return HookHarness(tree, [GroupIdentity], **kw)


def _hook(h: Any, rule: dict[str, Any] | None = DEFAULT_RULE) -> GroupIdentity:
    hook = h.manager.hook("GroupIdentity")
    assert isinstance(hook, GroupIdentity)
    hook.rule = BvtRule.from_dict(rule) if rule is not None else None
    return hook


def _bvt(
    h: Any, labels: dict[str, str], parent: str, annotations: dict[str, str] | None = None
) -> int | None:
    result = h.manager.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request(labels, annotations, parent))
    return result.response.resources.cpu_bvt


def test_ls_pod_annotation_override_succeeds(tmp_path: Path) -> None:
    h = harness(tmp_path)
    _hook(h)
    ann = {"koordinator.sh/cpuQOS": '{"enable":true,"groupIdentity":-1}'}
    assert _bvt(h, LS, "kubepods/pod-guaranteed-test-uid/", ann) == -1


def test_the_annotation_only_applies_to_ls_pods(tmp_path: Path) -> None:
    h = harness(tmp_path)
    _hook(h)
    ann = {"koordinator.sh/cpuQOS": '{"enable":false}'}
    assert _bvt(h, BE, "kubepods/besteffort/pod-x/", ann) == -1


def test_be_pod(tmp_path: Path) -> None:
    h = harness(tmp_path)
    _hook(h)
    assert _bvt(h, BE, "kubepods/besteffort/pod-besteffort-test-uid/") == -1


def test_pod_without_koordinator_qos_falls_back_to_its_kube_qos(tmp_path: Path) -> None:
    h = harness(tmp_path)
    _hook(h)
    assert _bvt(h, {}, "kubepods/pod-guaranteed-test-uid/") == 2
    assert _bvt(h, {}, "kubepods/besteffort/pod-x/") == -1


def test_system_not_supported_leaves_the_response_alone(tmp_path: Path) -> None:
    h = harness(tmp_path, bvt_file=False)
    _hook(h)
    assert _bvt(h, BE, "kubepods/besteffort/pod-besteffort-test-uid/") is None
    assert (
        h.manager.run_kube_qos(KubeQOSRequest("BestEffort", "kubepods/besteffort")).response.resources.cpu_bvt
        is None
    )


def test_sysctl_alone_makes_the_system_supported(tmp_path: Path) -> None:
    h = harness(tmp_path, bvt_file=False, sysctl="1")
    _hook(h)
    assert _bvt(h, BE, "kubepods/besteffort/pod-x/") == -1


def test_rule_nil_leaves_the_response_alone(tmp_path: Path) -> None:
    h = harness(tmp_path)
    _hook(h, None)
    assert _bvt(h, BE, "kubepods/besteffort/pod-besteffort-test-uid/") is None


def test_nothing_to_do_while_rule_and_sysctl_are_both_disabled(tmp_path: Path) -> None:
    h = harness(tmp_path, sysctl="0")
    _hook(h, {**DEFAULT_RULE, "enable": False})
    assert _bvt(h, LS, "kubepods/pod-guaranteed-test-uid/") is None
    h2 = harness(tmp_path / "on", sysctl="1")
    _hook(h2, {**DEFAULT_RULE, "enable": False})
    assert _bvt(h2, LS, "kubepods/pod-guaranteed-test-uid/") == 2


@pytest.mark.parametrize(("kube_qos", "want"), [("Guaranteed", 0), ("Burstable", 2), ("BestEffort", -1)])
def test_kube_qos_dir_values(kube_qos: str, want: int, tmp_path: Path) -> None:
    h = harness(tmp_path)
    _hook(h)
    assert h.manager.run_kube_qos(KubeQOSRequest(kube_qos, "x")).response.resources.cpu_bvt == want


def test_a_non_gi_cpu_policy_resets_every_class(tmp_path: Path) -> None:
    h = harness(tmp_path)
    h.manager.update_rules(
        state_with_merged_slo({"resourceQOSStrategy": {**ENABLED, "policies": {"cpuPolicy": "coreSched"}}})
    )
    hook = _hook(h, None)
    h.manager.update_rules(
        state_with_merged_slo({"resourceQOSStrategy": {**ENABLED, "policies": {"cpuPolicy": "coreSched"}}})
    )
    assert hook.rule is not None and not hook.rule.enable
    assert set(hook.rule.pod_qos_params.values()) == {0}


@pytest.mark.parametrize(
    "raw", ["{not json", '["list"]', '{"enable":true,"groupIdentity":7}', '{"enable":"yes"}']
)
def test_a_malformed_annotation_follows_the_failure_policy_and_names_pod_and_hook(
    raw: str, tmp_path: Path
) -> None:
    h = harness(tmp_path, failure_policy="Fail")
    _hook(h)
    with pytest.raises(
        HookFailed,
        match=r"hook GroupIdentity failed at PreRunPodSandbox for pod default/pod: .*koordinator.sh/cpuQOS",
    ):
        _bvt(h, LS, "kubepods/pod-x/", {"koordinator.sh/cpuQOS": raw})
    h2 = harness(tmp_path / "ignore", failure_policy="Ignore")
    _hook(h2)
    result = h2.manager.run_pod(
        Stage.PRE_RUN_POD_SANDBOX, pod_request(LS, {"koordinator.sh/cpuQOS": raw}, "kubepods/pod-x")
    )
    assert result.response.resources.cpu_bvt is None and [f.hook for f in result.failures] == [
        "GroupIdentity"
    ]


def test_reconciler_writes_bvt_of_pods_and_qos_dirs_after_a_nodeslo_change(tmp_path: Path) -> None:
    be = make_pod("be", uid="uid-be", qos="BE", node="test-node")
    ls = make_pod("ls", uid="uid-ls", qos="LS", cpu="1", memory="1Gi", node="test-node")
    for p in (be, ls):
        p["status"] = {"phase": "Running"}
    h = harness(tmp_path)
    tree = h.tree
    for p in (be, ls):
        tree.add_pod(p, {"cpu.bvt_warp_ns": "0"})
    h.qos.set_state(pods=[be, ls], node_slo={"resourceQOSStrategy": ENABLED})
    report = h.reconciler.tick(h.qos.clock.now())
    assert report is not None and report.reason == "rule changed: GroupIdentity" and report.failures == []
    by_name = {p.pod.name: p for p in h.qos.state.pods}
    assert tree.read("cpu.bvt_warp_ns", by_name["be"].cgroup_dir) == "-1"
    assert tree.read("cpu.bvt_warp_ns", by_name["ls"].cgroup_dir) == "2"
    assert tree.read("cpu.bvt_warp_ns", "kubepods/besteffort") == "-1"
    assert tree.read("cpu.bvt_warp_ns", "kubepods/burstable") == "2"
    assert tree.read("cpu.bvt_warp_ns", "kubepods") == "0"
