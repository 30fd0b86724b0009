"""ElasticQuota on a real kube-apiserver: ``koord scheduler`` with the shipped profile admits a quota's pods
up to its runtime, the next pod waits, and a freed pod lets it in; the status writer publishes the runtime."""

from __future__ import annotations

import json
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

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
LABEL = "quota.scheduling.koordinator.sh/name"


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Scheduler:
    """A ``koord scheduler`` process with its health port."""

    def __init__(self, tmp: Path, config: Path, kubeconfig: Path, harness: Any) -> None:
        self.port = harness.free_port()
        self.log = tmp / f"scheduler-{self.port}.log"
        args = [
            sys.executable,
            "-m",
            "koord_framework.cli.serve",
            "scheduler",
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--address=127.0.0.1:{self.port}",
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def ready(self) -> bool:
        assert self.proc.poll() is None, f"exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(20)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Scheduler]]:
    procs: list[Scheduler] = []
    yield procs
    for p in procs:
        p.stop()


def shipped_config(tmp_path: Path, lease: str) -> Path:
    source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
    config = yaml.safe_load(source["data"]["koord-scheduler-config"])
    config["leaderElection"]["resourceName"] = lease
    profile = config["profiles"][0]
    assert "ElasticQuota" in [p["name"] for p in profile["plugins"]["preFilter"]["enabled"]]
    path = tmp_path / f"{lease}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def node_of(kube: KubeCluster, namespace: str, name: str) -> str:
    pod = kube.try_get("Pod", name, namespace)
    return str((pod or {}).get("spec", {}).get("nodeName") or "")


def test_quota_admits_up_to_runtime_then_a_freed_pod_lets_the_next_in(
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    koord_crds: list[str],
    started: list[Scheduler],
    tmp_path: Path,
    kube_apiserver: Any,
    e2e_harness: Any,
) -> None:
    assert "elasticquotas.scheduling.sigs.k8s.io" in koord_crds
    kube.create(make_node(f"{namespace}-n", cpu="8", memory="16Gi"))
    quota = f"team-{namespace}"
    kube.create(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": quota, "namespace": namespace},
            # max bounds the runtime whatever else the cluster holds: 2 cores for this team
            "spec": {"max": {"cpu": "2", "memory": "4Gi"}, "min": {"cpu": "1", "memory": "1Gi"}},
        }
    )
    scheduler = Scheduler(
        tmp_path, shipped_config(tmp_path, f"q-{namespace}"), kube_apiserver.kubeconfig, e2e_harness
    )
    started.append(scheduler)
    wait_for(scheduler.ready, 60, "scheduler ready")

    def pod(name: str) -> dict[str, Any]:
        return make_pod(
            name, namespace, cpu="1", memory="256Mi", labels={LABEL: quota}, scheduler_name="koord-scheduler"
        )

    kube.create(pod("p0"))
    kube.create(pod("p1"))
    wait_for(
        lambda: bool(node_of(kube, namespace, "p0") and node_of(kube, namespace, "p1")), 60, "p0, p1 bound"
    )
    kube.create(pod("p2"))
    time.sleep(3)
    assert node_of(kube, namespace, "p2") == "", "the third pod must wait: the quota's runtime is 2 cores"

    # the status writer publishes what the scheduler computed
    def runtime_published() -> bool:
        obj = kube.get("ElasticQuota", quota, namespace)
        raw = (obj["metadata"].get("annotations") or {}).get("quota.scheduling.koordinator.sh/runtime")
        return raw is not None and json.loads(raw).get("cpu") == "2"

    wait_for(runtime_published, 30, "runtime annotation")
    assert kube.get("ElasticQuota", quota, namespace)["status"]["used"]["cpu"] == "2"

    kube.delete("Pod", "p0", namespace)
    wait_for(lambda: bool(node_of(kube, namespace, "p2")), 60, "p2 bound after p0 went away")
    assert kube.try_get("ElasticQuota", "koordinator-default-quota", "koordinator-system") is not None
