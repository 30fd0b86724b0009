"""The CRI proxy: one gRPC server, raw passthrough for everything, hooks around the intercepted calls.

Every method -- of ``runtime.v1.RuntimeService``, ``runtime.v1.ImageService`` or any other service -- is
served by one generic handler. A method the proxy does not intercept is forwarded as the raw bytes it
received (identity serializers, nothing decoded), with the caller's metadata and deadline, and the
runtime's answer, status code, details and metadata come back the same way: unknown fields, newer CRI
methods and streaming methods survive. The calls Koordinator intercepts (``RunPodSandbox``,
``StopPodSandbox``, ``CreateContainer``, ``StartContainer``, ``StopContainer``,
``UpdateContainerResources``) are decoded, given to the hook servers before (and after) the runtime call,
and re-encoded with their edits (fields the proxy does not know survive as unknown fields).

Whatever a hook server does -- refuse, hang, vanish, answer nonsense -- the proxy keeps serving: a failure
is logged naming the call, pod, container, hook and server, and the server's failure policy decides
whether the kubelet's call goes on (``Ignore``, ``""``) or is refused (``Fail``, gRPC ``UNKNOWN`` with that
message, as Koordinator's ``hook server err``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc

from koord_framework.koordlet.runtimehooks.client import (
    ContainerResourceHookResponse,
    PodSandboxHookResponse,
)
from koord_framework.runtimeproxy.config import RequestPath
from koord_framework.runtimeproxy.dispatcher import HookDispatcher, HookFailure, HookRefused
from koord_framework.runtimeproxy.executor import (
    DEFAULT_SKIP_KEY,
    DEFAULT_SKIP_VALUE,
    ContainerExecutor,
    ExecutorError,
    PodExecutor,
)
from koord_framework.runtimeproxy.proto import api_pb2 as cri
from koord_framework.runtimeproxy.store import MetaStore

__all__ = [
    "IMAGE_SERVICE",
    "RUNTIME_SERVICE",
    "CRIProxyServer",
    "ProxyOptions",
    "details_of",
    "dial",
    "unix_target",
    "version",
]

log = logging.getLogger(__name__)

RUNTIME_SERVICE = "runtime.v1.RuntimeService"
IMAGE_SERVICE = "runtime.v1.ImageService"

# The proxy is transparent: the kubelet and the runtime enforce their own message size limits.
_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
]

# How each CRI method is forwarded: the unary ones as one message each way (the cheapest path), the
# server-streaming one as a stream; any method not listed (another service, a CRI method newer than this
# list) as a bidirectional stream, which carries every cardinality unchanged.
_CRI_SERVICES = frozenset(
    f"runtime.{v}.{s}" for v in ("v1", "v1alpha2") for s in ("RuntimeService", "ImageService")
)
_CRI_UNARY = frozenset(
    {
        "Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus",
        "ListPodSandbox",
        "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer", "ListContainers",
        "ContainerStatus", "UpdateContainerResources", "ReopenContainerLog", "ExecSync", "Exec", "Attach",
        "PortForward", "ContainerStats", "ListContainerStats", "PodSandboxStats", "ListPodSandboxStats",
        "UpdateRuntimeConfig", "Status", "CheckpointContainer", "ListMetricDescriptors",
        "ListPodSandboxMetrics", "RuntimeConfig", "UpdatePodSandboxResources",
        "ListImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo",
    }
)  # fmt: skip
_CRI_SERVER_STREAMING = frozenset({"GetContainerEvents"})


def _cardinality(method: str) -> str:
    """``unary``, ``server-stream`` or ``any`` for a full method name ``/package.Service/Method``."""
    service, _, name = method.lstrip("/").partition("/")
    if service in _CRI_SERVICES:
        if name in _CRI_UNARY:
            return "unary"
        if name in _CRI_SERVER_STREAMING:
            return "server-stream"
    return "any"


# Headers gRPC sets itself: forwarding them would clash with the outgoing call's own.
_HOP_HEADERS = frozenset({"user-agent", "content-type", "te", "host", "grpc-timeout", "grpc-encoding"})


def unix_target(endpoint: str) -> str:
    """A gRPC target from a socket path or a ``unix://`` endpoint (Koordinator takes plain paths)."""
    if endpoint.startswith("unix://") or endpoint.startswith("unix:"):
        return endpoint
    return f"unix://{endpoint}"


def dial(endpoint: str) -> grpc.Channel:
    return grpc.insecure_channel(unix_target(endpoint), options=_CHANNEL_OPTIONS)


def _identity(data: bytes) -> bytes:
    return data


def _metadata(context: grpc.ServicerContext) -> list[tuple[str, str | bytes]]:
    return [
        (k, v)
        for k, v in (context.invocation_metadata() or ())
        if not k.startswith(":") and k not in _HOP_HEADERS and not k.startswith("grpc-")
    ]


