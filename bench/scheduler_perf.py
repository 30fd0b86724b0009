"""Measure the scheduler the way kube-scheduler's ``scheduler_perf`` does.

One run of a workload:

1. **set-up** (not measured): the embedded cluster gets the nodes, whatever else the workload needs
   (NodeMetrics) and the *init pods*, already bound: the state the measured pods meet;
2. **start** (not measured): the scheduler starts on that cluster (informer lists, caches fill) and brings
   its snapshot up to date, so that no set-up cost leaks into the measurement (scheduler_perf collects
   metrics only during the measured pods' ``createPods`` step);
3. **create** (timed, not counted as scheduling): the measured pods are created; each enters the scheduling
   queue as it is created, and its creation instant is its queue-entry time;
4. **schedule** (measured): ``run_until_idle`` on the calling thread (the deterministic mode: each binding
   runs right after its scheduling cycle). After every cycle the loop polls a ``ThroughputCollector`` that
   samples the number of bound pods once per wall second, exactly as scheduler_perf's ``throughputCollector``:
   the first sample is dropped (scheduler_perf: "likely to be an outlier"), an interval in which nothing was
   bound is merged into the next one, and a sample spanning k intervals is recorded k times.

Reported (JSON, see ``bench/README.md``): pods/s as the overall mean (bound measured pods / scheduling
seconds) and the average / p50 / p90 / p99 of the per-second samples (nearest rank, as scheduler_perf);
per-pod latency from queue entry to bind and per scheduling attempt (pop → bind, one cycle); peak RSS of the
process (``getrusage``: run each workload in its own process, as ``python -m bench`` does).
"""

from __future__ import annotations

import cProfile
import math
import os
import platform
import resource
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

from bench import workloads as wl
from koord_framework.cluster.clock import VirtualClock, parse_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import WatchEvent
from koord_framework.config.loader import LoadedSchedulerConfig, load_scheduler_config
from koord_framework.scheduler.scheduler import Scheduler

Obj = dict[str, Any]
Progress = Callable[[str], None]
Key = tuple[str, str]

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "configs" / "scheduler" / "default-scheduler.yaml"
"""kube-scheduler's default profile, as shipped (what scheduler_perf runs)."""
SAMPLE_INTERVAL = 1.0
"""Seconds between throughput samples (scheduler_perf's ``throughputSampleInterval``)."""


# --- what a workload is ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """Objects a workload creates: ``setup`` before the scheduler starts, ``measured`` once it runs."""

    setup: Iterable[Obj]
    measured: Sequence[Obj]


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    nodes: int
    init_pods: int
    measured_pods: int
    build: Callable[[int, int, int], Scenario]
    """(nodes, init pods, measured pods) → the scenario."""
    config: Callable[[], LoadedSchedulerConfig]
    min_pods_per_second: float
    """The target (mean pods/s) on a 2-core machine."""
    aim_pods_per_second: float | None = None
    kube_threshold: float | None = None
    """kube-scheduler's own CI threshold for the comparable scheduler_perf workload."""
    verify: Callable[[Run], dict[str, Any]] | None = None
    """A check of the run's outcome (e.g. LoadAware thresholds), reported under ``checks``."""
    max_rss_mib: float | None = None
    """A ceiling on the process's peak RSS, part of the target when set."""


@dataclass
class Run:
    """A finished run, for ``Workload.verify``."""

    cluster: MemoryCluster
    scheduler: Scheduler
    measured: list[Key]
    bound: dict[Key, float]
    seconds: float = 0.0
    """Wall seconds of the measured scheduling."""
    cpu_seconds: float = 0.0
    """CPU seconds of the measured scheduling (the fair comparison on a shared machine)."""


def default_config() -> LoadedSchedulerConfig:
    return load_scheduler_config(DEFAULT_CONFIG)


