"""koord manager's ``quotaprofile`` controller against a real kube-apiserver: an ElasticQuotaProfile (the
project's CRD) becomes a root ElasticQuota sized by the nodes it selects, and a node added later reaches the
quota's min at the controller's 10 s requeue, as in Koordinator."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_node

pytestmark = pytest.mark.e2e

TREE = "quota.scheduling.koordinator.sh/tree-id"
TOTAL = "quota.scheduling.koordinator.sh/total-resource"
MAX = str((2**63 - 1) // 2000)


def _wait(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"koord manager exited {proc.returncode} waiting for {what}:\n{log.read_text()[-4000:]}"
            )
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}\n{log.read_text()[-4000:]}")


@pytest.fixture
def manager(
    kube_apiserver: Any, koordinator_system: str, koord_crds: list[str], tmp_path: Path, e2e_harness: Any
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    log = tmp_path / "manager.log"
    with e2e_harness.koord_manager(
        kube_apiserver.kubeconfig, log, "--webhook=false", "--controllers=quotaprofile"
    ) as proc:
        yield proc, log


def test_profile_nodes_in_root_quota_out(
    kube: KubeCluster, namespace: str, manager: tuple[subprocess.Popen[bytes], Path]
) -> None:
    proc, log = manager
    pool = namespace  # a label value of this test's own, so other tests' nodes are not selected
    for name, cpu, memory in (("qp-a", "8", "32Gi"), ("qp-b", "4", "16Gi")):
        kube.create(make_node(f"{name}-{pool}", cpu=cpu, memory=memory, labels={"quota-pool": pool}))
    kube.create(
        {
            "apiVersion": "quota.koordinator.sh/v1alpha1",
            "kind": "ElasticQuotaProfile",
            "metadata": {"name": "profile", "namespace": namespace},
            "spec": {
                "quotaName": "root",
                "quotaLabels": {"team": "e2e"},
                "resourceRatio": "0.5",
                "nodeSelector": {"matchLabels": {"quota-pool": pool}},
            },
        }
    )

    def quota() -> dict[str, Any] | None:
        return kube.try_get("ElasticQuota", "root", namespace)

    _wait(lambda: quota() is not None, 60, "the root quota", proc, log)
    q = quota()
    assert q is not None
    assert q["spec"]["min"] == {"cpu": "6", "memory": "24Gi"}
    assert q["spec"]["max"] == {"cpu": MAX, "memory": MAX}
    labels = q["metadata"]["labels"]
    assert labels["team"] == "e2e" and labels["quota.scheduling.koordinator.sh/is-root"] == "true"
    assert labels["quota.scheduling.koordinator.sh/profile"] == "profile"
    profile = kube.get("ElasticQuotaProfile", "profile", namespace)
    assert labels[TREE] == profile["metadata"]["labels"][TREE]

    kube.create(make_node(f"qp-c-{pool}", cpu="4", memory="16Gi", labels={"quota-pool": pool}))

    def grown() -> bool:
        q = quota()
        return q is not None and q["spec"]["min"] == {"cpu": "8", "memory": "32Gi"}

    # Within Koordinator's 10 s requeue (and some margin for a loaded machine).
    _wait(grown, 40, "the added node in the quota's min", proc, log)
    q = quota()
    assert q is not None
    assert json.loads(q["metadata"]["annotations"][TOTAL])["cpu"] == "8"
