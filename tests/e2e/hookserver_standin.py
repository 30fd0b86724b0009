"""A koordlet stand-in for the runtime-proxy e2e: ``RuntimeHookService`` over the project's hook plugins.

It does what the koordlet's hook server does in proxy mode (Koordinator's ``runtimehooks/proxyserver``):
turn the proxy's request into the hook extension point's typed request, run the enabled hook plugins
(through ``HookManager``, the same facade the koordlet uses), write the pod-level cgroup values itself (the
pod's cgroup is the kubelet's, not the runtime's: Koordinator's ``PodContext.ProxyDone`` writes them through
its executor) and answer with the request's values plus the hooks' edits. It is test scaffolding until the
koordlet's own server (wave3/hookrpc) is merged: the e2e then starts that one instead.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.nodeslo import NodeSLO
from koord_framework.koordlet.runtimehooks import (
    ContainerMeta,
    ContainerRequest,
    ContainerResources,
    HookContext,
    HookFailed,
    HookManager,
    PodSandboxMeta,
    PodSandboxRequest,
    Stage,
)
from koord_framework.koordlet.runtimehooks.proto import api_pb2 as hookapi
from koord_framework.koordlet.runtimehooks.proto import api_pb2_grpc
from koord_framework.koordlet.states import NodeState

log = logging.getLogger(__name__)

HOOKS = ["GroupIdentity", "BatchResource", "CPUSetAllocator", "GPUEnvInject", "CPUNormalization"]
GROUP_IDENTITY = {
    "policies": {"cpuPolicy": "groupIdentity"},
    "lsrClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}},
}
"""The NodeSLO's resourceQOSStrategy the stand-in koordlet runs with: group identity on (bvt 2 for LS)."""
_RESOURCE_FIELDS = (
    "cpu_period",
    "cpu_quota",
    "cpu_shares",
    "memory_limit_in_bytes",
    "cpuset_cpus",
    "cpuset_mems",
)


def _resources(r: hookapi.LinuxContainerResources) -> ContainerResources:
    return ContainerResources(
        cpu_period=r.cpu_period or None,
        cpu_quota=r.cpu_quota or None,
        cpu_shares=r.cpu_shares or None,
        memory_limit_in_bytes=r.memory_limit_in_bytes or None,
        cpuset_cpus=r.cpuset_cpus or None,
        cpuset_mems=r.cpuset_mems or None,
    )


def _overlay(into: hookapi.LinuxContainerResources, edits: ContainerResources) -> None:
    for name in _RESOURCE_FIELDS:
        value = getattr(edits, name)
        if value is not None:
            setattr(into, name, value)
    if edits.oom_score_adj is not None:
        into.oom_score_adj = edits.oom_score_adj


