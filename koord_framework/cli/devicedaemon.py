"""``koord device-daemon``: discover the node's GPUs and RDMA NICs and write its ``Device`` object.

    koord device-daemon --node-name NAME [--cluster PATH... | --kubeconfig [FILE]] [--host-root DIR]
                        [--oneshot] [--sleep-interval DURATION] [--no-timestamp]
                        [--output-file FILE] [--output json|yaml] [--no-nvml]
                        [--health-address HOST:PORT] [--duration SECONDS]

Koordinator's koord-device-daemon, for NVIDIA GPUs and RDMA NICs: every ``--sleep-interval`` (default 60s)
the host under ``--host-root`` is scanned -- GPUs through NVML (``nvidia-ml-py``, loaded only if present)
or, without the driver, from sysfs PCI; RDMA NICs from ``/sys/class/infiniband`` with their SR-IOV VFs --
and the node's ``Device`` (scheduling.koordinator.sh/v1alpha1) plus the ``node.koordinator.sh/gpu-vendor``,
``gpu-model`` and ``gpu-driver-version`` labels of the Device and the Node are written through the cluster
(manifests with ``--cluster``, a real API server with ``--kubeconfig``; neither: only printed). Each round
is printed (to ``--output-file`` when given, replacing its content) with a timestamp unless
``--no-timestamp``. ``--oneshot`` scans once and exits. A device or NVML failure marks devices unhealthy and
is reported, and a failed write is retried on the next round; neither stops the daemon.

Without ``--oneshot`` the daemon is a long-running component (``koord_framework.component``, see
docs/components.md): ``/healthz``, ``/readyz`` and ``/metrics`` on ``--health-address``; ready while its
last round wrote the Device (or, without a cluster, printed it). When the API server does not serve the
Device CRD the daemon waits, unready, without a time limit, logging once how to install it (Koordinator's
device reporter in the koordlet retries every round and never exits). An unexpected exception in its loop
ends it: ``/healthz`` fails, then ``koord device-daemon: fatal: <cause>`` and exit 1.

Exit status: 0 ok (stopped on request), 1 the oneshot round failed to write or the loop died, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import yaml

from koord_framework.cluster.kinds import unknown_kind
from koord_framework.cluster.port import ClusterPort
from koord_framework.cluster.served import install_hint
from koord_framework.component import ComponentRunner
from koord_framework.devices.daemon import DeviceDaemon, SyncResult
from koord_framework.devices.nvml import NVML, PynvmlNVML
from koord_framework.errors import KindNotServedError
from koord_framework.health import parse_address
from koord_framework.koordlet.hostpaths import HostPaths

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "device-daemon",
        help="discover GPUs/RDMA NICs and write the node's Device object (koord-device-daemon)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--node-name", metavar="NAME", help="the node (default: $NODE_NAME)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--cluster", action="append", metavar="PATH", help="manifest file or folder")
    source.add_argument(
        "--kubeconfig", nargs="?", const="", metavar="FILE", help="a real cluster (no FILE: default)"
    )
    parser.add_argument("--host-root", metavar="DIR", default="/", help="where the host's / is (default: /)")
    parser.add_argument("--oneshot", action="store_true", help="scan and report once, then exit")
    parser.add_argument(
        "--sleep-interval", default="60s", metavar="DURATION", help="time between scans (default: 60s)"
    )
    parser.add_argument("--no-timestamp", action="store_true", help="leave the timestamp out of the output")
    parser.add_argument("--output-file", metavar="FILE", help="write each round here instead of stdout")
    parser.add_argument("--output", "-o", choices=("json", "yaml"), default="json")
    parser.add_argument("--no-nvml", action="store_true", help="do not use NVML (sysfs PCI only)")
    parser.add_argument(
        "--health-address",
        default="0.0.0.0:9318",
        metavar="HOST:PORT",
        help="serve /healthz, /readyz and /metrics here unless --oneshot (port 0: any; default: %(default)s)",
    )
    parser.add_argument(
        "--duration", type=float, metavar="SECONDS", help="stop after this long (tests, demos)"
    )
    parser.set_defaults(func=run)


def parse_duration(text: str) -> float:
    """``60s``, ``5m``, ``1h``, ``500ms`` or plain seconds."""
    for suffix, scale in (("ms", 0.001), ("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if text.endswith(suffix):
            value = float(text[: -len(suffix)]) * scale
            break
    else:
        value = float(text)
    if value <= 0:
        raise ValueError("must be positive")
    return value


def _bad_input(message: str) -> int:
    print(f"koord device-daemon: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _cluster(args: argparse.Namespace) -> ClusterPort | None:
    if args.cluster:
        from koord_framework.cluster.memory import MemoryCluster

        return MemoryCluster.from_paths(args.cluster)
    if args.kubeconfig is not None:
        from koord_framework.cluster.kube.adapter import KubeCluster

        return KubeCluster.from_kubeconfig(args.kubeconfig or None, component="koord-device-daemon")
    return None


def _emit(result: SyncResult, args: argparse.Namespace) -> None:
    data = result.as_dict(timestamp=not args.no_timestamp)
    text = (
        json.dumps(data, indent=2) + "\n"
        if args.output == "json"
        else yaml.safe_dump(data, sort_keys=False, explicit_start=True)
    )
    if args.output_file:
        path = Path(args.output_file)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # readers never see half a round
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def run(args: argparse.Namespace, *, stop: threading.Event | None = None, nvml: NVML | None = None) -> int:
    """The command; ``stop`` ends the loop when set, ``nvml`` replaces the real NVML (tests)."""
    node = args.node_name or os.environ.get("NODE_NAME", "")
    if not node:
        return _bad_input("--node-name (or $NODE_NAME) is required")
    try:
        interval = parse_duration(args.sleep_interval)
    except ValueError as err:
        return _bad_input(f"--sleep-interval {args.sleep_interval!r}: {err}")
    root = Path(args.host_root)
    if not root.is_dir():
        return _bad_input(f"--host-root {root}: not a directory")
    if not args.oneshot:
        parse_address(args.health_address, "--health-address")  # a typo fails before the cluster is read
    cluster = _cluster(args)
    if cluster is not None and DEVICE_KIND not in cluster.kinds:
        # The kind is koord-plugin-deviceshare's (ADR 0004): without it no round could ever write.
        print(f"koord device-daemon: error: {unknown_kind(DEVICE_KIND, cluster.kinds)}", file=sys.stderr)
        return EXIT_PROBLEM
    backend = None if args.no_nvml else (nvml if nvml is not None else PynvmlNVML())
    clock = cluster.clock.now if cluster is not None else _wall_clock
    daemon = DeviceDaemon(node, cluster, HostPaths.under(root), backend, clock)
    stop = stop if stop is not None else threading.Event()

    def on_result(result: SyncResult) -> None:
        _emit(result, args)
        for error in result.errors:
            print(f"koord device-daemon: {error}", file=sys.stderr)

    if args.oneshot:
        results: list[SyncResult] = []

        def record(result: SyncResult) -> None:
            results.append(result)
            on_result(result)

        daemon.run(stop, interval, record, oneshot=True)
        return EXIT_PROBLEM if results and results[-1].action == "failed" else EXIT_OK
    runner = ComponentRunner(
        "device-daemon",
        lambda _registry: DeviceDaemonComponent(daemon, interval, on_result),
        address=args.health_address,
        flag="--health-address",
        cluster=cluster,
    )
    print(
        f"koord device-daemon: serving /healthz, /readyz and /metrics on port {runner.port}", file=sys.stderr
    )
    try:
        return runner.run(stop, duration=args.duration)
    finally:
        close = getattr(cluster, "close", None)  # a real cluster's connections
        if callable(close):
            close()


DEVICE_KIND = "Device"


class DeviceDaemonComponent:
    """The daemon's loop as a ``koord_framework.component.Component``: ready while its last round wrote the
    node's Device (or printed it, without a cluster)."""

    def __init__(
        self, daemon: DeviceDaemon, interval: float, on_result: Callable[[SyncResult], None]
    ) -> None:
        cluster = daemon.cluster
        if cluster is not None and not cluster.serves(DEVICE_KIND):
            # The runner waits, unready, and builds again once the CRD is served (docs/components.md).
            raise KindNotServedError(
                DEVICE_KIND, f"the API server does not serve {DEVICE_KIND}; {install_hint(DEVICE_KIND)}"
            )
        self.daemon, self.interval, self.on_result = daemon, interval, on_result
        self._ready = threading.Event()

    def _observe(self, result: SyncResult) -> None:
        if result.action == "failed":
            self._ready.clear()
        else:
            self._ready.set()
        self.on_result(result)

    def run(self, stop: threading.Event) -> None:
        self.daemon.run(stop, self.interval, self._observe)

    def ready(self) -> bool:
        return self._ready.is_set()

    def close(self) -> None:
        """Nothing to release: the daemon holds no thread or socket of its own (the cluster is closed by
        the command)."""


def _wall_clock() -> float:
    import time

    return time.time()
