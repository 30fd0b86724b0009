"""``koord explain``: why the scheduler decides what it decides, for one pod, node or quota.

    koord explain pod NS/NAME (--cluster PATH | --kubeconfig FILE) [--config FILE] [--nodes N]
                              [--node NAME] [-o text|json] [--seed N] [--now RFC3339]
    koord explain node NAME   (--cluster PATH | --kubeconfig FILE) [--config FILE] [-o text|json]
    koord explain quota NAME  (--cluster PATH | --kubeconfig FILE) [--config FILE] [-o text|json]

Every explanation runs on a private in-memory copy of the cluster: the manifests of ``--cluster`` (files or
folders, repeatable), or the objects listed from the API server ``--kubeconfig`` names (only read: nothing
is ever written to it). ``--config`` is the scheduler configuration (default: Koordinator's
``koord-scheduler-config``, shipped with koord, fitted to the installed plugins); only the plugins it
enables explain anything. ``docs/explain.md`` describes the output and its JSON schema.

Exit status: 0 explained, 2 bad input (an unknown pod, node or quota: the error names it and suggests close
names; a file that cannot be read).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from koord_framework.cli.common import UsageError, bad_input, newest_metric_time, parse_now, print_json
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import KoordError

EXIT_OK = 0
TEXT_NODES = 10
"""Feasible nodes the text form shows by default (the best ones; ``--nodes`` changes it)."""
SUMMARY = "explain one pod's scheduling, what plugins see on a node, a quota"
DEFAULT_CONFIG = "Koordinator's koord-scheduler-config, fitted to the installed plugins"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "explain", help=SUMMARY, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    verbs = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    pod = _verb(
        verbs, "pod", "NS/NAME", "one dry scheduling cycle: every node's verdict per plugin, the scores"
    )
    pod.add_argument(
        "--nodes",
        type=int,
        metavar="N",
        help=f"best feasible nodes shown (default: {TEXT_NODES} in text, every node in JSON)",
    )
    pod.add_argument("--node", metavar="NAME", help="show this node's verdict and scores only")
    pod.add_argument("--seed", type=int, default=0, help="seed of the tie-breaking among equal nodes")
    _verb(verbs, "node", "NAME", "what each enabled plugin sees on the node")
    _verb(verbs, "quota", "NAME", "an ElasticQuota's min/max/runtime/used/request and its runtime rounds")


def _verb(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], name: str, metavar: str, summary: str
) -> argparse.ArgumentParser:
    p = verbs.add_parser(name, help=summary, description=f"koord explain {name}: {summary}.")
    p.add_argument("target", metavar=metavar)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cluster", action="append", metavar="PATH", help="manifest file or folder (repeatable)"
    )
    source.add_argument("--kubeconfig", metavar="FILE", help="a live cluster, only read (never written)")
    p.add_argument("--config", metavar="FILE", help=f"scheduler configuration (default: {DEFAULT_CONFIG})")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    p.add_argument(
        "--now",
        metavar="RFC3339",
        help="the virtual clock (default: the newest NodeMetric updateTime, else now)",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace, *, port: ClusterPort | None = None) -> int:
    """The command. ``port`` replaces the cluster ``--kubeconfig`` names (tests pass a guarded one)."""
    command = f"explain {args.what}"
    try:
        cluster = _open(args, port)
        config = _config(args)
        text, data = EXPLAINERS[args.what](args, cluster, config)
    except (KoordError, UsageError) as exc:
        return bad_input(command, str(exc))
    if args.output == "json":
        print_json(data)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _open(args: argparse.Namespace, port: ClusterPort | None) -> MemoryCluster:
    from koord_framework.explain.source import from_manifests, read_only_copy

    now = parse_now(args.now)
    if args.cluster:
        if now is None:
            now = newest_metric_time(args.cluster)
        return from_manifests(args.cluster, now)
    at = now if now is not None else time.time()
    if port is not None:
        return read_only_copy(port, at)
    from koord_framework.cluster.kube import KubeCluster

    live = KubeCluster.from_kubeconfig(args.kubeconfig, component="koord-explain")
    try:
        return read_only_copy(live, at)
    finally:
        live.close()


def _config(args: argparse.Namespace) -> Any:
    from koord_framework.cli.common import shipped_config
    from koord_framework.config.loader import load_scheduler_config

    if args.config:
        return load_scheduler_config(args.config)
    return shipped_config("scheduler", "explain")


def _pod(args: argparse.Namespace, cluster: MemoryCluster, config: Any) -> tuple[str, dict[str, Any]]:
    from koord_framework.explain.pod import explain_pod
    from koord_framework.explain.render import render_pod

    if args.nodes is not None and args.nodes < 0:
        raise UsageError(f"--nodes {args.nodes}: must be 0 or more")
    ex = explain_pod(cluster, config, args.target, seed=args.seed, focus=args.node)
    if args.node is not None and args.node not in {v.name for v in ex.nodes}:
        from koord_framework.explain.source import unknown

        raise unknown("node", args.node, [v.name for v in ex.nodes])
    top = TEXT_NODES if args.nodes is None else args.nodes
    return render_pod(ex, top=top, focus=args.node), ex.to_dict(top=args.nodes, focus=args.node)


def _node(args: argparse.Namespace, cluster: MemoryCluster, config: Any) -> tuple[str, dict[str, Any]]:
    from koord_framework.explain.node import explain_node
    from koord_framework.explain.render import render_sections

    ex = explain_node(cluster, config, args.target)
    return render_sections(ex), ex.to_dict()


def _quota(args: argparse.Namespace, cluster: MemoryCluster, config: Any) -> tuple[str, dict[str, Any]]:
    from koord_framework.explain.node import explain_quota
    from koord_framework.explain.render import render_sections

    ex = explain_quota(cluster, config, args.target)
    return render_sections(ex), ex.to_dict()


EXPLAINERS: dict[str, Callable[[argparse.Namespace, MemoryCluster, Any], tuple[str, dict[str, Any]]]] = {
    "pod": _pod,
    "node": _node,
    "quota": _quota,
}
