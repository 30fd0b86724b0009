"""NodeNUMAResource at scale, side by side with the same pods without it; and a replay of every cpuset.

1,000 nodes of 2 sockets × 2 NUMA nodes × 16 cores × 2 threads (64 CPUs, 256Gi), each with the
NodeResourceTopology koordlet would report; 10,000 pods, half LSR prod pods asking for FullPCPUs cpusets of
2, 4, 6 or 8 CPUs, half LS pods of 1 CPU. ``numa`` schedules them with Koordinator's koord-scheduler profile
including NodeNUMAResource (filter, score w1, reserve, preBind, as shipped); ``numa-baseline`` with the same
profile minus NodeNUMAResource. ``python bench/numa.py`` runs both in one process and prints them side by
side with the ratio (target: at least 500 pods/s and at least 0.5× the baseline).

``check_cpusets`` replays the ``scheduling.koordinator.sh/resource-status`` annotations of every bound pod:
no CPU may be given to two pods, every cpuset must lie inside its node's CPUs, and every LSR pod must have a
cpuset of exactly its CPU count (the share that got whole physical cores is reported too).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python bench/numa.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from koord_plugin_nodenumaresource.testing import nrt

from bench import workloads as wl
from bench.scheduler_perf import Obj, Run, Scenario, Workload, run
from koord_framework.config.loader import LoadedSchedulerConfig, load_text
from koord_framework.koordlet.cpuset import CPUSetError, parse_cpuset

SCHEDULER_NAME = "koord-scheduler"
SOCKETS, NUMA_PER_SOCKET, CORES_PER_NUMA, THREADS = 2, 2, 16, 2
CPUS = SOCKETS * NUMA_PER_SOCKET * CORES_PER_NUMA * THREADS
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"


def _config(with_numa: bool) -> str:
    def numa(indent: str, extra: str = "") -> str:
        return f"\n{indent}- {{name: NodeNUMAResource{extra}}}" if with_numa else ""

    return f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: {SCHEDULER_NAME}
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: LeastAllocated
            resources:
              - {{name: cpu, weight: 1}}
              - {{name: memory, weight: 1}}
    plugins:
      queueSort:
        disabled: [{{name: "*"}}]
        enabled: [{{name: PrioritySort}}]
      preFilter:
        enabled:
          - {{name: SchedulingHint}}{numa("          ")}
      filter:
        enabled:
          - {{name: LoadAwareScheduling}}{numa("          ")}
      postFilter:
        disabled: [{{name: "*"}}]
        enabled: [{{name: DefaultPreemption}}]
      score:
        enabled:
          - {{name: LoadAwareScheduling, weight: 1}}{numa("          ", ", weight: 1")}
      reserve:
        enabled:
          - {{name: LoadAwareScheduling}}{numa("          ")}
      preBind:
        enabled:{numa("          ")}
          - {{name: DefaultPreBind}}
      bind:
        disabled: [{{name: "*"}}]
        enabled: [{{name: DefaultBinder}}]
"""


def numa_config() -> LoadedSchedulerConfig:
    loaded = load_text(_config(True), "bench/numa.py", component="scheduler")
    assert isinstance(loaded, LoadedSchedulerConfig)
    return loaded


def baseline_config() -> LoadedSchedulerConfig:
    loaded = load_text(_config(False), "bench/numa.py (baseline)", component="scheduler")
    assert isinstance(loaded, LoadedSchedulerConfig)
    return loaded


def numa_nodes(n: int) -> Iterable[Obj]:
    for i in range(n):
        name = f"numa-node-{i:05d}"
        yield wl.node(name, i, {"cpu": str(CPUS), "memory": "256Gi", "pods": "110"})
        yield nrt(name, SOCKETS, NUMA_PER_SOCKET, CORES_PER_NUMA, THREADS, memory_per_numa="64Gi")


def numa_pods(n: int, seed: int = 7) -> list[Obj]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 2 == 0:
            cpu = rng.choice([2, 4, 6, 8])
            pod = wl.pod(
                f"lsr-{i:05d}",
                {"cpu": str(cpu), "memory": f"{2 * cpu}Gi"},
                labels={"koordinator.sh/qosClass": "LSR", "app": "lsr"},
                priority=9000,
                scheduler_name=SCHEDULER_NAME,
            )
            pod["metadata"]["annotations"] = {
                "scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy":"FullPCPUs"}'
            }
        else:
            pod = wl.pod(
                f"ls-{i:05d}",
                {"cpu": "1", "memory": "2Gi"},
                labels={"koordinator.sh/qosClass": "LS", "app": "ls"},
                priority=9000,
                scheduler_name=SCHEDULER_NAME,
            )
        out.append(pod)
    return out


def build(nodes: int, init: int, measured: int) -> Scenario:
    """``init`` is unused: the pods start on empty nodes."""
    return Scenario(numa_nodes(nodes), numa_pods(measured))


