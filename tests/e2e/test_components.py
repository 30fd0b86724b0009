"""The components as processes against a real API server: koord scheduler, its fail-over, koord koordlet."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.hosttree import FakeHostTree

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
GiB = 1024**3


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def metric(port: int, name: str) -> float | None:
    _, text = http_get(port, "/metrics")
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


class Component:
    """A ``koord scheduler|descheduler`` process with its health port."""

    def __init__(self, tmp: Path, name: str, config: Path, kubeconfig: Path, harness: Any) -> None:
        self.port = harness.free_port()
        self.log = tmp / f"{name}-{self.port}.log"
        args = [
            sys.executable,
            "-m",
            "koord_framework.cli.serve",
            name,
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--address=127.0.0.1:{self.port}",
            "--v=4",
        ]
        with open(self.log, "wb") as out:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def ready(self) -> bool:
        assert self.proc.poll() is None, f"exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}"
        return http_get(self.port, "/readyz")[0] == 200

    def leading(self) -> bool:
        return metric(self.port, "koord_leader_is_leader") == 1.0

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        self.proc.wait(20)


@pytest.fixture
def components(tmp_path: Path) -> Iterator[list[Component]]:
    started: list[Component] = []
    yield started
    for c in started:
        c.kill(signal.SIGTERM)


def scheduler_config(tmp_path: Path, lease: str, *, fast: bool = False) -> Path:
    """configs/scheduler/koord-scheduler.yaml with its own Lease (and short election timings)."""
    source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
    config = yaml.safe_load(source["data"]["koord-scheduler-config"])
    config["leaderElection"]["resourceName"] = lease
    if fast:
        config["leaderElection"].update(
            {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"}
        )
    path = tmp_path / f"{lease}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def bound(kube: KubeCluster, namespace: str) -> dict[str, str]:
    pods, _ = kube.list("Pod", namespace)
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}


def test_scheduler_binds_pods_and_serves_health(
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    koord_crds: list[str],
    components: list[Component],
    tmp_path: Path,
    kube_apiserver: Any,
    e2e_harness: Any,
) -> None:
    harness = e2e_harness
    nodes = [f"{namespace}-n{i}" for i in range(3)]
    for node in nodes:
        kube.create(make_node(node, cpu="2", memory="4Gi", labels={"e2e": namespace}))
    for i in range(30):
        kube.create(
            make_pod(f"p{i}", namespace, cpu="100m", memory="128Mi", scheduler_name="koord-scheduler")
        )
    kube.create(make_pod("other", namespace, cpu="100m", scheduler_name="someone-else"))
    scheduler = Component(
        tmp_path,
        "scheduler",
        scheduler_config(tmp_path, f"s-{namespace}"),
        kube_apiserver.kubeconfig,
        harness,
    )
    components.append(scheduler)
    wait_for(scheduler.ready, 30, "scheduler ready")
    wait_for(lambda: sum(1 for n in bound(kube, namespace).values() if n) >= 30, 60, "30 pods bound")
    placement = bound(kube, namespace)
    assert placement["other"] == "", "pods of another scheduler are left alone"
    all_nodes = {n["metadata"]["name"] for n in kube.list("Node")[0]}
    assert all(placement[f"p{i}"] in all_nodes for i in range(30))
    assert http_get(scheduler.port, "/healthz") == (200, "ok")
    assert scheduler.leading()
    scheduled = metric(
        scheduler.port,
        'koord_scheduler_schedule_attempts_total{profile="koord-scheduler",result="scheduled"}',
    )
    assert scheduled is not None and scheduled >= 30


def test_scheduler_fail_over_between_processes(
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    components: list[Component],
    tmp_path: Path,
    kube_apiserver: Any,
    e2e_harness: Any,
) -> None:
    harness = e2e_harness
    kube.create(make_node(f"{namespace}-n", cpu="8", memory="16Gi"))
    config = scheduler_config(tmp_path, f"f-{namespace}", fast=True)
    first = Component(tmp_path, "scheduler", config, kube_apiserver.kubeconfig, harness)
    second = Component(tmp_path, "scheduler", config, kube_apiserver.kubeconfig_for("peer"), harness)
    components += [first, second]
    wait_for(lambda: first.ready() and second.ready(), 30, "both replicas ready")
    wait_for(lambda: first.leading() or second.leading(), 15, "a leader")
    time.sleep(1.0)
    assert first.leading() != second.leading(), "exactly one replica leads"
    leader, standby = (first, second) if first.leading() else (second, first)

    kube.create(make_pod("before", namespace, cpu="100m", scheduler_name="koord-scheduler"))
    wait_for(lambda: bound(kube, namespace)["before"] != "", 20, "the leader binds")
    leader.kill()  # a crash: the Lease is not released
    killed = time.monotonic()
    kube.create(make_pod("after", namespace, cpu="100m", scheduler_name="koord-scheduler"))
    wait_for(lambda: bound(kube, namespace)["after"] != "", 30, "the standby takes over and binds")
    took = time.monotonic() - killed
    assert took < 4 + 6, f"fail-over took {took:.1f} s (lease 4 s)"
    assert standby.leading()
    lease = kube.get("Lease", f"f-{namespace}", koordinator_system)
    assert lease["spec"]["leaseTransitions"] >= 1


def test_koordlet_writes_node_metric(
    kube: KubeCluster, namespace: str, koord_crds: list[str], tmp_path: Path, kube_apiserver: Any
) -> None:
    node = f"{namespace}-agent"
    kube.create(make_node(node))
    tree = FakeHostTree(tmp_path / "host", cpus=4, memory_bytes=8 * GiB)
    tree.set_node_memory_used(3 * GiB)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "koord_framework.cli.main",
            "koordlet",
            f"--node-name={node}",
            f"--kubeconfig={kube_apiserver.kubeconfig}",
            f"--host-root={tree.root}",
            "--create-node-metric",
            "--once",
            "--output=json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metric_obj = kube.get("NodeMetric", node)
    status = metric_obj["status"]
    usage = status["nodeMetric"]["nodeUsage"]["resources"]
    assert usage["memory"] == "3Gi"
    assert "cpu" in usage
    assert status["updateTime"]


def _replica_set(kube: KubeCluster, namespace: str, name: str, replicas: int) -> str:
    rs = kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
                },
            },
        }
    )
    return str(rs["metadata"]["uid"])


def _running_pod(kube: KubeCluster, namespace: str, name: str, rs: str, rs_uid: str, node: str) -> None:
    pod = make_pod(
        name,
        namespace,
        cpu="100m",
        memory="128Mi",
        node=node,
        labels={"app": rs},
        scheduler_name="koord-scheduler",
    )
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": rs_uid, "controller": True}
    ]
    kube.create(pod)
    # No kubelet: publish the status a running, ready pod would have.
    kube.patch(
        "Pod",
        name,
        namespace,
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        status=True,
    )


def test_descheduler_evicts_through_the_eviction_api_and_respects_pdbs(
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    koord_crds: list[str],
    components: list[Component],
    tmp_path: Path,
    kube_apiserver: Any,
    e2e_harness: Any,
) -> None:
    """LowNodeLoad finds node "hot" over its threshold and asks to move its two pods; the MigrationController
    evicts them through the Eviction API: the pod of the free workload goes, the one a PodDisruptionBudget
    guards stays (429) and is never deleted instead."""
    from koord_framework.cluster.clock import format_time
    from koord_framework.testing import make_node_metric, make_pdb

    hot, cold = f"{namespace}-hot", f"{namespace}-cold"
    for node in (hot, cold):
        kube.create(make_node(node, cpu="10", memory="64Gi", labels={"e2e": namespace}))
    uids = {rs: _replica_set(kube, namespace, rs, 10) for rs in ("guarded", "free")}
    for rs, uid in uids.items():
        _running_pod(kube, namespace, f"{rs}-hot", rs, uid, hot)
        for i in range(9):  # every replica exists and is ready: the workload is fully available
            _running_pod(kube, namespace, f"{rs}-{i}", rs, uid, cold)
    kube.create(make_pdb("guard", namespace, {"app": "guarded"}, min_available=10))
    now = time.time()
    metrics = {
        hot: make_node_metric(
            hot,
            update_time=now,
            system={"cpu": "4"},
            pods=[{"name": f"{rs}-hot", "namespace": namespace, "cpu": "2"} for rs in uids],
        ),
        cold: make_node_metric(cold, update_time=now),
    }
    for node, nm in metrics.items():
        kube.create({k: v for k, v in nm.items() if k != "status"})
        nm["status"]["updateTime"] = format_time(now)
        kube.patch("NodeMetric", node, "", {"status": nm["status"]}, status=True)

    config = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "deschedulingInterval": "2s",
        "leaderElection": {"leaderElect": False},
        "nodeSelector": {"matchLabels": {"e2e": namespace}},
        "profiles": [
            {
                "name": "koord-descheduler",
                "plugins": {
                    "balance": {"enabled": [{"name": "LowNodeLoad"}]},
                    "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "MigrationController"}]},
                },
                "pluginConfig": [
                    {
                        "name": "LowNodeLoad",
                        "args": {
                            "lowThresholds": {"cpu": 30, "memory": 100},
                            "highThresholds": {"cpu": 50, "memory": 100},
                            "anomalyCondition": {"consecutiveAbnormalities": 1},
                        },
                    },
                    {
                        "name": "MigrationController",
                        "args": {"defaultJobMode": "EvictDirectly", "evictionPolicy": "Eviction"},
                    },
                ],
            }
        ],
    }
    path = tmp_path / "descheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    descheduler = Component(tmp_path, "descheduler", path, kube_apiserver.kubeconfig, e2e_harness)
    components.append(descheduler)
    wait_for(descheduler.ready, 30, "descheduler ready")

    def alive() -> set[str]:
        """Pods not being deleted. Without a kubelet an evicted bound pod stays, terminating, for good."""
        pods, _ = kube.list("Pod", namespace)
        return {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}

    wait_for(lambda: "free-hot" not in alive(), 60, "the free pod evicted")
    time.sleep(3.0)  # more cycles: the guarded pod stays
    assert "guarded-hot" in alive(), "a PodDisruptionBudget-guarded pod is never deleted instead"
    jobs, _ = kube.list("PodMigrationJob")
    by_pod = {
        j["spec"]["podRef"]["name"]: j for j in jobs if j["spec"]["podRef"].get("namespace") == namespace
    }
    assert "free-hot" in by_pod
    events, _ = kube.list("Event", namespace)
    assert any(e["reason"] == "Evicted" and e["involvedObject"]["name"] == "free-hot" for e in events)
    assert not any(e["reason"] == "Evicted" and e["involvedObject"]["name"] == "guarded-hot" for e in events)
    assert http_get(descheduler.port, "/healthz") == (200, "ok")
