"""Start-up of ``koord scheduler`` on a real API server: the time from exec to its first binding.

    .venv/bin/python -m bench.startup [--nodes 1000] [--pods 5000] [--runs 3] [--against DIR]

Starts the e2e harness's etcd + kube-apiserver (tests/e2e/harness.py) with an audit log of bindings,
creates the nodes and pending pods, then execs the scheduler (leader election off) ``--runs`` times; each
run's time to first bind is the first ``pods/binding`` request the audit log records minus the moment of
exec, and its CPU seconds are the process's (all threads, user + system) at that moment (sampled every
10 ms). After each run the pods it bound are replaced by fresh pending ones (deleted at once: with no
kubelet a bound pod deleted gracefully would stay Terminating and every later run would list more pods).

``--instructions`` runs the scheduler under valgrind's callgrind instead and reports the instructions it
executed up to its first binding (``callgrind_control -e`` the moment the audit log shows it): a figure
that does not move with the machine's load, for A/B comparisons on a shared machine (valgrind from
Debian's packages; each run takes minutes).

``--against DIR`` alternates each run with one of the checkout at ``DIR`` (its ``.venv/bin/python``, run
from ``DIR``): an A/B on the same API server and the same load. Each figure comes with the 1-minute load
average at its start, since the machine may be shared. Bytecode is compiled for the checkout(s) first, as
``make install`` and the image do. Issue 22, gap 4 (the side-by-side with kube-scheduler is
bench/kube_e2e.py's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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


def _audit_size(server: Any) -> int:
    path = server.audit_log
    return path.stat().st_size if path is not None and path.exists() else 0


def _first_bind_after(server: Any, since: float, offset: int, timeout: float = 120.0) -> float | None:
    """The first binding the audit log records at or after ``since``, reading from byte ``offset`` on
    (the log of earlier runs is not parsed again while the process under test competes for the CPU)."""
    deadline = time.monotonic() + timeout
    pending = b""
    while time.monotonic() < deadline:
        path = server.audit_log
        if path is not None and path.exists():
            with open(path, "rb") as log:
                log.seek(offset)
                chunk = log.read()
            offset += len(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if b'"binding"' not in line:
                    continue
                ev = json.loads(line)
                at = _epoch(ev.get("requestReceivedTimestamp") or "1970-01-01T00:00:00Z")
                if at >= since and (ev.get("objectRef") or {}).get("subresource") == "binding":
                    return at
        time.sleep(0.02)
    return None


def _refill(kube: Any, scheduler: str, run: int) -> None:
    """Replace the pods a run bound by pending ones, so every run starts from the same backlog."""
    listed, _ = kube.list("Pod", "bench")
    bound = [p["metadata"]["name"] for p in listed if p["spec"].get("nodeName")]

    def replace(item: tuple[int, str]) -> None:
        i, name = item
        kube.delete("Pod", name, "bench")
        kube.create(_pod(f"r{run}-{i}", "bench", scheduler))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(replace, enumerate(bound)))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process, all its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _CpuSampler:
    """Samples a process's CPU seconds every 10 ms, so that its CPU *at* the first binding (the audit log's
    time) can be read afterwards: reading it when the binding is noticed would add whatever the process did
    while this benchmark waited for a core on a loaded machine."""

    def __init__(self, pid: int) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pid,), daemon=True)
        self._thread.start()

    def _run(self, pid: int) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.time(), _cpu_seconds(pid)))
            except (OSError, IndexError, ValueError):
                return
            self._stop.wait(0.01)

    def at(self, when: float) -> float:
        """CPU seconds of the last sample at or before ``when``."""
        self._stop.set()
        self._thread.join()
        before = [cpu for at, cpu in self.samples if at <= when]
        return before[-1] if before else float("nan")


def _real_python(python: Path) -> str:
    """The interpreter itself, not a shim script: valgrind does not follow the shim's exec."""
    out = subprocess.run(
        [str(python), "-c", "import sys; print(sys.executable)"], capture_output=True, text=True, check=True
    )
    return out.stdout.strip() or str(python)


def _instructions(pid: int) -> int:
    """Instructions executed so far by every thread of a process running under callgrind."""
    out = subprocess.run(["callgrind_control", "-e", str(pid)], capture_output=True, text=True, check=True)
    total = 0
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "Th":
            total += int(parts[2].replace(",", ""))
    if total == 0:
        raise RuntimeError(f"callgrind_control -e {pid} reported no counts: {out.stdout!r}")
    return total


