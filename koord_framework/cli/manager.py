"""``koord manager``: koord-manager's SLO controllers, long-running.

    koord manager (--cluster PATH... | --kubeconfig [FILE]) [--config-namespace NS]
                  [--metrics-addr HOST:PORT] [--enable-leader-election true|false]
                  [--leader-election-namespace NS] [--feature-gates GATES] [--controllers LIST]
                  [--noderesource-plugins LIST] [--once] [--now RFC3339]

The controllers, level-triggered over one shared informer (a failing one never blocks the others):

* **sloconfig**: reads ``<config-namespace>/slo-controller-config``; each key is parsed on its own, and a
  key that does not parse is logged and recorded as a Warning Event on the ConfigMap naming the key and the
  field, its last good value kept;
* **nodeslo**: each node's NodeSLO, the ConfigMap's strategies (cluster, then the first matching node
  strategy) merged over Koordinator's defaults;
* **nodemetric**: each node's NodeMetric ``spec.metricCollectPolicy`` from its colocation strategy;
* **noderesource**: the extended resources the installed calculators (entry-point group
  ``koord.manager.noderesource``: BatchResource, MidResource, CPUNormalization, ResourceAmplification)
  compute, written to the node status when they moved by more than ``resourceDiffThreshold`` or
  ``updateTimeThresholdSeconds`` passed, and the node annotations they decide.

* the controllers installed distributions add (entry-point group ``koord.manager.controllers``:
  ``quotaprofile`` from koord-plugin-elasticquota).

``--controllers`` and ``--noderesource-plugins`` choose which of them run, as Koordinator's flags of the
same names (default ``*``: all; ``*,-MidResource``: all but one).

``--cluster`` loads manifests into the embedded cluster on a virtual clock starting at ``--now`` (default:
the newest NodeMetric ``updateTime``, so the metrics are fresh); ``--once`` then makes one pass and prints
each node's batch resources and the controllers' problems. Without ``--once`` the manager runs until
SIGTERM, serving ``/healthz``, ``/readyz`` and ``/metrics`` on ``--metrics-addr`` (Koordinator's
``:8080``), and with leader election on (the default, as Koordinator's ``--enable-leader-election``) works
only while it holds the Lease ``<leader-election-namespace>/koordinator-manager``. Its CRD kinds (NodeSLO,
NodeMetric) not served: it waits unready, and gives up after two minutes (controller-runtime's
``CacheSyncTimeout``), exiting 1.

Exit status: 0 stopped on request (or ``--once`` done), 1 the work died or the Lease was lost, 2 bad input.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koord_framework.cli.common import UsageError, bad_input, parse_now
from koord_framework.cli.manager_webhook import add_webhook_flags, start_webhook
from koord_framework.cluster.clock import VirtualClock, parse_time
from koord_framework.cluster.manifests import load_documents
from koord_framework.cluster.port import ClusterPort
from koord_framework.component import CONTROLLER_CACHE_SYNC_TIMEOUT, ComponentRunner, MissingKindPolicy
from koord_framework.errors import KoordError
from koord_framework.featuregates import FeatureGateError, FeatureGates, gates_for
from koord_framework.manager.controllerplugin import GROUP as CONTROLLER_GROUP
from koord_framework.manager.controllerplugin import ManagerController
from koord_framework.manager.noderesource import GROUP, NodeResourcePlugin
from koord_framework.manager.selection import (
    CONTROLLERS,
    KOORDINATOR_CALCULATORS,
    KOORDINATOR_CONTROLLERS,
    enabled,
    parse_selection,
)
from koord_framework.manager.sloconfig import DEFAULT_CONFIG_NAMESPACE

__all__ = ["MISSING_KINDS", "enabled_controllers", "load_controllers", "load_plugins", "register", "run"]

log = logging.getLogger("koord.manager")

DEFAULT_METRICS_ADDR = "0.0.0.0:8080"
LEASE_NAME = "koordinator-manager"
MISSING_KINDS = MissingKindPolicy(default=CONTROLLER_CACHE_SYNC_TIMEOUT)
"""koord-manager is controller-runtime: a CRD kind not served is given up on after CacheSyncTimeout."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "manager",
        help="run koord-manager: SLO controllers (NodeSLO, NodeMetric, node resources) and webhooks",
        description=__doc__,
        epilog=gates_for("manager").help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cluster", action="append", metavar="PATH", help="manifest file or folder (repeatable)"
    )
    source.add_argument(
        "--kubeconfig", nargs="?", const="", metavar="FILE", help="a real API server (default credentials)"
    )
    parser.add_argument("--config-namespace", default=DEFAULT_CONFIG_NAMESPACE, metavar="NS")
    parser.add_argument("--metrics-addr", default=DEFAULT_METRICS_ADDR, metavar="HOST:PORT")
    parser.add_argument("--enable-leader-election", choices=("true", "false"), default="true")
    parser.add_argument("--leader-election-namespace", default=DEFAULT_CONFIG_NAMESPACE, metavar="NS")
    parser.add_argument("--identity", help="leader-election identity (default: HOSTNAME_<uuid>)")
    parser.add_argument(
        "--feature-gates", default="", metavar="GATES", help="A=true,B=false,AllAlpha=true,..."
    )
    parser.add_argument(
        "--controllers",
        default="*",
        metavar="LIST",
        help="controllers to enable: '*' all, 'noderesource' only it, '*,-noderesource' all but it "
        f"(all: {', '.join(CONTROLLERS)})",
    )
    parser.add_argument(
        "--noderesource-plugins",
        default="*",
        metavar="LIST",
        help="node-resource calculators to enable: '*' all, 'BatchResource' only it, "
        f"'*,-BatchResource' all but it (Koordinator's: {', '.join(KOORDINATOR_CALCULATORS)})",
    )
    parser.add_argument("--once", action="store_true", help="one pass over every node, print it, exit")
    parser.add_argument("--now", metavar="RFC3339", help="--cluster: where the virtual clock starts")
    parser.add_argument(
        "--write-state", metavar="DIR", help="--once: write the resulting cluster as manifests (for simulate)"
    )
    parser.add_argument("--resync", type=float, default=60.0, metavar="SECONDS", help="full resync period")
    add_webhook_flags(parser)
    parser.set_defaults(func=run)


