"""ElasticQuota benchmark: a multi-tenant cluster shaped like Kueue's and Koordinator's quota tests.

    python bench/elasticquota.py [--nodes 1000] [--pods 15000] [--waves 5] [--out FILE]

1,000 nodes (24 cores, 96 GiB each), 30 ElasticQuotas in a two-level tree (5 organisations, each a parent of
5 teams), and 15,000 pods arriving in waves with a different demand per team (a skewed share of the pods:
some teams stay under their min and lend, others borrow, a few hit their max). The same pods are scheduled
twice on fresh clusters: by kube-scheduler's default profile plus ElasticQuota (PreFilter, PostFilter,
Reserve), and by the default profile alone. Reported: pods/s of each and their ratio, cluster utilisation at
the end, and fairness: each team's used cpu against its water-filled share (its runtime at the end, capped by
its demand) — a team is treated fairly when it got min(demand, share).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

from bench import workloads as wl
from koord_framework.cluster.clock import VirtualClock, parse_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.config.loader import load_scheduler_config
from koord_framework.scheduler.scheduler import Scheduler

Obj = dict[str, Any]
LABEL = "quota.scheduling.koordinator.sh/name"
ORGS, TEAMS = 5, 5
NODE_CPU, NODE_MEM_GI = 24, 96
POD_CPU, POD_MEM_GI = 2, 4
MIN_PODS_PER_SECOND = 500.0
MIN_RATIO = 0.5

DEFAULT_PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
"""
QUOTA_PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    plugins:
      preFilter:
        enabled:
          - name: ElasticQuota
      postFilter:
        enabled:
          - name: ElasticQuota
      reserve:
        enabled:
          - name: ElasticQuota
    pluginConfig:
      - name: ElasticQuota
        args:
          quotaGroupNamespace: koordinator-system
