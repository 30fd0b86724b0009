"""``koord koordlet``'s runtime hook server flags (Koordinator's ``runtimehooks.Config.InitFlags``).

The long-running koordlet serves ``RuntimeHookService`` whenever it has runtime hooks enabled
(``runtimeHooks.enabled`` of ``--config``) and ``--runtime-hooks-addr`` is not empty. Koordinator's
defaults are paths inside the koordlet's container (``/host-var-run-koordlet/koordlet.sock``,
``/host-etc-hookserver/``: host paths mounted there); koord runs on the host or with the host's ``/`` at
``--host-root``, so its defaults are the host paths under ``--host-root``: the socket at
``<host-root>/var/run/koordlet/koordlet.sock`` and the registration in
``<host-root>/etc/runtime/hookserver.d``, and the registered ``remote-endpoint`` is
``/var/run/koordlet/koordlet.sock`` (the proxy's view).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from koord_framework.koordlet.runtimehooks.protocol import FailurePolicy
from koord_framework.koordlet.runtimehooks.registration import DEFAULT_CONFIG_DIR
from koord_framework.koordlet.runtimehooks.server import DEFAULT_HOOK_TIMEOUT_SECONDS, HookServerOptions

__all__ = ["HOST_ENDPOINT", "add_flags", "server_options"]

HOST_ENDPOINT = "/var/run/koordlet/koordlet.sock"
"""Koordinator's ``--runtime-hooks-host-endpoint`` default."""
_UNSET = object()


def add_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("runtime hook server (RuntimeHookService for koord-runtime-proxy)")
    group.add_argument(
        "--runtime-hooks-network", default="unix", choices=("unix",), help="rpc server network (only unix)"
    )
    group.add_argument(
        "--runtime-hooks-addr",
        metavar="PATH",
        help="the socket to serve on; empty: do not serve "
        "(default: <host-root>/var/run/koordlet/koordlet.sock)",
    )
    group.add_argument(
        "--runtime-hooks-host-endpoint",
        default=HOST_ENDPOINT,
        metavar="PATH",
        help=f"the socket as the proxy sees it, registered as remote-endpoint (default: {HOST_ENDPOINT})",
    )
    group.add_argument(
        "--runtime-hooks-failure-policy",
        default="Ignore",
        choices=("Fail", "Ignore"),
        help="what the proxy does when a hook call fails, registered as failure-policy (default: Ignore)",
    )
    group.add_argument(
        "--runtime-hooks-plugin-failure-policy",
        choices=("Fail", "Ignore"),
        help="what a failing hook does to the request "
        "(default: runtimeHooks.failurePolicy of --config, else Ignore)",
    )
    group.add_argument(
        "--runtime-hooks-config-path",
        metavar="DIR",
        help=f"where koordlet.json is registered (default: <host-root>{DEFAULT_CONFIG_DIR})",
    )
    group.add_argument(
        "--runtime-hooks-disable-stages",
        default="",
        metavar="STAGES",
        help="comma-separated stages not to register (e.g. PreStartContainer,PostStopContainer)",
    )
    group.add_argument(
        "--runtime-hooks-timeout",
        type=float,
        default=DEFAULT_HOOK_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"how long one request's hooks may run (koord's; default: {DEFAULT_HOOK_TIMEOUT_SECONDS:g})",
    )


def server_options(args: argparse.Namespace) -> HookServerOptions | None:
    """The hook server's options from the flags; None when ``--runtime-hooks-addr`` is empty."""
    root = Path(args.host_root or "/")
    address = args.runtime_hooks_addr
    if address is None:
        address = str(root / HOST_ENDPOINT.lstrip("/"))
    if not address:
        return None
    config_dir = args.runtime_hooks_config_path
    if config_dir is None:
        config_dir = str(root / DEFAULT_CONFIG_DIR.lstrip("/"))
    if args.runtime_hooks_timeout <= 0:
        raise ValueError(f"--runtime-hooks-timeout must be > 0, got {args.runtime_hooks_timeout:g}")
    return HookServerOptions(
        network=args.runtime_hooks_network,
        address=address,
        host_endpoint=args.runtime_hooks_host_endpoint,
        failure_policy=FailurePolicy(args.runtime_hooks_failure_policy),
        config_dir=config_dir or None,
        disable_stages=frozenset(
            s.strip() for s in args.runtime_hooks_disable_stages.split(",") if s.strip()
        ),
        hook_timeout_seconds=args.runtime_hooks_timeout,
    )
