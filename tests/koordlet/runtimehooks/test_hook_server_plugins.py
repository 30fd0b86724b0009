"""The five hook plugins behind the real gRPC server: Koordinator's request-level vectors end to end, and
malformed ``resource-status`` / ``device-allocated`` annotations under each failure policy."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_batchresourcehook import BatchResource
from koord_plugin_cpunormalization import CPUNormalization
from koord_plugin_cpusetallocator import CPUSetAllocator
from koord_plugin_gpuenvinject import GPUEnvInject
from koord_plugin_groupidentity import BvtRule, GroupIdentity

from koord_framework.koordlet.cgroups import CPU_BVT_WARP_NS
from koord_framework.koordlet.runtimehooks.client import (
    ContainerMetadata,
    ContainerResourceHookRequest,
    HookCallError,
    PodSandboxHookRequest,
    PodSandboxMetadata,
    RuntimeHookClient,
)
from koord_framework.koordlet.runtimehooks.server import HookServer, HookServerOptions
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import HookHarness

VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]
SPEC = "node.koordinator.sh/extended-resource-spec"
STATUS = "scheduling.koordinator.sh/resource-status"
DEVICES = "scheduling.koordinator.sh/device-allocated"
ALL = [BatchResource, CPUNormalization, CPUSetAllocator, GPUEnvInject, GroupIdentity]


class Served:
    def __init__(self, root: Path, policy: str = "Ignore", args: dict[str, Any] | None = None) -> None:
        self.tree = FakeHostTree(root / "host", version=1, driver="cgroupfs")
        for d in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
            self.tree.ensure_cgroup(d, {CPU_BVT_WARP_NS: "0"})  # a kernel with group identity
        self.harness = HookHarness(self.tree, ALL, args=args, failure_policy=policy)
        opts = HookServerOptions(address=str(root / "koordlet.sock"), config_dir=None)
        self.server = HookServer(self.harness.manager, opts, executor=self.harness.qos.executor)
        self.server.start()
        self.client = RuntimeHookClient(opts.address, timeout=10)

    def close(self) -> None:
        self.client.close()
        self.server.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path)
    yield s
    s.close()


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def _meta(uid: str = "pod-uid") -> PodSandboxMetadata:
    return PodSandboxMetadata(name="pod", namespace="default", uid=uid)


@pytest.mark.parametrize("vector", _by("bvtPlugin.SetPodBvtValue"))
def test_group_identity_vectors_over_grpc(vector: dict[str, Any], served: Served) -> None:
    req = vector["inputs"]["request"]
    hook = served.harness.manager.hook("GroupIdentity")
    assert isinstance(hook, GroupIdentity)
    hook.rule = BvtRule.from_dict(vector["inputs"]["rule"])
    cgroup = req["cgroupParent"].strip("/")
    served.tree.ensure_cgroup(cgroup, {CPU_BVT_WARP_NS: "7"})
    served.client.pre_run_pod_sandbox_hook(
        PodSandboxHookRequest(
            pod_meta=_meta(),
            labels=req["labels"] or {},
            annotations=req["annotations"] or {},
            cgroup_parent="/" + cgroup,
        )
    )
    # bvt is not a CRI field: the server wrote the hook's value to the pod's cgroup.
    assert int(served.tree.read(CPU_BVT_WARP_NS, cgroup)) == vector["expected"]["cpuBvt"]


def _batch_rule(served: Served, rule: dict[str, Any] | None) -> None:
    hook = served.harness.manager.hook("BatchResource")
    assert isinstance(hook, BatchResource)
    if rule is not None:
        hook.enable_cfs_quota = rule["enableCFSQuota"]
        hook.ratio = rule["cpuNormalizationRatio"]


def _resources(expected: dict[str, Any] | None) -> tuple[int, int, int]:
    if expected is None:
        return (0, 0, 0)  # untouched: nothing on the wire
    return (expected.get("cpuShares") or 0, expected.get("cfsQuota") or 0, expected.get("memoryLimit") or 0)


@pytest.mark.parametrize("vector", _by("plugin.SetPodResources"))
def test_batch_resource_pod_vectors_over_grpc(vector: dict[str, Any], served: Served) -> None:
    inputs = vector["inputs"]
    _batch_rule(served, inputs["rule"])
    ann = {SPEC: json.dumps(inputs["extendedResources"])} if inputs["extendedResources"] is not None else {}
    got = served.client.pre_run_pod_sandbox_hook(
        PodSandboxHookRequest(pod_meta=_meta(), labels=inputs["podLabels"] or {}, annotations=ann)
    )
    res = got.resources
    assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == _resources(
        vector["expected"]["resources"]
    )


@pytest.mark.parametrize("vector", _by("plugin.SetContainerResources"))
@pytest.mark.parametrize("rpc", ["PreCreateContainer", "PreUpdateContainerResources"])
def test_batch_resource_container_vectors_over_grpc(vector: dict[str, Any], rpc: str, served: Served) -> None:
    inputs = vector["inputs"]
    _batch_rule(served, inputs["rule"])
    name = inputs["containerName"]
    ann = {SPEC: json.dumps({"containers": {name: inputs["containerExtendedResources"]}})}
    got = served.client.call(
        rpc,
        ContainerResourceHookRequest(
            pod_meta=_meta(),
            container_meta=ContainerMetadata(name=name),
            pod_labels=inputs["podLabels"] or {},
            pod_annotations=ann,
        ),
    )
    assert isinstance(got, type(served.client.pre_create_container_hook(ContainerResourceHookRequest())))
    res = got.container_resources
    assert (res.cpu_shares, res.cpu_quota, res.memory_limit_in_bytes) == _resources(
        vector["expected"]["resources"]
    )


@pytest.mark.parametrize("vector", _by("gpuPlugin."))
def test_gpu_env_vectors_over_grpc(vector: dict[str, Any], tmp_path: Path) -> None:
    inputs = vector["inputs"]
    gates = inputs.get("featureGates") or {}
    args = {"hamiCoreVgpuMonitor": gates.get("HamiCoreVGPUMonitor", False), "createMonitorDir": False}
    s = Served(tmp_path, args={"GPUEnvInject": args})
    try:
        got = s.client.pre_create_container_hook(
            ContainerResourceHookRequest(
                pod_meta=_meta(inputs.get("podUID", "pod-uid")),
                container_meta=ContainerMetadata(name=inputs.get("containerName", "main")),
                pod_labels=inputs.get("podLabels") or {},
                pod_annotations=inputs.get("podAnnotations") or {},
                container_envs={"PATH": "/bin"},
            )
        )
        # Mounts (HAMi's library) are not on the wire: only NRI can add them (docs/runtime-hooks.md).
        assert dict(got.container_envs) == {"PATH": "/bin", **vector["expected"]["envs"]}
    finally:
        s.close()


def _container(annotations: dict[str, str]) -> ContainerResourceHookRequest:
    return ContainerResourceHookRequest(
        pod_meta=PodSandboxMetadata(name="web", namespace="prod", uid="uid-web"),
        container_meta=ContainerMetadata(name="main", id="c0ffee"),
        pod_labels={"koordinator.sh/qosClass": "LSR"},
        pod_annotations=annotations,
        pod_cgroup_parent="/kubepods/poduid-web",
    )


BAD = [
    pytest.param("CPUSetAllocator", {STATUS: '{"cpuset": '}, id="resource-status-not-json"),
    pytest.param("CPUSetAllocator", {STATUS: '{"cpuset": "0-x"}'}, id="resource-status-bad-cpuset"),
    pytest.param("GPUEnvInject", {DEVICES: "[1, 2"}, id="device-allocated-not-json"),
    pytest.param("GPUEnvInject", {DEVICES: '{"gpu": [{"minor": "zero"}]}'}, id="device-allocated-bad-minor"),
]


@pytest.mark.parametrize(("hook", "annotations"), BAD)
def test_malformed_annotation_under_fail(hook: str, annotations: dict[str, str], tmp_path: Path) -> None:
    s = Served(tmp_path, policy="Fail")
    try:
        with pytest.raises(HookCallError) as err:
            s.client.pre_create_container_hook(_container(annotations))
        assert err.value.code == "INTERNAL"
        details = err.value.details
        assert f"runtime hook {hook} failed at PreCreateContainer for pod prod/web container main" in details
        assert next(iter(annotations)) in details
    finally:
        s.close()


@pytest.mark.parametrize(("hook", "annotations"), BAD)
def test_malformed_annotation_under_ignore(
    hook: str, annotations: dict[str, str], served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        got = served.client.pre_create_container_hook(_container(annotations))
    # Nothing of the broken hook on the wire; the request goes on.
    assert got.container_resources.cpuset_cpus == ""
    assert "NVIDIA_VISIBLE_DEVICES" not in got.container_envs
    said = [r.getMessage() for r in caplog.records if f"runtime hook {hook}" in r.getMessage()]
    assert len(said) == 1 and "pod prod/web container main" in said[0]
