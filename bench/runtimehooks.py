"""Benchmark: the koordlet's runtime hook server, per call over the real unix-socket gRPC, all five hooks on.

    python -m bench.runtimehooks [--pods 2000] [--check]

Starts ``koord koordlet`` as its own process on the fake host of ``bench/koordlet_agent.py`` (150
containers, cgroup v1, with group identity in the kernel) with every hook plugin enabled
(GroupIdentity, BatchResource, CPUSetAllocator, GPUEnvInject, CPUNormalization) and a NodeSLO that turns
group identity on, then acts as koord-runtime-proxy: for each of ``--pods`` pods (a quarter each LS, LSR
with a ``resource-status`` cpuset, BE with batch resources, LS with two GPUs in ``device-allocated``) it
calls PreRunPodSandbox, then for two containers PreCreateContainer, PreStartContainer and
PostStartContainer, every fourth pod a PreUpdateContainerResources, and at the end PostStopContainer and
PostStopPodSandbox -- the mix a kubelet's pod start and stop make. Every call is timed at the client
(``RuntimeHookClient``), so the figures include the gRPC round trip. Prints one JSON line: calls, p50 /
p99 / max in ms per rpc and overall, and the koordlet's peak RSS (``VmHWM``) with hooks on.

Targets (``--check`` exits 1 on a miss): p99 <= 5 ms over all calls; koordlet peak RSS <= 256 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from bench.koordlet_agent import build
from koord_framework.testing.probes import free_port, get

P99_TARGET_MS = 5.0
RSS_TARGET_MIB = 256.0
HOOKS = ["BatchResource", "CPUNormalization", "CPUSetAllocator", "GPUEnvInject", "GroupIdentity"]
CONFIG = {
    "apiVersion": "koordlet.koordinator.sh/v1alpha1",
    "kind": "KoordletConfiguration",
    "nodeName": "bench-node",
    "runtimeHooks": {"enabled": HOOKS, "failurePolicy": "Ignore"},
}
GROUP_IDENTITY = {
    "policies": {"cpuPolicy": "groupIdentity"},
    "lsrClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}},
}


def _requests(i: int) -> tuple[Any, list[Any]]:
    """The pod-level and the container-level requests of pod ``i`` (kind by ``i % 4``)."""
    from koord_framework.koordlet.runtimehooks.client import (
        ContainerMetadata,
        ContainerResourceHookRequest,
        LinuxContainerResources,
        PodSandboxHookRequest,
        PodSandboxMetadata,
    )

    kind = ("LS", "LSR", "BE", "GPU")[i % 4]
    meta = PodSandboxMetadata(name=f"{kind.lower()}-{i}", namespace="bench", uid=f"uid-{i}")
    labels = {"koordinator.sh/qosClass": "LS" if kind == "GPU" else kind}
    annotations: dict[str, str] = {}
    qos_dir = "kubepods/besteffort" if kind == "BE" else "kubepods/burstable"
    if kind == "LSR":
        annotations["scheduling.koordinator.sh/resource-status"] = json.dumps(
            {"cpuset": f"{2 * (i % 8)}-{2 * (i % 8) + 1}"}
        )
    if kind == "BE":
        spec = {"limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"}}
        spec["requests"] = dict(spec["limits"])
        annotations["node.koordinator.sh/extended-resource-spec"] = json.dumps(
            {"containers": {"c0": spec, "c1": spec}}
        )
    if kind == "GPU":
        annotations["scheduling.koordinator.sh/device-allocated"] = json.dumps(
            {"gpu": [{"minor": 0}, {"minor": 1}]}
        )
    cgroup = f"/{qos_dir}/poduid-{i}"
    resources = LinuxContainerResources(
        cpu_shares=1024, cpu_quota=100000, cpu_period=100000, memory_limit_in_bytes=1 << 30
    )
    pod = PodSandboxHookRequest(
        pod_meta=meta, labels=labels, annotations=annotations, cgroup_parent=cgroup, resources=resources
    )
    containers = [
        ContainerResourceHookRequest(
            pod_meta=meta,
            container_meta=ContainerMetadata(name=f"c{n}", id=f"{i:060x}{n:04x}"),
            pod_labels=labels,
            pod_annotations=annotations,
            pod_cgroup_parent=cgroup,
            container_resources=resources,
            pod_resources=resources,
            container_envs={"PATH": "/usr/bin"},
        )
        for n in range(2)
    ]
    return pod, containers


def _vm(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _wait(path: Path, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"koord koordlet did not serve {path} (exit {proc.poll()})")
        time.sleep(0.1)


def run(pods: int) -> dict[str, Any]:
    from koord_framework.koordlet.runtimehooks.client import RuntimeHookClient

    with tempfile.TemporaryDirectory(prefix="hookserver-bench-") as tmp:
        base = Path(tmp)
        tree, objects, _ = build(base / "host", 150)
        for d in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
            tree.ensure_cgroup(d, {"cpu.bvt_warp_ns": "0"})
        for i in range(pods):
            tree.ensure_cgroup(f"{'kubepods/besteffort' if i % 4 == 2 else 'kubepods/burstable'}/poduid-{i}")
        for obj in objects:
            if obj["kind"] == "NodeSLO":
                obj["spec"]["resourceQOSStrategy"] = GROUP_IDENTITY
        (base / "cluster").mkdir()
        (base / "cluster" / "objects.yaml").write_text(yaml.safe_dump_all(objects))
        (base / "koordlet.yaml").write_text(yaml.safe_dump(CONFIG))
        sock = base / "koordlet.sock"
        koord = Path(sys.executable).with_name("koord")
        argv = [str(koord), "koordlet", "--cluster", str(base / "cluster"), "--host-root", str(tree.root)]
        port = free_port()
        argv += ["--config", str(base / "koordlet.yaml"), "--health-address", f"127.0.0.1:{port}"]
        argv += ["--runtime-hooks-addr", str(sock), "-o", "json"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _wait(sock, proc, 60)
            time.sleep(2.0)  # a couple of agent steps: rules (group identity from the NodeSLO) in place
            latencies: dict[str, list[float]] = defaultdict(list)
            failures = 0
            with RuntimeHookClient(str(sock), timeout=5) as client:

                def timed(rpc: str, call: Any, request: Any) -> None:
                    nonlocal failures
                    t0 = time.perf_counter()
                    try:
                        call(request)
                    except Exception:
                        failures += 1
                    latencies[rpc].append((time.perf_counter() - t0) * 1000.0)

                client.pre_run_pod_sandbox_hook(_requests(0)[0])  # warm the channel
                for i in range(pods):
                    pod, containers = _requests(i)
                    timed("PreRunPodSandbox", client.pre_run_pod_sandbox_hook, pod)
                    for c in containers:
                        timed("PreCreateContainer", client.pre_create_container_hook, c)
                        timed("PreStartContainer", client.pre_start_container_hook, c)
                        timed("PostStartContainer", client.post_start_container_hook, c)
                    if i % 4 == 0:
                        timed(
                            "PreUpdateContainerResources",
                            client.pre_update_container_resources_hook,
                            containers[0],
                        )
                    for c in containers:
                        timed("PostStopContainer", client.post_stop_container_hook, c)
                    timed("PostStopPodSandbox", client.post_stop_pod_sandbox_hook, pod)
            rss_now, rss_peak = _vm(proc.pid, "VmRSS"), _vm(proc.pid, "VmHWM")
            hook_ms = _hook_time(get(port, "/metrics")[1])
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        socket_removed = not sock.exists()
    every = [x for v in latencies.values() for x in v]
    return {
        "pods": pods,
        "calls": len(every),
        "failures": failures,
        "hooks": HOOKS,
        "all": _stats(every),
        "perRPC": {k: _stats(v) for k, v in sorted(latencies.items())},
        "meanHookInvocationMs": hook_ms,
        "koordletRSSMiB": round(rss_now, 1),
        "koordletPeakRSSMiB": round(rss_peak, 1),
        "socketRemovedOnStop": socket_removed,
        "cpus": os.cpu_count(),
    }


def _hook_time(metrics: str) -> dict[str, float]:
    """Mean time one hook invocation took inside the koordlet, by stage, from its own histogram
    (``koordlet_runtime_hook_invoked_duration_milliseconds``; the reconciler's calls included): the part
    of a call that is not gRPC, threads and scheduling."""
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, float] = defaultdict(float)
    name = "koordlet_runtime_hook_invoked_duration_milliseconds"
    for line in metrics.splitlines():
        if not line.startswith(name + "_sum{") and not line.startswith(name + "_count{"):
            continue
        labels, value = line.rsplit(" ", 1)
        stage = labels.split('stage="', 1)[1].split('"', 1)[0]
        (sums if "_sum{" in labels else counts)[stage] += float(value)
    return {stage: round(sums[stage] / counts[stage], 3) for stage in sorted(sums) if counts[stage]}


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else ordered * 99
    return {"n": len(ordered), "p50": round(q[49], 3), "p99": round(q[98], 3), "max": round(ordered[-1], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    result = run(args.pods)
    print(json.dumps(result))
    missed = []
    if result["all"]["p99"] > P99_TARGET_MS:
        missed.append(f"p99 {result['all']['p99']} ms > {P99_TARGET_MS} ms")
    if result["koordletPeakRSSMiB"] > RSS_TARGET_MIB:
        missed.append(f"koordlet peak RSS {result['koordletPeakRSSMiB']} MiB > {RSS_TARGET_MIB} MiB")
    if result["failures"]:
        missed.append(f"{result['failures']} calls failed")
    for line in missed:
        print(f"runtimehooks bench: missed: {line}", file=sys.stderr)
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
