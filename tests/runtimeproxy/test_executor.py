"""The merge rules of koord runtime-proxy (Koordinator's ``resexecutor/cri`` unit-test cases and more)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koord_framework.koordlet.runtimehooks.client import (
    ContainerResourceHookResponse,
    LinuxContainerResources,
    PodSandboxHookResponse,
)
from koord_framework.koordlet.runtimehooks.protocol import FailurePolicy, Stage
from koord_framework.runtimeproxy.config import HookConfigDir, RequestPath, parse_hook_server_config
from koord_framework.runtimeproxy.executor import (
    ContainerExecutor,
    ExecutorError,
    PodExecutor,
    merge_resources,
    to_cri_resources,
    to_hook_resources,
)
from koord_framework.runtimeproxy.proto import api_pb2 as cri
from koord_framework.runtimeproxy.store import MetaStore

A = dict(
    cpu_period=1000,
    cpu_quota=2000,
    cpu_shares=500,
    oom_score_adj=10,
    memory_swap_limit_in_bytes=100,
    memory_limit_in_bytes=300,
    cpuset_cpus="0-64",
    cpuset_mems="0-2",
    unified={"resourceA": "resource A"},
)
B = dict(
    cpu_period=2000,
    cpu_quota=4000,
    cpu_shares=1000,
    oom_score_adj=20,
    memory_swap_limit_in_bytes=200,
    memory_limit_in_bytes=600,
    cpuset_cpus="0-31",
    cpuset_mems="0-4",
    unified={"resourceB": "resource B"},
)


def test_update_resource_normal_case() -> None:  # Koordinator's Test_updateResource
    a = LinuxContainerResources(**A)
    merge_resources(a, LinuxContainerResources(**B))
    assert a == LinuxContainerResources(
        **{**B, "unified": {"resourceA": "resource A", "resourceB": "resource B"}}
    )


def test_update_by_update_request_keeps_oom_score_adj() -> None:
    # Koordinator's Test_updateResourceByUpdateContainerResourceRequest
    a = LinuxContainerResources(**A)
    merge_resources(a, LinuxContainerResources(**B), from_update=True)
    want = {**B, "oom_score_adj": 10, "unified": {"resourceA": "resource A", "resourceB": "resource B"}}
    assert a == LinuxContainerResources(**want)


def test_zero_values_leave_the_request_alone_but_the_cpuset_follows_the_hook() -> None:
    a = LinuxContainerResources(**A)
    merge_resources(a, LinuxContainerResources(cpu_quota=-1))
    assert (a.cpu_period, a.cpu_quota, a.cpu_shares, a.memory_limit_in_bytes) == (1000, -1, 500, 300)
    assert (a.cpuset_cpus, a.cpuset_mems, a.oom_score_adj) == ("", "", 0)
    b = LinuxContainerResources(**A)
    merge_resources(b, LinuxContainerResources(), from_update=True)
    assert b == LinuxContainerResources(**A)


def test_resources_convert_both_ways_through_the_wire() -> None:
    r = cri.LinuxContainerResources(**A, hugepage_limits=[cri.HugepageLimit(page_size="2MB", limit=1 << 21)])
    hook = to_hook_resources(r)
    assert hook.cpu_shares == 500 and hook.hugepage_limits[0].page_size == "2MB"
    assert to_cri_resources(hook) == r


def test_pod_executor_merges_and_checkpoints() -> None:
    store = MetaStore()
    ex = PodExecutor(store)
    req = cri.RunPodSandboxRequest(
        config=cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name="p", uid="u", namespace="ns"),
            labels={"l": "1"},
            annotations={"a": "1"},
            linux=cri.LinuxPodSandboxConfig(cgroup_parent="/kubepods/podu"),
        ),
        runtime_handler="runc",
    )
    ex.parse_run(req)
    assert ex.hook_request().runtime_handler == "runc"
    ex.apply(PodSandboxHookResponse(labels={"l2": "2"}, annotations={"a": "2"}, cgroup_parent=""), req)
    assert dict(req.config.labels) == {"l": "1", "l2": "2"}
    assert dict(req.config.annotations) == {"a": "2"}
    assert req.config.linux.cgroup_parent == "/kubepods/podu"  # an empty cgroup parent changes nothing
    ex.checkpoint("sb")
    kept = store.pod("sb")
    assert kept is not None and kept.labels["l2"] == "2"
    with pytest.raises(ExecutorError, match="no pod known for sandbox other"):
        PodExecutor(store).load("other")


def test_container_envs_replaced_by_the_hooks_when_it_returns_any() -> None:
    store = MetaStore()
    pod = PodExecutor(store)
    sandbox = cri.PodSandboxConfig(metadata=cri.PodSandboxMetadata(name="p", uid="u", namespace="ns"))
    pod.parse_run(cri.RunPodSandboxRequest(config=sandbox))
    pod.checkpoint("sb")
    req = cri.CreateContainerRequest(
        pod_sandbox_id="sb",
        config=cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name="c"),
            envs=[
                cri.KeyValue(key="Z", value="1"),
                cri.KeyValue(key="A", value="2"),
                cri.KeyValue(key="Z", value="3"),
            ],
        ),
        sandbox_config=sandbox,
    )
    ex = ContainerExecutor(store)
    ex.parse_create(req)
    assert dict(ex.info.container_envs) == {"Z": "3", "A": "2"}  # a repeated key keeps its last value
    ex.apply(ContainerResourceHookResponse(), req)  # no envs in the answer: the request's stay
    assert [(kv.key, kv.value) for kv in req.config.envs] == [("Z", "3"), ("A", "2")]
    ex.apply(ContainerResourceHookResponse(container_envs={"A": "2", "Y": "9", "B": "8"}), req)
    assert [(kv.key, kv.value) for kv in req.config.envs] == [("A", "2"), ("B", "8"), ("Y", "9")]
    assert ex.where == "pod ns/p (uid u) container c"


def test_registration_parsing_names_the_file_and_field(tmp_path: Path) -> None:
    cfg = parse_hook_server_config(
        {
            "remote-endpoint": "/s.sock",
            "failure-policy": "Fail",
            "runtime-hooks": ["PreStartContainer", "PostStartContainer"],
        },
        "k.json",
    )
    assert cfg.failure_policy is FailurePolicy.FAIL
    assert cfg.stages_on(RequestPath.START_CONTAINER, pre=True) == [Stage.PRE_START_CONTAINER]
    assert cfg.stages_on(RequestPath.START_CONTAINER, pre=False) == [Stage.POST_START_CONTAINER]
    assert cfg.stages_on(RequestPath.RUN_POD_SANDBOX, pre=True) == []
    with pytest.raises(ValueError, match=r"k\.json: failure-policy 'Sometimes'"):
        parse_hook_server_config({"remote-endpoint": "/s", "failure-policy": "Sometimes"}, "k.json")
    with pytest.raises(ValueError, match=r"k\.json: remote-endpoint"):
        parse_hook_server_config({"runtime-hooks": []}, "k.json")
    with pytest.raises(ValueError, match=r"k\.json: runtime-hooks must be a list"):
        parse_hook_server_config({"remote-endpoint": "/s", "runtime-hooks": "PreRunPodSandbox"}, "k.json")


def test_config_dir_picks_up_changes_after_the_rescan_interval(tmp_path: Path) -> None:
    now = [0.0]
    configs = HookConfigDir(tmp_path, rescan_interval=1.0, clock=lambda: now[0])
    assert configs.servers() == []
    (tmp_path / "a.json").write_text(
        json.dumps({"remote-endpoint": "/a.sock", "runtime-hooks": ["PreRunPodSandbox"]})
    )
    assert configs.servers() == []  # within the interval: not re-read yet
    now[0] = 1.5
    assert [s.remote_endpoint for s in configs.servers()] == ["/a.sock"]
    (tmp_path / "a.json").unlink()
    now[0] = 3.0
    assert configs.servers() == []
