"""Koordinator's GPU env-inject cases the vectors lack, bad input, and HAMi's monitor dir on the host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_gpuenvinject import GPUEnvInject

from koord_framework.koordlet.runtimehooks import HookContext, HookFailed, HookManager, Stage
from koord_framework.koordlet.states import NodeState
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import container_request

ALLOC = "scheduling.koordinator.sh/device-allocated"
HAMI = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}


def manager(root: Path, args: dict[str, Any] | None = None, policy: str = "Fail") -> HookManager:
    tree = FakeHostTree(root)
    ctx = HookContext("test-node", tree.paths, tree.layout, lambda: NodeState("test-node"))
    m = HookManager(ctx, failure_policy=policy)
    m.register(GPUEnvInject(GPUEnvInject.parse_args(args), ctx))
    return m


def _run(m: HookManager, annotations: dict[str, str], labels: dict[str, str] | None = None) -> Any:
    req = container_request(labels, annotations, name="train", namespace="ml", container="worker")
    return m.run_container(Stage.PRE_CREATE_CONTAINER, req).response


def test_no_gpu_in_the_allocation_injects_nothing(tmp_path: Path) -> None:
    response = _run(manager(tmp_path), {ALLOC: '{"fpga": [{"minor": 0},{"minor": 1}]}'})
    assert response.add_env == {} and response.add_mounts == []


def test_no_annotation_injects_nothing(tmp_path: Path) -> None:
    assert _run(manager(tmp_path), {}).add_env == {}


def test_minors_in_allocation_order(tmp_path: Path) -> None:
    env = _run(manager(tmp_path), {ALLOC: '{"gpu": [{"minor": 3},{"minor": 1},{"minor": 2}]}'}).add_env
    assert env == {"NVIDIA_VISIBLE_DEVICES": "3,1,2"}


def test_a_whole_gpu_under_hami_gets_no_limits(tmp_path: Path) -> None:
    res = {
        "koordinator.sh/gpu-core": "100",
        "koordinator.sh/gpu-memory": "80Gi",
        "koordinator.sh/gpu-memory-ratio": "100",
    }
    response = _run(manager(tmp_path), {ALLOC: json.dumps({"gpu": [{"minor": 0, "resources": res}]})}, HAMI)
    assert response.add_env == {"NVIDIA_VISIBLE_DEVICES": "0"} and response.add_mounts == []


def test_hami_monitor_dir_is_created_fresh_and_mounted(tmp_path: Path) -> None:
    lib = tmp_path / "vgpu" / "libvgpu.so"
    stale = tmp_path / "vgpu" / "containers" / "pod-uid_worker" / "old.cache"
    stale.parent.mkdir(parents=True)
    stale.write_text("x")
    m = manager(tmp_path / "host", {"hamiCoreLibraryPath": str(lib), "hamiCoreVgpuMonitor": True})
    res = {"koordinator.sh/gpu-memory": "8Gi", "koordinator.sh/gpu-memory-ratio": "50"}
    response = _run(m, {ALLOC: json.dumps({"gpu": [{"minor": 1, "resources": res}]})}, HAMI)
    assert stale.parent.is_dir() and not stale.exists()
    assert oct(stale.parent.stat().st_mode & 0o777) == oct(0o777)
    assert response.add_env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == f"{lib.parent}/pod-uid_worker.cache"
    assert "CUDA_DEVICE_SM_LIMIT" not in response.add_env
    assert response.add_mounts[-1].source == str(stale.parent)


@pytest.mark.parametrize(
    ("raw", "labels", "field"),
    [
        ("{not json", None, "not JSON"),
        ('["gpu"]', None, "must be an object"),
        ('{"gpu": {"minor": 0}}', None, "gpu must be a list"),
        ('{"gpu": [{"minor": -1}]}', None, "gpu[0].minor"),
        ('{"gpu": [{"minor": "0"}]}', None, "gpu[0].minor"),
        ('{"gpu": [{"minor": 0}]}', HAMI, "koordinator.sh/gpu-memory-ratio"),
        (
            '{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-memory-ratio": "50"}}]}',
            HAMI,
            "gpu-memory",
        ),
        ('{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-memory-ratio": "half"}}]}', HAMI, "ratio"),
    ],
)
def test_malformed_allocation_names_pod_container_hook_and_field(
    raw: str, labels: dict[str, str] | None, field: str, tmp_path: Path
) -> None:
    with pytest.raises(HookFailed) as err:
        _run(manager(tmp_path), {ALLOC: raw}, labels)
    text = str(err.value)
    assert "hook GPUEnvInject failed at PreCreateContainer for pod ml/train container worker" in text
    assert ALLOC in text and field in text


def test_ignore_policy_starts_the_container_without_env(tmp_path: Path) -> None:
    req = container_request(None, {ALLOC: "{not json"}, container="worker")
    result = manager(tmp_path, policy="Ignore").run_container(Stage.PRE_CREATE_CONTAINER, req)
    assert result.response.add_env == {} and [f.hook for f in result.failures] == ["GPUEnvInject"]