# --- throughput and percentiles -------------------------------------------------------------------
class ThroughputCollector:
    """scheduler_perf's ``throughputCollector``, polled by the scheduling loop instead of a ticker goroutine.

    The loop calls ``poll(now)`` after every cycle; a sample is taken at the first poll past each tick. A
    cycle longer than the interval makes one sample span several intervals, recorded that many times (as
    scheduler_perf records a sample once per skipped interval).
    """

    def __init__(self, count: Callable[[], int], interval: float = SAMPLE_INTERVAL) -> None:
        self._count = count
        self.interval = interval
        self.samples: list[float] = []
        self._start = 0.0
        self._next = 0.0
        self._last_time = 0.0
        self._last_count = 0
        self._started = False

    def start(self, now: float) -> None:
        self._start = self._last_time = now
        self._next = now + self.interval
        self._last_count = self._count()

    def poll(self, now: float) -> bool:
        """Take a sample if a tick has passed; returns whether one did."""
        if now < self._next:
            return False
        ticks = int((now - self._start) // self.interval)
        self._next = self._start + (ticks + 1) * self.interval
        scheduled = self._count()
        if scheduled == 0:
            return True
        if not self._started:
            # scheduler_perf skips the first sample: sampling and pod creation start independently there.
            self._started = True
            self._last_count, self._last_time = scheduled, now
            return True
        new = scheduled - self._last_count
        if new == 0:
            return True  # no zero samples: the interval is merged into the next one
        duration = now - self._last_time
        spans = max(1, round(duration / self.interval))
        self.samples.extend([new / duration] * spans)
        self._last_count, self._last_time = scheduled, now
        return True


def nearest_rank(values: Sequence[float], percent: float) -> float:
    """The ``percent``-th percentile of ``values`` by nearest rank (scheduler_perf's ``collect``)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * percent / 100) - 1)]


def summary(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> dict[str, float]:
    if not values:
        return {"count": 0, "mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    return {
        "count": len(values),
        "mean": round(sum(values) / len(values) * scale, digits),
        "p50": round(nearest_rank(values, 50) * scale, digits),
        "p90": round(nearest_rank(values, 90) * scale, digits),
        "p99": round(nearest_rank(values, 99) * scale, digits),
        "max": round(max(values) * scale, digits),
    }


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def current_rss_mib() -> float:
    """Resident set size now (Linux ``/proc/self/statm``; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024), 1)
    except (OSError, ValueError, IndexError):
        return peak_rss_mib()


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def _key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


def _node_name(obj: Obj | None) -> str:
    return str(((obj or {}).get("spec") or {}).get("nodeName") or "")


# --- one run --------------------------------------------------------------------------------------
def run(
    workload: Workload,
    *,
    nodes: int | None = None,
    init_pods: int | None = None,
    pods: int | None = None,
    progress: Progress | None = None,
    profiler: cProfile.Profile | None = None,
) -> tuple[dict[str, Any], Run]:
    """Run ``workload`` (sizes overridable) and return its JSON report and the finished run.

    ``profiler`` is enabled during the measured scheduling only.
    """
    say = progress or (lambda _msg: None)
    n_nodes = workload.nodes if nodes is None else nodes
    n_init = workload.init_pods if init_pods is None else init_pods
    n_pods = workload.measured_pods if pods is None else pods
    seconds: dict[str, float] = {}

    t = perf_counter()
    scenario = workload.build(n_nodes, n_init, n_pods)
    cluster = MemoryCluster(VirtualClock(parse_time(wl.NOW)), seed=0)
    for obj in scenario.setup:
        cluster.create(obj)
    seconds["setup"] = perf_counter() - t
    rss = {"afterSetup": current_rss_mib()}
    say(f"{workload.name}: {n_nodes} nodes and {n_init} bound pods created in {seconds['setup']:.1f}s")

    t = perf_counter()
    sched = Scheduler.from_config(cluster, workload.config(), seed=0)
    sched.start()
    sched.cache.update_snapshot(sched.snapshot)
    seconds["start"] = perf_counter() - t
    rss["afterStart"] = current_rss_mib()

    created: dict[Key, float] = {}
    bound: dict[Key, float] = {}

    def on_pod(event: WatchEvent) -> None:
        if event.type == "MODIFIED" and not _node_name(event.old) and _node_name(event.obj):
            bound[_key(event.obj)] = perf_counter()

    unsubscribe = cluster.subscribe(["Pod"], on_pod)
    t = perf_counter()
    for obj in scenario.measured:
        created[_key(obj)] = perf_counter()
        cluster.create(obj)
    seconds["create"] = perf_counter() - t
    say(f"{workload.name}: {len(created)} measured pods queued in {seconds['create']:.1f}s; scheduling")

    collector = ThroughputCollector(lambda: sched.scheduled_count)
    cycle_ends: list[float] = []

    def on_cycle() -> None:
        now = perf_counter()
        cycle_ends.append(now)
        if collector.poll(now):
            done = sched.scheduled_count
            say(f"{workload.name}: {done}/{n_pods} bound, {done / (now - t0):.0f} pods/s so far")

    if profiler is not None:
        profiler.enable()
    t0 = perf_counter()
    cpu0 = process_time()
    collector.start(t0)
    cycles = sched.run_until_idle(on_cycle=on_cycle)
    elapsed = perf_counter() - t0
    cpu = process_time() - cpu0
    if profiler is not None:
        profiler.disable()
    seconds["schedule"] = elapsed
    unsubscribe()

    measured = list(created)
    e2e = [bound[k] - created[k] for k in measured if k in bound]
    attempts = [b - a for a, b in zip([t0, *cycle_ends], cycle_ends)]
    scheduled = len(e2e)
    mean = scheduled / elapsed if elapsed > 0 else 0.0
    samples = collector.samples
    peak_rss = peak_rss_mib()
    report: dict[str, Any] = {
        "workload": workload.name,
        "title": workload.title,
        "nodes": n_nodes,
        "initPods": n_init,
        "measuredPods": len(measured),
        "scheduled": scheduled,
        "unscheduled": len(measured) - scheduled,
        "cycles": cycles,
        "podsPerSecond": {
            "mean": round(mean, 1),
            "average": round(sum(samples) / len(samples), 1) if samples else round(mean, 1),
            "p50": round(nearest_rank(samples, 50), 1) if samples else round(mean, 1),
            "p90": round(nearest_rank(samples, 90), 1) if samples else round(mean, 1),
            "p99": round(nearest_rank(samples, 99), 1) if samples else round(mean, 1),
            "samples": len(samples),
            "perCpuSecond": round(scheduled / cpu, 1) if cpu > 0 else 0.0,
        },
        "latencyMs": {
            "queueToBind": summary(e2e, 1000.0),
            "attempt": summary(attempts, 1000.0),
        },
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "cpuSeconds": {"schedule": round(cpu, 3)},
        "peakRssMiB": peak_rss,
        "rssMiB": {**rss, "end": current_rss_mib()},
        "target": {
            "minPodsPerSecond": workload.min_pods_per_second,
            "aimPodsPerSecond": workload.aim_pods_per_second,
            "kubeSchedulerThreshold": workload.kube_threshold,
            "maxPeakRssMiB": workload.max_rss_mib,
            "met": mean >= workload.min_pods_per_second
            and (workload.max_rss_mib is None or peak_rss < workload.max_rss_mib),
        },
        "machine": machine(),
    }
    finished = Run(cluster, sched, measured, bound, elapsed, cpu)
    if workload.verify is not None:
        t = perf_counter()
        report["checks"] = checks = workload.verify(finished)
        report["seconds"]["verify"] = round(perf_counter() - t, 3)
        if not all(c.get("ok", True) for c in checks.values()):
            report["target"]["met"] = False
    sched.close()
    return report, finished


