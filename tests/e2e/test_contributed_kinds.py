"""A kind contributed through the registration seam (ADR 0004), against a real kube-apiserver: its CRD as
``configs/crds/generate.py`` writes it from the ``KindInfo`` is accepted and served, and a ``KubeCluster``
with that kind in its registry creates, reads, lists and follows objects of it through the informer."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.kinds import KindInfo, KindRegistry, PrinterColumn
from koord_framework.cluster.kube import KubeCluster
from koord_framework.errors import NotFoundError

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

WIDGET = KindInfo(
    "Widget",
    "e2e.koord.dev",
    "v1alpha1",
    "widgets",
    True,
    short_names=("wdg",),
    printer_columns=(PrinterColumn("Size", ".spec.size", "integer"),),
)


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "koord_crd_generate", ROOT / "configs" / "crds" / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def widget_crd(kube_apiserver: Any) -> str:
    doc = _generator().crd(WIDGET)
    status, body = kube_apiserver.request(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc
    )
    assert status in (201, 409), json.dumps(body)[:500]
    name = str(doc["metadata"]["name"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        _, crd = kube_apiserver.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        )
        conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or ()}
        if conditions.get("Established") == "True":
            return name
        time.sleep(0.1)
    raise AssertionError(f"CRD {name} not established")


def test_a_contributed_kind_is_served_created_and_followed(
    kube_apiserver: Any, widget_crd: str, namespace: str
) -> None:
    registry = KindRegistry.builtin().with_kinds([WIDGET])
    kube = KubeCluster.from_kubeconfig(
        str(kube_apiserver.kubeconfig), component="koord-e2e", grace_period_seconds=0, kinds=registry
    )
    try:
        informer = SharedInformer(kube)
        seen: list[str] = []
        informer.add_handler("Widget", lambda obj: seen.append(obj["metadata"]["name"]))
        created = kube.create(
            {
                "apiVersion": "e2e.koord.dev/v1alpha1",
                "kind": "Widget",
                "metadata": {"name": "w1", "namespace": namespace},
                "spec": {"size": 3},
            }
        )
        assert created["metadata"]["uid"]
        assert kube.get("Widget", "w1", namespace)["spec"] == {"size": 3}
        items, _ = kube.list("Widget", namespace)
        assert [o["metadata"]["name"] for o in items] == ["w1"]
        deadline = time.monotonic() + 10
        while "w1" not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen == ["w1"]
        informer.stop()
    finally:
        kube.close()
    # A cluster whose registry lacks the kind refuses it before any request.
    plain = KubeCluster.from_kubeconfig(str(kube_apiserver.kubeconfig), kinds=KindRegistry.builtin())
    try:
        with pytest.raises(NotFoundError, match="unknown kind 'Widget'"):
            plain.get("Widget", "w1", namespace)
    finally:
        plain.close()
