"""Scheduling throughput and latency against a real kube-apiserver: koord scheduler vs kube-scheduler v1.20.

    python -m bench.kube_e2e [--nodes 1000] [--pods 1000,5000] [--schedulers koord,kube] [--kube-qps 5000]
                             [--stream 500] [--stream-rate 100] [--output results.json]

For each scheduler and pod count, on a fresh etcd + kube-apiserver (tests/e2e/harness.py; binaries built
once by tests/e2e/build_apiserver.sh):

1. ``--nodes`` Ready nodes (32 cores, 256Gi, 110 pods each) and ``N`` pending pods (one container,
   100m / 128Mi, scheduler ``koord-scheduler`` or ``default-scheduler``) are created before the scheduler
   starts, as in kube-scheduler's scheduler_perf ``SchedulingBasic``;
2. the scheduler process starts; a watch in this process records when each pod is bound;
3. **batch**: time from the scheduler's start until every pod is bound, and pods/s between the first and
   the last binding (throughput without the start-up);
4. **stream** (``--stream`` pods at ``--stream-rate`` per second, created while the scheduler runs): the
   pod-scheduled latency of each, from the creation the watch saw to the binding it saw; p50/p99 against
   Kubernetes' 5 s pod-startup SLO.

The client rate limit of kube-scheduler is set with ``--kube-qps`` (its default 50 caps it at ~50 pods/s).
Results print as a table and, with ``--output``, as JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SLO_SECONDS = 5.0


def _harness() -> ModuleType:
    name = "koord_e2e_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "e2e" / "harness.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass
class Result:
    scheduler: str
    nodes: int
    pods: int
    all_bound_seconds: float = 0.0
    """From the scheduler process's start until the last pod was bound."""
    pods_per_second: float = 0.0
    """Between the first and the last binding."""
    stream_pods: int = 0
    stream_p50: float = 0.0
    stream_p99: float = 0.0
    stream_max: float = 0.0
    notes: list[str] = field(default_factory=list)