def _compile_bytecode(tree: Path) -> None:
    python = tree / ".venv" / "bin" / "python"
    dirs = [d for d in ("koord_framework", "libs", "plugins") if (tree / d).is_dir()]
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", *dirs], cwd=tree, capture_output=True)
    if (tree / "koord_framework" / "cli" / "codecache.py").exists():  # as make install does
        subprocess.run(
            [str(python), "-m", "koord_framework.cli.codecache", "-q"], cwd=tree, capture_output=True
        )


def _koord_args(workdir: Path, server: Any, harness: Any, python: str = sys.executable) -> list[str]:
    source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
    config = yaml.safe_load(source["data"]["koord-scheduler-config"])
    config["leaderElection"]["leaderElect"] = False
    path = workdir / "koord-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    return [
        python,
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
    parser.add_argument("--against", type=Path, metavar="DIR", help="another checkout to alternate with")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions to the first bind under callgrind"
    )
    args = parser.parse_args(argv)
    if args.instructions and shutil.which("callgrind_control") is None:
        print("bench.startup: --instructions needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    trees = [ROOT] + ([args.against.resolve()] if args.against else [])
    for tree in trees:
        _compile_bytecode(tree)
    harness = _harness()
    workdir = Path(tempfile.mkdtemp(prefix="koord-startup-"))
    bins = harness.ensure_binaries()
    server = harness.start_apiserver(workdir, bins, audit=True)
    scheduler = "koord-scheduler"
    try:
        kube = _setup(server, args.nodes, args.pods, scheduler)
        kube.grace_period_seconds = 0
        results: dict[str, list[dict[str, float]]] = {str(t): [] for t in trees}
        for run in range(args.runs):
            for tree in trees:
                command = _koord_args(workdir, server, harness, str(tree / ".venv" / "bin" / "python"))
                if args.instructions:
                    real = _real_python(tree / ".venv" / "bin" / "python")
                    command = [
                        "valgrind",
                        "--tool=callgrind",
                        "--callgrind-out-file=/dev/null",
                        real,
                        *command[1:],
                    ]
                log = workdir / f"run-{run}-{len(results[str(tree)])}-{tree.name}.log"
                load = os.getloadavg()[0]
                offset = _audit_size(server)
                with open(log, "wb") as out:
                    began = time.time()
                    proc = subprocess.Popen(
                        command, cwd=tree, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                    )
                sampler = _CpuSampler(proc.pid)
                instructions = 0
                try:
                    first = _first_bind_after(server, began, offset, 1800.0 if args.instructions else 120.0)
                    if first is not None and args.instructions:
                        instructions = _instructions(proc.pid)
                    cpu = sampler.at(first) if first is not None else float("nan")
                finally:
                    harness.stop_process(proc)
                if first is None:
                    print(f"run {run} ({tree}): no binding within the timeout; see {log}", file=sys.stderr)
                    return 1
                if args.instructions:
                    results[str(tree)].append({"instructions": instructions, "load1": round(load, 1)})
                    print(f"run {run} ({tree}): {instructions:,} instructions to the first bind", flush=True)
                    _refill(kube, scheduler, run * len(trees) + trees.index(tree))
                    continue
                results[str(tree)].append(
                    {"first_bind_s": round(first - began, 2), "cpu_s": round(cpu, 2), "load1": round(load, 1)}
                )
                print(
                    f"run {run} ({tree}): first bind {first - began:.2f} s after exec, "
                    f"{cpu:.2f} CPU s, load average {load:.1f}",
                    flush=True,
                )
                _refill(kube, scheduler, run * len(trees) + trees.index(tree))
        summary = []
        for tree, runs in results.items():
            if args.instructions:
                counts = [int(r["instructions"]) for r in runs]
                summary.append({"tree": tree, "instructions": counts, "median": statistics.median(counts)})
                continue
            summary.append(
                {
                    "scheduler": "koord scheduler",
                    "tree": tree,
                    "nodes": args.nodes,
                    "pods": args.pods,
                    "first_bind_s": [r["first_bind_s"] for r in runs],
                    "cpu_s": [r["cpu_s"] for r in runs],
                    "load1": [r["load1"] for r in runs],
                    "median_s": round(statistics.median(r["first_bind_s"] for r in runs), 2),
                    "median_cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2),
                }
            )
        print(json.dumps(summary if len(summary) > 1 else summary[0]))
        kube.close()
    finally:
        server.stop()
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
