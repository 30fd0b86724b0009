"""``koord runtime-proxy`` as a ``ComponentRunner`` component (docs/components.md).

``run`` waits for the runtime to answer ``Version`` (unready meanwhile, retrying with backoff and saying so
once), fills the store from the running pods (failover), then listens on the proxy socket and serves until
stopped. ``ready()`` is true while it serves. A hook server's trouble never ends the component: only a
socket it cannot listen on does (exit 1 with the reason).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from prometheus_client import CollectorRegistry, Gauge

from koord_framework.runtimeproxy.config import DEFAULT_HOOK_CONFIG_DIR, HookConfigDir
from koord_framework.runtimeproxy.dispatcher import DEFAULT_HOOK_TIMEOUT, HookDispatcher
from koord_framework.runtimeproxy.server import CRIProxyServer, ProxyOptions, details_of, dial, version
from koord_framework.runtimeproxy.store import MetaStore

__all__ = [
    "BACKEND_CONTAINERD",
    "BACKEND_DOCKER",
    "DEFAULT_RUNTIME_ENDPOINT",
    "DEFAULT_RUNTIME_PROXY_ENDPOINT",
    "RuntimeProxy",
    "RuntimeProxyConfig",
]

log = logging.getLogger(__name__)

DEFAULT_RUNTIME_PROXY_ENDPOINT = "/var/run/koord-runtimeproxy/runtimeproxy.sock"
DEFAULT_RUNTIME_ENDPOINT = "/var/run/containerd/containerd.sock"
BACKEND_CONTAINERD = "Containerd"
BACKEND_DOCKER = "Docker"


@dataclass(frozen=True, slots=True)
class RuntimeProxyConfig:
    """The flags of ``koord runtime-proxy`` (Koordinator's ``cmd/koord-runtime-proxy/options``)."""

    proxy_endpoint: str = DEFAULT_RUNTIME_PROXY_ENDPOINT
    runtime_endpoint: str = DEFAULT_RUNTIME_ENDPOINT
    image_endpoint: str = ""
    """Empty: the runtime endpoint (containerd serves both services on one socket)."""
    backend_runtime_mode: str = BACKEND_CONTAINERD
    hook_config_dir: str = DEFAULT_HOOK_CONFIG_DIR
    hook_timeout: float = DEFAULT_HOOK_TIMEOUT
    options: ProxyOptions = field(default_factory=ProxyOptions)
    backoff: tuple[float, float] = (0.5, 10.0)
    """Retry delays (first, max) while the runtime does not answer ``Version``."""


class RuntimeProxy:
    """The component: built by the runner, serves until ``stop``."""

    def __init__(self, config: RuntimeProxyConfig, registry: CollectorRegistry) -> None:
        if config.backend_runtime_mode != BACKEND_CONTAINERD:
            # The runner turns this into "koord runtime-proxy: fatal: ..." and exit 1.
            raise ValueError(
                f"--backend-runtime-mode {config.backend_runtime_mode!r}: only {BACKEND_CONTAINERD!r} "
                f"(any CRI v1 runtime) is served; Koordinator's Docker mode proxies dockerd's HTTP API, "
                f"not ported"
            )
        self.config = config
        self.store = MetaStore()
        self.dispatcher = HookDispatcher(
            HookConfigDir(config.hook_config_dir), timeout=config.hook_timeout, registry=registry
        )
        self.runtime = dial(config.runtime_endpoint)
        image = config.image_endpoint or config.runtime_endpoint
        self.image = self.runtime if image == config.runtime_endpoint else dial(image)
        self.server = CRIProxyServer(self.runtime, self.image, self.dispatcher, self.store, config.options)
        self._serving = threading.Event()
        gauge = Gauge(
            "koord_runtime_proxy_store_items",
            "Pods and containers the proxy knows",
            ["kind"],
            registry=registry,
        )
        gauge.labels("pod").set_function(lambda: self.store.sizes()[0])
        gauge.labels("container").set_function(lambda: self.store.sizes()[1])

    def run(self, stop: threading.Event) -> None:
        if not self._await_runtime(stop):
            return
        pods, containers = self.server.failover()
        log.info("failover: %d pods and %d containers known from the runtime", pods, containers)
        endpoint = Path(self.config.proxy_endpoint)
        endpoint.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            endpoint.unlink()
        self.server.start(str(endpoint))
        self._serving.set()
        log.info(
            "koord runtime-proxy: serving CRI on %s, forwarding to %s; hook servers from %s",
            endpoint,
            self.config.runtime_endpoint,
            self.config.hook_config_dir,
        )
        stop.wait()

    def _await_runtime(self, stop: threading.Event) -> bool:
        delay, ceiling = self.config.backoff
        said = False
        while not stop.is_set():
            try:
                v = version(self.runtime, timeout=max(delay, 2.0))
            except grpc.RpcError as err:
                if not said:
                    log.warning(
                        "waiting for the runtime at %s to answer CRI v1 Version: %s",
                        self.config.runtime_endpoint,
                        details_of(err),
                    )
                    said = True
            else:
                log.info("runtime %s %s (CRI %s)", v.runtime_name, v.runtime_version, v.runtime_api_version)
                return True
            stop.wait(delay)
            delay = min(delay * 2, ceiling)
        return False

    def ready(self) -> bool:
        return self._serving.is_set()

    def close(self) -> None:
        self._serving.clear()
        self.server.stop(grace=1.0)
        self.dispatcher.close()
        if self.image is not self.runtime:
            self.image.close()
        self.runtime.close()
        with contextlib.suppress(OSError):
            os.unlink(self.config.proxy_endpoint)
