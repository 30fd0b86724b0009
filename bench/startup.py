"""Start-up of ``koord scheduler`` on a real API server: the time from exec to its first binding.

    .venv/bin/python -m bench.startup [--nodes 1000] [--pods 5000] [--runs 3]

Starts the e2e harness's etcd + kube-apiserver (tests/e2e/harness.py) with an audit log of bindings,
creates the nodes and pending pods, then execs the scheduler (leader election off) ``--runs`` times; each
run's time to first bind is the first ``pods/binding`` request the audit log records minus the moment of
exec. After each run the pods it bound are replaced by fresh pending ones. Issue 22, gap 4 (the side-by-side
with kube-scheduler is bench/kube_e2e.py's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("koord_e2e_harness", ROOT / "tests" / "e2e" / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["koord_e2e_harness"] = module
    spec.loader.exec_module(module)
    return module


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    from koord_framework.testing import make_pod

    return make_pod(name, namespace, cpu="100m", memory="64Mi", scheduler_name=scheduler)


def _setup(server: Any, nodes: int, pods: int, scheduler: str) -> Any:
    from koord_framework.cluster.kube import KubeCluster
    from koord_framework.testing import make_node

    kube = KubeCluster.from_kubeconfig(str(server.kubeconfig), component="bench-startup")
    for ns in ("koordinator-system", "bench"):
        server.request(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    for path in sorted((ROOT / "configs" / "crds").glob("*.yaml")):
        server.request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            yaml.safe_load(path.read_text()),
        )
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: kube.create(make_node(f"n{i}", cpu="32", memory="128Gi")), range(nodes)))
        list(pool.map(lambda i: kube.create(_pod(f"p{i}", "bench", scheduler)), range(pods)))
    time.sleep(3.0)  # CRDs established
    return kube


def _first_bind_after(server: Any, since: float, timeout: float = 120.0) -> float | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for ev in server.audit_events():
            at = _epoch(ev.get("requestReceivedTimestamp") or "1970-01-01T00:00:00Z")
            if at >= since and (ev.get("objectRef") or {}).get("subresource") == "binding":
                return at
        time.sleep(0.05)
    return None


def _refill(kube: Any, scheduler: str, run: int) -> None:
    """Replace the pods a run bound by pending ones, so every run starts from the same backlog."""
    listed, _ = kube.list("Pod", "bench")
    for i, pod in enumerate(p for p in listed if p["spec"].get("nodeName")):
        kube.delete("Pod", pod["metadata"]["name"], "bench")
        kube.create(_pod(f"r{run}-{i}", "bench", scheduler))


def _koord_args(workdir: Path, server: Any, harness: Any) -> list[str]:
    source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
    config = yaml.safe_load(source["data"]["koord-scheduler-config"])
    config["leaderElection"]["leaderElect"] = False
    path = workdir / "koord-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    return [
        sys.executable,
        "-m",
        "koord_framework.cli.serve",
        "scheduler",
        f"--config={path}",
        f"--kubeconfig={server.kubeconfig}",
        f"--address=127.0.0.1:{harness.free_port()}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.startup")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    harness = _harness()
    workdir = Path(tempfile.mkdtemp(prefix="koord-startup-"))
    bins = harness.ensure_binaries()
    server = harness.start_apiserver(workdir, bins, audit=True)
    scheduler = "koord-scheduler"
    try:
        kube = _setup(server, args.nodes, args.pods, scheduler)
        command = _koord_args(workdir, server, harness)
        results = []
        for run in range(args.runs):
            log = workdir / f"run-{run}.log"
            with open(log, "wb") as out:
                began = time.time()
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                first = _first_bind_after(server, began)
            finally:
                harness.stop_process(proc)
            if first is None:
                print(f"run {run}: no binding within the timeout; see {log}", file=sys.stderr)
                return 1
            results.append(first - began)
            print(f"run {run}: first bind {first - began:.2f} s after exec", flush=True)
            _refill(kube, scheduler, run)
        name = "koord scheduler"
        print(
            json.dumps(
                {
                    "scheduler": name,
                    "nodes": args.nodes,
                    "pods": args.pods,
                    "first_bind_s": [round(r, 2) for r in results],
                    "median_s": round(statistics.median(results), 2),
                }
            )
        )
        kube.close()
    finally:
        server.stop()
        if os.environ.get("KEEP") != "1":
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
