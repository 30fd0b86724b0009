"""DeviceShare at scale: 1,000 GPU nodes (8 GPUs + 2 RDMA NICs each, with Device objects), 10,000 pods.

The measured pods mix whole GPUs (1, 2, 4 or 8 per pod, mostly 1-2), shared GPUs (gpu-core 25-50 with the same
gpu-memory-ratio) and CPU-only pods, 30/40/30, seeded. Two workloads run the same pods:

* ``deviceshare``: kube-scheduler's default profile plus DeviceShare (PreFilter, Filter, Score, Reserve,
  PreBind) with Koordinator's default args;
* ``deviceshare-baseline``: the default profile alone; NodeResourcesFit still counts the node-level
  extended resources (``nvidia.com/gpu``, ``koordinator.sh/gpu-core``, ...), so the pods place, but no
  device is chosen.

``check_devices`` replays the ``device-allocated`` annotations of the bound pods against the Device objects
(``koord_plugin_deviceshare.checker``): the target includes 0 oversubscribed devices, and every GPU pod must
carry the annotation.

    python bench/deviceshare.py            # both workloads, each in its own process, side by side
    python -m bench --workload deviceshare
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.builders import GiB, gpu_node_allocatable, make_device
from koord_plugin_deviceshare.checker import check_allocations

from bench import workloads as wl
from bench.scheduler_perf import Obj, Run, Scenario, Workload
from koord_framework.config.loader import LoadedSchedulerConfig, load_text

GPUS, NICS = 8, 2
MEMORY = 80 * GiB
MIN_PODS_PER_SECOND = 500
MIN_RATIO = 0.5

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
{plugins}
"""
DEVICE_PLUGINS = """\
    plugins:
      preFilter: {enabled: [{name: DeviceShare}]}
      filter: {enabled: [{name: DeviceShare}]}
      score: {enabled: [{name: DeviceShare, weight: 1}]}
      reserve: {enabled: [{name: DeviceShare}]}
      preBind: {enabled: [{name: DeviceShare}]}
"""


def config_with() -> LoadedSchedulerConfig:
    return load_text(CONFIG.format(plugins=DEVICE_PLUGINS), "bench/deviceshare.py", component="scheduler")


def config_without() -> LoadedSchedulerConfig:
    return load_text(CONFIG.format(plugins=""), "bench/deviceshare.py (baseline)", component="scheduler")


def gpu_nodes(count: int) -> Iterable[Obj]:
    resources = {"cpu": "128", "memory": "1Ti", "pods": "110", **gpu_node_allocatable(GPUS, NICS, MEMORY)}
    for i in range(count):
        name = f"gpu-node-{i:04d}"
        node = wl.node(name, i, resources)
        node["metadata"]["labels"] |= {n.LABEL_GPU_VENDOR: "nvidia", n.LABEL_GPU_MODEL: "A100-SXM4-80GB"}
        yield node
        yield make_device(name, GPUS, NICS, memory=MEMORY, vfs=4)


def mixed_pods(count: int, seed: int = 7) -> list[Obj]:
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        draw = rng.random()
        requests = {"cpu": "1", "memory": "2Gi"}
        if draw < 0.2:
            requests[n.NVIDIA_GPU] = str(rng.choice([1, 1, 1, 2, 2, 4, 8]))
        elif draw < 0.6:
            share = str(rng.choice([25, 30, 40, 50]))
            requests |= {n.GPU_CORE: share, n.GPU_MEMORY_RATIO: share}
        pods.append(wl.pod(f"measured-{i:05d}", requests))
    return pods


def build(nodes: int, _init: int, measured: int) -> Scenario:
    return Scenario(gpu_nodes(nodes), mixed_pods(measured))


def check_devices(run: Run) -> dict[str, Any]:
    pods, _ = run.cluster.list("Pod")
    devices, _ = run.cluster.list("Device")
    problems = check_allocations(devices, pods)
    missing = [
        p["metadata"]["name"]
        for p in pods
        if p["spec"].get("nodeName")
        and any(
            k in n.DEVICE_RESOURCE_NAMES[n.GPU]
            for c in p["spec"]["containers"]
            for k in c["resources"]["requests"]
        )
        and n.ANNOTATION_DEVICE_ALLOCATED not in (p["metadata"].get("annotations") or {})
    ]
    return {
        "devices": {
            "ok": not problems and not missing,
            "violations": len(problems) + len(missing),
            "oversubscribed": problems[:10],
            "gpuPodsWithoutAllocation": missing[:10],
        }
    }


DEVICESHARE = Workload(
    name="deviceshare",
    title="DeviceShare: 1,000 nodes x 8 GPUs + 2 RDMA NICs (Device objects), 10,000 pods (whole/shared/CPU)",
    nodes=1000,
    init_pods=0,
    measured_pods=10_000,
    build=build,
    config=config_with,
    min_pods_per_second=MIN_PODS_PER_SECOND,
    verify=check_devices,
)

BASELINE = Workload(
    name="deviceshare-baseline",
    title="The same nodes and pods without DeviceShare (default profile)",
    nodes=1000,
    init_pods=0,
    measured_pods=10_000,
    build=build,
    config=config_without,
    min_pods_per_second=0,
)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (DEVICESHARE, BASELINE)}


def side_by_side(with_plugin: dict[str, Any], without: dict[str, Any]) -> dict[str, Any]:
    a, b = with_plugin["podsPerSecond"]["mean"], without["podsPerSecond"]["mean"]
    ratio = round(a / b, 3) if b else 0.0
    checks = with_plugin.get("checks", {}).get("devices", {})
    return {
        "withDeviceShare": {"podsPerSecond": a, "scheduled": with_plugin["scheduled"]},
        "withoutDeviceShare": {"podsPerSecond": b, "scheduled": without["scheduled"]},
        "ratio": ratio,
        "oversubscribedDevices": checks.get("violations"),
        "target": {
            "minPodsPerSecond": MIN_PODS_PER_SECOND,
            "minRatio": MIN_RATIO,
            "met": a >= MIN_PODS_PER_SECOND and ratio >= MIN_RATIO and checks.get("violations") == 0,
        },
    }


def main(argv: list[str]) -> int:
    results = Path(__file__).resolve().with_name("results")
    reports = {}
    extra = argv[1:]
    for name in ("deviceshare", "deviceshare-baseline"):
        out = results / f"{name}.json"
        cmd = [sys.executable, "-m", "bench", "--workload", name, "--out", str(out), "--quiet", *extra]
        print(f"== {name}", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=Path(__file__).resolve().parents[1])
        reports[name] = json.loads(out.read_text())
    summary = side_by_side(reports["deviceshare"], reports["deviceshare-baseline"])
    print(json.dumps(summary, indent=2))
    return 0 if summary["target"]["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
