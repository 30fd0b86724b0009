"""A fake CRI runtime and a fake runtime hook server, each a real gRPC server on a unix socket."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc

from koord_framework.koordlet.runtimehooks.proto import api_pb2 as hookapi
from koord_framework.runtimeproxy.proto import api_pb2 as cri

RUNTIME = "runtime.v1.RuntimeService"


def _identity(b: bytes) -> bytes:
    return b


@dataclass
class Received:
    method: str
    body: bytes
    metadata: dict[str, str]


@dataclass
class FakeRuntime:
    """Records every call's raw bytes; answers intercepted calls with ids, others with ``answers``."""

    socket: str
    received: list[Received] = field(default_factory=list)
    answers: dict[str, bytes] = field(default_factory=dict)
    errors: dict[str, tuple[grpc.StatusCode, str]] = field(default_factory=dict)
    sandboxes: list[cri.PodSandbox] = field(default_factory=list)
    containers: list[cri.Container] = field(default_factory=list)
    _server: Any = None
    _count: int = 0

    def start(self) -> FakeRuntime:
        server = grpc.server(ThreadPoolExecutor(max_workers=8))
        fake = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
                method = details.method
                if method.endswith("Events"):
                    return grpc.unary_stream_rpc_method_handler(
                        lambda body, ctx: fake._stream(method, body, ctx),
                        request_deserializer=_identity,
                        response_serializer=_identity,
                    )
                return grpc.unary_unary_rpc_method_handler(
                    lambda body, ctx: fake._answer(method, body, ctx),
                    request_deserializer=_identity,
                    response_serializer=_identity,
                )

        server.add_generic_rpc_handlers([Handler()])
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()

    def _answer(self, method: str, body: bytes, ctx: grpc.ServicerContext) -> bytes:
        md = {k: v for k, v in ctx.invocation_metadata() if isinstance(v, str)}
        self.received.append(Received(method, body, md))
        if method in self.errors:
            code, msg = self.errors[method]
            ctx.set_trailing_metadata((("x-fake", "trailer"),))
            ctx.abort(code, msg)
        if method in self.answers:
            return self.answers[method]
        name = method.rsplit("/", 1)[-1]
        self._count += 1
        if name == "Version":
            return cri.VersionResponse(runtime_name="fake", runtime_api_version="v1").SerializeToString()
        if name == "RunPodSandbox":
            return cri.RunPodSandboxResponse(pod_sandbox_id=f"sb-{self._count}").SerializeToString()
        if name == "CreateContainer":
            return cri.CreateContainerResponse(container_id=f"ctr-{self._count}").SerializeToString()
        if name == "ListPodSandbox":
            return cri.ListPodSandboxResponse(items=self.sandboxes).SerializeToString()
        if name == "ListContainers":
            return cri.ListContainersResponse(containers=self.containers).SerializeToString()
        return b""

    def _stream(self, method: str, body: bytes, ctx: grpc.ServicerContext) -> Any:
        self.received.append(Received(method, body, {}))
        yield b"\x0a\x01a"
        yield b"\x0a\x01b"

    def last(self, name: str) -> Received:
        for r in reversed(self.received):
            if r.method.endswith("/" + name):
                return r
        raise AssertionError(f"the runtime got no {name}; got {[r.method for r in self.received]}")


Behaviour = Callable[[Any, grpc.ServicerContext], Any]


@dataclass
class FakeHookServer:
    """A ``runtime.v1alpha1.RuntimeHookService``: each rpc answers through ``behaviour[rpc]`` (default: the
    request echoed as Koordinator's koordlet does -- its response starts from the request's values)."""

    socket: str
    behaviour: dict[str, Behaviour] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    _server: Any = None

    RPCS = {
        "PreRunPodSandboxHook": (hookapi.PodSandboxHookRequest, hookapi.PodSandboxHookResponse),
        "PostStopPodSandboxHook": (hookapi.PodSandboxHookRequest, hookapi.PodSandboxHookResponse),
        "PreCreateContainerHook": (
            hookapi.ContainerResourceHookRequest,
            hookapi.ContainerResourceHookResponse,
        ),
        "PreStartContainerHook": (
            hookapi.ContainerResourceHookRequest,
            hookapi.ContainerResourceHookResponse,
        ),
        "PostStartContainerHook": (
            hookapi.ContainerResourceHookRequest,
            hookapi.ContainerResourceHookResponse,
        ),
        "PostStopContainerHook": (
            hookapi.ContainerResourceHookRequest,
            hookapi.ContainerResourceHookResponse,
        ),
        "PreUpdateContainerResourcesHook": (
            hookapi.ContainerResourceHookRequest,
            hookapi.ContainerResourceHookResponse,
        ),
    }

    def start(self) -> FakeHookServer:
        server = grpc.server(ThreadPoolExecutor(max_workers=8))
        fake = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
                rpc = details.method.rsplit("/", 1)[-1]
                if rpc not in FakeHookServer.RPCS:
                    return None
                req_type, resp_type = FakeHookServer.RPCS[rpc]
                return grpc.unary_unary_rpc_method_handler(
                    lambda req, ctx: fake._serve(rpc, req, ctx),
                    request_deserializer=req_type.FromString,
                    response_serializer=resp_type.SerializeToString,
                )

        server.add_generic_rpc_handlers([Handler()])
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None

    def _serve(self, rpc: str, req: Any, ctx: grpc.ServicerContext) -> Any:
        self.calls.append((rpc, req))
        if rpc in self.behaviour:
            return self.behaviour[rpc](req, ctx)
        return echo(req)

    def rpcs(self) -> list[str]:
        return [rpc for rpc, _ in self.calls]


def echo(req: Any) -> Any:
    """The koordlet's starting point: the request's own values."""
    if isinstance(req, hookapi.PodSandboxHookRequest):
        return hookapi.PodSandboxHookResponse(
            labels=req.labels,
            annotations=req.annotations,
            cgroup_parent=req.cgroup_parent,
            resources=req.resources,
        )
    return hookapi.ContainerResourceHookResponse(
        container_annotations=req.container_annotations,
        container_resources=req.container_resources,
        pod_cgroup_parent=req.pod_cgroup_parent,
        container_envs=req.container_envs,
    )


def hang(seconds: float) -> Behaviour:
    def behaviour(req: Any, ctx: grpc.ServicerContext) -> Any:
        end = time.monotonic() + seconds
        while time.monotonic() < end and ctx.is_active():
            time.sleep(0.01)
        return echo(req)

    return behaviour


def refuse(message: str) -> Behaviour:
    def behaviour(req: Any, ctx: grpc.ServicerContext) -> Any:
        ctx.abort(grpc.StatusCode.INTERNAL, message)

    return behaviour


class Kubelet:
    """Calls CRI the way the kubelet does, through a channel (to the proxy or the runtime)."""

    def __init__(self, socket: str) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")

    def call(
        self, name: str, req: Any, resp_type: Any, *, timeout: float = 10.0, metadata: Any = None
    ) -> Any:
        fn = self.channel.unary_unary(
            f"/{RUNTIME}/{name}",
            request_serializer=type(req).SerializeToString,
            response_deserializer=resp_type.FromString,
        )
        return fn(req, timeout=timeout, metadata=metadata)

    def raw(self, method: str, body: bytes, *, timeout: float = 10.0, metadata: Any = None) -> Any:
        fn = self.channel.unary_unary(method, request_serializer=_identity, response_deserializer=_identity)
        return fn.with_call(body, timeout=timeout, metadata=metadata)

    def close(self) -> None:
        self.channel.close()
