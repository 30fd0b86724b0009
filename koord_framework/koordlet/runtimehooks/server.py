"""The koordlet's hook server: ``RuntimeHookService`` over a unix socket (Koordinator's ``proxyserver``).

koord-runtime-proxy (or any CRI proxy speaking ``runtime.v1alpha1``) calls it around the CRI calls it
intercepts. Each rpc turns the proto request into the extension point's typed request
(``runtimehooks.convert``), runs the stage's hooks through the koordlet's ``HookManager``, and answers with
the request's values and the hooks' edits laid over them.

What can go wrong, and who decides (every failure is logged once, naming pod, container and hook):

* a hook raises (a malformed ``resource-status`` / ``device-allocated`` annotation, a bug): the hook's
  failure policy (its ``failurePolicy`` arg, else ``--runtime-hooks-plugin-failure-policy``). ``Fail``:
  the rpc fails with ``INTERNAL`` and the hook's message; ``Ignore``: the hook's edits are dropped, the
  other hooks' edits are answered;
* the hooks of one request run past ``hook_timeout_seconds``: the policy of the hook still running.
  ``Fail``: the rpc fails with ``DEADLINE_EXCEEDED``; ``Ignore``: the request's own values are answered
  (nothing changed; the late result is thrown away, never half-applied);
* anything else inside the server (a request that cannot be converted): ``INTERNAL`` with the cause --
  the proxy then applies the *server's* failure policy (``--runtime-hooks-failure-policy``, written into
  the registration file).

The server never dies of a request. ``start()`` listens (a stale socket file is removed first, as
Koordinator does) and writes the registration file; ``stop()`` stops serving and removes the socket.
"""

from __future__ import annotations

import logging
import os
import queue
import stat
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from koord_framework.koordlet.executor import CgroupUpdate, ResourceExecutor
from koord_framework.koordlet.runtimehooks import convert
from koord_framework.koordlet.runtimehooks.manager import HookFailed, HookFailure, HookManager, HookProgress
from koord_framework.koordlet.runtimehooks.proto import api_pb2, api_pb2_grpc
from koord_framework.koordlet.runtimehooks.protocol import FailurePolicy, PodSandboxResponse, Stage
from koord_framework.koordlet.runtimehooks.registration import (
    DEFAULT_CONFIG_DIR,
    REGISTRATION_FILE,
    HookServerRegistration,
    served_stages,
)

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_HOOK_TIMEOUT_SECONDS", "HookServer", "HookServerOptions"]

DEFAULT_HOOK_TIMEOUT_SECONDS = 2.0
"""Koordinator has no timeout of its own here (the proxy's call carries the kubelet's 2-minute CRI
deadline); koord bounds one request's hooks so a hung hook cannot hold a pod's creation, well below the
client's default 5 s so that the policy-driven answer arrives first."""

OWNER = "RuntimeHookServer"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class HookServerOptions:
    """Koordinator's koordlet runtime-hooks flags (``pkg/koordlet/runtimehooks/config.go``)."""

    network: str = "unix"
    """``--runtime-hooks-network``: only ``unix`` is served."""
    address: str = "/host-var-run-koordlet/koordlet.sock"
    """``--runtime-hooks-addr``: where the server listens (inside the koordlet's container)."""
    host_endpoint: str = "/var/run/koordlet/koordlet.sock"
    """``--runtime-hooks-host-endpoint``: the same socket as the proxy sees it (``remote-endpoint``)."""
    failure_policy: FailurePolicy = FailurePolicy.IGNORE
    """``--runtime-hooks-failure-policy``: what the proxy does when a call fails (registration file)."""
    config_dir: str | None = DEFAULT_CONFIG_DIR
    """``--runtime-hooks-config-path``: where ``koordlet.json`` is written; None writes nothing."""
    disable_stages: frozenset[str] = field(default_factory=frozenset)
    """``--runtime-hooks-disable-stages``: stages left out of the registration (the proxy skips them)."""
    hook_timeout_seconds: float = DEFAULT_HOOK_TIMEOUT_SECONDS
    """koord's: how long one request's hooks may run (see the module docstring)."""
    max_workers: int = 4
    """Concurrent rpcs (the kubelet creates a node's pods a few at a time)."""


