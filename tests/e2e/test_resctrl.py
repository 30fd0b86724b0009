"""The Resctrl strategy in ``koord koordlet`` against a real API server: a NodeSLO and pods read from the
cluster become resctrl schemata and task placement on a fake host (the production ``HostResctrlFS`` with the
koord-native shim, writing the tree's files)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_node
from koord_framework.testing.hosttree import FakeHostTree, make_running_pod

pytestmark = pytest.mark.e2e


def test_koordlet_applies_node_slo_resctrl_policy(
    kube: KubeCluster, namespace: str, koord_crds: list[str], tmp_path: Path, kube_apiserver: Any
) -> None:
    pytest.importorskip("koord_native")
    node = f"{namespace}-rdt"
    kube.create(make_node(node))
    kube.create(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": node},
            "spec": {
                "resourceQOSStrategy": {
                    "beClass": {
                        "resctrlQOS": {
                            "enable": True,
                            "catRangeStartPercent": 0,
                            "catRangeEndPercent": 30,
                            "mbaPercent": 40,
                        }
                    }
                }
            },
        }
    )
    be = make_running_pod("batch", namespace=namespace, node=node, qos="BE", uid="will-be-replaced")
    be["metadata"].pop("uid")
    be["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.9"
    status = be.pop("status")
    created = kube.create(be)
    kube.patch("Pod", "batch", namespace, {"status": status}, status=True)
    uid = created["metadata"]["uid"]
    tree = FakeHostTree(tmp_path / "host", cpus=4)
    # the kernel makes the groups' files on mkdir; a plain mkdir on the tree would not
    tree.with_resctrl(cbm_mask="7ff", cache_ids=(0, 1), groups=("LSR", "LS", "BE"))
    pod = tree.add_pod({**be, "metadata": {**be["metadata"], "uid": uid}, "status": status})
    tree.add_threads(pod.containers["main"], [4242, 4243])
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "koordlet.koordinator.sh/v1alpha1",
                "kind": "KoordletConfiguration",
                "qosStrategies": [{"name": "Resctrl", "args": {"intervalSeconds": 1}}],
            }
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "koord_framework.cli.main",
            "koordlet",
            f"--node-name={node}",
            f"--kubeconfig={kube_apiserver.kubeconfig}",
            f"--host-root={tree.root}",
            f"--config={profile}",
            "--once",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    schemata = tree.paths.resctrl_file("BE", "schemata").read_text()
    assert schemata == "L3:0=f;1=f;\nMB:0=40;1=40;\n", done.stdout[-3000:]
    assert tree.paths.resctrl_file("BE", "tasks").read_text().split() == ["4242", "4243"]