def _timeout(context: grpc.ServicerContext) -> float | None:
    remaining: float | None = context.time_remaining()
    # grpcio reports "no deadline" as a huge number (or None): no timeout on the forwarded call then.
    if remaining is None or remaining > 365 * 24 * 3600:
        return None
    return max(remaining, 0.0)


def details_of(err: BaseException) -> str:
    """A gRPC error's details (its ``str`` for anything else)."""
    details = getattr(err, "details", None)
    if callable(details):
        try:
            return str(details() or "")
        except Exception:
            pass
    return str(err)


def _relay_error(context: grpc.ServicerContext, err: grpc.RpcError) -> None:
    """End the kubelet's call with the runtime's status, details and trailing metadata."""
    call: Any = err
    try:
        trailing = call.trailing_metadata()
        if trailing:
            context.set_trailing_metadata(trailing)
        code, details = call.code(), call.details()
    except Exception:  # not a call error (e.g. a grpc.FutureTimeoutError): say what it was
        code, details = grpc.StatusCode.UNAVAILABLE, str(err)
    context.abort(code or grpc.StatusCode.UNKNOWN, details or "")


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    skip_key: str = DEFAULT_SKIP_KEY
    skip_value: str = DEFAULT_SKIP_VALUE
    max_workers: int = 16


