"""Which hook server is called for which CRI call (Koordinator's ``runtimeproxy/dispatcher`` and ``client``).

For an intercepted call and a stage (before or after the runtime call), every registered hook server whose
``runtime-hooks`` holds a hook type occurring on that call is called, in the order of the registration
files' names. Koordinator calls only the first match ("TODO: multi hook server to merge response"); koord
calls each in turn and merges each answer before building the next request, which is the same when one
server (the koordlet) is registered.

One client (one gRPC channel) per endpoint, kept in a small LRU as Koordinator does. Every call is bounded
by the hook timeout (and by what is left of the kubelet's own deadline).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

from koord_framework.koordlet.runtimehooks.client import (
    HookCallError,
    HookRequest,
    HookResponse,
    RuntimeHookClient,
)
from koord_framework.koordlet.runtimehooks.protocol import FailurePolicy, Stage
from koord_framework.runtimeproxy.config import HookConfigDir, HookServerConfig, RequestPath

__all__ = ["DEFAULT_HOOK_TIMEOUT", "HookDispatcher", "HookFailure", "HookRefused"]

log = logging.getLogger(__name__)

DEFAULT_HOOK_TIMEOUT = 5.0
"""Seconds one hook call may take (Koordinator passes the kubelet's context through, whose CRI timeout is
2 minutes; a hook server that hangs would hang every pod start that long)."""
CLIENT_CACHE_SIZE = 10


@dataclass(frozen=True, slots=True)
class HookFailure:
    """One failed hook call: names the call, the pod and container, the hook and the server."""

    call: str
    where: str
    stage: Stage
    endpoint: str
    source: str
    policy: FailurePolicy
    error: str

    def __str__(self) -> str:
        policy = self.policy.value or "None"
        return (
            f"{self.call} for {self.where}: runtime hook {self.stage.value} on hook server {self.endpoint} "
            f"(registered by {self.source}, failure-policy {policy}) failed: {self.error}"
        )


class HookRefused(Exception):
    """A hook failed whose server's failure policy is ``Fail``: the CRI call is refused."""

    def __init__(self, failure: HookFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


class HookDispatcher:
    """Calls the registered hook servers; thread-safe."""

    def __init__(
        self,
        configs: HookConfigDir,
        *,
        timeout: float = DEFAULT_HOOK_TIMEOUT,
        client_factory: Callable[[str], RuntimeHookClient] | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.configs = configs
        self.timeout = timeout
        self._factory = client_factory or (lambda endpoint: RuntimeHookClient(endpoint, timeout=timeout))
        self._clients: OrderedDict[str, RuntimeHookClient] = OrderedDict()
        self._lock = threading.Lock()
        reg = registry if registry is not None else CollectorRegistry()
        self._latency = Histogram(
            "koord_runtime_proxy_hook_duration_milliseconds",
            "Time one call to a runtime hook server took, by hook and status.",
            ["hook", "status"],
            buckets=(0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000, 5000),
            registry=reg,
        )
        self._failures = Counter(
            "koord_runtime_proxy_hook_failures",
            "Failed runtime hook calls, by hook and the failure policy that decided.",
            ["hook", "policy"],
            registry=reg,
        )

    def matching(self, path: RequestPath, *, pre: bool) -> list[tuple[HookServerConfig, Stage]]:
        out: list[tuple[HookServerConfig, Stage]] = []
        for server in self.configs.servers():
            out.extend((server, stage) for stage in server.stages_on(path, pre=pre))
        return out

    def call(
        self,
        server: HookServerConfig,
        stage: Stage,
        request: HookRequest,
        *,
        call: str,
        where: str,
        deadline: float | None = None,
    ) -> HookResponse | HookFailure:
        """One hook call; a failure comes back as a ``HookFailure`` (logged and counted) -- the caller
        raises ``HookRefused`` for it when ``failure.policy`` is ``Fail``."""
        timeout = self.timeout
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - time.monotonic()))
        start = time.perf_counter()
        try:
            response = self._client(server.remote_endpoint).call(stage, request, timeout=timeout)
        except HookCallError as exc:
            error = f"{exc.code}: {exc.details}"
        except Exception as exc:  # a bug or a bad answer must not take the proxy down
            error = f"{type(exc).__name__}: {exc}"
        else:
            self._latency.labels(stage.value, "succeeded").observe((time.perf_counter() - start) * 1e3)
            return response
        self._latency.labels(stage.value, "failed").observe((time.perf_counter() - start) * 1e3)
        failure = HookFailure(
            call, where, stage, server.remote_endpoint, server.source, server.failure_policy, error
        )
        self._failures.labels(stage.value, server.failure_policy.value or "None").inc()
        log.warning("%s", failure)
        return failure

    def _client(self, endpoint: str) -> RuntimeHookClient:
        with self._lock:
            client = self._clients.get(endpoint)
            if client is not None:
                self._clients.move_to_end(endpoint)
                return client
            client = self._factory(endpoint)
            self._clients[endpoint] = client
            while len(self._clients) > CLIENT_CACHE_SIZE:
                _old, evicted = self._clients.popitem(last=False)
                evicted.close()
            return client

    def close(self) -> None:
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            try:
                client.close()
            except Exception as exc:
                log.debug("closing hook client: %s", exc)
