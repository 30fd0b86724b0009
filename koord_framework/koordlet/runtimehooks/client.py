"""A typed client of a runtime hook server (``RuntimeHookService`` over a unix socket).

This is what ``koord runtime-proxy`` uses to call the koordlet (Koordinator's ``runtimeproxy/client``):
one channel per hook server endpoint, one method per rpc, every call bounded by a timeout so a hung hook
server cannot hang the kubelet's CRI call. Errors come back as ``HookCallError`` carrying the gRPC status
code name and the server's message, so the caller can apply the server's failure policy.

Requests and responses are the generated messages of ``proto/api.proto`` (``runtime.v1alpha1``), re-exported
here: ``PodSandboxHookRequest``, ``ContainerResourceHookRequest``, ... .
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeAlias

import grpc

from koord_framework.errors import KoordError
from koord_framework.koordlet.runtimehooks.proto import api_pb2, api_pb2_grpc
from koord_framework.koordlet.runtimehooks.protocol import Stage

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "ContainerMetadata",
    "ContainerResourceHookRequest",
    "ContainerResourceHookResponse",
    "HookCallError",
    "HookRequest",
    "HookResponse",
    "HugepageLimit",
    "LinuxContainerResources",
    "PodSandboxHookRequest",
    "PodSandboxHookResponse",
    "PodSandboxMetadata",
    "RuntimeHookClient",
    "unix_target",
]

PodSandboxMetadata = api_pb2.PodSandboxMetadata
ContainerMetadata = api_pb2.ContainerMetadata
LinuxContainerResources = api_pb2.LinuxContainerResources
HugepageLimit = api_pb2.HugepageLimit
PodSandboxHookRequest = api_pb2.PodSandboxHookRequest
PodSandboxHookResponse = api_pb2.PodSandboxHookResponse
ContainerResourceHookRequest = api_pb2.ContainerResourceHookRequest
ContainerResourceHookResponse = api_pb2.ContainerResourceHookResponse

HookRequest: TypeAlias = api_pb2.PodSandboxHookRequest | api_pb2.ContainerResourceHookRequest
HookResponse: TypeAlias = api_pb2.PodSandboxHookResponse | api_pb2.ContainerResourceHookResponse

DEFAULT_CALL_TIMEOUT = 5.0
"""Seconds one hook call may take end to end. Koordinator's proxy passes the kubelet's context through
(the kubelet's 2-minute CRI timeout); koord bounds it tighter, above the server's own per-hook timeout
(2 s by default) so a slow hook still comes back as the server's policy-driven answer."""

# The rpc serving each stage (Koordinator's ``dispatchInternal``); PreRemoveRunPodSandbox has no rpc.
_RPC_OF_STAGE: dict[Stage, str] = {
    Stage.PRE_RUN_POD_SANDBOX: "PreRunPodSandboxHook",
    Stage.POST_STOP_POD_SANDBOX: "PostStopPodSandboxHook",
    Stage.PRE_CREATE_CONTAINER: "PreCreateContainerHook",
    Stage.PRE_START_CONTAINER: "PreStartContainerHook",
    Stage.POST_START_CONTAINER: "PostStartContainerHook",
    Stage.PRE_UPDATE_CONTAINER_RESOURCES: "PreUpdateContainerResourcesHook",
    Stage.POST_STOP_CONTAINER: "PostStopContainerHook",
}


class HookCallError(KoordError):
    """A hook call failed: the server refused it (failure policy ``Fail``), was unreachable, or timed out."""

    def __init__(self, rpc: str, code: str, details: str) -> None:
        super().__init__(f"runtime hook server {rpc}: {code}: {details}")
        self.rpc = rpc
        self.code = code
        """The gRPC status code's name (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, ``INTERNAL``, ...)."""
        self.details = details

    @property
    def unavailable(self) -> bool:
        """The server could not be reached (no socket, no listener)."""
        return self.code == "UNAVAILABLE"


def unix_target(endpoint: str) -> str:
    """The gRPC target of a hook server endpoint (a socket path, as in ``remote-endpoint``)."""
    if endpoint.startswith("unix:") or "://" in endpoint:
        return endpoint
    return "unix:" + os.path.abspath(endpoint)


class RuntimeHookClient:
    """Calls one hook server. Thread-safe (one gRPC channel); ``close()`` when done."""

    def __init__(self, endpoint: str, *, timeout: float = DEFAULT_CALL_TIMEOUT) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._channel: Any = grpc.insecure_channel(unix_target(endpoint))
        # The generated gRPC glue has no annotations (protoc writes none for it).
        self._stub: Any = api_pb2_grpc.RuntimeHookServiceStub(self._channel)  # type: ignore[no-untyped-call]

    # --- one method per rpc ----------------------------------------------------------------------------
    def pre_run_pod_sandbox_hook(
        self, request: api_pb2.PodSandboxHookRequest, *, timeout: float | None = None
    ) -> api_pb2.PodSandboxHookResponse:
        return self._pod("PreRunPodSandboxHook", request, timeout)

    def post_stop_pod_sandbox_hook(
        self, request: api_pb2.PodSandboxHookRequest, *, timeout: float | None = None
    ) -> api_pb2.PodSandboxHookResponse:
        return self._pod("PostStopPodSandboxHook", request, timeout)

    def pre_create_container_hook(
        self, request: api_pb2.ContainerResourceHookRequest, *, timeout: float | None = None
    ) -> api_pb2.ContainerResourceHookResponse:
        return self._container("PreCreateContainerHook", request, timeout)

    def pre_start_container_hook(
        self, request: api_pb2.ContainerResourceHookRequest, *, timeout: float | None = None
    ) -> api_pb2.ContainerResourceHookResponse:
        return self._container("PreStartContainerHook", request, timeout)

    def post_start_container_hook(
        self, request: api_pb2.ContainerResourceHookRequest, *, timeout: float | None = None
    ) -> api_pb2.ContainerResourceHookResponse:
        return self._container("PostStartContainerHook", request, timeout)

    def post_stop_container_hook(
        self, request: api_pb2.ContainerResourceHookRequest, *, timeout: float | None = None
    ) -> api_pb2.ContainerResourceHookResponse:
        return self._container("PostStopContainerHook", request, timeout)

    def pre_update_container_resources_hook(
        self, request: api_pb2.ContainerResourceHookRequest, *, timeout: float | None = None
    ) -> api_pb2.ContainerResourceHookResponse:
        return self._container("PreUpdateContainerResourcesHook", request, timeout)

    # --- by stage (what a proxy holding Koordinator's RuntimeHookType names uses) -------------------------
    def call(self, stage: Stage | str, request: HookRequest, *, timeout: float | None = None) -> HookResponse:
        """Call the rpc of ``stage`` (``"PreCreateContainer"`` ...); the request type must match it."""
        st = Stage(stage)
        rpc = _RPC_OF_STAGE.get(st)
        if rpc is None:
            raise ValueError(f"runtime hook stage {st.value} has no RuntimeHookService rpc")
        if st.is_pod_stage:
            if not isinstance(request, api_pb2.PodSandboxHookRequest):
                raise TypeError(f"{st.value} takes a PodSandboxHookRequest, not {type(request).__name__}")
            return self._pod(rpc, request, timeout)
        if not isinstance(request, api_pb2.ContainerResourceHookRequest):
            raise TypeError(f"{st.value} takes a ContainerResourceHookRequest, not {type(request).__name__}")
        return self._container(rpc, request, timeout)

    @staticmethod
    def rpc_of(stage: Stage | str) -> str | None:
        """The rpc name serving ``stage``, or None (PreRemoveRunPodSandbox has none)."""
        return _RPC_OF_STAGE.get(Stage(stage))

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> RuntimeHookClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing --------------------------------------------------------------------------------------
    def _pod(
        self, rpc: str, request: api_pb2.PodSandboxHookRequest, timeout: float | None
    ) -> api_pb2.PodSandboxHookResponse:
        response = self._invoke(rpc, request, timeout)
        assert isinstance(response, api_pb2.PodSandboxHookResponse)
        return response

    def _container(
        self, rpc: str, request: api_pb2.ContainerResourceHookRequest, timeout: float | None
    ) -> api_pb2.ContainerResourceHookResponse:
        response = self._invoke(rpc, request, timeout)
        assert isinstance(response, api_pb2.ContainerResourceHookResponse)
        return response

    def _invoke(self, rpc: str, request: HookRequest, timeout: float | None) -> object:
        method: Callable[..., object] = getattr(self._stub, rpc)
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise HookCallError(rpc, code.name if code is not None else "UNKNOWN", details or "") from exc