class CRIProxyServer:
    """Serves CRI on ``endpoint`` and forwards to the runtime's (and image service's) channels."""

    def __init__(
        self,
        runtime: grpc.Channel,
        image: grpc.Channel,
        dispatcher: HookDispatcher,
        store: MetaStore,
        options: ProxyOptions | None = None,
    ) -> None:
        self.runtime = runtime
        self.image = image
        self.dispatcher = dispatcher
        self.store = store
        self.options = options or ProxyOptions()
        self._server: grpc.Server | None = None
        self._intercepted: dict[str, grpc.RpcMethodHandler] = {
            f"/{RUNTIME_SERVICE}/{name}": grpc.unary_unary_rpc_method_handler(
                handler, request_deserializer=req_type.FromString, response_serializer=_identity
            )
            for name, req_type, handler in (
                ("RunPodSandbox", cri.RunPodSandboxRequest, self._run_pod_sandbox),
                ("StopPodSandbox", cri.StopPodSandboxRequest, self._stop_pod_sandbox),
                ("CreateContainer", cri.CreateContainerRequest, self._create_container),
                ("StartContainer", cri.StartContainerRequest, self._start_container),
                ("StopContainer", cri.StopContainerRequest, self._stop_container),
                ("UpdateContainerResources", cri.UpdateContainerResourcesRequest, self._update_resources),
            )
        }
        self._passthrough: dict[str, grpc.RpcMethodHandler] = {}

    # --- serving ---------------------------------------------------------------------------------------
    def start(self, endpoint: str) -> None:
        server = grpc.server(
            ThreadPoolExecutor(max_workers=self.options.max_workers, thread_name_prefix="cri-proxy"),
            handlers=[_Generic(self._handler)],
            options=_CHANNEL_OPTIONS,
        )
        if server.add_insecure_port(unix_target(endpoint)) == 0:
            raise OSError(f"cannot listen on {endpoint}")
        server.start()
        self._server = server

    def stop(self, grace: float | None = 1.0) -> None:
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None

    def _handler(self, method: str) -> grpc.RpcMethodHandler:
        handler = self._intercepted.get(method)
        if handler is not None:
            return handler
        handler = self._passthrough.get(method)
        if handler is None:
            handler = self._passthrough_handler(method)
            self._passthrough[method] = handler  # a benign race: both builds are equal
        return handler

    def _passthrough_handler(self, method: str) -> grpc.RpcMethodHandler:
        service = method.lstrip("/").partition("/")[0]
        channel = self.image if service.endswith(".ImageService") else self.runtime
        ident: dict[str, Any] = {"request_serializer": _identity, "response_deserializer": _identity}
        kind = _cardinality(method)
        if kind == "server-stream":
            stream_call = channel.unary_stream(method, **ident)

            def unary_stream(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
                responses = stream_call(request, timeout=_timeout(context), metadata=_metadata(context))
                context.add_callback(responses.cancel)
                try:
                    yield from responses
                except grpc.RpcError as err:
                    _relay_error(context, err)

            return grpc.unary_stream_rpc_method_handler(
                unary_stream, request_deserializer=_identity, response_serializer=_identity
            )
        if kind == "unary":
            unary_call = channel.unary_unary(method, **ident)

            def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
                try:
                    response, call = unary_call.with_call(
                        request, timeout=_timeout(context), metadata=_metadata(context)
                    )
                except grpc.RpcError as err:
                    _relay_error(context, err)
                    raise  # not reached: abort raises
                trailing = call.trailing_metadata()
                if trailing:
                    context.set_trailing_metadata(trailing)
                result: bytes = response
                return result

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=_identity, response_serializer=_identity
            )
        bidi_call = channel.stream_stream(method, **ident)

        def bidi(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
            responses = bidi_call(requests, timeout=_timeout(context), metadata=_metadata(context))
            context.add_callback(responses.cancel)
            try:
                yield from responses
            except grpc.RpcError as err:
                _relay_error(context, err)

        return grpc.stream_stream_rpc_method_handler(
            bidi, request_deserializer=_identity, response_serializer=_identity
        )

    # --- the runtime call of an intercepted method -------------------------------------------------------
    def _backend(self, name: str, request: Any, context: grpc.ServicerContext) -> bytes:
        call = self.runtime.unary_unary(
            f"/{RUNTIME_SERVICE}/{name}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=_identity,
        )
        try:
            response, rpc = call.with_call(request, timeout=_timeout(context), metadata=_metadata(context))
        except grpc.RpcError as err:
            log.error("%s: the runtime failed: %s", name, details_of(err))
            _relay_error(context, err)
            raise
        trailing = rpc.trailing_metadata()
        if trailing:
            context.set_trailing_metadata(trailing)
        result: bytes = response
        return result

    def _refuse(self, context: grpc.ServicerContext, refused: HookRefused) -> None:
        context.abort(grpc.StatusCode.UNKNOWN, f"hook server err: {refused}")

    @staticmethod
    def _deadline(context: grpc.ServicerContext) -> float | None:
        t = _timeout(context)
        return time.monotonic() + t if t is not None else None

    def _run_hooks(
        self,
        path: RequestPath,
        executor: PodExecutor | ContainerExecutor,
        apply: Callable[[Any], None] | None,
        context: grpc.ServicerContext,
        *,
        pre: bool,
    ) -> None:
        """Call every matching hook server in turn; merge each answer through ``apply``. Raises
        ``HookRefused`` for a failure whose policy is ``Fail`` (only meaningful before the runtime call)."""
        deadline = self._deadline(context)
        for server, stage in self.dispatcher.matching(path, pre=pre):
            result = self.dispatcher.call(
                server,
                stage,
                executor.hook_request(),
                call=path.value,
                where=executor.where,
                deadline=deadline,
            )
            if isinstance(result, HookFailure):
                if pre and result.policy.stops:
                    raise HookRefused(result)
                continue
            if apply is None:
                continue
            try:
                apply(result)
            except Exception as exc:  # a response the merge cannot take: that hook's failure
                failure = HookFailure(
                    path.value,
                    executor.where,
                    stage,
                    server.remote_endpoint,
                    server.source,
                    server.failure_policy,
                    f"cannot merge the response: {type(exc).__name__}: {exc}",
                )
                log.warning("%s", failure)
                if pre and failure.policy.stops:
                    raise HookRefused(failure) from exc

    def _intercept(
        self,
        path: RequestPath,
        request: Any,
        context: grpc.ServicerContext,
        executor: PodExecutor | ContainerExecutor,
        parse: Callable[[], None],
        apply_pre: Callable[[Any], None] | None,
        after: Callable[[bytes], None] | None = None,
    ) -> bytes:
        """Koordinator's ``InterceptRuntimeRequest``: parse, pre hooks, runtime, checkpoint, post hooks."""
        call_hooks = False
        try:
            parse()
            call_hooks = not executor.skipped(self.options.skip_key, self.options.skip_value)
            if not call_hooks:
                log.debug("%s for %s: skip label, no hooks", path.value, executor.where)
        except ExecutorError as exc:
            log.error("%s: %s; the call goes to the runtime without hooks", path.value, exc)
        except Exception as exc:  # bad input must not crash the proxy: no hooks for it
            log.error("%s: cannot read the request (%s); no hooks", path.value, exc)
        if call_hooks:
            try:
                self._run_hooks(path, executor, apply_pre, context, pre=True)
            except HookRefused as refused:
                self._refuse(context, refused)
        try:
            response = self._backend(path.value, request, context)
            if after is not None:
                try:
                    after(response)
                except Exception as exc:
                    log.error("%s for %s: checkpoint failed: %s", path.value, executor.where, exc)
        finally:
            # Koordinator calls the post hooks whatever the runtime answered; their answers are not used.
            if call_hooks:
                self._run_hooks(path, executor, None, context, pre=False)
        return response

    # --- the intercepted methods ---------------------------------------------------------------------------
    def _run_pod_sandbox(self, request: cri.RunPodSandboxRequest, context: grpc.ServicerContext) -> bytes:
        ex = PodExecutor(self.store)

        def apply(resp: PodSandboxHookResponse) -> None:
            ex.apply(resp, request)

        def after(raw: bytes) -> None:
            ex.checkpoint(cri.RunPodSandboxResponse.FromString(raw).pod_sandbox_id)

        return self._intercept(
            RequestPath.RUN_POD_SANDBOX, request, context, ex, lambda: ex.parse_run(request), apply, after
        )

    def _stop_pod_sandbox(self, request: cri.StopPodSandboxRequest, context: grpc.ServicerContext) -> bytes:
        ex = PodExecutor(self.store)
        try:
            return self._intercept(
                RequestPath.STOP_POD_SANDBOX,
                request,
                context,
                ex,
                lambda: ex.load(request.pod_sandbox_id),
                None,
            )
        finally:
            self.store.delete_pod(request.pod_sandbox_id)

    def _create_container(self, request: cri.CreateContainerRequest, context: grpc.ServicerContext) -> bytes:
        ex = ContainerExecutor(self.store)

        def apply(resp: ContainerResourceHookResponse) -> None:
            ex.apply(resp, request)

        def after(raw: bytes) -> None:
            if ex.info.HasField("pod_meta"):
                ex.checkpoint(cri.CreateContainerResponse.FromString(raw).container_id)

        return self._intercept(
            RequestPath.CREATE_CONTAINER, request, context, ex, lambda: ex.parse_create(request), apply, after
        )

    def _start_container(self, request: cri.StartContainerRequest, context: grpc.ServicerContext) -> bytes:
        ex = ContainerExecutor(self.store)

        def apply(resp: ContainerResourceHookResponse) -> None:
            ex.apply(resp, None)

        return self._intercept(
            RequestPath.START_CONTAINER,
            request,
            context,
            ex,
            lambda: ex.load(request.container_id, "StartContainer"),
            apply,
        )

    def _stop_container(self, request: cri.StopContainerRequest, context: grpc.ServicerContext) -> bytes:
        ex = ContainerExecutor(self.store)
        try:
            return self._intercept(
                RequestPath.STOP_CONTAINER,
                request,
                context,
                ex,
                lambda: ex.load(request.container_id, "StopContainer"),
                None,
            )
        finally:
            self.store.delete_container(request.container_id)

    def _update_resources(
        self, request: cri.UpdateContainerResourcesRequest, context: grpc.ServicerContext
    ) -> bytes:
        ex = ContainerExecutor(self.store)

        def apply(resp: ContainerResourceHookResponse) -> None:
            ex.apply(resp, request)

        def after(_raw: bytes) -> None:
            if ex.info.HasField("pod_meta"):
                ex.checkpoint(request.container_id)

        return self._intercept(
            RequestPath.UPDATE_CONTAINER_RESOURCES,
            request,
            context,
            ex,
            lambda: ex.parse_update(request),
            apply,
            after,
        )

    # --- failover ------------------------------------------------------------------------------------------
    def failover(self, timeout: float = 10.0) -> tuple[int, int]:
        """Fill the store from the runtime's running pods and containers (Koordinator's ``failOver``)."""
        list_pods = self.runtime.unary_unary(
            f"/{RUNTIME_SERVICE}/ListPodSandbox",
            request_serializer=cri.ListPodSandboxRequest.SerializeToString,
            response_deserializer=cri.ListPodSandboxResponse.FromString,
        )
        pods = list_pods(cri.ListPodSandboxRequest(), timeout=timeout)
        for sandbox in pods.items:
            ex = PodExecutor(self.store)
            ex.parse_sandbox(sandbox)
            ex.checkpoint(sandbox.id)
        list_containers = self.runtime.unary_unary(
            f"/{RUNTIME_SERVICE}/ListContainers",
            request_serializer=cri.ListContainersRequest.SerializeToString,
            response_deserializer=cri.ListContainersResponse.FromString,
        )
        containers = list_containers(cri.ListContainersRequest(), timeout=timeout)
        known = 0
        for container in containers.containers:
            cex = ContainerExecutor(self.store)
            try:
                cex.parse_container(container)
            except ExecutorError as exc:
                log.warning("failover: %s", exc)
                continue
            cex.checkpoint(container.id)
            known += 1
        return len(pods.items), known


class _Generic(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc has no type stubs
    def __init__(self, lookup: Callable[[str], grpc.RpcMethodHandler]) -> None:
        self._lookup = lookup

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method
        return self._lookup(method)


def version(channel: grpc.Channel, timeout: float) -> cri.VersionResponse:
    """The runtime's ``Version`` (how the proxy checks that the backend speaks CRI v1)."""
    call = channel.unary_unary(
        f"/{RUNTIME_SERVICE}/Version",
        request_serializer=cri.VersionRequest.SerializeToString,
        response_deserializer=cri.VersionResponse.FromString,
    )
    result: cri.VersionResponse = call(cri.VersionRequest(version="v1"), timeout=timeout)
    return result
