"""``koord koordlet``: run the node agent for one node.

    koord koordlet --node-name NAME (--cluster PATH... | --kubeconfig [FILE]) [--host-root DIR]
                   [--config FILE] [--once] [--duration SECONDS] [--health-address HOST:PORT]
                   [--output text|json|yaml] [--dry-run] [--v N]

The agent reads the host under ``--host-root`` (default ``/``; the configuration's ``hostPaths`` are taken
relative to it), the node's pods, NodeSLO, NodeResourceTopology and NodeMetric from the cluster (manifests
loaded into the embedded cluster with ``--cluster``, or a real API server with ``--kubeconfig``), and runs
the QoS strategies the configuration names (default: ``BECPUSuppress`` and ``CPUBurst``, Koordinator's
default-on features, if installed).

``--dry-run`` decides and prints as usual but writes nothing: no cgroup or resctrl file, no eviction, no
NodeMetric or NodeResourceTopology (the "wrote" section lists what would have been written). A
``--node-name`` the cluster has no Node for is bad input.

``--once`` runs one round -- two metric collections one interval apart, every strategy once, the NodeMetric
report -- and prints what was measured, decided, written and evicted. Without it the agent runs until
SIGTERM or SIGINT (or for ``--duration`` seconds), printing each decision, write and eviction as it happens,
and serves on ``--health-address`` (default ``0.0.0.0:9316``, the port of Koordinator's koordlet ``-addr``,
which is also accepted):

* ``/healthz``: 200 while the agent's loop is alive;
* ``/readyz``: 200 once the agent has read the node's usage from the host and every QoS strategy has had
  its first round;
* ``/metrics``: the agent's own metrics (strategy durations, host writes, evictions).

With runtime hooks enabled (``runtimeHooks.enabled`` of ``--config``) the long-running agent also serves
Koordinator's ``RuntimeHookService`` for koord-runtime-proxy on a unix socket (``--runtime-hooks-addr``,
default ``<host-root>/var/run/koordlet/koordlet.sock``) and registers it in
``<host-root>/etc/runtime/hookserver.d/koordlet.json`` (``koord_framework.cli.koordlet_hooks``); ``/readyz``
is 200 only while it serves, and the socket is removed on shutdown. A socket that cannot be served ends the
process with status 1.

A QoS strategy that raises is logged and counted, never fatal; an exception out of the agent's loop itself
fails ``/healthz`` and ends the process with status 1 and the line ``koord koordlet: fatal: <cause>``. On a
cluster that does not serve NodeSLO or NodeMetric (their CRDs not installed) the agent waits, unready, and
says once how to install them (``koord_framework.component``, docs/components.md).

Exit status: 0 ok, 1 a strategy or report failed during ``--once`` or the agent's loop died, 2 bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

import yaml

from koord_framework.cli import koordlet_hooks
from koord_framework.cluster.port import ClusterPort
from koord_framework.cluster.served import install_hint
from koord_framework.component import ComponentRunner
from koord_framework.errors import KindNotServedError
from koord_framework.featuregates import FeatureGateError, gates_for
from koord_framework.health import parse_address
from koord_framework.koordlet.agent import (
    AgentOptions,
    KoordletAgent,
    RoundReport,
    StrategySpec,
    hooks_from_config,
    host_paths_from_config,
    strategies_from_config,
)
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.runtimehooks.server import HookServer, HookServerOptions

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT = 0, 1, 2

DEFAULT_HEALTH_ADDRESS = "0.0.0.0:9316"
"""Koordinator's koordlet serves its metrics on ``-addr=:9316`` (``cmd/koordlet/options``); its chart's
``koordlet.metrics.port`` is 9316 too."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "koordlet",
        help="run the node agent (QoS strategies, metrics, NodeMetric report) for one node",
        description=__doc__,
        epilog=gates_for("koordlet").help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--node-name", metavar="NAME", help="the node to run for (default: config nodeName, $NODE_NAME)"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--cluster", action="append", metavar="PATH", help="manifest file or folder (repeatable)"
    )
    source.add_argument(
        "--kubeconfig",
        nargs="?",
        const="",
        metavar="FILE",
        help="a real cluster (no FILE: default kubeconfig)",
    )
    parser.add_argument("--host-root", metavar="DIR", help="where the host's / is mounted (default: /)")
    parser.add_argument(
        "--feature-gates", default="", metavar="GATES", help="the koordlet's feature gates (listed below)"
    )
    parser.add_argument("--config", metavar="FILE", help="a KoordletConfiguration (bare or in a ConfigMap)")
    parser.add_argument("--once", action="store_true", help="run one round and print it")
    parser.add_argument("--duration", type=float, metavar="SECONDS", help="stop after this long")
    parser.add_argument("--output", "-o", choices=("text", "json", "yaml"), default="text")
    parser.add_argument(
        "--create-node-metric", action="store_true", help="create the NodeMetric when the cluster has none"
    )
    parser.add_argument(
        "--health-address",
        "--addr",
        default=DEFAULT_HEALTH_ADDRESS,
        metavar="HOST:PORT",
        help=f"serve /healthz, /readyz and /metrics here unless --once (default: {DEFAULT_HEALTH_ADDRESS})",
    )
    koordlet_hooks.add_flags(parser)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="decide and print; write no host file, evict nobody, report nothing",
    )
    parser.add_argument("--v", type=int, default=0, metavar="N", help="klog verbosity (>= 4: debug)")
    parser.set_defaults(func=run)