"""


def quota(name: str, min_cpu: int, max_cpu: int, parent: str = "", is_parent: bool = False) -> Obj:
    labels = {"quota.scheduling.koordinator.sh/is-parent": "true" if is_parent else "false"}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "koordinator-system", "labels": labels},
        "spec": {
            "min": {"cpu": str(min_cpu), "memory": f"{min_cpu * 4}Gi"},
            "max": {"cpu": str(max_cpu), "memory": f"{max_cpu * 4}Gi"},
        },
    }


def scenario(
    nodes: int, pods: int, waves: int, seed: int = 0
) -> tuple[list[Obj], list[list[Obj]], dict[str, int]]:
    """(set-up objects, the pod waves, each team's demand in milli-cores)."""
    rng = random.Random(seed)
    total_cpu = nodes * NODE_CPU
    setup: list[Obj] = [
        wl.node(f"node-{i:04d}", i, {"cpu": str(NODE_CPU), "memory": f"{NODE_MEM_GI}Gi", "pods": "110"})
        for i in range(nodes)
    ]
    teams: list[str] = []
    team_min = int(total_cpu * 0.7) // (ORGS * TEAMS)  # 70% of the cluster guaranteed, 30% to share
    for o in range(ORGS):
        org = f"org-{o}"
        setup.append(quota(org, team_min * TEAMS, int(total_cpu * 0.6), is_parent=True))
        for t in range(TEAMS):
            name = f"{org}-team-{t}"
            teams.append(name)
            setup.append(quota(name, team_min, team_min * 4, parent=org))
    # Skewed demand: a Zipf-like share of the pods per team, shuffled across organisations.
    weights = [1.0 / (k + 1) ** 0.8 for k in range(len(teams))]
    rng.shuffle(weights)
    total_w = sum(weights)
    counts = [int(pods * w / total_w) for w in weights]
    counts[0] += pods - sum(counts)
    all_pods: list[Obj] = []
    for team, count in zip(teams, counts, strict=True):
        for j in range(count):
            all_pods.append(
                wl.pod(
                    f"{team}-{j}",
                    {"cpu": str(POD_CPU), "memory": f"{POD_MEM_GI}Gi"},
                    namespace="tenants",
                    labels={LABEL: team},
                )
            )
    rng.shuffle(all_pods)
    size = -(-len(all_pods) // waves)
    demand = {team: count * POD_CPU * 1000 for team, count in zip(teams, counts, strict=True)}
    return setup, [all_pods[i : i + size] for i in range(0, len(all_pods), size)], demand


def run_once(
    profile: str, setup: list[Obj], waves: list[list[Obj]], *, quotas: bool
) -> tuple[dict[str, Any], Scheduler]:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(profile)
    config = load_scheduler_config(Path(f.name))
    cluster = MemoryCluster(VirtualClock(parse_time(wl.NOW)), seed=0)
    for obj in setup:
        if quotas or obj["kind"] != "ElasticQuota":
            cluster.create(obj)
    sched = Scheduler.from_config(cluster, config, seed=0)
    sched.start()
    sched.cache.update_snapshot(sched.snapshot)
    scheduling = cpu = 0.0
    for wave in waves:
        for obj in wave:
            cluster.create(obj)
        t, c = perf_counter(), process_time()
        sched.run_until_idle()
        scheduling += perf_counter() - t
        cpu += process_time() - c
    sched.close()
    bound = sched.scheduled_count
    return {
        "seconds": round(scheduling, 3),
        "cpuSeconds": round(cpu, 3),
        "bound": bound,
        "podsPerSecond": round(bound / scheduling, 1),
        "podsPerCpuSecond": round(bound / cpu, 1),
    }, sched


def fairness(sched: Scheduler, demand: dict[str, int]) -> dict[str, Any]:
    plugin: Any = next(iter(sched.frameworks.values())).plugin("ElasticQuota")
    rows = []
    worst = 1.0
    for team, wanted in sorted(demand.items()):
        mgr = plugin.quotas.manager_for_quota(team)
        runtime = (mgr.refresh_runtime(team) or {}).get("cpu", 0)
        info = mgr.get_quota_info(team)
        used = info.calc.used.get("cpu", 0)
        fair = min(wanted, runtime)
        ratio = used / fair if fair else 1.0
        worst = min(worst, ratio)
        rows.append(
            {
                "quota": team,
                "demandCores": wanted // 1000,
                "minCores": info.calc.min.get("cpu", 0) // 1000,
                "maxCores": info.calc.max.get("cpu", 0) // 1000,
                "runtimeCores": runtime // 1000,
                "usedCores": used // 1000,
                "usedOverFairShare": round(ratio, 3),
            }
        )
    within = sum(1 for r in rows if r["usedOverFairShare"] >= 0.95)
    return {"quotas": rows, "worstUsedOverFairShare": round(worst, 3), "quotasAtFairShare": within}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=15000)
    ap.add_argument("--waves", type=int, default=5)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().with_name("results") / "elasticquota.json"
    )
    args = ap.parse_args(argv)
    setup, waves, demand = scenario(args.nodes, args.pods, args.waves)
    print(
        f"elasticquota: {args.nodes} nodes, {ORGS * (TEAMS + 1)} quotas, {args.pods} pods"
        f" in {len(waves)} waves",
        file=sys.stderr,
    )
    with_q, sched = run_once(QUOTA_PROFILE, setup, waves, quotas=True)
    print(f"  with quotas:    {with_q['bound']} bound, {with_q['podsPerSecond']} pods/s", file=sys.stderr)
    without, plain = run_once(DEFAULT_PROFILE, setup, waves, quotas=False)
    print(f"  without quotas: {without['bound']} bound, {without['podsPerSecond']} pods/s", file=sys.stderr)
    total_cpu = args.nodes * NODE_CPU * 1000
    used_cpu = sum(sum(p.requests.get("cpu", 0) for p in ni.pods.values()) for ni in sched.snapshot.node_list)
    # The ratio is taken on CPU time: on a shared machine wall time mostly measures the neighbours.
    ratio = with_q["podsPerCpuSecond"] / without["podsPerCpuSecond"] if without["podsPerCpuSecond"] else 0.0
    fair = fairness(sched, demand)
    report = {
        "workload": "elasticquota",
        "nodes": args.nodes,
        "quotas": ORGS * (TEAMS + 1),
        "pods": args.pods,
        "waves": len(waves),
        "withQuotas": with_q,
        "withoutQuotas": without,
        "ratio": round(ratio, 3),
        "utilisation": {
            "withQuotas": round(used_cpu / total_cpu, 3),
            "withoutQuotas": round(plain.scheduled_count * POD_CPU * 1000 / total_cpu, 3),
        },
        "fairness": fair,
        "target": {
            "minPodsPerSecond": MIN_PODS_PER_SECOND,
            "minRatio": MIN_RATIO,
            "met": with_q["podsPerCpuSecond"] >= MIN_PODS_PER_SECOND and ratio >= MIN_RATIO,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    print(
        f"elasticquota: {with_q['podsPerSecond']} pods/s ({with_q['podsPerCpuSecond']} per cpu-s)"
        " with quotas vs "
        f"{without['podsPerSecond']} ({without['podsPerCpuSecond']}) without "
        f"(ratio {ratio:.2f}); utilisation {report['utilisation']['withQuotas']:.1%}; "
        f"{fair['quotasAtFairShare']}/{ORGS * TEAMS} teams at their fair share "
        f"(worst {fair['worstUsedOverFairShare']}); target {'met' if report['target']['met'] else 'MISSED'}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