def load_plugins(selection: str = "*") -> list[NodeResourcePlugin[Any]]:
    """The installed node-resource calculators ``--noderesource-plugins`` enables, built with default args,
    in Koordinator's run order (``KOORDINATOR_CALCULATORS``, then the others by name)."""
    from koord_framework.registry import PluginRegistry

    installed = PluginRegistry.discover(GROUP).load_all()
    chosen = parse_selection(selection, "--noderesource-plugins", KOORDINATOR_CALCULATORS, installed)
    order = {name: i for i, name in enumerate(KOORDINATOR_CALCULATORS)}
    plugins: list[NodeResourcePlugin[Any]] = []
    for name, cls in sorted(installed.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        if not issubclass(cls, NodeResourcePlugin):
            raise KoordError(f"plugin {name!r} in {GROUP} is not a NodeResourcePlugin")
        if enabled(name, chosen):
            plugins.append(cls())
        else:
            log.info("noderesource plugin %s is disabled (--noderesource-plugins)", name)
    return plugins


def enabled_controllers(selection: str, installed: Iterable[str] = ()) -> frozenset[str]:
    """The built-in controllers ``--controllers`` enables (Koordinator's ``isControllerEnabled``);
    ``installed``: the controller plugins' names, also valid in the list."""
    chosen = parse_selection(selection, "--controllers", KOORDINATOR_CONTROLLERS, (*CONTROLLERS, *installed))
    return frozenset(c for c in CONTROLLERS if enabled(c, chosen))


def load_controllers(selection: str = "*") -> list[ManagerController[Any]]:
    """The installed controller plugins (``koord.manager.controllers``) ``--controllers`` enables, built
    with default args, by name."""
    from koord_framework.registry import PluginRegistry

    installed = PluginRegistry.discover(CONTROLLER_GROUP).load_all()
    chosen = parse_selection(selection, "--controllers", KOORDINATOR_CONTROLLERS, (*CONTROLLERS, *installed))
    controllers: list[ManagerController[Any]] = []
    for name, cls in sorted(installed.items()):
        if not issubclass(cls, ManagerController):
            raise KoordError(f"plugin {name!r} in {CONTROLLER_GROUP} is not a ManagerController")
        if enabled(name, chosen):
            controllers.append(cls())
        else:
            log.info("controller %s is disabled (--controllers)", name)
    return controllers


def _newest_metric_time(paths: list[str]) -> float | None:
    newest = None
    for doc in load_documents(paths):
        if doc.obj.get("kind") == "NodeMetric":
            t = parse_time((doc.obj.get("status") or {}).get("updateTime"))
            if t is not None and (newest is None or t > newest):
                newest = t
    return newest


def _embedded(paths: list[str], now: float | None) -> ClusterPort:
    from koord_framework.cluster.memory import MemoryCluster

    start = now if now is not None else (_newest_metric_time(paths) or time.time())
    cluster = MemoryCluster(VirtualClock(start), seed=0)
    cluster.load(paths)
    return cluster


def run(
    args: argparse.Namespace, *, cluster: ClusterPort | None = None, stop: threading.Event | None = None
) -> int:
    logging.basicConfig(
        level=logging.WARNING if args.once else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        gates = gates_for("manager").parse(args.feature_gates)
        now = parse_now(args.now)
    except (FeatureGateError, UsageError) as exc:
        return bad_input("manager", str(exc))
    try:
        if cluster is None:
            if args.cluster:
                cluster = _embedded(args.cluster, now)
            else:
                from koord_framework.cluster.kube import KubeCluster
                from koord_framework.settings import load_settings

                kubeconfig = args.kubeconfig or load_settings().kubeconfig
                cluster = KubeCluster.from_kubeconfig(kubeconfig or None, component="koord-manager")
        plugins = load_plugins(args.noderesource_plugins)
        controller_plugins = load_controllers(args.controllers)
        controllers = enabled_controllers(args.controllers, [c.name for c in controller_plugins])
    except KoordError as exc:
        return bad_input("manager", str(exc))
    from koord_framework.manager.component import ManagerComponent

    port: ClusterPort = cluster
    if args.once:
        return _once(port, args, plugins, controllers, gates, controller_plugins)

    from koord_framework.cluster.fence import FencedCluster, WriteFence

    # The controllers write through the fence; the elector renews the Lease through ``port`` itself.
    fence = WriteFence("koord-manager")
    fenced = FencedCluster(port, fence)

    def build(registry: CollectorRegistry) -> ManagerComponent:
        return ManagerComponent(
            fenced,
            registry,
            config_namespace=args.config_namespace,
            plugins=plugins,
            resync=args.resync,
            controllers=controllers,
            gates=gates,
            controller_plugins=controller_plugins,
        )

    lease = None
    if args.enable_leader_election == "true":
        from koord_framework.cluster.kube.leader import LeaderElectionConfig

        lease = LeaderElectionConfig(
            name=LEASE_NAME,
            namespace=args.leader_election_namespace
            or os.environ.get("POD_NAMESPACE")
            or DEFAULT_CONFIG_NAMESPACE,
            identity=args.identity or f"{socket.gethostname()}_{uuid.uuid4()}",
        )
    registry = CollectorRegistry()  # the runner's /metrics; the webhook's series (workers' summed) on it
    try:
        webhook = start_webhook(port, args, registry)
    except KoordError as exc:
        close = getattr(port, "close", None)
        if callable(close):
            close()
        return bad_input("manager", str(exc))
    try:
        runner = ComponentRunner(
            "manager",
            build,
            address=args.metrics_addr,
            registry=registry,
            flag="--metrics-addr",
            cluster=port,
            leader_election=lease,
            missing_kinds=MISSING_KINDS,
            fence=fence,
            also_ready=webhook.ready if webhook is not None else None,
        )
        return runner.run(stop)
    finally:
        if webhook is not None:
            webhook.close()
        close = getattr(port, "close", None)
        if callable(close):
            close()


def write_state(cluster: ClusterPort, directory: Path) -> Path:
    """The cluster as one multi-document ``state.yaml``, each kind's objects in the order they were
    created: ``koord simulate`` on it queues the pods in the same order as on the original manifests."""
    import yaml

    docs: list[dict[str, Any]] = []
    for kind in cluster.kinds:
        try:
            objs, _ = cluster.list(kind)
        except KoordError:  # a kind this cluster does not serve
            continue
        docs += [{"kind": kind, **o} for o in objs]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "state.yaml"
    with path.open("w", encoding="utf-8") as fh:
        yaml.safe_dump_all(docs, fh, sort_keys=False)
    return path


def _once(
    cluster: ClusterPort,
    args: argparse.Namespace,
    plugins: list[NodeResourcePlugin[Any]],
    controllers: frozenset[str] = frozenset(CONTROLLERS),
    gates: FeatureGates | None = None,
    controller_plugins: list[ManagerController[Any]] | None = None,
) -> int:
    from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY
    from koord_framework.manager.component import ManagerComponent

    component = ManagerComponent(
        cluster,
        CollectorRegistry(),
        config_namespace=args.config_namespace,
        plugins=plugins,
        controllers=controllers,
        gates=gates,
        controller_plugins=controller_plugins or (),
    )
    try:
        component.sync_once()
    finally:
        component.close()
    if args.write_state:
        try:
            write_state(cluster, Path(args.write_state))
        except OSError as exc:
            return bad_input("manager", f"--write-state {args.write_state}: {exc.strerror or exc}")
    for problem in component.config_reconciler.problems:
        print(f"warning: {problem}")
    nodes, _ = cluster.list("Node")
    slos = {o["metadata"]["name"] for o in cluster.list("NodeSLO")[0]}
    print(f"{'NODE':<24} {'NODESLO':<8} {'BATCH-CPU':>10} {'BATCH-MEMORY':>14}")
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        alloc = (node.get("status") or {}).get("allocatable") or {}
        print(
            f"{name:<24} {'yes' if name in slos else 'no':<8} {alloc.get(BATCH_CPU, '-'):>10} "
            f"{alloc.get(BATCH_MEMORY, '-'):>14}"
        )
        for msg in dict.fromkeys(component.resources.last_messages.get(name, [])):
            print(f"  {msg}")
    return 0