class StandInHookServer(api_pb2_grpc.RuntimeHookServiceServicer):  # type: ignore[misc]
    def __init__(self, socket: str, cgroup_root: Path = Path("/sys/fs/cgroup")) -> None:
        self.socket = socket
        paths = HostPaths.under("/")
        self.cgroup_root = cgroup_root
        layout = CgroupLayout(paths, CgroupVersion.V1, CgroupDriver.CGROUPFS)
        state = NodeState("e2e-node", node_slo=NodeSLO.from_spec({"resourceQOSStrategy": GROUP_IDENTITY}))
        context = HookContext("e2e-node", paths, layout, lambda: state)
        self.manager = HookManager.from_config(HOOKS, context)
        self.manager.update_rules(state)
        self.pod_writes: list[tuple[str, str]] = []
        self._server: Any = None

    def start(self) -> StandInHookServer:
        server = grpc.server(ThreadPoolExecutor(max_workers=4))
        api_pb2_grpc.add_RuntimeHookServiceServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None
        Path(self.socket).unlink(missing_ok=True)

    # --- pod stages --------------------------------------------------------------------------------------
    def _pod(
        self, stage: Stage, req: hookapi.PodSandboxHookRequest, ctx: Any
    ) -> hookapi.PodSandboxHookResponse:
        request = PodSandboxRequest(
            pod_meta=PodSandboxMeta(
                req.pod_meta.name, req.pod_meta.uid, req.pod_meta.namespace, req.pod_meta.attempt
            ),
            labels=dict(req.labels),
            annotations=dict(req.annotations),
            cgroup_parent=req.cgroup_parent,
            runtime_handler=req.runtime_handler,
        )
        try:
            result = self.manager.run_pod(stage, request)
        except HookFailed as failed:
            ctx.abort(grpc.StatusCode.INTERNAL, str(failed))
        out = hookapi.PodSandboxHookResponse(
            labels={**req.labels, **result.response.labels},
            annotations={**req.annotations, **result.response.annotations},
            cgroup_parent=result.response.cgroup_parent or req.cgroup_parent,
        )
        out.resources.CopyFrom(req.resources)
        _overlay(out.resources, result.response.resources)
        if stage is Stage.PRE_RUN_POD_SANDBOX:
            self._write_pod_cgroup(req.cgroup_parent, result.response.resources)
        return out

    def _write_pod_cgroup(self, parent: str, res: ContainerResources) -> None:
        files = {
            ("cpu", "cpu.shares"): res.cpu_shares,
            ("cpu", "cpu.cfs_quota_us"): res.cpu_quota,
            ("memory", "memory.limit_in_bytes"): res.memory_limit_in_bytes,
            ("cpu", "cpu.bvt_warp_ns"): res.cpu_bvt,
        }
        for (subsystem, name), value in files.items():
            if value is None:
                continue
            path = self.cgroup_root / subsystem / parent.strip("/") / name
            if not path.exists():
                continue  # no such knob on this kernel (bvt), or a pod dir the kubelet did not make
            path.write_text(str(value))
            self.pod_writes.append((str(path), str(value)))

    def PreRunPodSandboxHook(self, req: Any, ctx: Any) -> Any:
        return self._pod(Stage.PRE_RUN_POD_SANDBOX, req, ctx)

    def PostStopPodSandboxHook(self, req: Any, ctx: Any) -> Any:
        return self._pod(Stage.POST_STOP_POD_SANDBOX, req, ctx)

    # --- container stages -----------------------------------------------------------------------------------
    def _container(
        self, stage: Stage, req: hookapi.ContainerResourceHookRequest, ctx: Any
    ) -> hookapi.ContainerResourceHookResponse:
        request = ContainerRequest(
            pod_meta=PodSandboxMeta(
                req.pod_meta.name, req.pod_meta.uid, req.pod_meta.namespace, req.pod_meta.attempt
            ),
            container_meta=ContainerMeta(
                req.container_meta.name, req.container_meta.id, req.container_meta.attempt
            ),
            pod_labels=dict(req.pod_labels),
            pod_annotations=dict(req.pod_annotations),
            container_annotations=dict(req.container_annotations),
            cgroup_parent=req.pod_cgroup_parent,
            resources=_resources(req.container_resources),
            env=dict(req.container_envs),
        )
        try:
            result = self.manager.run_container(stage, request)
        except HookFailed as failed:
            ctx.abort(grpc.StatusCode.INTERNAL, str(failed))
        r = result.response
        out = hookapi.ContainerResourceHookResponse(
            container_annotations={**req.container_annotations, **r.container_annotations},
            pod_cgroup_parent=r.pod_cgroup_parent or req.pod_cgroup_parent,
            container_envs={**req.container_envs, **r.add_env},
        )
        out.container_resources.CopyFrom(req.container_resources)
        _overlay(out.container_resources, r.resources)
        return out

    def PreCreateContainerHook(self, req: Any, ctx: Any) -> Any:
        return self._container(Stage.PRE_CREATE_CONTAINER, req, ctx)

    def PreStartContainerHook(self, req: Any, ctx: Any) -> Any:
        return self._container(Stage.PRE_START_CONTAINER, req, ctx)

    def PostStartContainerHook(self, req: Any, ctx: Any) -> Any:
        return self._container(Stage.POST_START_CONTAINER, req, ctx)

    def PostStopContainerHook(self, req: Any, ctx: Any) -> Any:
        return self._container(Stage.POST_STOP_CONTAINER, req, ctx)

    def PreUpdateContainerResourcesHook(self, req: Any, ctx: Any) -> Any:
        return self._container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, req, ctx)