def _bad_input(message: str) -> int:
    print(f"koord koordlet: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run(args: argparse.Namespace, *, stop: threading.Event | None = None) -> int:
    """The command. ``stop``, when given, ends the long-running agent when set (besides SIGTERM/SIGINT):
    the way to stop it when embedded or run from a thread other than the main one."""
    from koord_framework.cli.common import setup_logging

    if getattr(args, "v", 0):  # unset, the agent's --once report is its whole output
        setup_logging(args.v)
    try:
        gates = gates_for("koordlet").parse(getattr(args, "feature_gates", ""))
    except FeatureGateError as exc:
        return _bad_input(str(exc))
    loaded = None
    if args.config:
        from koord_framework.config.loader import load_koordlet_config

        loaded = load_koordlet_config(args.config)
    node = args.node_name or (loaded.config.node_name if loaded else None) or os.environ.get("NODE_NAME")
    if not node:
        return _bad_input("no node name: give --node-name, nodeName in --config, or $NODE_NAME")
    if args.host_root is not None and not Path(args.host_root).is_dir():
        return _bad_input(f"--host-root {args.host_root}: not a directory")
    hook_server: HookServerOptions | None = None
    if not args.once:
        parse_address(args.health_address, "--health-address")  # a typo fails before the cluster is read
        try:
            hook_server = koordlet_hooks.server_options(args)
        except ValueError as exc:
            return _bad_input(str(exc))
    cluster = _cluster(args)
    if loaded is not None:
        host = host_paths_from_config(loaded.config, args.host_root)
        options = AgentOptions.from_config(loaded.config, create_node_metric=args.create_node_metric)
        if args.runtime_hooks_plugin_failure_policy:
            options = dataclasses.replace(
                options, runtime_hooks_failure_policy=args.runtime_hooks_plugin_failure_policy
            )
        strategies: list[StrategySpec] | None = strategies_from_config(loaded)
        hooks = hooks_from_config(loaded)
    else:
        host = HostPaths.under(args.host_root or "/")
        options = AgentOptions(
            create_node_metric=args.create_node_metric,
            runtime_hooks_failure_policy=args.runtime_hooks_plugin_failure_policy or "Ignore",
        )
        strategies = None
        hooks = []
    if getattr(args, "dry_run", False):
        options = dataclasses.replace(
            options, dry_run=True, report_node_metric=False, report_node_topology=False
        )
    if cluster is not None and cluster.try_get("Node", node) is None:
        return _bad_input(f"--node-name {node}: the cluster has no Node of that name")
    agent = KoordletAgent(
        node, cluster, host=host, options=options, strategies=strategies, hooks=hooks, gates=gates
    )
    if args.once:
        report = agent.run_once()
        _print_report(report, agent, args.output, sys.stdout, dry_run=getattr(args, "dry_run", False))
        return EXIT_PROBLEM if report.errors and _strategy_failed(report, agent) else EXIT_OK
    server = None
    if hook_server is not None and agent.hooks.hooks:
        try:
            server = HookServer(agent.hooks, hook_server, executor=agent.executor)
        except ValueError as exc:  # an unknown --runtime-hooks-disable-stages name
            return _bad_input(str(exc))
    return _serve(agent, args, stop or threading.Event(), server)


KOORDLET_WAITS_FOR = ("NodeSLO", "NodeMetric")
"""Kinds the long-running agent waits for, unready, when the cluster does not serve them, as Koordinator's
states informer waits for its NodeSLO and NodeMetric informers to sync. NodeResourceTopology is not
awaited: the agent runs without it (its states informer logs the kind and leaves it empty)."""


class KoordletComponent:
    """The agent as a ``koord_framework.component.Component``."""

    def __init__(
        self,
        agent: KoordletAgent,
        readiness: Readiness,
        on_step: Callable[[RoundReport], None],
        hook_server: HookServer | None = None,
    ) -> None:
        cluster = agent.cluster
        for kind in KOORDLET_WAITS_FOR:
            if cluster is not None and not cluster.serves(kind):
                raise KindNotServedError(kind, f"the API server does not serve {kind}; {install_hint(kind)}")
        self.agent, self.readiness, self.on_step = agent, readiness, on_step
        self.hook_server = hook_server

    def run(self, stop: threading.Event) -> None:
        # The hook server first: a socket that cannot be served is the component's death (exit 1 with the
        # reason), not a koordlet that silently lets every container start without its hooks.
        if self.hook_server is not None and not self.hook_server.serving:
            self.hook_server.start()
            print(
                f"koord koordlet: serving runtime hooks on {self.hook_server.options.address}",
                file=sys.stderr,
            )
        self.agent.run(stop, on_step=self.on_step)

    def ready(self) -> bool:
        """Ready once the agent is (``Readiness``) and, with hooks, while the hook server serves."""
        serving = self.hook_server is None or self.hook_server.serving
        return serving and self.readiness()

    def close(self) -> None:
        if self.hook_server is not None:
            self.hook_server.stop()  # removes the socket
        self.agent.stop()


def _serve(
    agent: KoordletAgent,
    args: argparse.Namespace,
    stop: threading.Event,
    hook_server: HookServer | None = None,
) -> int:
    """The long-running agent with its health server, until ``stop`` (or SIGTERM/SIGINT, or
    ``--duration``), or until its loop dies (``koord_framework.component``: exit 1 with the reason)."""
    readiness = Readiness(s.name for s in agent.strategies)
    limiter = RepeatLimiter(agent.clock.now)

    def on_step(report: RoundReport) -> None:
        readiness.observe(report)
        report.errors = limiter.filter(report.errors)
        _print_events(report, args.output, sys.stdout)

    # Liveness is "the loop is alive", deliberately not "a step finished recently": a restart throws away
    # the in-memory metric history the NodeMetric aggregations and predictions are built from, and a step
    # can be slow for a while when the API server is (the NodeMetric report waits on it).
    runner = ComponentRunner(
        "koordlet",
        # The agent (and its metrics) is built once, before: a rebuild after waiting for a kind reuses it.
        lambda _registry: KoordletComponent(agent, readiness, on_step, hook_server),
        address=args.health_address,
        registry=agent.registry,
        flag="--health-address",
        cluster=agent.cluster,
    )
    print(f"koord koordlet: serving /healthz, /readyz and /metrics on port {runner.port}", file=sys.stderr)
    try:
        return runner.run(stop, duration=args.duration)
    finally:
        close = getattr(agent.cluster, "close", None)  # a real cluster's connections and watches
        if callable(close):
            close()


class RepeatLimiter:
    """The same error every second (a cgroup file that is gone, an API server that is down) is printed once,
    then again at most once per ``interval`` with the number of repeats in between, as klog's rate-limited
    loggers do; a different error is printed at once."""

    def __init__(self, now: Callable[[], float], interval: float = 60.0) -> None:
        self._now = now
        self.interval = interval
        self._last: dict[str, tuple[float, int]] = {}

    def filter(self, errors: Iterable[str]) -> list[str]:
        out = []
        t = self._now()
        for err in errors:
            seen = self._last.get(err)
            if seen is None or t - seen[0] >= self.interval:
                repeats = seen[1] if seen else 0
                out.append(err if not repeats else f"{err} (repeated {repeats} times since)")
                self._last[err] = (t, 0)
            else:
                self._last[err] = (seen[0], seen[1] + 1)
        return out


class Readiness:
    """``/readyz`` of the agent: ready once a step read the node's usage from the host and, from then on,
    every QoS strategy has had its first round.

    A strategy that raised still counts as having had its round: the agent contains such failures by
    design (they show in the log and as ``status="error"`` in ``koordlet_qos_strategy_duration_seconds``),
    and holding the pod unready for one would stall a DaemonSet rollout on a node where the rest of the
    agent works. A host whose ``/proc`` cannot be read, by contrast, leaves every strategy blind: not ready.
    Once ready it stays ready; the probe tells rollouts the agent came up, not how each round went.
    """

    def __init__(self, strategies: Iterable[str]) -> None:
        self._pending = set(strategies)
        self._host_read = False
        self._ready = threading.Event()

    def observe(self, report: RoundReport) -> None:
        if self._ready.is_set():
            return
        if not self._host_read:
            if report.collected is None or report.collected.node_memory is None:
                return
            self._host_read = True
        # ``ran`` holds "Name" or "Name (disabled by NodeSLO)"; a strategy that raised is reported as
        # "Name: ErrorType: message" in ``errors`` instead.
        self._pending -= {entry.split(" ", 1)[0] for entry in report.ran}
        self._pending -= {entry.split(":", 1)[0] for entry in report.errors}
        if not self._pending:
            self._ready.set()

    def __call__(self) -> bool:
        return self._ready.is_set()


def _cluster(args: argparse.Namespace) -> ClusterPort | None:
    if args.cluster:
        from koord_framework.cluster.memory import MemoryCluster

        return MemoryCluster.from_paths(args.cluster)
    if args.kubeconfig is not None:
        from koord_framework.cluster.kube.adapter import KubeCluster

        return KubeCluster.from_kubeconfig(args.kubeconfig or None, component="koordlet")
    return None


def _strategy_failed(report: RoundReport, agent: KoordletAgent) -> bool:
    names = {s.name for s in agent.strategies}
    return any(e.split(":", 1)[0] in names or e.startswith("NodeMetric") for e in report.errors)


# --- printing ----------------------------------------------------------------------------------------------


def _print_report(
    report: RoundReport, agent: KoordletAgent, output: str, out: TextIO, *, dry_run: bool = False
) -> None:
    data = report.as_dict()
    data = {"node": agent.node_name, "host": agent.host.describe(), "cgroup": _layout(agent), **data}
    if output == "json":
        json.dump(data, out, indent=2, default=str)
        out.write("\n")
        return
    if output == "yaml":
        yaml.safe_dump(json.loads(json.dumps(data, default=str)), out, sort_keys=False)
        return
    w = out.write
    w(
        f"koordlet {agent.node_name}: one round ({_layout(agent)}, strategies: "
        f"{', '.join(s.name for s in agent.strategies) or 'none'})\n"
    )
    w("measured:\n")
    m = report.collected
    if m is not None:
        node_cpu = f"{m.node_cpu:.3f} cores" if m.node_cpu is not None else "n/a (first sample)"
        node_mem = _bytes(m.node_memory)
        w(f"  node: cpu {node_cpu}, memory {node_mem}\n")
        if m.system_cpu is not None:
            w(f"  system: cpu {m.system_cpu:.3f} cores\n")
        for meta in agent.state.pods:
            if meta.uid in m.pod_cpu or meta.uid in m.pod_memory:
                cpu = m.pod_cpu.get(meta.uid)
                cpu_text = f"{cpu:.3f} cores" if cpu is not None else "n/a"
                w(
                    f"  pod {meta.key} ({meta.raw_qos.value or meta.pod.qos_class.value}): cpu {cpu_text}, "
                    f"memory {_bytes(m.pod_memory.get(meta.uid))}\n"
                )
        if m.be_cpu_real_limit_milli is not None:
            w(
                f"  best-effort: used {m.be_cpu_usage_milli}m, requested {m.be_cpu_request_milli}m, "
                f"may use {m.be_cpu_real_limit_milli}m\n"
            )
    w("decided:\n")
    for d in report.decisions:
        w(f"  {d.strategy}: {d.summary}{_details(d.details)}\n")
    if not report.decisions:
        w("  (nothing)\n")
    w("would write (--dry-run, nothing written):\n" if dry_run else "wrote:\n")
    for rec in report.writes:
        w(
            f"  {rec.path}: {rec.old} -> {rec.new} ({rec.status.value}; {rec.owner}: {rec.reason})"
            f"{' error: ' + rec.error if rec.error else ''}\n"
        )
    if not report.writes:
        w("  (nothing changed)\n")
    w("would evict (--dry-run):\n" if dry_run else "evicted:\n")
    for e in report.evictions:
        w(f"  {e.namespace}/{e.name}: {e.reason}{'' if e.ok else ' (refused: ' + str(e.error) + ')'}\n")
    if not report.evictions:
        w("  (nobody)\n")
    if report.node_metric is not None:
        usage = (report.node_metric.get("nodeMetric") or {}).get("nodeUsage") or {}
        w(
            f"NodeMetric: status written (nodeUsage {usage.get('resources', {})}, "
            f"{len(report.node_metric.get('podsMetric') or [])} pod(s))\n"
        )
    if report.errors:
        w("errors:\n")
        for err in report.errors:
            w(f"  {err}\n")


def _print_events(report: RoundReport, output: str, out: TextIO) -> None:
    events: list[dict[str, Any]] = []
    events += [{"decided": d.as_dict()} for d in report.decisions]
    events += [{"wrote": r.as_dict()} for r in report.writes]
    events += [{"evicted": e.as_dict()} for e in report.evictions]
    events += [{"error": e} for e in report.errors]
    for ev in events:
        if output == "text":
            ((kind, body),) = ev.items()
            out.write(f"{kind}: {json.dumps(body, default=str)}\n")
        else:
            out.write(json.dumps(ev, default=str) + "\n")
    out.flush()


def _layout(agent: KoordletAgent) -> str:
    return f"cgroup v{int(agent.layout.version)}, {agent.layout.driver.value} driver"


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit, size in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n}B"


def _details(details: dict[str, Any]) -> str:
    if not details:
        return ""
    text = json.dumps(details, default=str, separators=(", ", ": "))
    return " " + (text if len(text) < 400 else text[:397] + "...")


__all__ = ["DEFAULT_HEALTH_ADDRESS", "Readiness", "RepeatLimiter", "register", "run"]
