"""Fixtures of the end-to-end tests: a real kube-apiserver (session), an adapter and a fresh namespace.

The tests here run only when asked for (``pytest -m e2e tests/e2e`` or ``KOORD_E2E=1``): the first run on a
fresh machine builds kube-apiserver (about 4 minutes) and needs root for apt-get.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from koord_framework.cluster.kube import KubeCluster

ROOT = Path(__file__).resolve().parents[2]


def _load_harness() -> ModuleType:
    # --import-mode=importlib: a sibling module is not importable by name, so load it from its path.
    name = "koord_e2e_harness"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("harness.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


harness = _load_harness()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs a real kube-apiserver on loopback (built once, cached)")


def _e2e_selected(config: pytest.Config) -> bool:
    expr = str(config.getoption("markexpr") or "")
    selected = any(m in expr and f"not {m}" not in expr for m in ("e2e", "chaos"))
    return os.environ.get("KOORD_E2E") == "1" or selected


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _e2e_selected(config):
        return
    skip = pytest.mark.skip(reason="end-to-end: run with `pytest -m e2e tests/e2e` (or KOORD_E2E=1)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def e2e_harness() -> ModuleType:
    """tests/e2e/harness.py (free ports, process helpers)."""
    return harness


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """etcd + kube-apiserver on loopback for the whole session; yields ``harness.ApiServer``."""
    workdir = tmp_path_factory.mktemp("apiserver")
    bins = harness.ensure_binaries(log=workdir / "build.log")
    server = harness.start_apiserver(workdir, bins, audit=True)  # bindings and evictions only
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kube(kube_apiserver: Any) -> Iterator[KubeCluster]:
    """The adapter under test, connected with the admin kubeconfig; pods are deleted at once (no kubelet)."""
    cluster = KubeCluster.from_kubeconfig(
        str(kube_apiserver.kubeconfig), component="koord-e2e", grace_period_seconds=0
    )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def koord_crds(kube_apiserver: Any) -> list[str]:
    """The project's CRDs (configs/crds) installed and served."""
    names = []
    for path in sorted((ROOT / "configs" / "crds").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        status, body = kube_apiserver.request(
            "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc
        )
        assert status in (201, 409), f"{path.name}: {status} {json.dumps(body)[:500]}"
        names.append(doc["metadata"]["name"])
    deadline = time.monotonic() + 30
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            _, crd = kube_apiserver.request(
                "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            )
            conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or ()}
            if conditions.get("Established") == "True":
                pending.discard(name)
        time.sleep(0.1)
    assert not pending, f"CRDs not established: {sorted(pending)}"
    return names


@pytest.fixture(scope="session")
def koordinator_system(kube_apiserver: Any) -> str:
    """Koordinator's installation namespace, where the components keep their Leases."""
    status, body = kube_apiserver.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koordinator-system"}},
    )
    assert status in (201, 409), body
    return "koordinator-system"


_namespaces = itertools.count()


@pytest.fixture
def namespace(kube_apiserver: Any) -> str:
    """A fresh namespace per test (without kube-controller-manager a deleted namespace never goes away)."""
    name = f"e2e-{os.getpid()}-{next(_namespaces)}"
    status, body = kube_apiserver.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert status == 201, body
    return name


CHAOS_USERS = ("a", "b", "rogue")


@pytest.fixture(scope="module")
def chaos_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An API server of the module's own, with the audit log of bindings and evictions, the project's CRDs
    and the Lease namespace; the chaos tests kill and restart it (``harness.ApiServer.kill_apiserver``)."""
    workdir = tmp_path_factory.mktemp("chaos-apiserver")
    bins = harness.ensure_binaries(log=workdir / "build.log")
    server = harness.start_apiserver(workdir, bins, extra_users=CHAOS_USERS, audit=True)
    try:
        server.request(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koordinator-system"}},
        )
        _install_crds(server)
        yield server
    finally:
        server.stop()


def _install_crds(server: Any) -> None:
    names = []
    for path in sorted((ROOT / "configs" / "crds").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        status, body = server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
        assert status in (201, 409), f"{path.name}: {status} {json.dumps(body)[:300]}"
        names.append(doc["metadata"]["name"])
    deadline = time.monotonic() + 60
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            _, crd = server.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or ()}
            if conditions.get("Established") == "True":
                pending.discard(name)
        time.sleep(0.2)
    assert not pending, f"CRDs not established: {sorted(pending)}"
