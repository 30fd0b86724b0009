"""Koordinator's BatchResource unit-test vectors (``data/vectors.json``), through the hook extension point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_batchresourcehook import BatchResource

from koord_framework.koordlet.runtimehooks import ContainerResources, HookContext, HookManager, Stage
from koord_framework.koordlet.states import NodeState
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import container_request, pod_request

VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]
SPEC = "node.koordinator.sh/extended-resource-spec"


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def manager(root: Path, rule: dict[str, Any] | None) -> HookManager:
    tree = FakeHostTree(root)
    ctx = HookContext("test-node", tree.paths, tree.layout, lambda: NodeState("test-node"))
    m = HookManager(ctx, failure_policy="Fail")
    hook = BatchResource(BatchResource.parse_args(None), ctx)
    if rule is not None:
        hook.enable_cfs_quota = rule["enableCFSQuota"]
        hook.ratio = rule["cpuNormalizationRatio"]
    m.register(hook)
    return m


def expected(raw: dict[str, Any] | None) -> ContainerResources:
    if raw is None:
        return ContainerResources()
    return ContainerResources(
        cpu_shares=raw.get("cpuShares"),
        cpu_quota=raw.get("cfsQuota"),
        memory_limit_in_bytes=raw.get("memoryLimit"),
    )


def test_every_vector_is_used() -> None:
    assert len(_by("plugin.SetPodResources")) + len(_by("plugin.SetContainerResources")) == len(VECTORS) > 0


@pytest.mark.parametrize("vector", _by("plugin.SetPodResources"))
def test_set_pod_resources(vector: dict[str, Any], tmp_path: Path) -> None:
    inputs = vector["inputs"]
    ann = {SPEC: json.dumps(inputs["extendedResources"])} if inputs["extendedResources"] is not None else {}
    m = manager(tmp_path, inputs["rule"])
    result = m.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request(inputs["podLabels"], ann))
    assert result.response.resources == expected(vector["expected"]["resources"])


@pytest.mark.parametrize("vector", _by("plugin.SetContainerResources"))
@pytest.mark.parametrize("stage", [Stage.PRE_CREATE_CONTAINER, Stage.PRE_UPDATE_CONTAINER_RESOURCES])
def test_set_container_resources(vector: dict[str, Any], stage: Stage, tmp_path: Path) -> None:
    inputs = vector["inputs"]
    name = inputs["containerName"]
    ann = {SPEC: json.dumps({"containers": {name: inputs["containerExtendedResources"]}})}
    m = manager(tmp_path, inputs["rule"])
    result = m.run_container(stage, container_request(inputs["podLabels"], ann, container=name))
    assert result.response.resources == expected(vector["expected"]["resources"])
