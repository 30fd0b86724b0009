"""Scheduling throughput against a real kube-apiserver: koord, kube-scheduler v1.20 and the ceiling.

    python -m bench.kube_e2e [--nodes 1000] [--pods 1000,5000] [--qps 5000,50] [--repeat 1]
                             [--schedulers ceiling,koord,koord-koordinator,kube]
                             [--stream 500] [--stream-rate 100] [--output results.json] [--profile DIR]

Schedulers:

* ``ceiling``: ``bench/nologic_binder.py``, binding pods round-robin over 16 connections with no scheduling
  logic and no rate limit: what this machine's API server allows; every other figure is read against it;
* ``koord``: koord-scheduler with kube-scheduler's default profile
  (``configs/scheduler/default-scheduler.yaml`` under the name ``koord-scheduler``);
* ``koord-koordinator``: koord-scheduler with Koordinator's shipped profile
  (``configs/scheduler/koord-scheduler.yaml``: LoadAwareScheduling on), each node with a fresh NodeMetric;
* ``kube``: kube-scheduler v1.20 (built once by tests/e2e/build_apiserver.sh).

Every scheduler but the ceiling runs at each client QPS of ``--qps`` (burst = 2 x QPS, kube-scheduler's
ratio: 50/100 are its defaults). ``--repeat`` runs the whole list that many times, alternating
schedulers, so that the load of the shared machine falls on all of them alike; each run gets a fresh
etcd + kube-apiserver with the same objects.

For each scheduler and pod count, on a fresh etcd + kube-apiserver (tests/e2e/harness.py; binaries built
once by tests/e2e/build_apiserver.sh):

1. ``--nodes`` Ready nodes (32 cores, 256Gi, 110 pods each) and ``N`` pending pods (one container,
   100m / 128Mi, scheduler ``koord-scheduler`` or ``default-scheduler``) are created before the scheduler
   starts, as in kube-scheduler's scheduler_perf ``SchedulingBasic``;
2. the scheduler process starts; a watch in this process records when each pod is bound;
3. **batch**: time from the scheduler's start until every pod is bound, pods/s between the first and
   the last binding (throughput without the start-up), time to the first binding, and the scheduler
   process's CPU seconds (user + system, from its start until the last binding) and peak RSS;
4. **stream** (``--stream`` pods at ``--stream-rate`` per second, created while the scheduler runs): the
   pod-scheduled latency of each, from the creation the watch saw to the binding it saw; p50/p99 against
   Kubernetes' 5 s pod-startup SLO.

Results print as a table per run, then medians per scheduler and QPS with their ratios to the ceiling and
to kube-scheduler at the same QPS, and the load average of the machine; with ``--output``, as JSON.
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


KOORD_KINDS = ("koord", "koord-koordinator")
SCHEDULER_NAMES = {
    "ceiling": "no-logic-binder",
    "koord": "koord-scheduler",
    "koord-koordinator": "koord-scheduler",
    "kube": "default-scheduler",
}


@dataclass
class Result:
    scheduler: str
    nodes: int
    pods: int
    qps: int = 0
    """The scheduler's client QPS (0: no limit, the ceiling)."""
    run: int = 0
    all_bound_seconds: float = 0.0
    """From the scheduler process's start until the last pod was bound."""
    pods_per_second: float = 0.0
    """Between the first and the last binding."""
    first_bind_seconds: float = 0.0
    """From the scheduler process's start until the first pod was bound."""
    cpu_seconds: float = 0.0
    """User + system CPU of the scheduler process from its start until the last binding."""
    cpu_ms_per_pod: float = 0.0
    """CPU between the first and the last binding per pod bound in between (start-up excluded)."""
    total_cpu_ms_per_pod: float = 0.0
    """``cpu_seconds`` per pod (start-up included)."""
    peak_rss_mb: float = 0.0
    apiserver_cpu_seconds: float = 0.0
    """CPU of kube-apiserver + etcd during the same interval."""
    load_average: float = 0.0
    """The machine's 1-minute load average when the last pod was bound."""
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


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (its threads included), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


class CpuSampler:
    """Samples a process's CPU seconds every ``interval`` so that CPU between two instants can be read."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), cpu_seconds(self.pid)))
            self._stop.wait(interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, when: float) -> float:
        """CPU seconds at ``when`` (the nearest sample not after it)."""
        best = 0.0
        for t, cpu in self.samples:
            if t > when:
                break
            best = cpu
        return best


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of a live process, by thread id (from /proc: the kernel's accounting)."""
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / _TICKS
    return out