class BindWatch:
    """Watches pods of one namespace; records when each is first seen and when it is first seen bound."""

    def __init__(self, kube: Any, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.seen: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        _, rv = kube.list("Pod", namespace)
        self.unsubscribe = kube.subscribe(["Pod"], self._on_event, since=rv)

    def _on_event(self, event: Any) -> None:
        meta = event.obj.get("metadata") or {}
        if meta.get("namespace") != self.namespace:
            return
        name = str(meta.get("name"))
        now = time.monotonic()
        with self.changed:
            self.seen.setdefault(name, now)
            if (event.obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                self.bound[name] = now
                self.changed.notify_all()

    def wait_bound(self, names: set[str], timeout: float, proc: subprocess.Popen[bytes]) -> bool:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not names <= self.bound.keys():
                left = deadline - time.monotonic()
                if left <= 0 or proc.poll() is not None:
                    return False
                self.changed.wait(min(left, 1.0))
        return True


def node_manifest(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def pod_manifest(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.2",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }


def install_crds(server: Any) -> None:
    """Koordinator's CRDs, which a cluster running koord has (LoadAwareScheduling watches NodeMetrics)."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    names = []
    for crd in sorted((ROOT / "configs" / "crds").glob("*.yaml")):
        doc = yaml.safe_load(crd.read_text())
        server.request("POST", path, doc)
        names.append(doc["metadata"]["name"])
    deadline = time.monotonic() + 30
    while names and time.monotonic() < deadline:
        _, crd_obj = server.request("GET", f"{path}/{names[0]}")
        conditions = (crd_obj.get("status") or {}).get("conditions") or ()
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            names.pop(0)
        else:
            time.sleep(0.1)


def create_all(kube: Any, objs: list[dict[str, Any]], workers: int = 16) -> None:
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(kube.create, objs))


def start_scheduler(
    kind: str, server: Any, workdir: Path, bins: dict[str, Path], kube_qps: int
) -> subprocess.Popen[bytes]:
    log = open(workdir / f"{kind}-scheduler.log", "wb")  # noqa: SIM115 - handed to the child
    if kind == "koord":
        source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
        config = workdir / "koord-scheduler.yaml"
        config.write_text(source["data"]["koord-scheduler-config"])
        args = [
            sys.executable,
            "-m",
            "koord_framework.cli.serve",
            "scheduler",
            f"--config={config}",
            f"--kubeconfig={server.kubeconfig}",
            f"--address=127.0.0.1:{_harness().free_port()}",
            "--leader-elect=false",
        ]
    else:
        config = workdir / "kube-scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {
                        "qps": kube_qps,
                        "burst": kube_qps,
                        "kubeconfig": str(server.kubeconfig),
                    },
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        args = [
            str(bins["kube-scheduler"]),
            f"--config={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={_harness().free_port()}",
            "--port=0",
            f"--authentication-kubeconfig={server.kubeconfig}",
            f"--authorization-kubeconfig={server.kubeconfig}",
            "-v=1",
        ]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    return proc


def run_one(kind: str, nodes: int, pods: int, args: argparse.Namespace, bins: dict[str, Path]) -> Result:
    from koord_framework.cluster.kube import KubeCluster

    harness = _harness()
    result = Result(scheduler=kind, nodes=nodes, pods=pods)
    workdir = Path(tempfile.mkdtemp(prefix=f"kube-e2e-{kind}-"))
    server = harness.start_apiserver(workdir, bins)
    scheduler_name = "koord-scheduler" if kind == "koord" else "default-scheduler"
    kube = KubeCluster.from_kubeconfig(str(server.kubeconfig), component="bench")
    proc: subprocess.Popen[bytes] | None = None
    try:
        namespace = "bench"
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        install_crds(server)
        t = time.monotonic()
        create_all(kube, [node_manifest(i) for i in range(nodes)])
        names = [f"pod-{i:05d}" for i in range(pods)]
        create_all(kube, [pod_manifest(n, namespace, scheduler_name) for n in names])
        print(f"  {kind}: {nodes} nodes and {pods} pods created in {time.monotonic() - t:.1f} s", flush=True)
        watch = BindWatch(kube, namespace)
        started = time.monotonic()
        proc = start_scheduler(kind, server, workdir, bins, args.kube_qps)
        if not watch.wait_bound(set(names), args.timeout, proc):
            result.notes.append(f"only {len(watch.bound)} of {pods} bound (scheduler exit: {proc.poll()})")
        times = sorted(watch.bound[n] for n in names if n in watch.bound)
        if times:
            result.all_bound_seconds = round(times[-1] - started, 2)
            span = times[-1] - times[0]
            result.pods_per_second = round((len(times) - 1) / span, 1) if span > 0 else float(len(times))
        if args.stream:
            stream = [f"stream-{i:05d}" for i in range(args.stream)]
            interval = 1.0 / args.stream_rate
            begin = time.monotonic()
            for i, name in enumerate(stream):
                delay = begin + i * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                kube.create(pod_manifest(name, namespace, scheduler_name))
            watch.wait_bound(set(stream), args.timeout, proc)
            latencies = sorted(watch.bound[n] - watch.seen[n] for n in stream if n in watch.bound)
            if latencies:
                result.stream_pods = len(latencies)
                result.stream_p50 = round(statistics.median(latencies), 3)
                result.stream_p99 = round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 3)
                result.stream_max = round(latencies[-1], 3)
        watch.unsubscribe()
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        kube.close()
        server.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", default="1000,5000", help="comma-separated pod counts")
    parser.add_argument("--schedulers", default="koord,kube")
    parser.add_argument("--kube-qps", type=int, default=5000, help="kube-scheduler's client QPS and burst")
    parser.add_argument("--stream", type=int, default=500, help="pods created while the scheduler runs")
    parser.add_argument("--stream-rate", type=float, default=100.0, help="their creation rate per second")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--output", help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the working directories (logs)")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.schedulers.split(",") if k.strip()]
    extra = ("kube-scheduler",) if "kube" in kinds else ()
    bins = _harness().ensure_binaries(extra)
    results = []
    for pods in (int(p) for p in args.pods.split(",")):
        for kind in kinds:
            print(f"{kind}: {args.nodes} nodes, {pods} pods", flush=True)
            results.append(run_one(kind, args.nodes, pods, args, bins))
    print()
    header = ("scheduler", "nodes", "pods", "all bound s", "pods/s", "p50 s", "p99 s")
    print("{:<10} {:>6} {:>6} {:>12} {:>8} {:>7} {:>7}  notes".format(*header))
    for r in results:
        row = (
            r.scheduler,
            r.nodes,
            r.pods,
            r.all_bound_seconds,
            r.pods_per_second,
            r.stream_p50,
            r.stream_p99,
        )
        print("{:<10} {:>6} {:>6} {:>12.2f} {:>8.1f} {:>7.3f} {:>7.3f}  ".format(*row) + "; ".join(r.notes))
    if args.output:
        Path(args.output).write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    worst = max((r.stream_p99 for r in results if r.scheduler == "koord"), default=0.0)
    if worst > SLO_SECONDS:
        print(
            f"koord p99 pod-scheduled latency {worst:.2f} s exceeds the {SLO_SECONDS:.0f} s SLO",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
