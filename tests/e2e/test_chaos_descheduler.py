"""Chaos: koord-descheduler killed mid-round, judged by the API server's audit log of evictions.

LowNodeLoad finds a hot node and asks the MigrationController to move its pods; evictions are throttled
(``evictQPS``) so that the round is still going when the process is killed (SIGKILL). A new process takes
over. The judge: every eviction the audit log records is of a pod whose PodMigrationJob carries the reason
(``koordinator.sh/evict-reason``), no pod is evicted twice, and the work goes on after the restart.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cluster.clock import format_time
from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_node, make_node_metric, make_pod

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]

PODS = 6


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    tails = "\n".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-2500:]}" for p in logs if p.exists())
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")


class Descheduler:
    def __init__(self, tmp: Path, config: Path, kubeconfig: Path, user: str, harness: Any) -> None:
        self.log = tmp / f"descheduler-{user}.log"
        port = harness.free_port()
        args = [
            sys.executable,
            "-m",
            "koord_framework.cli.serve",
            "descheduler",
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--address=127.0.0.1:{port}",
            f"--identity={user}",
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@pytest.fixture
def processes() -> Iterator[list[Descheduler]]:
    started: list[Descheduler] = []
    yield started
    for d in started:
        d.kill()


def _setup(kube: KubeCluster, namespace: str) -> tuple[str, str]:
    hot, cold = f"{namespace}-hot", f"{namespace}-cold"
    for node in (hot, cold):
        kube.create(make_node(node, cpu="10", memory="64Gi", labels={"chaos": namespace}))
    rs = kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {
                "replicas": PODS,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
                },
            },
        }
    )
    for i in range(PODS):
        pod = make_pod(f"web-{i}", namespace, cpu="1", memory="128Mi", node=hot, labels={"app": "web"})
        pod["spec"]["schedulerName"] = "koord-scheduler"
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": rs["metadata"]["uid"],
                "controller": True,
            }
        ]
        kube.create(pod)
        kube.patch(
            "Pod",
            f"web-{i}",
            namespace,
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            status=True,
        )
    now = time.time()
    metrics = {
        hot: make_node_metric(
            hot,
            update_time=now,
            system={"cpu": "2"},
            pods=[{"name": f"web-{i}", "namespace": namespace, "cpu": "1"} for i in range(PODS)],
        ),
        cold: make_node_metric(cold, update_time=now),
    }
    for node, nm in metrics.items():
        kube.create({k: v for k, v in nm.items() if k != "status"})
        nm["status"]["updateTime"] = format_time(now)
        kube.patch("NodeMetric", node, "", {"status": nm["status"]}, status=True)
    return hot, cold


def _config(tmp: Path, namespace: str) -> Path:
    config = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "deschedulingInterval": "1s",
        "leaderElection": {
            "leaderElect": True,
            "resourceName": f"d-{namespace}",
            "resourceNamespace": "koordinator-system",
            "leaseDuration": "4s",
            "renewDeadline": "3s",
            "retryPeriod": "500ms",
        },
        "nodeSelector": {"matchLabels": {"chaos": namespace}},
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
                        "args": {
                            "defaultJobMode": "EvictDirectly",
                            "evictionPolicy": "Eviction",
                            # One eviction every 2 s: the round is still going when the process dies.
                            "evictQPS": "0.5",
                            "maxMigratingPerNode": PODS,
                            "defaultDeleteOptions": {"gracePeriodSeconds": 0},
                            "skipEvictionGates": [
                                "ExpectedReplicas",
                                "MaxMigratingPerWorkload",
                                "MaxUnavailablePerWorkload",
                            ],
                        },
                    },
                ],
            }
        ],
    }
    path = tmp / "descheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _evictions(server: Any, namespace: str) -> list[dict[str, Any]]:
    calls = []
    for ev in server.audit_events():
        ref = ev.get("objectRef") or {}
        if ref.get("namespace") == namespace and ref.get("subresource") == "eviction":
            calls.append(
                {
                    "pod": ref.get("name"),
                    "user": (ev.get("user") or {}).get("username"),
                    "code": int((ev.get("responseStatus") or {}).get("code") or 0),
                }
            )
    return calls


def test_descheduler_killed_mid_round(
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    koord_crds: list[str],
    processes: list[Descheduler],
    tmp_path: Path,
    kube_apiserver: Any,
    e2e_harness: Any,
) -> None:
    _setup(kube, namespace)
    config = _config(tmp_path, namespace)
    first = Descheduler(tmp_path, config, kube_apiserver.kubeconfig_for("peer"), "first", e2e_harness)
    processes.append(first)
    logs = [first.log]

    def evicted(user: str | None = None) -> int:
        return sum(
            1
            for c in _evictions(kube_apiserver, namespace)
            if c["code"] == 201 and (user is None or c["user"] == user)
        )

    wait_for(lambda: evicted() >= 1, 90, "a first eviction", logs)
    first.kill(signal.SIGKILL)  # mid-round: more pods were chosen, their evictions not yet sent
    before = evicted()
    assert before < PODS, "the round ended before the kill: the scenario tested nothing"
    second = Descheduler(tmp_path, config, kube_apiserver.kubeconfig, "second", e2e_harness)
    processes.append(second)
    logs.append(second.log)
    wait_for(lambda: evicted("admin") >= 1, 90, "the restarted descheduler evicting", logs)

    calls = _evictions(kube_apiserver, namespace)
    done = Counter(c["pod"] for c in calls if c["code"] == 201)
    assert all(n == 1 for n in done.values()), f"pods evicted twice: {done}"
    jobs, _ = kube.list("PodMigrationJob")
    reasons: dict[str, str] = {}
    for job in jobs:
        ref = job["spec"]["podRef"]
        if ref.get("namespace") == namespace:
            reasons[ref["name"]] = (job["metadata"].get("annotations") or {}).get(
                "koordinator.sh/evict-reason", ""
            )
    unexplained = sorted(pod for pod in done if not reasons.get(pod))
    assert not unexplained, f"evictions without a recorded reason: {unexplained}; jobs: {reasons}"