def check_cpusets(run_: Run) -> dict[str, Any]:
    """Replay every bound pod's resource-status: double allocations, cpusets outside the node, LSR pods
    without a cpuset of their size, and how many got whole cores."""
    held: dict[str, dict[int, str]] = {}
    double: list[dict[str, Any]] = []
    outside = 0
    wrong_size = 0
    whole_cores = 0
    lsr = 0
    for pod in run_.cluster.list_shared("Pod")[0]:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        meta = pod["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        is_lsr = (meta.get("labels") or {}).get("koordinator.sh/qosClass") == "LSR"
        raw = (meta.get("annotations") or {}).get(RESOURCE_STATUS)
        try:
            cpus = parse_cpuset(json.loads(raw).get("cpuset", "")) if raw else frozenset()
        except (ValueError, CPUSetError):
            cpus = frozenset()
        if is_lsr:
            lsr += 1
            want = int(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"])
            if len(cpus) != want:
                wrong_size += 1
            # The builder's numbering: both threads of a core are 2k and 2k+1.
            if cpus and all(c ^ 1 in cpus for c in cpus):
                whole_cores += 1
        taken = held.setdefault(node, {})
        for cpu in cpus:
            if cpu >= CPUS:
                outside += 1
            if cpu in taken:
                double.append({"node": node, "cpu": cpu, "pods": [taken[cpu], key]})
            taken[cpu] = key
    ok = not double and outside == 0 and wrong_size == 0
    return {
        "cpusets": {
            "lsrPodsBound": lsr,
            "doubleAllocatedCPUs": len(double),
            "firstDoubleAllocations": double[:10],
            "cpusOutsideNode": outside,
            "lsrWithoutTheirCPUs": wrong_size,
            "lsrOnWholeCores": whole_cores,
            "ok": ok,
        }
    }


NUMA = Workload(
    name="numa",
    title="NodeNUMAResource: 10,000 pods (half LSR FullPCPUs 2-8 CPUs) on 1,000 2x2x16x2 nodes with NRTs",
    nodes=1000,
    init_pods=0,
    measured_pods=10_000,
    build=build,
    config=numa_config,
    min_pods_per_second=500,
    verify=check_cpusets,
)

NUMA_BASELINE = Workload(
    name="numa-baseline",
    title="The numa workload's pods and nodes without NodeNUMAResource (the profile minus the plugin)",
    nodes=1000,
    init_pods=0,
    measured_pods=10_000,
    build=build,
    config=baseline_config,
    min_pods_per_second=0,
)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (NUMA, NUMA_BASELINE)}


def main(argv: list[str] | None = None) -> int:
    """Run both workloads one after the other and print them side by side."""
    import argparse

    parser = argparse.ArgumentParser(prog="python bench/numa.py", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--pods", type=int)
    args = parser.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    baseline, _ = run(NUMA_BASELINE, nodes=args.nodes, pods=args.pods, progress=say)
    with_plugin, _ = run(NUMA, nodes=args.nodes, pods=args.pods, progress=say)
    ratio = with_plugin["podsPerSecond"]["mean"] / max(baseline["podsPerSecond"]["mean"], 1e-9)
    # On a shared machine wall-clock rates swing with the neighbours' load; pods per CPU-second of this
    # process do not, so the ratio is reported both ways.
    cpu_ratio = with_plugin["podsPerSecond"]["perCpuSecond"] / max(
        baseline["podsPerSecond"]["perCpuSecond"], 1e-9
    )
    cpusets = with_plugin["checks"]["cpusets"]
    met = with_plugin["podsPerSecond"]["mean"] >= NUMA.min_pods_per_second and ratio >= 0.5 and cpusets["ok"]
    result = {
        "numa": with_plugin,
        "baseline": baseline,
        "ratio": round(ratio, 3),
        "ratioPerCpuSecond": round(cpu_ratio, 3),
        "target": {"minPodsPerSecond": NUMA.min_pods_per_second, "minRatio": 0.5, "met": met},
    }
    out = Path(__file__).resolve().with_name("results") / "numa-side-by-side.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for name, r in (("without NodeNUMAResource", baseline), ("with NodeNUMAResource", with_plugin)):
        pps = r["podsPerSecond"]
        say(
            f"{name:<26} {r['nodes']:>5} nodes {r['scheduled']:>6}/{r['measuredPods']} bound"
            f"  {pps['mean']:>8,.1f} pods/s ({pps['perCpuSecond']:,.0f} per CPU-s)"
            f"  attempt p99 {r['latencyMs']['attempt']['p99']:.2f} ms"
        )
    say(
        f"ratio {ratio:.2f} (per CPU-s {cpu_ratio:.2f}); "
        f"{cpusets['doubleAllocatedCPUs']} CPUs double-allocated, "
        f"{cpusets['lsrWithoutTheirCPUs']} LSR pods without their CPUs, "
        f"{cpusets['lsrOnWholeCores']}/{cpusets['lsrPodsBound']} LSR pods on whole cores: "
        f"{'met' if met else 'MISSED'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
