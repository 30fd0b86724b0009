"""The koordlet's hook server over a real gRPC unix socket: conversion, failure policy, timeout, lifecycle."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from koord_framework.koordlet.runtimehooks import (
    ContainerRequest,
    ContainerResponse,
    FailurePolicy,
    HookError,
    HookManager,
    PodSandboxRequest,
    PodSandboxResponse,
    RuntimeHook,
    RuntimeHookArgs,
    hookimpl,
)
from koord_framework.koordlet.runtimehooks.client import (
    ContainerMetadata,
    ContainerResourceHookRequest,
    HookCallError,
    LinuxContainerResources,
    PodSandboxHookRequest,
    PodSandboxMetadata,
    RuntimeHookClient,
)
from koord_framework.koordlet.runtimehooks.registration import HookServerRegistration, read_registrations
from koord_framework.koordlet.runtimehooks.server import HookServer, HookServerOptions
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import HookHarness

RELEASE = threading.Event()


class Shares(RuntimeHook[RuntimeHookArgs]):
    """Pod: shares 100, an annotation and group identity; container: shares 50, cpuset, an env."""

    name: ClassVar[str] = "Shares"
    Args = RuntimeHookArgs

    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        response.resources.cpu_shares = 100
        response.resources.cpu_bvt = -1
        response.annotations["seen-cgroup"] = request.cgroup_parent

    @hookimpl
    def pre_create_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        response.resources.cpu_shares = 50
        response.resources.cpuset_cpus = "0-1"
        response.add_env["SEEN_QUOTA"] = str(request.resources.cpu_quota if request.resources else None)


class Broken(RuntimeHook[RuntimeHookArgs]):
    """Raises on a malformed annotation, as the real hooks do (``HookError`` naming the annotation)."""

    name: ClassVar[str] = "Broken"
    Args = RuntimeHookArgs

    @hookimpl
    def pre_create_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        response.resources.cpu_quota = 1  # dropped: the hook raises after editing
        if "bad" in request.pod_annotations:
            raise HookError("annotation bad is not JSON")


class Hang(RuntimeHook[RuntimeHookArgs]):
    """Blocks until released (a hook stuck on a host read)."""

    name: ClassVar[str] = "Hang"
    Args = RuntimeHookArgs

    @hookimpl
    def pre_start_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        response.resources.cpu_shares = 7
        RELEASE.wait(10)


@pytest.fixture(autouse=True)
def _release_hung_hooks() -> Iterator[None]:
    RELEASE.clear()
    yield
    RELEASE.set()


def serve(
    tmp_path: Path,
    hooks: list[type[RuntimeHook[Any]]],
    *,
    policy: str = "Ignore",
    args: dict[str, Any] | None = None,
    timeout: float = 2.0,
) -> tuple[HookServer, RuntimeHookClient, HookHarness]:
    tree = FakeHostTree(tmp_path / "host", version=1, driver="cgroupfs")
    tree.ensure_cgroup("kubepods/burstable/poduid-1", {"cpu.bvt_warp_ns": "0"})
    harness = HookHarness(tree, hooks, args=args, failure_policy=policy)
    options = HookServerOptions(
        address=str(tmp_path / "run" / "koordlet.sock"),
        host_endpoint="/var/run/koordlet/koordlet.sock",
        config_dir=str(tmp_path / "hookserver.d"),
        hook_timeout_seconds=timeout,
    )
    server = HookServer(harness.manager, options, executor=harness.qos.executor)
    server.start()
    client = RuntimeHookClient(options.address, timeout=10)
    return server, client, harness


def pod_req(**annotations: str) -> PodSandboxHookRequest:
    return PodSandboxHookRequest(
        pod_meta=PodSandboxMetadata(name="web", namespace="default", uid="uid-1"),
        labels={"app": "web"},
        annotations=annotations,
        cgroup_parent="/kubepods/burstable/poduid-1",
        resources=LinuxContainerResources(cpu_shares=1024, memory_limit_in_bytes=1 << 30),
    )


def container_req(**annotations: str) -> ContainerResourceHookRequest:
    return ContainerResourceHookRequest(
        pod_meta=PodSandboxMetadata(name="web", namespace="default", uid="uid-1"),
        container_meta=ContainerMetadata(name="main", id="c1"),
        pod_annotations=annotations,
        pod_cgroup_parent="/kubepods/burstable/poduid-1",
        container_resources=LinuxContainerResources(cpu_shares=512, cpu_quota=50000, cpu_period=100000),
        container_envs={"KEEP": "1"},
        container_annotations={"io.kubernetes.container.name": "main"},
    )


def test_pod_hook_over_the_socket(tmp_path: Path) -> None:
    server, client, harness = serve(tmp_path, [Shares])
    try:
        got = client.pre_run_pod_sandbox_hook(pod_req(a="b"))
        # The request's values with the hooks' edits over them (Koordinator's response shape).
        assert dict(got.labels) == {"app": "web"}
        assert dict(got.annotations) == {"a": "b", "seen-cgroup": "kubepods/burstable/poduid-1"}
        assert got.cgroup_parent == "/kubepods/burstable/poduid-1"
        assert got.resources.cpu_shares == 100
        assert got.resources.memory_limit_in_bytes == 1 << 30
        # Group identity is not a CRI field: the server wrote it to the pod's cgroup itself.
        assert harness.tree.read("cpu.bvt_warp_ns", "kubepods/burstable/poduid-1").strip() == "-1"
        # So are the pod-level shares the hook set (Koordinator's injectForExt): the runtime never writes
        # the kubelet's pod cgroup.
        assert harness.tree.read("cpu.shares", "kubepods/burstable/poduid-1").strip() == "100"
    finally:
        client.close()
        server.stop()


def test_container_hook_over_the_socket(tmp_path: Path) -> None:
    server, client, _ = serve(tmp_path, [Shares])
    try:
        got = client.call("PreCreateContainer", container_req())
        assert isinstance(got, type(client.pre_create_container_hook(container_req())))
        assert got.container_resources.cpu_shares == 50
        assert got.container_resources.cpuset_cpus == "0-1"
        assert got.container_resources.cpu_quota == 50000  # kept from the request
        assert got.container_resources.cpu_period == 100000
        assert dict(got.container_envs) == {"KEEP": "1", "SEEN_QUOTA": "50000"}
        assert dict(got.container_annotations) == {"io.kubernetes.container.name": "main"}
        # A stage no hook implements answers the request unchanged.
        same = client.post_stop_container_hook(container_req())
        assert same.container_resources == container_req().container_resources
        assert dict(same.container_envs) == {"KEEP": "1"}
    finally:
        client.close()
        server.stop()


def test_registration_file_and_socket_lifecycle(tmp_path: Path) -> None:
    stale = tmp_path / "run"
    stale.mkdir()
    server, client, _ = serve(tmp_path, [Shares])
    sock = Path(server.options.address)
    try:
        assert server.serving and sock.exists()
        written = json.loads((tmp_path / "hookserver.d" / "koordlet.json").read_text())
        assert written == {
            "remote-endpoint": "/var/run/koordlet/koordlet.sock",
            "failure-policy": "Ignore",
            "runtime-hooks": [
                "PreRunPodSandbox",
                "PostStopPodSandbox",
                "PreCreateContainer",
                "PreStartContainer",
                "PostStartContainer",
                "PreUpdateContainerResources",
                "PostStopContainer",
            ],
        }
        parsed = read_registrations(tmp_path / "hookserver.d")
        assert list(parsed.values()) == [HookServerRegistration.from_json(json.dumps(written))]
    finally:
        client.close()
        server.stop()
    assert not server.serving and not sock.exists()
    # A socket left behind by a killed koordlet does not stop the next one from listening.
    again, client2, _ = serve(tmp_path, [Shares])
    try:
        assert client2.pre_run_pod_sandbox_hook(pod_req()).resources.cpu_shares == 100
    finally:
        client2.close()
        again.stop()


def test_disabled_stages_and_unknown_stage(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path / "host")
    harness = HookHarness(tree, [Shares])
    opts = HookServerOptions(
        address=str(tmp_path / "s.sock"), config_dir=None, disable_stages=frozenset({"PostStopContainer"})
    )
    assert "PostStopContainer" not in HookServer(harness.manager, opts).stages
    with pytest.raises(ValueError, match="PreFoo"):
        HookServer(harness.manager, HookServerOptions(address="x", disable_stages=frozenset({"PreFoo"})))


def test_raising_hook_under_ignore_drops_only_its_edits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server, client, _ = serve(tmp_path, [Broken, Shares])
    try:
        with caplog.at_level(logging.WARNING):
            got = client.pre_create_container_hook(container_req(bad="{"))
        assert got.container_resources.cpu_shares == 50  # Shares' edit answered
        assert got.container_resources.cpu_quota == 50000  # Broken's edit dropped
        lines = [r.getMessage() for r in caplog.records if "Broken" in r.getMessage()]
        assert len(lines) == 1
        assert "pod default/web container main" in lines[0] and "annotation bad" in lines[0]
    finally:
        client.close()
        server.stop()


def test_raising_hook_under_fail_refuses_with_names(tmp_path: Path) -> None:
    server, client, _ = serve(tmp_path, [Broken, Shares], policy="Fail")
    try:
        with pytest.raises(HookCallError) as err:
            client.pre_create_container_hook(container_req(bad="{"))
        assert err.value.code == "INTERNAL"
        assert "runtime hook Broken failed at PreCreateContainer" in err.value.details
        assert "pod default/web container main" in err.value.details
        # The server survives and serves the next (good) request.
        assert client.pre_create_container_hook(container_req()).container_resources.cpu_shares == 50
    finally:
        client.close()
        server.stop()


def test_hung_hook_under_ignore_answers_unchanged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server, client, _ = serve(tmp_path, [Hang, Shares], timeout=1.0)
    try:
        with caplog.at_level(logging.WARNING):
            got = client.pre_start_container_hook(container_req())
        assert got.container_resources == container_req().container_resources
        assert dict(got.container_envs) == {"KEEP": "1"}
        lines = [r.getMessage() for r in caplog.records if "timed out" in r.getMessage()]
        assert len(lines) == 1
        assert "runtime hook Hang" in lines[0] and "pod default/web container main" in lines[0]
        # Other rpcs keep being served while the hook hangs.
        assert client.pre_create_container_hook(container_req()).container_resources.cpu_shares == 50
    finally:
        client.close()
        server.stop()


def test_hung_hook_under_fail_is_deadline_exceeded(tmp_path: Path) -> None:
    server, client, _ = serve(tmp_path, [Hang], args={"Hang": {"failurePolicy": "Fail"}}, timeout=1.0)
    try:
        with pytest.raises(HookCallError) as err:
            client.pre_start_container_hook(container_req())
        assert err.value.code == "DEADLINE_EXCEEDED"
        assert (
            "runtime hook Hang failed at PreStartContainer for pod default/web container main"
            in err.value.details
        )
        assert "timed out after 1s" in err.value.details
    finally:
        client.close()
        server.stop()


def test_client_timeout_and_unavailable_server(tmp_path: Path) -> None:
    server, client, _ = serve(tmp_path, [Hang], timeout=5)
    try:
        with pytest.raises(HookCallError) as err:
            client.pre_start_container_hook(container_req(), timeout=0.2)
        assert err.value.code == "DEADLINE_EXCEEDED"
    finally:
        client.close()
        RELEASE.set()
        server.stop()
    with RuntimeHookClient(str(tmp_path / "nobody.sock"), timeout=1) as lonely:
        with pytest.raises(HookCallError) as gone:
            lonely.pre_run_pod_sandbox_hook(pod_req())
        assert gone.value.unavailable


def test_policy_of_the_manager_default(tmp_path: Path) -> None:
    harness = HookHarness(FakeHostTree(tmp_path), [Broken], failure_policy="Fail")
    assert isinstance(harness.manager, HookManager)
    assert harness.manager.policy_of(harness.manager.hook("Broken")) is FailurePolicy.FAIL


def test_the_grpc_server_is_a_hook_transport(tmp_path: Path) -> None:
    from koord_framework.koordlet.runtimehooks import HookTransport

    harness = HookHarness(FakeHostTree(tmp_path), [Shares])
    server = HookServer(harness.manager, HookServerOptions(address=str(tmp_path / "t.sock"), config_dir=None))
    assert isinstance(server, HookTransport)
    assert not server.serving
