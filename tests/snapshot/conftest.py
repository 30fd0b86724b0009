"""Fixtures of the snapshot tests: the example cluster, served by the fake API server of the testing kit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.memory import MemoryCluster
from koord_framework.testing.apiserver import FakeApiServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "configs" / "examples" / "cluster"


@pytest.fixture
def example_cluster() -> MemoryCluster:
    cluster = MemoryCluster.from_paths([EXAMPLE], seed=1)
    # What a real API server adds and a snapshot must not carry back.
    node, _ = cluster.list("Node")
    first = node[0]
    first["metadata"]["managedFields"] = [
        {"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1"}
    ]
    first["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = (
        '{"kind":"Node"}'
    )
    cluster.update(first)
    return cluster


@pytest.fixture
def served(example_cluster: MemoryCluster) -> Iterator[FakeApiServer]:
    with FakeApiServer.from_cluster(example_cluster) as server:
        yield server


@pytest.fixture
def kubeconfig(served: FakeApiServer, tmp_path: Path) -> Path:
    return served.write_kubeconfig(tmp_path / "kubeconfig")


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as a re-load must give it back: the cluster numbers resourceVersions itself."""
    out = dict(obj)
    meta = dict(out["metadata"])
    for key in ("resourceVersion", "managedFields"):
        meta.pop(key, None)
    annotations = dict(meta.get("annotations") or {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out["metadata"] = meta
    return out


def by_key(cluster: MemoryCluster, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    objs, _ = cluster.list(kind)
    return {(str(o["metadata"].get("namespace") or ""), o["metadata"]["name"]): comparable(o) for o in objs}
