"""Reservation at scale: 1,000 nodes, 2,000 Available reservations, 10,000 pods of which half are owners.

    python -m bench.reservation                 # both runs side by side and their ratio
    python -m bench --workload reservation      # the run with reservations only

Nodes {cpu 32, memory 128Gi, pods 110}. Reservations {cpu 4, memory 8Gi}, two per node, Available (as if
scheduled earlier), shared (``allocateOnce: false``), owned by one of 500 services (``app: svc-K``). Measured
pods {cpu 500m, memory 1Gi}: even ones are owners (``app: svc-(i/2 mod 500)``, each matching the 4
reservations of its service), odd ones belong to no service. The profile is the shipped
``configs/scheduler/koord-scheduler.yaml`` (Reservation at weight 5000). The baseline is the same run
without the reservations; the report gives both and the ratio of their mean pods/s.

Checks of the run with reservations: every owner that was scheduled consumes a reservation of its service,
and no node is overcommitted counting what the reservations still hold.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench import workloads as wl
from bench.scheduler_perf import Obj, Run, Scenario, Workload, run
from koord_framework.api.objects import PodInfo
from koord_framework.config.loader import LoadedSchedulerConfig, load_scheduler_config

SCHEDULER_NAME = "koord-scheduler"
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "scheduler" / "koord-scheduler.yaml"
NODE = {"cpu": "32", "memory": "128Gi", "pods": "110"}
RESERVED = {"cpu": "4", "memory": "8Gi"}
POD = {"cpu": "500m", "memory": "1Gi"}
SERVICES = 500
RESERVATIONS_PER_NODE = 2
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def config() -> LoadedSchedulerConfig:
    return load_scheduler_config(CONFIG)


def reservations(nodes: int) -> Iterable[Obj]:
    for i in range(nodes * RESERVATIONS_PER_NODE):
        node = f"node-{i % nodes}"
        yield {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": f"resv-{i}", "uid": f"resv-uid-{i}", "creationTimestamp": wl.NOW},
            "spec": {
                "allocateOnce": False,
                "ttl": "24h",
                "owners": [{"labelSelector": {"matchLabels": {"app": f"svc-{i % SERVICES}"}}}],
                "template": {
                    "spec": {
                        "schedulerName": SCHEDULER_NAME,
                        "containers": [{"name": "main", "resources": {"requests": dict(RESERVED)}}],
                    }
                },
            },
            "status": {
                "phase": "Available",
                "nodeName": node,
                "allocatable": dict(RESERVED),
                "conditions": [
                    {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
                    {"type": "Ready", "status": "True", "reason": "Available"},
                ],
            },
        }


def measured_pods(n: int) -> list[Obj]:
    pods = []
    for i in range(n):
        app = f"svc-{(i // 2) % SERVICES}" if i % 2 == 0 else "no-service"
        pods.append(wl.pod(f"measured-{i}", dict(POD), labels={"app": app}, scheduler_name=SCHEDULER_NAME))
    return pods


def _build(with_reservations: bool) -> Any:
    def build(nodes: int, _init: int, measured: int) -> Scenario:
        def setup() -> Iterable[Obj]:
            for i in range(nodes):
                yield wl.node(f"node-{i}", i, dict(NODE))
            if with_reservations:
                yield from reservations(nodes)

        return Scenario(setup(), measured_pods(measured))

    return build


def verify(finished: Run) -> dict[str, Any]:
    """Owners consume their own service's reservations; no node exceeds its cpu counting reservations."""
    pods = [PodInfo.from_manifest(o) for o in finished.cluster.list("Pod")[0]]
    objs, _ = finished.cluster.list("Reservation")
    by_uid = {o["metadata"]["uid"]: o for o in objs}
    consumed: dict[str, int] = {}
    wrong_owner = 0
    owners_in = owners = 0
    for p in pods:
        if not p.node_name:
            continue
        raw = p.annotations.get(ALLOCATED)
        if p.labels.get("app", "").startswith("svc-"):
            owners += 1
        if not raw:
            continue
        owners_in += 1
        uid = json.loads(raw)["uid"]
        r = by_uid[uid]
        want = r["spec"]["owners"][0]["labelSelector"]["matchLabels"]["app"]
        if p.labels.get("app") != want or r["status"]["nodeName"] != p.node_name:
            wrong_owner += 1
        consumed[uid] = consumed.get(uid, 0) + p.requests.get("cpu", 0)
    used: dict[str, int] = {}
    for p in pods:
        if p.node_name:
            used[p.node_name] = used.get(p.node_name, 0) + p.requests.get("cpu", 0)
    for uid, r in by_uid.items():
        if (r.get("status") or {}).get("phase") == "Available":
            node = r["status"]["nodeName"]
            used[node] = used.get(node, 0) + max(4000 - consumed.get(uid, 0), 0)
    overcommitted = sum(1 for v in used.values() if v > 32_000)
    return {
        "reservations": {
            "ok": wrong_owner == 0 and overcommitted == 0,
            "violations": wrong_owner + overcommitted,
            "ownersScheduled": owners,
            "ownersInReservations": owners_in,
            "wrongOwner": wrong_owner,
            "overcommittedNodes": overcommitted,
        }
    }


RESERVATION = Workload(
    name="reservation",
    title="Reservation: 1,000 nodes, 2,000 Available reservations, 10,000 pods (half of them owners)",
    nodes=1000,
    init_pods=0,
    measured_pods=10_000,
    build=_build(True),
    config=config,
    min_pods_per_second=500,
    verify=verify,
)

BASELINE = Workload(
    name="reservation-baseline",
    title="The Reservation workload without reservations (the same nodes, pods and profile)",
    nodes=1000,
    init_pods=0,
    measured_pods=10_000,
    build=_build(False),
    config=config,
    min_pods_per_second=0,
)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (RESERVATION, BASELINE)}
MIN_RATIO = 0.5


def compare(nodes: int | None = None, pods: int | None = None) -> dict[str, Any]:
    """Both runs in this process, one after the other; the ratio of their mean pods/s."""
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    base, _ = run(BASELINE, nodes=nodes, pods=pods, progress=say)
    with_r, _ = run(RESERVATION, nodes=nodes, pods=pods, progress=say)
    ratio = (
        with_r["podsPerSecond"]["mean"] / base["podsPerSecond"]["mean"]
        if base["podsPerSecond"]["mean"]
        else 0
    )
    met = with_r["target"]["met"] and ratio >= MIN_RATIO
    return {
        "workload": "reservation-compare",
        "withReservations": with_r,
        "withoutReservations": base,
        "ratio": round(ratio, 3),
        "target": {"minPodsPerSecond": RESERVATION.min_pods_per_second, "minRatio": MIN_RATIO, "met": met},
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.reservation", description=__doc__)
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--pods", type=int)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().with_name("results") / "reservation.json"
    )
    args = parser.parse_args(argv)
    report = compare(args.nodes, args.pods)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    w, b = report["withReservations"], report["withoutReservations"]
    print(
        f"reservation: {w['podsPerSecond']['mean']:.0f} pods/s with reservations, "
        f"{b['podsPerSecond']['mean']:.0f} without, ratio {report['ratio']:.2f} "
        f"(target >= {RESERVATION.min_pods_per_second:.0f} pods/s and >= {MIN_RATIO}x: "
        f"{'met' if report['target']['met'] else 'MISSED'}); checks {w.get('checks')}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