class HookServer:
    """Serves the koordlet's ``HookManager`` over gRPC. Thread-safe; start once, stop once."""

    def __init__(
        self,
        manager: HookManager,
        options: HookServerOptions | None = None,
        *,
        executor: ResourceExecutor | None = None,
    ) -> None:
        self.manager = manager
        self.options = options or HookServerOptions()
        if self.options.network != "unix":
            raise ValueError(f"--runtime-hooks-network {self.options.network!r}: only unix is supported")
        if self.options.hook_timeout_seconds <= 0:
            raise ValueError(f"hook timeout must be > 0s, got {self.options.hook_timeout_seconds}")
        self.stages = served_stages(self.options.disable_stages)
        self.executor = executor
        self._server: Any = None
        self._serving = threading.Event()
        # Hooks run here, not on the gRPC worker, so a hung hook can be timed out; sized above the rpc
        # workers so a few hung hooks leave room for the next requests.
        self._runner = _HookWorkers(self.options.max_workers * 2)
        self.registration_path: Path | None = None

    # --- lifecycle -------------------------------------------------------------------------------------
    @property
    def serving(self) -> bool:
        return self._serving.is_set()

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("hook server already started")
        address = self.options.address
        _remove_stale_socket(address)
        Path(address).parent.mkdir(parents=True, exist_ok=True)
        server = grpc.server(ThreadPoolExecutor(self.options.max_workers, thread_name_prefix="hookserver"))
        # The generated glue has no annotations (protoc writes none for it).
        api_pb2_grpc.add_RuntimeHookServiceServicer_to_server(_Servicer(self), server)  # type: ignore[no-untyped-call]
        if server.add_insecure_port("unix:" + os.path.abspath(address)) == 0:
            raise OSError(f"runtime hook server: cannot listen on {address}")
        server.start()
        self._server = server
        self._serving.set()
        log.info("runtime hook server serving on %s (stages %s)", address, ", ".join(self.stages))
        if self.options.config_dir is not None:
            self.registration_path = self.registration().write(self.options.config_dir, REGISTRATION_FILE)
            log.info("runtime hook server registered in %s", self.registration_path)

    def registration(self) -> HookServerRegistration:
        return HookServerRegistration(
            self.options.host_endpoint, self.options.failure_policy, tuple(self.stages)
        )

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving (in-flight rpcs get ``grace`` seconds) and remove the socket. The registration file
        stays, as Koordinator's does: the proxy then finds the server unavailable and applies its failure
        policy rather than silently skipping hooks."""
        server, self._server = self._server, None
        self._serving.clear()
        if server is not None:
            server.stop(grace).wait(grace + 1.0)
        self._runner.shutdown()
        _remove_stale_socket(self.options.address)

    def __enter__(self) -> HookServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- one rpc ---------------------------------------------------------------------------------------
    def pod_hook(
        self, stage: Stage, request: api_pb2.PodSandboxHookRequest
    ) -> api_pb2.PodSandboxHookResponse:
        """Serve one pod-level rpc; raises ``RpcFailure`` for the servicer to turn into a gRPC status."""
        if not self._has_hooks(stage):
            return convert.passthrough_pod_response(request)
        typed = convert.pod_request(request)
        progress = HookProgress()
        outcome = self._run(
            lambda: self.manager.run_pod(stage, typed, progress=progress),
            progress,
            stage,
            typed.pod_meta.key,
            "",
        )
        if outcome is None:
            return convert.passthrough_pod_response(request)
        self._write_ext(typed.cgroup_parent, outcome.response, typed.pod_meta.key)
        return convert.pod_response(request, outcome.response)

    def container_hook(
        self, stage: Stage, request: api_pb2.ContainerResourceHookRequest
    ) -> api_pb2.ContainerResourceHookResponse:
        if not self._has_hooks(stage):
            return convert.passthrough_container_response(request)
        typed = convert.container_request(request)
        progress = HookProgress()
        outcome = self._run(
            lambda: self.manager.run_container(stage, typed, progress=progress),
            progress,
            stage,
            typed.pod_meta.key,
            typed.container_meta.name,
        )
        if outcome is None:
            return convert.passthrough_container_response(request)
        return convert.container_response(request, outcome.response)

    def _has_hooks(self, stage: Stage) -> bool:
        """Whether any registered hook serves ``stage`` (the Post* stages mostly have none: answered
        without a trip through the hook workers)."""
        return bool(self.manager.hooks_for(stage))

    def _run(
        self, work: Callable[[], T], progress: HookProgress, stage: Stage, pod: str, container: str
    ) -> T | None:
        """Run the hooks within the timeout. None: they timed out under ``Ignore`` (answer unchanged)."""
        future: Future[T] = self._runner.submit(work)
        try:
            return future.result(timeout=self.options.hook_timeout_seconds)
        except HookFailed as failed:
            raise RpcFailure(grpc.StatusCode.INTERNAL, str(failed.failure)) from failed
        except FutureTimeout:
            # No hook running: queued behind busy (hung) hook workers, or between two hooks. The default
            # policy decides.
            hook = progress.current
            policy = self.manager.policy_of(self.manager.hook(hook)) if hook else self.manager.failure_policy
            failure = HookFailure(
                hook or "(none running: queued behind busy hook workers or between hooks)",
                stage.value,
                pod,
                container,
                f"timed out after {self.options.hook_timeout_seconds:g}s",
                policy,
            )
            log.warning("%s (failure policy %r)", failure, policy.value)
            if policy.stops:
                raise RpcFailure(grpc.StatusCode.DEADLINE_EXCEEDED, str(failure)) from None
            return None

    def _write_ext(self, cgroup_dir: str, response: PodSandboxResponse, pod: str) -> None:
        """The pod-level values go to the pod's cgroup directly (the kubelet created it before
        RunPodSandbox), as Koordinator's ``injectForExt`` does: group identity and cpu.idle are no CRI
        fields, and the pod's shares, quota and memory limit are the kubelet's cgroup, which the runtime
        never writes (the sandbox's own cgroup is below it). A failed write is logged; the reconciler
        converges it later."""
        res = response.resources
        if self.executor is None or not cgroup_dir:
            return
        values = (
            ("cpu.bvt_warp_ns", res.cpu_bvt),
            ("cpu.idle", res.cpu_idle),
            ("cpu.shares", res.cpu_shares),
            ("cpu.cfs_quota_us", res.cpu_quota),
            ("memory.limit_in_bytes", res.memory_limit_in_bytes),
        )
        updates = [
            CgroupUpdate(name, cgroup_dir, str(value), reason=f"pod {pod}", owner=OWNER)
            for name, value in values
            if value is not None
        ]
        for result in self.executor.update_batch(updates):
            if not result.ok:
                log.info("runtime hook server: pod %s: %s", pod, result)


class _HookWorkers:
    """Daemon threads running hook chains. Not a ``ThreadPoolExecutor``: the interpreter joins those at
    exit, so one hook hung for good would keep a stopped koordlet from ever exiting."""

    def __init__(self, workers: int) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"runtimehook-{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._queue.put((future, fn))
        return future

    def shutdown(self) -> None:
        for _ in self._threads:
            self._queue.put(None)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the waiting rpc, which applies the policy
                future.set_exception(exc)


class RpcFailure(Exception):
    """A request the server refuses: the status code and the message naming pod, container and hook."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


_POD_RPCS = {
    "PreRunPodSandboxHook": Stage.PRE_RUN_POD_SANDBOX,
    "PostStopPodSandboxHook": Stage.POST_STOP_POD_SANDBOX,
}
_CONTAINER_RPCS = {
    "PreCreateContainerHook": Stage.PRE_CREATE_CONTAINER,
    "PreStartContainerHook": Stage.PRE_START_CONTAINER,
    "PostStartContainerHook": Stage.POST_START_CONTAINER,
    "PostStopContainerHook": Stage.POST_STOP_CONTAINER,
    "PreUpdateContainerResourcesHook": Stage.PRE_UPDATE_CONTAINER_RESOURCES,
}


class _Servicer(api_pb2_grpc.RuntimeHookServiceServicer):
    """The gRPC face: one method per rpc, each a thin call into ``HookServer``; never lets an exception
    out unconverted (grpc would answer UNKNOWN without the names)."""

    def __init__(self, server: HookServer) -> None:
        self._server = server
        for rpc, stage in _POD_RPCS.items():
            setattr(self, rpc, self._bind(stage, server.pod_hook))
        for rpc, stage in _CONTAINER_RPCS.items():
            setattr(self, rpc, self._bind(stage, server.container_hook))

    def _bind(self, stage: Stage, serve: Callable[[Stage, Any], Any]) -> Callable[[Any, Any], Any]:
        def method(request: Any, context: Any) -> Any:
            try:
                return serve(stage, request)
            except RpcFailure as failure:
                context.abort(failure.code, str(failure))
            except Exception as exc:  # the server never dies of a request
                where = _where(request)
                log.exception("runtime hook server: %s for %s failed", stage.value, where)
                context.abort(
                    grpc.StatusCode.INTERNAL, f"runtime hook server {stage.value} for {where}: {exc}"
                )
            raise AssertionError("unreachable: context.abort raises")

        return method


def _where(request: Any) -> str:
    meta = getattr(request, "pod_meta", None)
    pod = f"pod {meta.namespace}/{meta.name}" if meta is not None else "pod ?"
    container = getattr(request, "container_meta", None)
    return pod + (f" container {container.name}" if container is not None and container.name else "")


def _remove_stale_socket(address: str) -> None:
    """Remove a socket file left behind (Koordinator unlinks before listening); never a regular file."""
    try:
        if stat.S_ISSOCK(os.lstat(address).st_mode):
            os.unlink(address)
    except FileNotFoundError:
        pass
