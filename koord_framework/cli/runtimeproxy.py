"""``koord runtime-proxy``: a CRI proxy that calls the koordlet's runtime hooks (koord-runtime-proxy).

    koord runtime-proxy [--koord-runtimeproxy-endpoint SOCK] [--remote-runtime-service-endpoint SOCK]
                        [--remote-image-service-endpoint SOCK] [--backend-runtime-mode Containerd]
                        [--runtime-hook-server-key KEY] [--runtime-hook-server-val VALUE]
                        [--hook-config-dir DIR] [--runtime-hook-timeout DURATION]
                        [--health-address HOST:PORT] [--duration SECONDS]

Serves the CRI RuntimeService and ImageService on ``--koord-runtimeproxy-endpoint`` and forwards every
call to the runtime (``--remote-runtime-service-endpoint``; image calls to
``--remote-image-service-endpoint`` when given). The kubelet is pointed at the proxy
(``--container-runtime-endpoint=unix:///var/run/koord-runtimeproxy/runtimeproxy.sock``). Around
RunPodSandbox, StopPodSandbox, CreateContainer, StartContainer, StopContainer and UpdateContainerResources
it calls the hook servers registered in ``--hook-config-dir`` (the koordlet writes ``koordlet.json``
there) and merges their answers into the request, per each server's failure-policy. Pods labelled
``<--runtime-hook-server-key>=<--runtime-hook-server-val>`` bypass the hooks.

A long-running component (docs/components.md): ``/healthz``, ``/readyz`` (ready while serving) and
``/metrics`` on ``--health-address``. Exit status: 0 stopped on request, 1 it could not serve (a socket it
cannot listen on), 2 bad flags.
"""

from __future__ import annotations

import argparse
import sys
import threading

from koord_framework.component import ComponentRunner
from koord_framework.config.common import DurationError, parse_duration
from koord_framework.errors import KoordError
from koord_framework.health import parse_address
from koord_framework.runtimeproxy.component import (
    BACKEND_CONTAINERD,
    BACKEND_DOCKER,
    DEFAULT_RUNTIME_ENDPOINT,
    DEFAULT_RUNTIME_PROXY_ENDPOINT,
    RuntimeProxy,
    RuntimeProxyConfig,
)
from koord_framework.runtimeproxy.config import DEFAULT_HOOK_CONFIG_DIR
from koord_framework.runtimeproxy.executor import DEFAULT_SKIP_KEY, DEFAULT_SKIP_VALUE
from koord_framework.runtimeproxy.server import ProxyOptions

EXIT_BAD_INPUT = 2
DEFAULT_HEALTH_ADDRESS = "127.0.0.1:9319"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "runtime-proxy",
        help="CRI proxy in front of containerd calling the koordlet's runtime hooks (koord-runtime-proxy)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--koord-runtimeproxy-endpoint",
        default=DEFAULT_RUNTIME_PROXY_ENDPOINT,
        metavar="SOCK",
        help="the proxy's own CRI socket (default: %(default)s)",
    )
    parser.add_argument(
        "--remote-runtime-service-endpoint",
        default=DEFAULT_RUNTIME_ENDPOINT,
        metavar="SOCK",
        help="the runtime's CRI socket (default: %(default)s)",
    )
    parser.add_argument(
        "--remote-image-service-endpoint",
        default="",
        metavar="SOCK",
        help="the image service's socket (default: the runtime's)",
    )
    parser.add_argument(
        "--backend-runtime-mode",
        default=BACKEND_CONTAINERD,
        metavar="MODE",
        help=f"backend container engine ({BACKEND_CONTAINERD}|{BACKEND_DOCKER}; default: %(default)s)",
    )
    parser.add_argument(
        "--runtime-hook-server-key",
        default=DEFAULT_SKIP_KEY,
        metavar="KEY",
        help="pods labelled KEY=VALUE bypass the hook servers (default: %(default)s)",
    )
    parser.add_argument(
        "--runtime-hook-server-val",
        default=DEFAULT_SKIP_VALUE,
        metavar="VALUE",
        help="works with --runtime-hook-server-key (default: %(default)s)",
    )
    parser.add_argument(
        "--hook-config-dir",
        default=DEFAULT_HOOK_CONFIG_DIR,
        metavar="DIR",
        help="where hook servers register (*.json; default: %(default)s)",
    )
    parser.add_argument(
        "--runtime-hook-timeout",
        default="5s",
        metavar="DURATION",
        help="longest one hook call may take (default: %(default)s)",
    )
    parser.add_argument(
        "--health-address",
        default=DEFAULT_HEALTH_ADDRESS,
        metavar="HOST:PORT",
        help="serve /healthz, /readyz and /metrics here (port 0: any; default: %(default)s)",
    )
    parser.add_argument("--duration", type=float, metavar="SECONDS", help="stop after this long")
    parser.set_defaults(func=run)


def _bad_input(message: str) -> int:
    print(f"koord runtime-proxy: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    if args.backend_runtime_mode not in (BACKEND_CONTAINERD, BACKEND_DOCKER):
        return _bad_input(
            f"--backend-runtime-mode {args.backend_runtime_mode!r}: unknown runtime engine backend "
            f"(expected {BACKEND_CONTAINERD} or {BACKEND_DOCKER})"
        )
    if args.backend_runtime_mode == BACKEND_DOCKER:
        return _bad_input(
            f"--backend-runtime-mode {BACKEND_DOCKER}: not supported here (Koordinator's Docker mode proxies "
            f"dockerd's HTTP API; use {BACKEND_CONTAINERD} with any CRI v1 runtime)"
        )
    try:
        timeout = parse_duration(args.runtime_hook_timeout)
    except DurationError as exc:
        return _bad_input(f"--runtime-hook-timeout: {exc}")
    if timeout <= 0:
        return _bad_input(f"--runtime-hook-timeout {args.runtime_hook_timeout}: must be positive")
    for flag, value in (
        ("--koord-runtimeproxy-endpoint", args.koord_runtimeproxy_endpoint),
        ("--remote-runtime-service-endpoint", args.remote_runtime_service_endpoint),
    ):
        if not value:
            return _bad_input(f"{flag}: empty")
    if args.koord_runtimeproxy_endpoint == args.remote_runtime_service_endpoint:
        return _bad_input("--koord-runtimeproxy-endpoint is --remote-runtime-service-endpoint: a loop")
    try:
        parse_address(args.health_address, "--health-address")
    except KoordError as exc:
        return _bad_input(str(exc))
    config = RuntimeProxyConfig(
        proxy_endpoint=args.koord_runtimeproxy_endpoint,
        runtime_endpoint=args.remote_runtime_service_endpoint,
        image_endpoint=args.remote_image_service_endpoint,
        backend_runtime_mode=args.backend_runtime_mode,
        hook_config_dir=args.hook_config_dir,
        hook_timeout=timeout,
        options=ProxyOptions(skip_key=args.runtime_hook_server_key, skip_value=args.runtime_hook_server_val),
    )
    runner = ComponentRunner(
        "runtime-proxy",
        lambda registry: RuntimeProxy(config, registry),
        address=args.health_address,
        flag="--health-address",
    )
    print(
        f"koord runtime-proxy: serving /healthz, /readyz and /metrics on port {runner.port}", file=sys.stderr
    )
    return runner.run(stop, duration=args.duration)
