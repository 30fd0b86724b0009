"""``koord scheduler`` and ``koord descheduler``: the long-running components on a real cluster.

    koord scheduler   --config FILE [--kubeconfig FILE] [--address HOST:PORT] [--client-qps N]
                      [--client-burst N] [--leader-elect true|false] [--v N] [--feature-gates GATES]
    koord descheduler --config FILE [same options] [--dry-run]

Each connects to the API server (``--kubeconfig``; without it in-cluster credentials in a pod, else
``$KOORD_KUBECONFIG`` / ``$KUBECONFIG`` / ``~/.kube/config``), serves ``/healthz``, ``/readyz`` and
``/metrics`` on ``--address``, and, when the configuration's ``leaderElection.leaderElect`` is on (the
default), works only while it holds the Lease ``leaderElection.resourceNamespace/resourceName``. SIGTERM
stops it cleanly: no new pod is scheduled (no new eviction started), bindings already sent finish and
those still queued behind the client rate limit are abandoned (their pods stay pending for the next
leader), the Lease is renewed meanwhile and handed over only after the last write. Every write goes
through a fence (``koord_framework.cluster.fence``) that refuses it once the term is over -- a renewal
failed, or the drain overran its 30 s -- so two replicas never act at once.

Client rate limits: ``--client-qps``/``--client-burst`` when given, else the configuration's
``clientConnection`` when it sets them, else the platform's defaults (5,000 / 10,000: kube-scheduler's
50 / 100 caps binding at about 50 pods per second).

A component that cannot do its job says so (``koord_framework.component``): a failure that stops the work
(a plugin that cannot be built, an unexpected exception in the scheduling or descheduling loop, a lost
Lease) fails ``/healthz``, releases the Lease and the port, prints ``koord <command>: fatal: <cause>`` and
exits with status 1; an error inside one scheduling cycle stays that pod's error. A kind the profile needs
but the cluster does not serve (a CRD not installed) is named with the way to install it; the scheduler
waits for it unready, the descheduler waits for NodeMetric and gives up on PodMigrationJob/Reservation
after two minutes (``docs/components.md``). ``/readyz`` answers 200 while the replica is a standby, or leads
with its caches filled.

Exit status: 0 stopped on request, 1 the work died, the Lease was lost or the profile failed validation,
2 bad input.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import socket
import sys
import threading
import uuid
from types import SimpleNamespace
from typing import Any, Final

from prometheus_client import CollectorRegistry

from koord_framework.cli.common import klog_level, setup_logging
from koord_framework.cluster.fence import FencedCluster, WriteFence
from koord_framework.cluster.port import ClusterPort
from koord_framework.component import (
    CONTROLLER_CACHE_SYNC_TIMEOUT,
    EXIT_FAILED,
    EXIT_OK,
    Component,
    ComponentRunner,
    MissingKindPolicy,
)
from koord_framework.errors import KoordError
from koord_framework.featuregates import FeatureGates, gates_for
from koord_framework.health import HealthServer  # re-exported: its first home was this module

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_LOST_LEASE",
    "EXIT_OK",
    "MISSING_KINDS",
    "HealthServer",
    "klog_level",
    "register",
    "serve",
]

log = logging.getLogger("koord")

EXIT_LOST_LEASE: Final = EXIT_FAILED
"""A replica that lost the Lease exits so that its pod restarts as a clean standby, as kube-scheduler."""
EXIT_BAD_INPUT: Final = 2

DEFAULT_ADDRESS = {"scheduler": "0.0.0.0:10251", "descheduler": "0.0.0.0:10251"}
LEASE_NAMESPACE = "koordinator-system"
SETTINGS_PREFIX: Final = "KOORD_"
SETTINGS_DEFAULTS: Final = SimpleNamespace(kubeconfig=None, client_qps=5000.0, client_burst=10000)
"""``koord_framework.settings.Settings`` with no ``KOORD_*`` variable set (a test keeps them equal)."""


# --- the components --------------------------------------------------------------------------------------
class _StartupGC:
    """No cyclic garbage collection while the caches are filled; then what was built is frozen.

    Listing 5,000 pods and 1,000 nodes and replaying them into the caches and plugins allocates a few
    million long-lived objects; the collector's passes over them (full ones included) took a quarter of the
    CPU up to the first bind (0.5 of 2.5 s). None of it is cyclic garbage worth finding: the collector is
    off from the build until the caches are filled, then everything alive is moved to the permanent
    generation (``gc.freeze``), so the passes of the running scheduler do not walk the initial state again
    either. Freed objects still go by reference counting; a cycle of them made before the freeze is kept.
    """

    def __init__(self) -> None:
        self._was_enabled = gc.isenabled()
        self._over = False
        gc.disable()

    def done(self, *, freeze: bool) -> None:
        if self._over:
            return
        self._over = True
        if freeze:
            gc.freeze()
        if self._was_enabled:
            gc.enable()


class SchedulerComponent:
    """koord-scheduler as a ``koord_framework.component.Component``."""

    def __init__(
        self,
        cluster: ClusterPort,
        loaded: Any,
        registry: CollectorRegistry,
        feature_gates: FeatureGates | None = None,
    ) -> None:
        from koord_framework.cluster.informer import SharedInformer
        from koord_framework.scheduler.scheduler import Scheduler

        # The informer is made here, not by the Scheduler, so that a build failing half-way (a plugin
        # listing a kind the cluster does not serve) stops the watches it had already started.
        self.informer = SharedInformer(cluster)
        self._gc = _StartupGC()
        try:
            self.scheduler = Scheduler.from_config(
                cluster,
                loaded,
                informer=self.informer,
                async_binding=True,
                metrics_registry=registry,
                seed=None,
                feature_gates=feature_gates,
            )
        except BaseException:
            self._gc.done(freeze=False)
            self.informer.stop()
            raise
        self._started = threading.Event()

    def run(self, stop: threading.Event) -> None:
        try:
            self.scheduler.start()  # the caches (filled at build) into the queue and the scheduler's cache
        finally:
            self._gc.done(freeze=True)
        self._started.set()
        self.scheduler.run(stop)

    def ready(self) -> bool:
        return self._started.is_set()

    def close(self) -> None:
        self._gc.done(freeze=False)
        try:
            self.scheduler.close()
        finally:
            self.informer.stop()


class DeschedulerComponent:
    """koord-descheduler as a ``koord_framework.component.Component``: a cycle every
    ``deschedulingInterval``, background plugins (migration jobs) working in between."""

    def __init__(
        self,
        cluster: ClusterPort,
        loaded: Any,
        registry: CollectorRegistry,
        dry_run: bool | None,
        instance_name: str = "",
    ) -> None:
        from koord_framework.cluster.informer import SharedInformer
        from koord_framework.descheduler.cache import DeschedulerCache
        from koord_framework.descheduler.descheduler import Descheduler

        self.informer = SharedInformer(cluster)
        try:
            cache = DeschedulerCache(self.informer)
            self.descheduler = Descheduler.from_config(
                loaded,
                cluster,
                dry_run=dry_run,
                metrics=registry,
                cache=cache,
                instance_name=instance_name,
            )
        except BaseException:
            self.informer.stop()
            raise
        self.interval = max(float(loaded.config.descheduling_interval), 1.0)
        self._started = threading.Event()

    def run(self, stop: threading.Event) -> None:
        clock = self.descheduler.services.clock
        self.descheduler.services.stopping = stop  # a round in progress evicts nothing once asked to stop
        self._started.set()
        while not stop.is_set():
            started = clock.now()
            report = self.descheduler.run_once()
            for error in report.errors:
                log.warning("descheduling cycle %d: %s", report.round, error)
            # Between cycles, background plugins (migration jobs) work when they asked to.
            while not stop.is_set():
                wake = self.descheduler.tick()
                now = clock.now()
                until = started + self.interval
                if now >= until:
                    break
                target = until if wake is None else min(until, max(wake, now + 0.01))
                stop.wait(max(target - now, 0.0))

    def ready(self) -> bool:
        return self._started.is_set()

    def close(self) -> None:
        try:
            self.descheduler.close()
        finally:
            self.informer.stop()


MISSING_KINDS = {
    # koord-scheduler's informer factories wait for their caches without a time limit.
    "scheduler": MissingKindPolicy(),
    # koord-descheduler: LowNodeLoad's NodeMetric informer waits without a limit; the migration controller
    # is a controller-runtime controller, which gives up after its CacheSyncTimeout and ends the process.
    "descheduler": MissingKindPolicy(
        {"PodMigrationJob": CONTROLLER_CACHE_SYNC_TIMEOUT, "Reservation": CONTROLLER_CACHE_SYNC_TIMEOUT}
    ),
}
"""Per command, what a kind the cluster does not serve does to it (the table is in docs/components.md)."""


# --- the command -----------------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, summary in (
        ("scheduler", "run koord-scheduler against a Kubernetes API server (leader-elected)"),
        ("descheduler", "run koord-descheduler against a Kubernetes API server (leader-elected)"),
    ):
        parser = subparsers.add_parser(
            name,
            help=summary,
            description=__doc__,
            epilog=gates_for(name).help(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("--config", required=True, metavar="FILE", help="the profile (bare or ConfigMap)")
        parser.add_argument(
            "--kubeconfig", metavar="FILE", help="credentials (default: in-cluster / default)"
        )
        parser.add_argument("--address", default=DEFAULT_ADDRESS[name], metavar="HOST:PORT")
        parser.add_argument("--client-qps", type=float, metavar="N")
        parser.add_argument("--client-burst", type=int, metavar="N")
        parser.add_argument(
            "--leader-elect",
            nargs="?",
            const="true",
            choices=("true", "false"),
            help="override the configuration's leaderElection.leaderElect (bare: true, as Go's flags)",
        )
        parser.add_argument("--identity", help="leader-election identity (default: HOSTNAME_<uuid>)")
        parser.add_argument("--v", type=int, default=0, metavar="N", help="klog verbosity (>= 4: debug)")
        parser.add_argument(
            "--feature-gates",
            default="",
            metavar="GATES",
            help="Koordinator's feature gates of this component: A=true,B=false,AllAlpha=true (listed below)",
        )
        if name == "descheduler":
            parser.add_argument("--dry-run", action="store_true", default=None, help="evict nothing")
        parser.set_defaults(func=lambda args, _name=name: serve(_name, args))


def _check_feature_gates(name: str, gates: str) -> FeatureGates:
    # Parsed and checked (an unknown gate or a non-boolean value is bad input, as kube components say);
    # koord-scheduler's go to its frameworks (SkipFilterWithNominatedPods); koord-descheduler's switch
    # nothing here yet.
    return gates_for(name).parse(gates)


def _process_settings() -> Any:
    """``koord_framework.settings.load_settings()``, or its defaults when no ``KOORD_*`` variable is set:
    importing pydantic-settings (it brings asyncio and dotenv) is ~30 ms of start-up (issue 22, gap 4),
    and the settings come from the environment alone."""
    if not any(key.upper().startswith(SETTINGS_PREFIX) for key in os.environ):
        return SETTINGS_DEFAULTS
    from koord_framework.settings import load_settings

    return load_settings()


def _kubeconfig(args: argparse.Namespace, from_profile: str, settings: Any) -> str:
    """``--kubeconfig``, else the profile's ``clientConnection.kubeconfig``, else ``$KOORD_KUBECONFIG``; ""
    means in-cluster credentials in a pod, else the default file."""
    return str(args.kubeconfig or from_profile or settings.kubeconfig or "")


def _client_limits(args: argparse.Namespace, client_connection: Any, settings: Any) -> tuple[float, int]:
    qps, burst = settings.client_qps, settings.client_burst
    explicit: set[str] = set(getattr(client_connection, "model_fields_set", ()) or ())
    if "qps" in explicit:
        qps = float(client_connection.qps)
    if "burst" in explicit:
        burst = int(client_connection.burst)
    if args.client_qps is not None:
        qps = args.client_qps
    if args.client_burst is not None:
        burst = args.client_burst
    return qps, burst


def _early_lists(name: str, args: argparse.Namespace, kube: Any, settings: Any) -> tuple[str, Any] | None:
    """For koord-scheduler: a cluster connected before the profile is loaded, with its Pod and Node lists
    already started (``KubeCluster.prefetch``), and the kubeconfig it used.

    Start-up (issue 22, gap 4): the API server serialises thousands of pods while this process imports and
    validates the profile. Only a cheap read of the profile's YAML happens here, for the field that
    decides (the kubeconfig: ``--kubeconfig``, ``clientConnection.kubeconfig``, ``$KOORD_KUBECONFIG``, else
    in-cluster credentials or the default file, as ``serve`` connects after the profile); ``serve`` uses the
    result only if the validated profile agrees, and anything unexpected here (a file that does not read, a
    bad kubeconfig) means no early lists: the profile's loader and the usual connection report it as
    before. With leader election the lists are made too, as kube-scheduler's informers start before the
    election: a replica that wins the Lease at once (the usual start) schedules from them, and a standby
    drops them after ``PREFETCH_MAX_AGE`` and lists anew when it leads."""
    if name != "scheduler":
        return None
    try:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        with open(args.config, encoding="utf-8") as source:
            doc = yaml.load(source, Loader=loader)
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            data = doc.get("data")
            if not isinstance(data, dict) or len(data) != 1:
                return None
            doc = yaml.load(next(iter(data.values())), Loader=loader)
        if not isinstance(doc, dict):
            return None
        connection = doc.get("clientConnection")
        from_profile = connection.get("kubeconfig") if isinstance(connection, dict) else ""
        if not isinstance(from_profile, str):
            return None
        kubeconfig = _kubeconfig(args, from_profile, settings)
        # None: in-cluster credentials in a pod, else the default kubeconfig, as the connection made after
        # the profile would use.
        cluster = kube.from_kubeconfig(kubeconfig or None, component=f"koord-{name}")
    except Exception:
        return None
    cluster.prefetch(("Pod", "Node"))
    return kubeconfig, cluster


def serve(
    name: str,
    args: argparse.Namespace,
    *,
    cluster: ClusterPort | None = None,
    stop: threading.Event | None = None,
) -> int:
    """The command. ``cluster`` replaces the one the kubeconfig names (tests run it on the embedded
    cluster); setting ``stop`` ends the run as SIGTERM does."""
    setup_logging(args.v)
    gates = _check_feature_gates(name, args.feature_gates)
    settings = _process_settings()
    importing = _StartupGC()  # the modules and models made here live as long as the process
    imported = False
    try:
        from koord_framework.cluster.kube import KubeCluster, LeaderElectionConfig

        # The lists start before the loader's modules are imported: the API server works on them meanwhile.
        early = _early_lists(name, args, KubeCluster, settings) if cluster is None else None
        try:
            from koord_framework.config.loader import load_descheduler_config, load_scheduler_config

            loaded: Any = (
                load_scheduler_config(args.config)
                if name == "scheduler"
                else load_descheduler_config(args.config)
            )
            imported = True
        except BaseException:
            if early is not None:
                early[1].close()
            raise
    finally:
        # Frozen out of the collector's passes: without it, the first pass after the collector is back
        # walked every object made so far (~80 ms of start-up, between the profile and the build).
        importing.done(freeze=imported)
    for note in getattr(loaded, "notes", ()):  # an older apiVersion read as v1: say what changed
        print(f"koord {name}: {args.config}: {note}", file=sys.stderr)
    cfg = loaded.config
    election = cfg.leader_election
    leader_elect = election.leader_elect if args.leader_elect is None else args.leader_elect == "true"
    lease = None
    if leader_elect:
        lease = LeaderElectionConfig(
            name=election.resource_name or f"koord-{name}",
            namespace=election.resource_namespace or os.environ.get("POD_NAMESPACE") or LEASE_NAMESPACE,
            identity=args.identity or f"{socket.gethostname()}_{uuid.uuid4()}",
            lease_duration=float(election.lease_duration),
            renew_deadline=float(election.renew_deadline),
            retry_period=float(election.retry_period),
        )
    if cluster is None:
        connection = getattr(cfg, "client_connection", None)
        qps, burst = _client_limits(args, connection, settings)
        kubeconfig = _kubeconfig(args, getattr(connection, "kubeconfig", ""), settings)
        if early is not None and early[0] == kubeconfig:
            connected: KubeCluster = early[1]  # its lists of Pod and Node are in flight or done
            connected.transport.set_limits(qps, burst)
            cluster = connected
        else:
            if early is not None:
                early[1].close()
            cluster = KubeCluster.from_kubeconfig(
                kubeconfig or None, qps=qps, burst=burst, component=f"koord-{name}"
            )
    elif early is not None:
        early[1].close()
    port: ClusterPort = cluster
    # The component writes through the fence; the elector renews the Lease through ``port`` itself.
    fence = WriteFence(f"koord-{name}")
    fenced = FencedCluster(port, fence)

    def build(registry: CollectorRegistry) -> Component:
        if name == "scheduler":
            return SchedulerComponent(fenced, loaded, registry, gates)
        if name == "descheduler":
            # Leader-elected replicas share one name (the Lease): a new leader carries on the
            # PodMigrationJobs its predecessor left (Koordinator's reconciler ignores them for good).
            instance = f"{lease.namespace}/{lease.name}" if lease is not None else ""
            return DeschedulerComponent(
                fenced, loaded, registry, getattr(args, "dry_run", None), instance_name=instance
            )
        raise KoordError(f"no component named {name!r}")

    def connect() -> None:
        if isinstance(port, KubeCluster):
            port.resource("Pod")  # discovery fails fast on bad credentials or an unreachable server

    try:
        runner = ComponentRunner(
            name,
            build,
            address=args.address,
            cluster=port,
            leader_election=lease,
            missing_kinds=MISSING_KINDS.get(name),
            preflight=connect,
            fence=fence,
        )
        return runner.run(stop)
    finally:
        close = getattr(port, "close", None)  # a real cluster's connections and watches
        if callable(close):
            close()


def main(argv: list[str] | None = None) -> int:
    """``python -m koord_framework.cli.serve scheduler|descheduler ...`` (the same as ``koord scheduler``)."""
    parser = argparse.ArgumentParser(prog="koord")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KoordError as err:
        print(f"koord: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())
