"""Chaos: koordlet with the API server gone, and a cgroup write that fails (on a fake host tree).

The agent runs for a node whose NodeSLO turns BECPUSuppress on (cfsQuota policy). It computes the
best-effort quota from the node's CPU usage, which a thread of the test feeds into the fake ``/proc/stat``.
The API server is then killed: the agent goes on enforcing from what it cached (the NodeSLO, its pods),
so a higher node usage lowers the best-effort quota while the API server is down. Then the quota file is
made unusable (a directory in its place): the failure is reported (``koordlet_resource_update`` or an error
line of the round naming the file), and the agent keeps running and healthy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from koord_framework.api.qos import KubeQoS
from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_node
from koord_framework.testing.hosttree import FakeHostTree, make_running_pod

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]
GiB = 1024**3


class Feed:
    """Adds ``cores`` of busy CPU time to the fake host's /proc/stat, in real time."""

    def __init__(self, tree: FakeHostTree, cores: float) -> None:
        self.tree, self.cores = tree, cores
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.2):
            now = time.monotonic()
            self.tree.add_node_cpu(seconds=self.cores * (now - last), wall_seconds=now - last)
            last = now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def _metric_sum(port: int, name: str, **labels: str) -> float:
    _, text = _get(port, "/metrics")
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{log.read_text()[-3000:]}")


@pytest.fixture
def agent_setup(chaos_apiserver: Any, tmp_path: Path, e2e_harness: Any) -> Iterator[dict[str, Any]]:
    server = chaos_apiserver
    kube = KubeCluster.from_kubeconfig(str(server.kubeconfig), component="chaos-judge")
    node = f"chaos-agent-{os.getpid()}"
    kube.create(make_node(node, cpu="8", memory="32Gi"))
    kube.create(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": node},
            "spec": {
                "resourceUsedThresholdWithBE": {
                    "enable": True,
                    "cpuSuppressThresholdPercent": 65,
                    "cpuSuppressPolicy": "cfsQuota",
                }
            },
        }
    )
    tree = FakeHostTree(tmp_path / "host", cpus=8, memory_bytes=32 * GiB)
    namespace = f"chaos-agent-{os.getpid()}"
    server.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    batch = {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2Gi"}
    for name, qos, resources in (
        ("ls", "LS", {"cpu": "2", "memory": "2Gi"}),
        ("be", "BE", batch),
    ):
        manifest = make_running_pod(
            name, namespace=namespace, node=node, qos=qos, requests=resources, limits=resources
        )
        status = manifest.pop("status")
        del manifest["metadata"]["uid"]
        for container in manifest["spec"]["containers"]:
            container.setdefault("image", "registry.k8s.io/pause:3.9")
        created = kube.create(manifest)  # the API server gives the uid the cgroups are named after
        kube.patch("Pod", name, namespace, {"status": status}, status=True)
        tree.add_pod({**created, "status": status})
    feed = Feed(tree, cores=1.0)
    port = e2e_harness.free_port()
    log = tmp_path / "koordlet.log"
    args = [
        sys.executable,
        "-m",
        "koord_framework.cli.main",
        "koordlet",
        f"--node-name={node}",
        f"--kubeconfig={server.kubeconfig}",
        f"--host-root={tree.root}",
        f"--health-address=127.0.0.1:{port}",
        "--create-node-metric",
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield {"server": server, "tree": tree, "feed": feed, "port": port, "log": log, "proc": proc}
    finally:
        feed.stop()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        if "kube-apiserver" not in server.processes:
            server.restart_apiserver()
        for kind, name in (("NodeSLO", node), ("NodeMetric", node), ("Node", node)):
            with contextlib.suppress(Exception):
                kube.delete(kind, name)
        kube.close()


def test_koordlet_enforces_from_its_cache_with_the_apiserver_down_and_survives_a_failed_write(
    agent_setup: dict[str, Any],
) -> None:
    tree: FakeHostTree = agent_setup["tree"]
    server, feed, port, log, proc = (agent_setup[k] for k in ("server", "feed", "port", "log", "proc"))
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)

    def quota() -> int:
        try:
            return int(tree.read("cpu.cfs_quota_us", be_dir).split()[0])
        except (OSError, ValueError):
            return -1

    wait_for(lambda: _get(port, "/readyz")[0] == 200, 60, "the agent ready", log)
    wait_for(lambda: quota() > 0, 60, "a best-effort quota from the suppress strategy", log)
    calm = quota()

    server.kill_apiserver(signal.SIGKILL)
    feed.cores = 4.0  # the node gets busier while nobody can tell the agent anything
    wait_for(lambda: 0 < quota() < calm, 60, "a lower quota written with the API server down", log)
    assert proc.poll() is None and _get(port, "/healthz")[0] == 200

    # The quota file becomes unwritable: a directory where the file was.
    path = tree.path("cpu.cfs_quota_us", be_dir)
    path.unlink()
    path.mkdir()
    feed.cores = 2.0

    def reported() -> bool:
        # A failed write is counted (koordlet_resource_update{status="failed"}); a file that cannot even
        # be read is an error line of the round naming it. Either way the agent says so.
        if _metric_sum(port, "koordlet_resource_update_total", status="failed") > 0:
            return True
        return any(
            line.startswith("error:") and str(path) in line
            for line in log.read_text(errors="replace").splitlines()
        )

    wait_for(reported, 60, "the failed write reported", log)
    time.sleep(2.0)  # more rounds: the agent goes on
    assert proc.poll() is None, log.read_text()[-3000:]
    assert _get(port, "/healthz")[0] == 200
    shutil.rmtree(path)
    server.restart_apiserver()