# --- the scheduler_perf workloads -------------------------------------------------------------------
def _basic(
    variant: str, *, init_namespace: str = "default", namespace: str = "default"
) -> Callable[[int, int, int], Scenario]:
    def build(nodes: int, init: int, measured: int) -> Scenario:
        def setup() -> Iterable[Obj]:
            yield from wl.basic_nodes(nodes)
            yield from _in_namespace(
                wl.basic_pods(init, prefix="init", bound_to=nodes, variant=variant), init_namespace
            )

        pods = list(_in_namespace(wl.basic_pods(measured, prefix="measured", variant=variant), namespace))
        return Scenario(setup(), pods)

    return build


def _in_namespace(objs: Iterable[Obj], namespace: str) -> Iterable[Obj]:
    for obj in objs:
        obj["metadata"]["namespace"] = namespace
        yield obj


BASIC = Workload(
    name="basic",
    title="SchedulingBasic: 5,000 nodes, 1,000 bound pods, 10,000 measured pods (default profile)",
    nodes=5000,
    init_pods=1000,
    measured_pods=10_000,
    build=_basic("basic"),
    config=default_config,
    min_pods_per_second=1000,
    aim_pods_per_second=3000,
    kube_threshold=680,
)

SPREAD = Workload(
    name="spread",
    title="TopologySpreading: as SchedulingBasic, measured pods with a zone spread constraint (maxSkew 5)",
    nodes=5000,
    init_pods=1000,
    measured_pods=10_000,
    build=_basic("spread"),
    config=default_config,
    min_pods_per_second=100,
    kube_threshold=85,
)

ANTI_AFFINITY = Workload(
    name="antiaffinity",
    title=(
        "SchedulingPodAntiAffinity: 5,000 nodes, 1,000 bound pods in namespace sched-0, 2,000 measured pods "
        "in sched-1, all with required anti-affinity on hostname"
    ),
    nodes=5000,
    init_pods=1000,
    # At most one measured pod fits per node, so 10,000 could never all be placed on 5,000 nodes; the
    # measured count is scheduler_perf's (5000Nodes_2000Pods, the workload its threshold of 60 belongs to).
    measured_pods=2000,
    build=_basic("antiaffinity", init_namespace="sched-0", namespace="sched-1"),
    config=default_config,
    min_pods_per_second=100,
    kube_threshold=60,
)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (BASIC, SPREAD, ANTI_AFFINITY)}
