"""``koord scheduler`` and ``koord descheduler``: the long-running components on a real cluster.

    koord scheduler   --config FILE [--kubeconfig FILE] [--address HOST:PORT] [--client-qps N]
                      [--client-burst N] [--leader-elect true|false] [--v N] [--feature-gates GATES]
    koord descheduler --config FILE [same options] [--dry-run]

Each connects to the API server (``--kubeconfig``; without it in-cluster credentials in a pod, else
``$KOORD_KUBECONFIG`` / ``$KUBECONFIG`` / ``~/.kube/config``), serves ``/healthz``, ``/readyz`` and
``/metrics`` on ``--address``, and, when the configuration's ``leaderElection.leaderElect`` is on (the
default), works only while it holds the Lease ``leaderElection.resourceNamespace/resourceName``. A replica
that loses the Lease exits with status 1 so that its pod restarts as a clean standby, as kube-scheduler
does; SIGTERM stops it cleanly and hands the Lease over at once.

Client rate limits: ``--client-qps``/``--client-burst`` when given, else the configuration's
``clientConnection`` when it sets them, else the platform's defaults (5,000 / 10,000: kube-scheduler's
50 / 100 caps binding at about 50 pods per second).

``/readyz`` answers 200 once the process is connected and, while it leads, once its caches are filled; a
standby is ready (it serves health and metrics). ``/healthz`` fails only when the component stopped.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Gauge

from koord_framework.errors import KoordError
from koord_framework.health import HealthServer  # re-exported: its first home was this module

__all__ = ["HealthServer", "klog_level", "register"]

log = logging.getLogger("koord")

EXIT_OK, EXIT_LOST_LEASE, EXIT_BAD_INPUT = 0, 1, 2

DEFAULT_ADDRESS = {"scheduler": "0.0.0.0:10251", "descheduler": "0.0.0.0:10251"}
LEASE_NAMESPACE = "koordinator-system"


# --- logging ---------------------------------------------------------------------------------------------
def klog_level(verbosity: int) -> int:
    """klog's ``--v`` as a logging level: Koordinator's charts use 4 for debug detail, 0-3 for the usual."""
    return logging.DEBUG if verbosity >= 4 else logging.INFO


# --- the components --------------------------------------------------------------------------------------
class Component(Protocol):
    """What a serving command runs while it leads."""

    def run(self, stop: threading.Event) -> None: ...

    def ready(self) -> bool: ...

    def close(self) -> None: ...


class SchedulerComponent:
    def __init__(self, cluster: Any, loaded: Any, registry: CollectorRegistry) -> None:
        from koord_framework.scheduler.scheduler import Scheduler

        self.scheduler = Scheduler.from_config(
            cluster, loaded, async_binding=True, metrics_registry=registry, seed=None
        )
        self._started = threading.Event()

    def run(self, stop: threading.Event) -> None:
        self.scheduler.start()  # lists nodes and pods: the caches are filled when it returns
        self._started.set()
        self.scheduler.run(stop)

    def ready(self) -> bool:
        return self._started.is_set()

    def close(self) -> None:
        self.scheduler.close()


class DeschedulerComponent:
    def __init__(self, cluster: Any, loaded: Any, registry: CollectorRegistry, dry_run: bool | None) -> None:
        from koord_framework.descheduler.descheduler import Descheduler

        self.descheduler = Descheduler.from_config(loaded, cluster, dry_run=dry_run, metrics=registry)
        self.interval = max(float(loaded.config.descheduling_interval), 1.0)
        self._started = threading.Event()

    def run(self, stop: threading.Event) -> None:
        clock = self.descheduler.services.clock
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
        self.descheduler.close()


# --- the command -----------------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, summary in (
        ("scheduler", "run koord-scheduler against a Kubernetes API server (leader-elected)"),
        ("descheduler", "run koord-descheduler against a Kubernetes API server (leader-elected)"),
    ):
        parser = subparsers.add_parser(
            name, help=summary, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
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
            choices=("true", "false"),
            help="override the configuration's leaderElection.leaderElect",
        )
        parser.add_argument("--identity", help="leader-election identity (default: HOSTNAME_<uuid>)")
        parser.add_argument("--v", type=int, default=0, metavar="N", help="klog verbosity (>= 4: debug)")
        parser.add_argument(
            "--feature-gates",
            default="",
            metavar="GATES",
            help="Koordinator feature gates (none are known yet)",
        )
        if name == "descheduler":
            parser.add_argument("--dry-run", action="store_true", default=None, help="evict nothing")
        parser.set_defaults(func=lambda args, _name=name: serve(_name, args))


def _check_feature_gates(gates: str) -> None:
    given = [g for g in gates.split(",") if g.strip()]
    if given:
        raise KoordError(f"--feature-gates {gates!r}: unknown feature gate(s); this build knows none")


def _client_limits(args: argparse.Namespace, client_connection: Any) -> tuple[float, int]:
    from koord_framework.settings import load_settings

    settings = load_settings()
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


def serve(name: str, args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=klog_level(args.v), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    _check_feature_gates(args.feature_gates)
    from koord_framework.cluster.kube import KubeCluster, LeaderElectionConfig, LeaderElector
    from koord_framework.config.loader import load_descheduler_config, load_scheduler_config
    from koord_framework.settings import load_settings

    loaded: Any = (
        load_scheduler_config(args.config) if name == "scheduler" else load_descheduler_config(args.config)
    )
    cfg = loaded.config
    qps, burst = _client_limits(args, getattr(cfg, "client_connection", None))
    kubeconfig = args.kubeconfig or getattr(getattr(cfg, "client_connection", None), "kubeconfig", "") or None
    kubeconfig = kubeconfig or load_settings().kubeconfig
    cluster = KubeCluster.from_kubeconfig(kubeconfig, qps=qps, burst=burst, component=f"koord-{name}")
    registry = CollectorRegistry()
    leading = Gauge("koord_leader_is_leader", "1 while this replica holds the lease", registry=registry)

    component: Component | None = None
    stopping = threading.Event()
    lost = threading.Event()
    connected = threading.Event()

    def ready() -> bool:
        if not connected.is_set():
            return False
        return component.ready() if component is not None else True

    health = HealthServer(args.address, registry, healthy=lambda: not lost.is_set(), ready=ready).start()
    log.info("koord %s: serving /healthz, /readyz, /metrics on port %d", name, health.port)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())

    try:
        cluster.resource("Pod")  # discovery: fails fast on bad credentials or an unreachable server
        connected.set()

        work_stop = threading.Event()
        work_done = threading.Event()

        def lead(leadership_over: threading.Event) -> None:
            nonlocal component
            leading.set(1)
            threading.Thread(
                target=_stop_when_any, args=(work_stop, leadership_over, stopping), daemon=True
            ).start()
            try:
                component = _build(name, cluster, loaded, registry, args)
                component.run(work_stop)
                component.close()
            finally:
                leading.set(0)
                work_done.set()

        election = cfg.leader_election
        leader_elect = election.leader_elect if args.leader_elect is None else args.leader_elect == "true"
        if not leader_elect:
            worker = threading.Thread(target=lead, args=(stopping,), name=name, daemon=True)
            worker.start()
            while worker.is_alive() and not stopping.wait(0.5):
                pass
            work_done.wait(30)
            return EXIT_OK
        identity = args.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        elector = LeaderElector(
            cluster,
            LeaderElectionConfig(
                name=election.resource_name or f"koord-{name}",
                namespace=election.resource_namespace or os.environ.get("POD_NAMESPACE") or LEASE_NAMESPACE,
                identity=identity,
                lease_duration=float(election.lease_duration),
                renew_deadline=float(election.renew_deadline),
                retry_period=float(election.retry_period),
            ),
            on_started_leading=lead,
        )
        log.info("koord %s: %s waiting for the lease", name, identity)
        thread = elector.start()
        while thread.is_alive() and not stopping.wait(0.5):
            pass
        if not stopping.is_set():
            lost.set()
            log.error("koord %s: leader election lost", name)
            return EXIT_LOST_LEASE
        # Finish in-flight work before handing the lease over, so two replicas never act at once.
        if elector.leading.is_set():
            work_done.wait(30)
        elector.stop()
        return EXIT_OK
    finally:
        health.close()
        cluster.close()


def _stop_when_any(stop: threading.Event, *events: threading.Event) -> None:
    while not any(e.wait(0.2) for e in events):
        pass
    stop.set()


def _build(
    name: str, cluster: Any, loaded: Any, registry: CollectorRegistry, args: argparse.Namespace
) -> Component:
    if name == "scheduler":
        return SchedulerComponent(cluster, loaded, registry)
    return DeschedulerComponent(cluster, loaded, registry, getattr(args, "dry_run", None))


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
