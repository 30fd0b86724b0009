"""koord runtime-proxy against a fake CRI runtime and a fake hook server (real gRPC on unix sockets)."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry

from koord_framework.koordlet.runtimehooks.proto import api_pb2 as hookapi
from koord_framework.runtimeproxy.component import RuntimeProxy, RuntimeProxyConfig
from koord_framework.runtimeproxy.proto import api_pb2 as cri
from tests.runtimeproxy.fakes import FakeHookServer, FakeRuntime, Kubelet, echo, hang, refuse

ALL_HOOKS = [
    "PreRunPodSandbox",
    "PostStopPodSandbox",
    "PreCreateContainer",
    "PreStartContainer",
    "PostStartContainer",
    "PreUpdateContainerResources",
    "PostStopContainer",
]


@dataclass
class Rig:
    dir: Path
    runtime: FakeRuntime
    hooks: FakeHookServer
    proxy: RuntimeProxy
    kubelet: Kubelet
    stop: threading.Event

    def register(
        self, policy: str = "Ignore", hooks: list[str] | None = None, name: str = "koordlet"
    ) -> None:
        (self.dir / "hooks.d" / f"{name}.json").write_text(
            json.dumps(
                {
                    "remote-endpoint": str(self.dir / "hook.sock"),
                    "failure-policy": policy,
                    "runtime-hooks": ALL_HOOKS if hooks is None else hooks,
                }
            )
        )
        self.proxy.dispatcher.configs.refresh()


@pytest.fixture
def rig() -> Iterator[Rig]:
    d = Path(tempfile.mkdtemp(prefix="kp-", dir="/tmp"))  # short: unix socket paths are limited to 107 bytes
    (d / "hooks.d").mkdir()
    runtime = FakeRuntime(str(d / "runtime.sock")).start()
    hooks = FakeHookServer(str(d / "hook.sock")).start()
    config = RuntimeProxyConfig(
        proxy_endpoint=str(d / "proxy.sock"),
        runtime_endpoint=str(d / "runtime.sock"),
        hook_config_dir=str(d / "hooks.d"),
        hook_timeout=1.0,
    )
    proxy = RuntimeProxy(config, CollectorRegistry())
    stop = threading.Event()
    worker = threading.Thread(target=proxy.run, args=(stop,), daemon=True)
    worker.start()
    for _ in range(500):
        if proxy.ready():
            break
        stop.wait(0.01)
    assert proxy.ready()
    kubelet = Kubelet(config.proxy_endpoint)
    try:
        yield Rig(d, runtime, hooks, proxy, kubelet, stop)
    finally:
        kubelet.close()
        stop.set()
        worker.join(5)
        proxy.close()
        hooks.stop()
        runtime.stop()
        shutil.rmtree(d, ignore_errors=True)


def sandbox_config(name: str = "web", labels: dict[str, str] | None = None) -> cri.PodSandboxConfig:
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=name, uid=f"uid-{name}", namespace="default"),
        labels=labels or {"app": name},
        annotations={"a": "1"},
        linux=cri.LinuxPodSandboxConfig(cgroup_parent=f"/kubepods/besteffort/poduid-{name}"),
    )


def run_pod(rig: Rig, cfg: cri.PodSandboxConfig) -> str:
    resp = rig.kubelet.call("RunPodSandbox", cri.RunPodSandboxRequest(config=cfg), cri.RunPodSandboxResponse)
    sandbox_id: str = resp.pod_sandbox_id
    return sandbox_id


def create(rig: Rig, sandbox_id: str, cfg: cri.PodSandboxConfig, name: str = "main") -> str:
    req = cri.CreateContainerRequest(
        pod_sandbox_id=sandbox_id,
        config=cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name=name),
            image=cri.ImageSpec(image="busybox"),
            envs=[cri.KeyValue(key="B", value="2"), cri.KeyValue(key="A", value="1")],
            annotations={"c": "3"},
            linux=cri.LinuxContainerConfig(
                resources=cri.LinuxContainerResources(cpu_shares=1024, cpu_period=100000, cpu_quota=200000)
            ),
        ),
        sandbox_config=cfg,
    )
    resp = rig.kubelet.call("CreateContainer", req, cri.CreateContainerResponse)
    container_id: str = resp.container_id
    return container_id


# --- passthrough ------------------------------------------------------------------------------------------
def test_a_call_not_intercepted_passes_through_byte_for_byte(rig: Rig) -> None:
    # A ListContainers request with a field this proxy's proto does not declare (field 99) and metadata.
    body = (
        cri.ListContainersRequest(filter=cri.ContainerFilter(id="x")).SerializeToString() + b"\x9a\x06\x03new"
    )
    answer = b"\x0a\x05hello\xa2\x06\x02zz"  # not even a valid ListContainersResponse for this proto
    rig.runtime.answers[f"/{'runtime.v1.RuntimeService'}/ListContainers"] = answer
    got, _call = rig.kubelet.raw(
        "/runtime.v1.RuntimeService/ListContainers", body, metadata=(("x-trace", "t1"),)
    )
    assert got == answer
    seen = rig.runtime.last("ListContainers")
    assert seen.body == body
    assert seen.metadata.get("x-trace") == "t1"
    assert rig.hooks.calls == []


def test_unknown_methods_and_services_pass_through(rig: Rig) -> None:
    got, _ = rig.kubelet.raw("/runtime.v1.RuntimeService/SomeFutureMethod", b"\x01\x02\x03")
    assert got == b""
    assert rig.runtime.last("SomeFutureMethod").body == b"\x01\x02\x03"
    got, _ = rig.kubelet.raw("/runtime.v1alpha2.RuntimeService/Version", b"\x0a\x02v1")
    assert rig.runtime.last("Version").method == "/runtime.v1alpha2.RuntimeService/Version"
    got, _ = rig.kubelet.raw("/runtime.v1.ImageService/ListImages", b"")
    assert rig.runtime.last("ListImages").method == "/runtime.v1.ImageService/ListImages"


@pytest.mark.parametrize("method", ["GetContainerEvents", "Events"])
def test_a_server_streaming_method_streams_through(rig: Rig, method: str) -> None:
    # GetContainerEvents is CRI's streaming method; "Events" is not a CRI method at all: forwarded as a
    # bidirectional stream, which carries any cardinality.
    fn = rig.kubelet.channel.unary_stream(
        f"/runtime.v1.RuntimeService/{method}",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    assert list(fn(b"\x01", timeout=5)) == [b"\x0a\x01a", b"\x0a\x01b"]
    assert rig.runtime.last(method).body == b"\x01"


def test_the_runtime_error_comes_back_with_its_code_and_details(rig: Rig) -> None:
    rig.runtime.errors["/runtime.v1.RuntimeService/ContainerStatus"] = (
        grpc.StatusCode.NOT_FOUND,
        "no such thing",
    )
    with pytest.raises(grpc.RpcError) as info:
        rig.kubelet.call(
            "ContainerStatus", cri.ContainerStatusRequest(container_id="x"), cri.ContainerStatusResponse
        )
    err: Any = info.value
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert err.details() == "no such thing"
    assert dict(err.trailing_metadata() or ()).get("x-fake") == "trailer"


def test_an_intercepted_call_keeps_fields_the_proxy_does_not_know(rig: Rig) -> None:
    rig.register()
    req = cri.RunPodSandboxRequest(config=sandbox_config())
    body = req.SerializeToString() + b"\xba\x06\x04keep"  # field 103, unknown here
    rig.kubelet.raw("/runtime.v1.RuntimeService/RunPodSandbox", body)
    sent = rig.runtime.last("RunPodSandbox").body
    assert sent.endswith(b"\xba\x06\x04keep") or b"\xba\x06\x04keep" in sent
    assert cri.RunPodSandboxRequest.FromString(sent).config.metadata.name == "web"


# --- hooks merged ---------------------------------------------------------------------------------------
def test_pre_run_pod_sandbox_merges_labels_annotations_and_cgroup_parent(rig: Rig) -> None:
    rig.register()

    def answer(req: hookapi.PodSandboxHookRequest, _ctx: Any) -> hookapi.PodSandboxHookResponse:
        resp = echo(req)
        resp.labels["koordinator.sh/hooked"] = "yes"
        resp.annotations["a"] = "overridden"
        resp.cgroup_parent = "/kubepods/besteffort/koord/poduid-web"
        return resp

    rig.hooks.behaviour["PreRunPodSandboxHook"] = answer
    run_pod(rig, sandbox_config())
    _rpc, hook_req = rig.hooks.calls[0]
    assert hook_req.pod_meta.name == "web" and hook_req.pod_meta.namespace == "default"
    assert hook_req.cgroup_parent == "/kubepods/besteffort/poduid-web"
    sent = cri.RunPodSandboxRequest.FromString(rig.runtime.last("RunPodSandbox").body)
    assert dict(sent.config.labels) == {"app": "web", "koordinator.sh/hooked": "yes"}
    assert dict(sent.config.annotations) == {"a": "overridden"}
    assert sent.config.linux.cgroup_parent == "/kubepods/besteffort/koord/poduid-web"


def test_pre_create_container_merges_resources_env_annotations_and_knows_the_pod(rig: Rig) -> None:
    rig.register()

    def answer(req: hookapi.ContainerResourceHookRequest, _ctx: Any) -> hookapi.ContainerResourceHookResponse:
        resp = echo(req)
        resp.container_resources.cpu_shares = 2
        resp.container_resources.cpu_quota = -1
        resp.container_resources.cpuset_cpus = "2-3"
        resp.container_resources.memory_limit_in_bytes = 1 << 30
        resp.container_envs["NVIDIA_VISIBLE_DEVICES"] = "0,1"
        resp.container_annotations["koord"] = "x"
        return resp

    rig.hooks.behaviour["PreCreateContainerHook"] = answer
    cfg = sandbox_config(labels={"app": "web", "koordinator.sh/qosClass": "BE"})
    sandbox_id = run_pod(rig, cfg)
    container_id = create(rig, sandbox_id, cfg)
    rpc, hook_req = rig.hooks.calls[-1]
    assert rpc == "PreCreateContainerHook"
    assert hook_req.pod_meta.name == "web"
    assert hook_req.pod_labels["koordinator.sh/qosClass"] == "BE"
    assert hook_req.container_meta.name == "main"
    assert hook_req.container_resources.cpu_shares == 1024
    assert dict(hook_req.container_envs) == {"A": "1", "B": "2"}
    sent = cri.CreateContainerRequest.FromString(rig.runtime.last("CreateContainer").body)
    res = sent.config.linux.resources
    assert (res.cpu_shares, res.cpu_quota, res.cpu_period) == (2, -1, 100000)
    assert res.cpuset_cpus == "2-3" and res.memory_limit_in_bytes == 1 << 30
    # The kubelet's order first, the hook's new keys after.
    assert [(kv.key, kv.value) for kv in sent.config.envs] == [
        ("B", "2"),
        ("A", "1"),
        ("NVIDIA_VISIBLE_DEVICES", "0,1"),
    ]
    assert dict(sent.config.annotations) == {"c": "3", "koord": "x"}
    # The container call afterwards knows its pod and container from the store.
    rig.kubelet.call(
        "StartContainer", cri.StartContainerRequest(container_id=container_id), cri.StartContainerResponse
    )
    assert rig.hooks.rpcs()[-2:] == ["PreStartContainerHook", "PostStartContainerHook"]
    _rpc, start_req = rig.hooks.calls[-1]
    assert start_req.pod_meta.name == "web" and start_req.container_meta.id == container_id
    assert start_req.container_resources.cpuset_cpus == "2-3"


def test_update_container_resources_merges_and_is_remembered(rig: Rig) -> None:
    rig.register()
    cfg = sandbox_config()
    container_id = create(rig, run_pod(rig, cfg), cfg)

    def answer(req: hookapi.ContainerResourceHookRequest, _ctx: Any) -> hookapi.ContainerResourceHookResponse:
        resp = echo(req)
        resp.container_resources.cpuset_cpus = "0-1"
        return resp

    rig.hooks.behaviour["PreUpdateContainerResourcesHook"] = answer
    update = cri.UpdateContainerResourcesRequest(
        container_id=container_id, linux=cri.LinuxContainerResources(cpu_shares=512)
    )
    rig.kubelet.call("UpdateContainerResources", update, cri.UpdateContainerResourcesResponse)
    _rpc, hook_req = rig.hooks.calls[-1]
    assert hook_req.container_resources.cpu_shares == 512  # the update merged into what the store had
    assert hook_req.container_resources.cpu_quota == 200000
    sent = cri.UpdateContainerResourcesRequest.FromString(rig.runtime.last("UpdateContainerResources").body)
    assert (sent.linux.cpu_shares, sent.linux.cpuset_cpus) == (512, "0-1")
    assert rig.proxy.store.container(container_id).container_resources.cpuset_cpus == "0-1"  # type: ignore[union-attr]


def test_stops_call_post_hooks_and_forget(rig: Rig) -> None:
    rig.register()
    cfg = sandbox_config()
    sandbox_id = run_pod(rig, cfg)
    container_id = create(rig, sandbox_id, cfg)
    rig.kubelet.call(
        "StopContainer", cri.StopContainerRequest(container_id=container_id), cri.StopContainerResponse
    )
    rig.kubelet.call(
        "StopPodSandbox", cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), cri.StopPodSandboxResponse
    )
    assert rig.hooks.rpcs()[-2:] == ["PostStopContainerHook", "PostStopPodSandboxHook"]
    assert rig.proxy.store.sizes() == (0, 0)
    # RemoveContainer / RemovePodSandbox are not intercepted (Koordinator): no hook, passed through.
    n = len(rig.hooks.calls)
    rig.kubelet.call(
        "RemoveContainer", cri.RemoveContainerRequest(container_id=container_id), cri.RemoveContainerResponse
    )
    assert len(rig.hooks.calls) == n


def test_two_registered_servers_are_called_in_file_order_and_merged(rig: Rig) -> None:
    rig.register(name="a-first", hooks=["PreRunPodSandbox"])
    second = FakeHookServer(str(rig.dir / "hook2.sock")).start()
    try:
        (rig.dir / "hooks.d" / "b-second.json").write_text(
            json.dumps(
                {
                    "remote-endpoint": second.socket,
                    "failure-policy": "Ignore",
                    "runtime-hooks": ["PreRunPodSandbox"],
                }
            )
        )
        rig.proxy.dispatcher.configs.refresh()

        def first(req: Any, _ctx: Any) -> Any:
            resp = echo(req)
            resp.labels["first"] = "1"
            return resp

        rig.hooks.behaviour["PreRunPodSandboxHook"] = first
        run_pod(rig, sandbox_config())
        _rpc, req2 = second.calls[0]
        assert req2.labels["first"] == "1"  # the second server saw the first one's edit
    finally:
        second.stop()


# --- failure policies ----------------------------------------------------------------------------------
def test_fail_policy_refuses_the_call_naming_pod_container_and_hook(rig: Rig) -> None:
    rig.register(policy="Fail")
    cfg = sandbox_config()
    sandbox_id = run_pod(rig, cfg)
    rig.hooks.behaviour["PreCreateContainerHook"] = refuse("bad resource-status annotation")
    with pytest.raises(grpc.RpcError) as info:
        create(rig, sandbox_id, cfg)
    err: Any = info.value
    assert err.code() == grpc.StatusCode.UNKNOWN
    msg = err.details()
    assert "hook server err" in msg and "default/web" in msg and "container main" in msg
    assert "PreCreateContainer" in msg and "bad resource-status annotation" in msg and "Fail" in msg
    assert not any(r.method.endswith("/CreateContainer") for r in rig.runtime.received)


def test_ignore_policy_goes_on_with_the_kubelets_request(rig: Rig) -> None:
    rig.register(policy="Ignore")
    rig.hooks.behaviour["PreRunPodSandboxHook"] = refuse("boom")
    cfg = sandbox_config()
    sandbox_id = run_pod(rig, cfg)
    assert sandbox_id
    sent = cri.RunPodSandboxRequest.FromString(rig.runtime.last("RunPodSandbox").body)
    assert sent == cri.RunPodSandboxRequest(config=cfg)
    assert rig.proxy.store.pod(sandbox_id) is not None  # the pod is still known for its containers


@pytest.mark.parametrize("policy, refused", [("Fail", True), ("Ignore", False), ("", False)])
def test_hook_server_down(rig: Rig, policy: str, refused: bool) -> None:
    rig.register(policy=policy)
    rig.hooks.stop()
    cfg = sandbox_config()
    if refused:
        with pytest.raises(grpc.RpcError) as info:
            run_pod(rig, cfg)
        assert "UNAVAILABLE" in info.value.details()  # type: ignore[attr-defined]
        assert "default/web" in info.value.details()  # type: ignore[attr-defined]
    else:
        assert run_pod(rig, cfg)


@pytest.mark.parametrize("policy, refused", [("Fail", True), ("Ignore", False)])
def test_hook_timeout(rig: Rig, policy: str, refused: bool) -> None:
    rig.register(policy=policy)
    rig.hooks.behaviour["PreRunPodSandboxHook"] = hang(3.0)  # the proxy's hook timeout is 1 s
    cfg = sandbox_config()
    if refused:
        with pytest.raises(grpc.RpcError) as info:
            run_pod(rig, cfg)
        assert "DEADLINE_EXCEEDED" in info.value.details()  # type: ignore[attr-defined]
    else:
        assert run_pod(rig, cfg)
        sent = cri.RunPodSandboxRequest.FromString(rig.runtime.last("RunPodSandbox").body)
        assert sent == cri.RunPodSandboxRequest(config=cfg)


def test_skip_label_bypasses_the_hooks_for_the_pod_and_its_containers(rig: Rig) -> None:
    rig.register(policy="Fail")
    rig.hooks.stop()  # the hook server's own pod must start while it is down
    cfg = sandbox_config(labels={"runtimeproxy.koordinator.sh/skip-hookserver": "true"})
    sandbox_id = run_pod(rig, cfg)
    container_id = create(rig, sandbox_id, cfg)
    rig.kubelet.call(
        "StartContainer", cri.StartContainerRequest(container_id=container_id), cri.StartContainerResponse
    )
    assert rig.hooks.calls == []


def test_a_container_of_an_unknown_pod_goes_through_without_hooks(rig: Rig) -> None:
    rig.register(policy="Fail")
    container_id = create(rig, "sb-never-seen", sandbox_config())
    assert container_id and rig.hooks.calls == []


def test_a_malformed_hook_answer_follows_the_policy(rig: Rig) -> None:
    rig.register(policy="Ignore")

    def nonsense(req: Any, _ctx: Any) -> Any:
        resp = echo(req)
        resp.container_resources.unified["x"] = "y"
        return resp

    rig.hooks.behaviour["PreCreateContainerHook"] = nonsense
    cfg = sandbox_config()
    assert create(rig, run_pod(rig, cfg), cfg)


def test_bad_registration_files_are_skipped(rig: Rig) -> None:
    (rig.dir / "hooks.d" / "broken.json").write_text("{not json")
    (rig.dir / "hooks.d" / "weird.json").write_text(json.dumps({"remote-endpoint": "", "runtime-hooks": []}))
    rig.register(hooks=["PreRunPodSandbox", "NoSuchHook"])
    servers = rig.proxy.dispatcher.configs.servers()
    assert [s.source.rsplit("/", 1)[-1] for s in servers] == ["koordlet.json"]
    assert [s.value for s in servers[0].runtime_hooks] == ["PreRunPodSandbox"]
    run_pod(rig, sandbox_config())
    assert rig.hooks.rpcs() == ["PreRunPodSandboxHook"]


def test_failover_fills_the_store_from_the_runtime(tmp_path: Path) -> None:
    d = Path(tempfile.mkdtemp(prefix="kp-", dir="/tmp"))
    runtime = FakeRuntime(str(d / "rt.sock"))
    runtime.sandboxes = [
        cri.PodSandbox(
            id="sb1", metadata=cri.PodSandboxMetadata(name="p", namespace="ns", uid="u"), labels={"x": "1"}
        )
    ]
    runtime.containers = [
        cri.Container(id="c1", pod_sandbox_id="sb1", metadata=cri.ContainerMetadata(name="c")),
        cri.Container(id="c2", pod_sandbox_id="gone", metadata=cri.ContainerMetadata(name="orphan")),
    ]
    runtime.start()
    config = RuntimeProxyConfig(
        proxy_endpoint=str(d / "p.sock"), runtime_endpoint=runtime.socket, hook_config_dir=str(d)
    )
    proxy = RuntimeProxy(config, CollectorRegistry())
    try:
        assert proxy.server.failover() == (1, 1)
        info = proxy.store.container("c1")
        assert info is not None and info.pod_meta.name == "p" and info.pod_labels["x"] == "1"
    finally:
        proxy.close()
        runtime.stop()
        shutil.rmtree(d, ignore_errors=True)
