"""Issue 24 on a real kube-apiserver: koord-scheduler with Koordinator's profile on a cluster without
Koordinator's CRDs waits unready, naming each kind it needs and how to install it; following those
instructions (``kubectl apply -f configs/crds/<file>``, done here through the API) makes it ready, and it
schedules a pod. An API server of its own, so that no other test's CRDs are installed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
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
INSTALL = re.compile(r"waiting for (\w+): .*kubectl apply -f (configs/crds/\S+\.yaml)")


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


@pytest.fixture(scope="module")
def bare_apiserver(tmp_path_factory: pytest.TempPathFactory, e2e_harness: Any) -> Iterator[Any]:
    """etcd + kube-apiserver with no CRD installed."""
    workdir = tmp_path_factory.mktemp("bare-apiserver")
    bins = e2e_harness.ensure_binaries(log=workdir / "build.log")
    server = e2e_harness.start_apiserver(workdir, bins)
    try:
        yield server
    finally:
        server.stop()


def apply_crd(server: Any, relative: str) -> str:
    """``kubectl apply -f <file>`` for one CRD manifest, then wait until it is established."""
    doc = yaml.safe_load((ROOT / relative).read_text())
    status, body = server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    assert status in (201, 409), f"{relative}: {status} {json.dumps(body)[:500]}"
    name = doc["metadata"]["name"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        _, crd = server.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or ()}
        if conditions.get("Established") == "True":
            return str(name)
        time.sleep(0.1)
    raise AssertionError(f"CRD {name} not established")


def ensure_namespace(server: Any, name: str) -> None:
    status, body = server.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert status in (201, 409), body


def test_scheduler_without_crds_waits_naming_them_then_schedules_once_installed(
    bare_apiserver: Any, e2e_harness: Any, tmp_path: Path
) -> None:
    server = bare_apiserver
    for ns in ("koordinator-system", "fail-loudly"):
        ensure_namespace(server, ns)
    kube = KubeCluster.from_kubeconfig(str(server.kubeconfig), component="koord-e2e", grace_period_seconds=0)
    try:
        kube.create(make_node("fail-loudly-n1", cpu="4", memory="8Gi"))
        kube.create(make_pod("p1", "fail-loudly", cpu="100m", scheduler_name="koord-scheduler"))
        port = e2e_harness.free_port()
        log_path = tmp_path / "scheduler.log"
        args = [
            sys.executable,
            "-m",
            "koord_framework.cli.serve",
            "scheduler",
            f"--config={ROOT / 'configs' / 'scheduler' / 'koord-scheduler.yaml'}",
            f"--kubeconfig={server.kubeconfig}",
            f"--address=127.0.0.1:{port}",
        ]
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT
            )
        try:
            awaited: list[str] = []
            deadline = time.monotonic() + 180

            def scheduled() -> str:
                return str(kube.get("Pod", "p1", "fail-loudly")["spec"].get("nodeName") or "")

            while not scheduled():
                assert time.monotonic() < deadline, f"p1 not scheduled; log:\n{log_path.read_text()[-3000:]}"
                assert proc.poll() is None, f"exited {proc.returncode}:\n{log_path.read_text()[-3000:]}"
                pending = [m for m in INSTALL.finditer(log_path.read_text()) if m.group(1) not in awaited]
                if not pending:
                    time.sleep(0.2)
                    continue
                kind, crd_file = pending[0].group(1), pending[0].group(2)
                # Waiting, not failing: alive, unready, saying for what; nothing is scheduled meanwhile.
                status, body = http_get(port, "/readyz")
                assert status == 503 and f"waiting for {kind}" in body, (status, body)
                assert http_get(port, "/healthz") == (200, "ok")
                assert not scheduled()
                awaited.append(kind)
                apply_crd(server, crd_file)  # what the message says to do
            assert "NodeMetric" in awaited, awaited
            log_text = log_path.read_text()
            for kind in awaited:
                assert log_text.count(f"waiting for {kind}:") == 1, f"{kind} logged more than once"
            assert scheduled() == "fail-loudly-n1"
            assert http_get(port, "/readyz") == (200, "ok")
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    finally:
        kube.close()


def test_scheduler_that_cannot_build_exits_non_zero_with_the_reason(
    bare_apiserver: Any, e2e_harness: Any, tmp_path: Path
) -> None:
    """A failure building the scheduler (here injected) is not waited on: the process ends with status 1
    and one line naming the cause, and gives its Lease back."""
    ensure_namespace(bare_apiserver, "koordinator-system")
    source = yaml.safe_load((ROOT / "configs" / "scheduler" / "koord-scheduler.yaml").read_text())
    config = yaml.safe_load(source["data"]["koord-scheduler-config"])
    config["leaderElection"]["resourceName"] = "fail-loudly-broken"
    config_path = tmp_path / "broken.yaml"
    config_path.write_text(yaml.safe_dump(config))
    port = e2e_harness.free_port()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _BREAK_AND_SERVE,
            f"--config={config_path}",
            f"--kubeconfig={bare_apiserver.kubeconfig}",
            f"--address=127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == "koord scheduler: fatal: RuntimeError: injected: the scheduler cannot be built", last
    status, lease = bare_apiserver.request(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/koordinator-system/leases/fail-loudly-broken"
    )
    assert status == 200 and lease["spec"]["holderIdentity"] == "", lease


_BREAK_AND_SERVE = """
import sys
from koord_framework.cli import serve
from koord_framework.scheduler.scheduler import Scheduler

def broken(*args, **kwargs):
    raise RuntimeError("injected: the scheduler cannot be built")

Scheduler.from_config = broken
sys.exit(serve.main(["scheduler", *sys.argv[1:]]))
"""
