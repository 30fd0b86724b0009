"""Events, conditions and quiet logs on a real kube-apiserver v1.20 (issue 22, defects 2 and 3).

* An unschedulable pod: koord writes a ``FailedScheduling`` Event and ``PodScheduled=False`` with the text
  kube-scheduler v1.20 writes for the same pod on the same cluster (both schedulers run here, each on its
  own copy of the pod).
* An API server outage (killed, then restarted 20 s later) while koord schedules: its log says so in a
  handful of lines, not one per failed request.

Both run on an API server of their own (this module's), so that its nodes are the only ones and killing it
disturbs no other test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_node, make_pod

ROOT = Path(__file__).resolve().parents[2]
NODES = 3

pytestmark = pytest.mark.e2e


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, e2e_harness: Any) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp("events-apiserver")
    bins = e2e_harness.ensure_binaries(("kube-scheduler",), log=workdir / "build.log")
    srv = e2e_harness.start_apiserver(workdir, bins)
    srv.bins = bins
    try:
        _install_crds(srv)
        for name in ("koordinator-system", "shape"):
            srv.request(
                "POST",
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
        for i in range(NODES):
            status, body = srv.request("POST", "/api/v1/nodes", make_node(f"node-{i}", cpu="1", memory="2Gi"))
            assert status == 201, body
        yield srv
    finally:
        srv.stop()


def _install_crds(srv: Any) -> None:
    names = []
    for path in sorted((ROOT / "configs" / "crds").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        status, body = srv.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
        assert status in (201, 409), f"{path.name}: {status} {json.dumps(body)[:300]}"
        names.append(doc["metadata"]["name"])

    def established() -> bool:
        for name in names:
            _, crd = srv.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or ()}
            if conds.get("Established") != "True":
                return False
        return True

    wait_for(established, 60, "CRDs established")


@pytest.fixture
def kube(server: Any) -> Iterator[KubeCluster]:
    cluster = KubeCluster.from_kubeconfig(
        str(server.kubeconfig), component="koord-e2e", grace_period_seconds=0
    )
    try:
        yield cluster
    finally:
        cluster.close()


def _koord_scheduler(server: Any, workdir: Path, e2e_harness: Any, log: Path) -> subprocess.Popen[bytes]:
    source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
    config = workdir / "koord-scheduler.yaml"
    config.write_text(source["data"]["koord-scheduler-config"])
    args = [
        sys.executable,
        "-m",
        "koord_framework.cli.serve",
        "scheduler",
        f"--config={config}",
        f"--kubeconfig={server.kubeconfig}",
        f"--address=127.0.0.1:{e2e_harness.free_port()}",
        "--leader-elect=false",
    ]
    with open(log, "wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _kube_scheduler(server: Any, workdir: Path, e2e_harness: Any, log: Path) -> subprocess.Popen[bytes]:
    config = workdir / "kube-scheduler.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(server.kubeconfig)},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    args = [
        str(server.bins["kube-scheduler"]),
        f"--config={config}",
        "--bind-address=127.0.0.1",
        f"--secure-port={e2e_harness.free_port()}",
        "--port=0",
        f"--authentication-kubeconfig={server.kubeconfig}",
        f"--authorization-kubeconfig={server.kubeconfig}",
        "-v=1",
    ]
    with open(log, "wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _failed_scheduling(kube: KubeCluster, namespace: str, pod: str) -> list[dict[str, Any]]:
    events, _ = kube.list("Event", namespace)
    return [
        e for e in events if e["involvedObject"].get("name") == pod and e.get("reason") == "FailedScheduling"
    ]


def _pod_scheduled(kube: KubeCluster, namespace: str, pod: str) -> dict[str, Any] | None:
    obj = kube.get("Pod", pod, namespace)
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return None


def test_unschedulable_pod_gets_the_same_event_and_condition_as_from_kube_scheduler(
    server: Any, kube: KubeCluster, tmp_path: Path, e2e_harness: Any
) -> None:
    ns = "shape"
    for name, scheduler in (("by-kube", "default-scheduler"), ("by-koord", "koord-scheduler")):
        kube.create(make_pod(name, ns, cpu="4", memory="128Mi", scheduler_name=scheduler))
    procs = [
        _kube_scheduler(server, tmp_path, e2e_harness, tmp_path / "kube-scheduler.log"),
        _koord_scheduler(server, tmp_path, e2e_harness, tmp_path / "koord-scheduler.log"),
    ]
    try:
        for pod in ("by-kube", "by-koord"):
            wait_for(
                lambda pod=pod: _failed_scheduling(kube, ns, pod) and _pod_scheduled(kube, ns, pod),
                60,
                f"FailedScheduling and PodScheduled of {pod}",
            )
    finally:
        for proc in procs:
            _stop(proc)
    expected = f"0/{NODES} nodes are available: {NODES} Insufficient cpu."
    kube_event, koord_event = (_failed_scheduling(kube, ns, p)[0] for p in ("by-kube", "by-koord"))
    assert kube_event["message"] == expected, kube_event
    assert koord_event["message"] == kube_event["message"]
    assert koord_event["type"] == kube_event["type"] == "Warning"
    assert koord_event["action"] == kube_event["action"] == "Scheduling"
    assert kube_event["reportingComponent"] == "default-scheduler"
    assert koord_event["reportingComponent"] == "koord-scheduler"
    assert koord_event["involvedObject"]["uid"] == kube.get("Pod", "by-koord", ns)["metadata"]["uid"]
    kube_cond, koord_cond = (_pod_scheduled(kube, ns, p) for p in ("by-kube", "by-koord"))
    assert kube_cond is not None and koord_cond is not None
    for cond in (kube_cond, koord_cond):
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", expected)
    assert set(koord_cond) - {"lastProbeTime"} == set(kube_cond) - {"lastProbeTime"}


def _restart_apiserver(server: Any, e2e_harness: Any, down_for: float) -> None:
    """Kill the API server, keep it down for ``down_for`` seconds, start it again with the same flags."""
    proc = server.processes["kube-apiserver"]
    args = [a.decode() for a in Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0") if a]
    proc.kill()
    proc.wait(10)
    time.sleep(down_for)
    log = server.workdir / "apiserver-restarted.log"
    server.processes["kube-apiserver"] = e2e_harness._spawn(args, log)
    wait_for(lambda: e2e_harness._http_ok(f"{server.url}/readyz", server.token), 90, "API server back")


def test_an_apiserver_outage_is_a_handful_of_log_lines(
    server: Any, kube: KubeCluster, tmp_path: Path, e2e_harness: Any
) -> None:
    ns = "shape"
    log = tmp_path / "koord-scheduler.log"
    proc = _koord_scheduler(server, tmp_path, e2e_harness, log)
    try:
        kube.create(make_pod("before", ns, cpu="100m", scheduler_name="koord-scheduler"))
        wait_for(lambda: kube.get("Pod", "before", ns)["spec"].get("nodeName"), 60, "first bind")
        # Pending pods while the server is down keep the scheduler's writers busy failing.
        for i in range(20):
            kube.create(make_pod(f"big-{i}", ns, cpu="4", scheduler_name="koord-scheduler"))
        time.sleep(2)
        lines_before = log.read_text().splitlines()
        _restart_apiserver(server, e2e_harness, 20.0)
        kube.create(make_pod("after", ns, cpu="100m", scheduler_name="koord-scheduler"))
        wait_for(lambda: kube.get("Pod", "after", ns)["spec"].get("nodeName"), 90, "bind after the outage")
        time.sleep(2)
        assert proc.poll() is None, log.read_text()[-3000:]
        during = log.read_text().splitlines()[len(lines_before) :]
        print("\n".join(["log lines during the outage:", *during]))  # shown with -s (the report's figure)
    finally:
        _stop(proc)
    assert not any("Retrying (" in line for line in during), "\n".join(during)
    assert any("is unreachable" in line for line in during), "\n".join(during)
    assert any("is reachable again" in line for line in during), "\n".join(during)
    assert len(during) <= 12, "\n".join(during)
