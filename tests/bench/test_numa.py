"""The NodeNUMAResource benchmark checker on small runs: each LSR pod pinned to its own CPUs, none shared."""

from __future__ import annotations

import json

from bench import numa
from bench.scheduler_perf import run
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.testing import make_pod


def test_small_numa_run_gives_every_lsr_pod_its_own_whole_cores() -> None:
    report, _ = run(numa.NUMA, nodes=6, pods=240)
    check = report["checks"]["cpusets"]
    assert report["scheduled"] == 240
    assert check["ok"], check
    assert check["doubleAllocatedCPUs"] == 0 and check["lsrPodsBound"] == 120
    assert check["lsrOnWholeCores"] == 120


def test_the_checker_finds_a_double_allocation() -> None:
    _, finished = run(numa.NUMA, nodes=2, pods=8)
    pods, _ = finished.cluster.list_shared("Pod")
    victim = next(p for p in pods if p["metadata"]["name"].startswith("lsr-") and p["spec"].get("nodeName"))
    status = victim["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"]
    # Bind an intruder onto the same node and CPUs behind the scheduler's back, as a faulty scheduler would.
    intruder = make_pod(
        "intruder",
        cpu="2",
        node=victim["spec"]["nodeName"],
        priority=9000,
        qos="LSR",
        annotations={"scheduling.koordinator.sh/resource-status": status},
    )
    finished.cluster.create(intruder)
    check = numa.check_cpusets(finished)["cpusets"]
    assert not check["ok"]
    assert check["doubleAllocatedCPUs"] == len(parse_cpuset(json.loads(status)["cpuset"]))
    assert "default/intruder" in check["firstDoubleAllocations"][0]["pods"]
