"""Koordinator's GPU env-inject vectors (``data/vectors.json``), through the hook extension point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_gpuenvinject import GPUEnvInject

from koord_framework.koordlet.runtimehooks import HookContext, HookManager, Mount, Stage
from koord_framework.koordlet.states import NodeState
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import container_request

VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]


@pytest.mark.parametrize("vector", [pytest.param(v, id=v["id"]) for v in VECTORS])
def test_inject_container_gpu_env(vector: dict[str, Any], tmp_path: Path) -> None:
    inputs = vector["inputs"]
    tree = FakeHostTree(tmp_path)
    ctx = HookContext("test-node", tree.paths, tree.layout, lambda: NodeState("test-node"))
    gates = inputs.get("featureGates") or {}
    # The monitor dir Koordinator creates lives under /usr/local on a host; the vector checks the response.
    args = {"hamiCoreVgpuMonitor": gates.get("HamiCoreVGPUMonitor", False), "createMonitorDir": False}
    m = HookManager(ctx, failure_policy="Fail")
    m.register(GPUEnvInject(GPUEnvInject.parse_args(args), ctx))
    req = container_request(
        inputs.get("podLabels"),
        inputs.get("podAnnotations"),
        uid=inputs.get("podUID", "pod-uid"),
        container=inputs.get("containerName", "main"),
    )
    response = m.run_container(Stage.PRE_CREATE_CONTAINER, req).response
    assert response.add_env == vector["expected"]["envs"]
    want = [
        Mount(x["destination"], x["source"], x["type"], tuple(x["options"]))
        for x in vector["expected"]["mounts"] or []
    ]
    assert response.add_mounts == want
