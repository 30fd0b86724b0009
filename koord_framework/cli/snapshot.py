"""``koord snapshot``: dump a live cluster into manifests that every ``--cluster`` command reads.

    koord snapshot --kubeconfig FILE -o DIR [--kinds KIND[,KIND...]] [--anonymize [--salt S]]
                   [--config-namespace NS] [--page-size N] [--quiet] [--force]

Nodes, pods, NodeMetrics, NodeSLOs, NodeResourceTopologies, Devices, ElasticQuotas, PodGroups, Reservations,
PodMigrationJobs, PodDisruptionBudgets, workloads (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs),
PriorityClasses, ClusterColocationProfiles and the ConfigMaps koord-scheduler-config,
koord-descheduler-config and slo-controller-config of --config-namespace are listed page by page and written
to DIR as they come, one <plural>.yaml per kind; DIR appears only when the run finished (it is written as
DIR.partial first), with an index .koord-snapshot.json. A kind that is not installed here or whose CRD the
server does not serve is skipped with a line saying so. --kinds dumps only the kinds it names (a kind or
its plural, any case; ConfigMap for the three ConfigMaps). --anonymize replaces names, namespaces, identifying
label/annotation values and images with stable hashes (docs/snapshot.md says what is kept).

Exit status: 0 the snapshot is complete; 1 it is partial (a kind was forbidden or could not be read, or an
object the loader would refuse was left out: the index and stderr name them); 2 bad usage or input (a
kubeconfig that cannot be read, DIR exists); 3 nothing was written (the API server cannot be reached, or
failed while listing).
"""

from __future__ import annotations

import argparse
import sys

from koord_framework.errors import ClusterError, KoordError

EXIT_OK, EXIT_PARTIAL, EXIT_BAD_INPUT, EXIT_FAILED = 0, 1, 2, 3
SUMMARY = "dump a live cluster into manifests every --cluster command reads"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from koord_framework.snapshot.kinds import DEFAULT_CONFIG_NAMESPACE

    parser = subparsers.add_parser(
        "snapshot", help=SUMMARY, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config)"
    )
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    parser.add_argument(
        "-o", "--output", metavar="DIR", required=True, help="directory to write (must not exist)"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace DIR when it exists (only once the run succeeded)"
    )
    parser.add_argument(
        "--config-namespace",
        metavar="NS",
        default=DEFAULT_CONFIG_NAMESPACE,
        help=f"namespace of the components' ConfigMaps (default: {DEFAULT_CONFIG_NAMESPACE})",
    )
    parser.add_argument(
        "--kinds",
        metavar="KIND[,KIND...]",
        help="dump only these kinds (Pod or pods, any case; ConfigMap: the components' ConfigMaps)",
    )
    parser.add_argument(
        "--anonymize", action="store_true", help="hash names, namespaces, label values, images"
    )
    parser.add_argument("--salt", default="", help="salt of --anonymize's hashes (same salt, same names)")
    parser.add_argument(
        "--page-size", type=int, default=500, metavar="N", help="objects per list request (default 500)"
    )
    parser.add_argument(
        "--qps", type=float, default=50.0, help="requests per second to the API server (burst: twice as many)"
    )
    parser.add_argument("--request-timeout", type=float, default=30.0, metavar="SECONDS")
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress lines (problems and the summary line are still said)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from koord_framework.cluster.kinds import KindRegistry
    from koord_framework.snapshot.kinds import CONFIG_MAP_KIND, CONFIG_MAPS, SNAPSHOT_KINDS, select_kinds
    from koord_framework.snapshot.run import Progress, SnapshotOptions, take_snapshot
    from koord_framework.snapshot.source import KubeSource
    from koord_framework.snapshot.writer import SnapshotWriter

    if args.page_size < 1:
        return _error(EXIT_BAD_INPUT, f"--page-size {args.page_size}: must be at least 1")
    if args.qps <= 0:
        return _error(EXIT_BAD_INPUT, f"--qps {args.qps}: must be above 0")
    if args.salt and not args.anonymize:
        return _error(EXIT_BAD_INPUT, "--salt needs --anonymize")
    kinds = KindRegistry.discover()
    selected = (*SNAPSHOT_KINDS, CONFIG_MAP_KIND)
    if args.kinds is not None:
        try:
            selected = select_kinds([n for n in args.kinds.split(",") if n.strip()], kinds)
        except ValueError as err:
            return _error(EXIT_BAD_INPUT, f"--kinds: {err}")
        if not selected:
            return _error(EXIT_BAD_INPUT, "--kinds: names no kind")
    try:
        source = KubeSource.from_kubeconfig(
            args.kubeconfig,
            kinds,
            context=args.context,
            request_timeout=args.request_timeout,
            qps=args.qps,
            burst=max(1, int(2 * args.qps)),
        )
    except ClusterError as err:
        return _error(EXIT_BAD_INPUT, str(err))
    try:
        try:
            writer = SnapshotWriter(args.output, force=args.force)
        except KoordError as err:
            return _error(EXIT_BAD_INPUT, str(err))
        options = SnapshotOptions(
            page_size=args.page_size,
            anonymize=args.anonymize,
            salt=args.salt,
            config_namespace=args.config_namespace,
            kinds=tuple(k for k in selected if k != CONFIG_MAP_KIND),
            config_maps=CONFIG_MAPS if CONFIG_MAP_KIND in selected else (),
        )
        progress = Progress(sys.stderr, quiet=args.quiet)
        try:
            result = take_snapshot(source, writer, kinds, options, progress)
        except ClusterError as err:
            return _error(EXIT_FAILED, f"{err}; nothing was written")
    finally:
        source.close()
    state = "complete" if result.complete else "PARTIAL"
    problems = len(result.failed) + len(result.invalid)
    print(
        f"snapshot {args.output}: {state}, {result.total} objects of {len(result.counts)} kinds in "
        f"{result.seconds:.1f} s"
        + (
            f"; {len(result.skipped)} skipped (not installed, not served or not found)"
            if result.skipped
            else ""
        )
        + (f"; {problems} problem(s): see above and {args.output}/.koord-snapshot.json" if problems else ""),
        file=sys.stderr,
    )
    return EXIT_OK if result.complete else EXIT_PARTIAL


def _error(code: int, message: str) -> int:
    print(f"koord snapshot: error: {message}", file=sys.stderr)
    return code
