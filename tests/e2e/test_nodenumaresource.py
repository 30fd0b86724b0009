"""NodeNUMAResource against a real API server: koordlet writes the node's NodeResourceTopology, and the
scheduler, running Koordinator's shipped profile, pins an LSR pod to whole cores and says so in the pod."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.kube import KubeCluster
from koord_framework.koordlet.cpuset import parse_cpuset
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.hosttree import FakeHostTree, Processor

pytestmark = pytest.mark.e2e

GiB = 1024**3


def _components() -> Any:
    from tests.e2e import test_components

    return test_components


def test_koordlet_reports_the_topology_and_the_scheduler_pins_cpus(
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    koord_crds: list[str],
    tmp_path: Path,
    kube_apiserver: Any,
    e2e_harness: Any,
) -> None:
    helpers = _components()
    node = f"{namespace}-numa"
    kube.create(make_node(node, cpu="8", memory="16Gi"))
    # 1 socket x 4 cores x 2 threads, siblings numbered n and n+4 as on Intel machines.
    cpus = [Processor(cpu=c, core=c % 4, socket=0, node=0) for c in range(8)]
    tree = FakeHostTree(tmp_path / "host", cpus=cpus, memory_bytes=16 * GiB)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "koord_framework.cli.main",
            "koordlet",
            f"--node-name={node}",
            f"--kubeconfig={kube_apiserver.kubeconfig}",
            f"--host-root={tree.root}",
            "--once",
            "--output=json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    nrt = kube.get("NodeResourceTopology", node)
    detail = json.loads(nrt["metadata"]["annotations"]["node.koordinator.sh/cpu-topology"])["detail"]
    assert [d["id"] for d in detail] == list(range(8))
    assert {d["id"]: d["core"] for d in detail}[4] == 0

    kube.create(
        make_pod(
            "lsr",
            namespace,
            cpu="2",
            memory="1Gi",
            labels={"koordinator.sh/qosClass": "LSR"},  # an LSR pod is prod by default (no PriorityClass)
            scheduler_name="koord-scheduler",
            # Other tests' koordlets report topologies for their nodes on the same apiserver: this pod's
            # cpuset is checked against this node's topology, so it must land here.
            spec={"nodeSelector": {"kubernetes.io/hostname": node}},
        )
    )
    scheduler = helpers.Component(
        tmp_path,
        "scheduler",
        helpers.scheduler_config(tmp_path, f"s-{namespace}"),
        kube_apiserver.kubeconfig,
        e2e_harness,
    )
    try:
        helpers.wait_for(scheduler.ready, 30, "scheduler ready")
        helpers.wait_for(lambda: helpers.bound(kube, namespace).get("lsr") == node, 60, "the LSR pod bound")
        pod = kube.get("Pod", "lsr", namespace)
        status = json.loads(pod["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"])
        assert parse_cpuset(status["cpuset"]) == {0, 4}  # both threads of one core
        spec = json.loads(pod["metadata"]["annotations"]["scheduling.koordinator.sh/resource-spec"])
        assert spec == {"preferredCPUBindPolicy": "FullPCPUs"}
    finally:
        scheduler.kill()