def thread_names(profile: Path) -> dict[int, str]:
    """Python thread names by thread id, from a py-spy raw profile (``thread (TID): NAME;...``)."""
    names: dict[int, str] = {}
    if profile.exists():
        for line in profile.read_text().splitlines():
            head = line.split(";", 1)[0]
            if head.startswith("thread (") and "):" in head:
                tid, name = head[len("thread (") :].split("):", 1)
                names[int(tid)] = name.strip()
    return names


def start_profile(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy (a dev tool, ``pip install py-spy``) sampling the thread holding the GIL in ``pid``: where the
    Python CPU goes (the kernel's per-thread figures are printed beside it)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("  --profile needs py-spy (pip install py-spy)", file=sys.stderr)
        return None
    args = [spy, "record", "--pid", str(pid), "--threads", "--gil", "--rate", "250", "--format", "raw"]
    args += ["--nonblocking", "--output", str(out)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


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


def node_metric(i: int) -> dict[str, Any]:
    """A NodeMetric reported just now: a quarter of the node's CPU and memory in use (LoadAware scores it)."""
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": f"node-{i:05d}"},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
    }


def node_metric_status(i: int) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cpu = 6000 + (i * 37) % 4000  # spread a little, so that scores differ between nodes
    return {
        "status": {
            "updateTime": now,
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{cpu}m", "memory": "64Gi"}}},
        }
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
    kind: str, server: Any, workdir: Path, bins: dict[str, Path], qps: int
) -> subprocess.Popen[bytes]:
    log = open(workdir / f"{kind}-scheduler.log", "wb")  # noqa: SIM115 - handed to the child
    if kind == "ceiling":
        args = [
            sys.executable,
            str(ROOT / "bench" / "nologic_binder.py"),
            f"--kubeconfig={server.kubeconfig}",
        ]
        args.append(f"--scheduler-name={SCHEDULER_NAMES[kind]}")
    elif kind in KOORD_KINDS:
        config = workdir / "koord-scheduler.yaml"
        if kind == "koord":
            doc = yaml.safe_load((ROOT / "configs" / "scheduler" / "default-scheduler.yaml").read_text())
            doc["profiles"][0]["schedulerName"] = SCHEDULER_NAMES[kind]
            config.write_text(yaml.safe_dump(doc))
        else:
            source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
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
            f"--client-qps={qps}",
            f"--client-burst={2 * qps}",
        ]
    else:
        config = workdir / "kube-scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {
                        "qps": qps,
                        "burst": 2 * qps,
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


def run_one(
    kind: str, nodes: int, pods: int, qps: int, args: argparse.Namespace, bins: dict[str, Path], run: int = 0
) -> Result:
    from koord_framework.cluster.kube import KubeCluster

    harness = _harness()
    result = Result(scheduler=kind, nodes=nodes, pods=pods, qps=qps, run=run)
    workdir = Path(tempfile.mkdtemp(prefix=f"kube-e2e-{kind}-"))
    server = harness.start_apiserver(workdir, bins)
    scheduler_name = SCHEDULER_NAMES[kind]
    kube = KubeCluster.from_kubeconfig(str(server.kubeconfig), component="bench")
    proc: subprocess.Popen[bytes] | None = None
    try:
        namespace = "bench"
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        install_crds(server)
        t = time.monotonic()
        create_all(kube, [node_manifest(i) for i in range(nodes)])
        if kind == "koord-koordinator":
            create_all(kube, [node_metric(i) for i in range(nodes)])
            with ThreadPoolExecutor(16) as pool:
                list(
                    pool.map(
                        lambda i: kube.patch(
                            "NodeMetric", f"node-{i:05d}", "", node_metric_status(i), status=True
                        ),
                        range(nodes),
                    )
                )
        names = [f"pod-{i:05d}" for i in range(pods)]
        create_all(kube, [pod_manifest(n, namespace, scheduler_name) for n in names])
        print(f"  {kind}: {nodes} nodes and {pods} pods created in {time.monotonic() - t:.1f} s", flush=True)
        watch = BindWatch(kube, namespace)
        started = time.monotonic()
        server_pids = [p.pid for p in server.processes.values()]
        server_cpu = sum(cpu_seconds(pid) for pid in server_pids)
        proc = start_scheduler(kind, server, workdir, bins, qps)
        sampler = CpuSampler(proc.pid)
        spy = None
        per_thread: dict[int, float] = {}
        profile_file = Path(args.profile or ".") / f"{kind}-{qps}-{pods}-{run}.txt"
        if args.profile:
            # From the first binding on: the steady state, not the imports and the initial lists.
            while not watch.bound and proc.poll() is None and time.monotonic() - started < args.timeout:
                time.sleep(0.02)
            per_thread = thread_cpu(proc.pid)
            spy = start_profile(proc.pid, profile_file)
        if not watch.wait_bound(set(names), args.timeout, proc):
            result.notes.append(f"only {len(watch.bound)} of {pods} bound (scheduler exit: {proc.poll()})")
        sampler.stop()
        if args.profile:
            after = thread_cpu(proc.pid)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        if args.profile:
            named = thread_names(profile_file)
            by_name: dict[str, float] = {}
            for tid, cpu in after.items():
                name = named.get(tid, f"tid {tid}")
                name = name.rstrip("0123456789").rstrip("_-") or name  # binder_7 -> binder
                by_name[name] = by_name.get(name, 0.0) + cpu - per_thread.get(tid, 0.0)
            total = sum(by_name.values()) or 1.0
            print(f"  CPU per thread from the first binding on ({total:.2f} s):", flush=True)
            for name, cpu in sorted(by_name.items(), key=lambda kv: -kv[1])[:12]:
                print(f"    {cpu:7.2f} s {100 * cpu / total:5.1f} %  {name}", flush=True)
        result.cpu_seconds = round(cpu_seconds(proc.pid), 2)
        result.total_cpu_ms_per_pod = round(1000 * result.cpu_seconds / max(1, len(watch.bound)), 3)
        result.peak_rss_mb = round(peak_rss_mb(proc.pid), 1)
        result.apiserver_cpu_seconds = round(sum(cpu_seconds(pid) for pid in server_pids) - server_cpu, 2)
        result.load_average = round(os.getloadavg()[0], 2)
        times = sorted(watch.bound[n] for n in names if n in watch.bound)
        if times:
            result.all_bound_seconds = round(times[-1] - started, 2)
            result.first_bind_seconds = round(times[0] - started, 2)
            span_cpu = sampler.at(times[-1] + 0.05) - sampler.at(times[0])
            result.cpu_ms_per_pod = round(1000 * span_cpu / max(1, len(times) - 1), 3)
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


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else 0.0


def summarize(results: list[Result]) -> list[dict[str, Any]]:
    """Medians per (scheduler, pods, QPS), with pods/s as a ratio to the ceiling and to kube-scheduler.

    The ratios are medians of per-repeat ratios: each repeat ran every scheduler back to back, so a ratio
    compares runs that saw about the same load on the shared machine."""
    groups: dict[tuple[str, int, int], list[Result]] = {}
    for r in results:
        groups.setdefault((r.scheduler, r.pods, r.qps), []).append(r)

    def per_run(scheduler: str, pods: int, qps: int | None) -> dict[int, float]:
        return {
            r.run: r.pods_per_second
            for r in results
            if r.scheduler == scheduler and r.pods == pods and (qps is None or r.qps == qps)
        }

    rows = []
    for (kind, pods, qps), runs in groups.items():
        mine = per_run(kind, pods, qps)
        ceiling = per_run("ceiling", pods, None)
        kube = per_run("kube", pods, qps)
        rows.append(
            {
                "scheduler": kind,
                "pods": pods,
                "qps": qps,
                "runs": len(runs),
                "pods_per_second": _median([r.pods_per_second for r in runs]),
                "cpu_ms_per_pod": _median([r.cpu_ms_per_pod for r in runs]),
                "total_cpu_ms_per_pod": _median([r.total_cpu_ms_per_pod for r in runs]),
                "first_bind_seconds": _median([r.first_bind_seconds for r in runs]),
                "peak_rss_mb": _median([r.peak_rss_mb for r in runs]),
                "vs_ceiling": _median([v / ceiling[k] for k, v in mine.items() if ceiling.get(k)]),
                "vs_kube": _median([v / kube[k] for k, v in mine.items() if kube.get(k)]),
                "load_average": _median([r.load_average for r in runs]),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", default="1000,5000", help="comma-separated pod counts")
    parser.add_argument("--schedulers", default="ceiling,koord,koord-koordinator,kube")
    parser.add_argument(
        "--qps", default="5000", help="comma-separated client QPS of the schedulers (burst = 2 x QPS)"
    )
    parser.add_argument("--kube-qps", type=int, help="(old spelling of --qps with one value)")
    parser.add_argument("--repeat", type=int, default=1, help="alternating rounds over the schedulers")
    parser.add_argument("--stream", type=int, default=500, help="pods created while the scheduler runs")
    parser.add_argument("--stream-rate", type=float, default=100.0, help="their creation rate per second")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--output", help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the working directories (logs)")
    parser.add_argument("--profile", metavar="DIR", help="py-spy each scheduler's threads into DIR")
    args = parser.parse_args(argv)
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    kinds = [k.strip() for k in args.schedulers.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in SCHEDULER_NAMES]
    if unknown:
        parser.error(f"unknown schedulers {unknown}; known: {', '.join(SCHEDULER_NAMES)}")
    qps_values = [args.kube_qps] if args.kube_qps else [int(q) for q in args.qps.split(",") if q.strip()]
    extra = ("kube-scheduler",) if "kube" in kinds else ()
    bins = _harness().ensure_binaries(extra)
    plan = [(kind, 0 if kind == "ceiling" else qps) for qps in qps_values for kind in kinds]
    plan = list(dict.fromkeys(plan))  # the ceiling once per round
    results = []
    begin = time.monotonic()
    for pods in (int(p) for p in args.pods.split(",")):
        for run in range(args.repeat):
            for kind, qps in plan:
                print(
                    f"{kind} (qps {qps or '-'}): {args.nodes} nodes, {pods} pods, round {run + 1}", flush=True
                )
                results.append(run_one(kind, args.nodes, pods, qps, args, bins, run))
                r = results[-1]
                print(
                    f"  {r.pods_per_second} pods/s, {r.cpu_ms_per_pod} ms CPU/pod, first bind "
                    f"{r.first_bind_seconds} s, load {r.load_average}",
                    flush=True,
                )
    print()
    # ms/pod: CPU between the first and the last binding per pod; CPU s: from the start (imports, lists)
    header = ["scheduler", "qps", "pods", "all bound s", "pods/s", "1st s", "CPU s", "ms/pod", "RSS MB"]
    header += ["api CPU", "load", "p50 s", "p99 s"]
    line = "{:<18} {:>5} {:>6} {:>11} {:>8} {:>6} {:>7} {:>7} {:>7} {:>7} {:>5} {:>6} {:>6}  "
    print(line.format(*header) + "notes")
    for r in results:
        cells: list[Any] = [r.scheduler, r.qps or "-", r.pods, r.all_bound_seconds, r.pods_per_second]
        cells += [r.first_bind_seconds, r.cpu_seconds, r.cpu_ms_per_pod, r.peak_rss_mb]
        cells += [r.apiserver_cpu_seconds, r.load_average, r.stream_p50, r.stream_p99]
        print(line.format(*cells) + "; ".join(r.notes))
    summary = summarize(results)
    print()
    print("medians (ratios: median of per-round ratios of pods/s)")
    print(
        "| scheduler | QPS | pods | runs | pods/s | CPU ms/pod | CPU ms/pod with start-up | first bind s"
        " | peak RSS MB | x ceiling | x kube | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for entry in summary:
        print(
            "| {scheduler} | {qps} | {pods} | {runs} | {pods_per_second:.0f} | {cpu_ms_per_pod:.2f} | "
            "{total_cpu_ms_per_pod:.2f} | "
            "{first_bind_seconds:.2f} | {peak_rss_mb:.0f} | {vs_ceiling:.2f} | {vs_kube:.2f} | "
            "{load_average:.1f} |".format(**{**entry, "qps": entry["qps"] or "-"})
        )
    print(f"\n{len(results)} runs in {time.monotonic() - begin:.0f} s")
    if args.output:
        doc = {"runs": [asdict(r) for r in results], "summary": summary}
        Path(args.output).write_text(json.dumps(doc, indent=2) + "\n")
    # Below the stream's rate, the client rate limit alone makes the queue (and the latency) grow.
    worst = max(
        (r.stream_p99 for r in results if r.scheduler in KOORD_KINDS and r.qps > args.stream_rate),
        default=0.0,
    )
    if worst > SLO_SECONDS:
        print(
            f"koord p99 pod-scheduled latency {worst:.2f} s exceeds the {SLO_SECONDS:.0f} s SLO",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
