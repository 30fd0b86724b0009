"""Gang scheduling workloads (Koordinator's and scheduler-plugins' coscheduling perf shapes), each measured
next to the same pods without gangs, and checked with the all-or-nothing invariant.

1,000 nodes, pods {cpu 1, memory 1Gi}, Koordinator's shipped ``koord-scheduler`` profile (with Coscheduling):

* ``gang-1000x3``: 1,000 PodGroups of minMember 3, 3,000 pods; nodes {cpu 4}, room for every gang;
* ``gang-3x1000``: 3 PodGroups of minMember 1,000, 3,000 pods; nodes {cpu 4};
* ``gang-80pct``: as ``gang-1000x3`` on nodes with room for 2,400 pods (600 nodes {cpu 2}, 400 {cpu 3}):
  800 gangs can bind, 200 cannot.

``verify`` reruns the same pods without their PodGroup labels on the same cluster and profile (the baseline:
what gang scheduling costs) and reports both rates and their ratio, and the violations of the all-or-nothing
checker over the final cluster (a Strict gang with some but fewer than minMember members bound). The target:
at least 500 pods/s, at least half the baseline's rate, and no violation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from koord_plugin_coscheduling.testing import all_or_nothing_violations

from bench import workloads as wl
from bench.scheduler_perf import REPO, Obj, Run, Scenario, Workload, run
from koord_framework.config.loader import LoadedSchedulerConfig, load_scheduler_config

SCHEDULER_NAME = "koord-scheduler"
POD = {"cpu": "1", "memory": "1Gi"}
GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"


def config() -> LoadedSchedulerConfig:
    return load_scheduler_config(REPO / "configs" / "scheduler" / "koord-scheduler.yaml")


def _pod_group(name: str, min_member: int) -> Obj:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 60},
    }


def _nodes(count: int, cpu_of: Callable[[int], str]) -> Iterable[Obj]:
    for i in range(count):
        yield wl.node(f"node-{i:05d}", i, {"cpu": cpu_of(i), "memory": "64Gi", "pods": "110"})


def _gangs(gangs: int, size: int, *, labelled: bool) -> list[Obj]:
    pods = []
    for g in range(gangs):
        for k in range(size):
            labels = {GROUP_LABEL: f"gang-{g:04d}"} if labelled else {}
            pods.append(wl.pod(f"gang-{g:04d}-{k:04d}", POD, labels=labels, scheduler_name=SCHEDULER_NAME))
    return pods


def _scenario(
    size: int, cpu_of: Callable[[int], str], *, labelled: bool
) -> Callable[[int, int, int], Scenario]:
    def build(nodes: int, _init: int, measured: int) -> Scenario:
        gangs = max(1, measured // size)

        def setup() -> Iterable[Obj]:
            yield from _nodes(nodes, cpu_of)
            if labelled:
                for g in range(gangs):
                    yield _pod_group(f"gang-{g:04d}", size)

        return Scenario(setup(), _gangs(gangs, size, labelled=labelled))

    return build


def _four(_i: int) -> str:
    return "4"


def _eighty_percent(i: int) -> str:
    # 600 nodes x 2 + 400 nodes x 3 = 2,400 one-cpu pods: 800 of the 1,000 gangs of 3.
    return "2" if i % 5 < 3 else "3"


def _verify(baseline: Workload) -> Callable[[Run], dict[str, Any]]:
    def verify(finished: Run) -> dict[str, Any]:
        objects = [*finished.cluster.list("Pod")[0], *finished.cluster.list("PodGroup")[0]]
        violations = all_or_nothing_violations(objects)
        nodes = len(finished.cluster.list("Node")[0])
        gang_rate = len(finished.bound) / max(finished.seconds, 1e-9)
        base, _ = run(baseline, nodes=nodes, pods=len(finished.measured))
        base_rate = base["podsPerSecond"]["mean"]
        ratio = gang_rate / base_rate if base_rate else 0.0
        gang_cpu_rate = len(finished.bound) / max(finished.cpu_seconds, 1e-9)
        base_cpu_rate = base["podsPerSecond"]["perCpuSecond"]
        cpu_ratio = gang_cpu_rate / base_cpu_rate if base_cpu_rate else 0.0
        return {
            "gangs": {
                "violations": len(violations),
                "examples": violations[:5],
                "podsPerSecond": round(gang_rate, 1),
                "withoutGangsPodsPerSecond": base_rate,
                "ratio": round(ratio, 3),
                "perCpuSecond": round(gang_cpu_rate, 1),
                "withoutGangsPerCpuSecond": base_cpu_rate,
                "cpuRatio": round(cpu_ratio, 3),
                "withoutGangsScheduled": base["scheduled"],
                # Wall-clock rates of two runs on a shared machine move by more than the difference measured;
                # CPU seconds are the fairer comparison, and both must hold.
                "ok": not violations and ratio >= 0.5 and cpu_ratio >= 0.5,
            }
        }

    return verify


def _pair(name: str, title: str, size: int, cpu_of: Callable[[int], str]) -> Workload:
    baseline = Workload(
        name=f"{name}-baseline",
        title=f"{title} (the same pods without PodGroups)",
        nodes=1000,
        init_pods=0,
        measured_pods=3000,
        build=_scenario(size, cpu_of, labelled=False),
        config=config,
        min_pods_per_second=0,
    )
    return Workload(
        name=name,
        title=title,
        nodes=1000,
        init_pods=0,
        measured_pods=3000,
        build=_scenario(size, cpu_of, labelled=True),
        config=config,
        min_pods_per_second=500,
        verify=_verify(baseline),
    )


GANGS_1000X3 = _pair("gang-1000x3", "Coscheduling: 1,000 nodes, 1,000 gangs of 3 (room for all)", 3, _four)
GANGS_3X1000 = _pair("gang-3x1000", "Coscheduling: 1,000 nodes, 3 gangs of 1,000 (room for all)", 1000, _four)
GANGS_80PCT = _pair(
    "gang-80pct", "Coscheduling: 1,000 nodes, 1,000 gangs of 3, room for 800 of them", 3, _eighty_percent
)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (GANGS_1000X3, GANGS_3X1000, GANGS_80PCT)}
