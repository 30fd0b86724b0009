"""CRI requests to hook requests, hook responses into CRI requests (Koordinator's ``resexecutor/cri``).

``PodExecutor`` serves ``RunPodSandbox`` / ``StopPodSandbox``; ``ContainerExecutor`` the container calls. Each
is made per intercepted call: ``parse`` builds the hook request from the CRI request (or loads it from the
store), ``apply`` merges one hook response into both the kept info and the CRI request, ``checkpoint``
stores the info once the runtime said yes, ``forget`` drops it after a stop.

Merge rules are Koordinator's: labels, annotations and unified are merged key by key (the hook wins);
cgroup parent replaced when the hook gives one; of the container resources, period, shares, memory and
swap when positive, quota when non-zero (-1 is "unlimited"), oom_score_adj when in [-1000, 1000], and the
cpuset always (the koordlet answers with the request's values plus its edits, so an unchanged cpuset comes
back as it was); envs replaced by the hook's when it returns any.

``LinuxContainerResources`` has the same fields and numbers in both APIs, so it converts through the wire.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping

from koord_framework.koordlet.runtimehooks.client import (
    ContainerMetadata,
    ContainerResourceHookRequest,
    ContainerResourceHookResponse,
    LinuxContainerResources,
    PodSandboxHookRequest,
    PodSandboxHookResponse,
    PodSandboxMetadata,
)
from koord_framework.runtimeproxy.proto import api_pb2 as cri
from koord_framework.runtimeproxy.store import MetaStore

__all__ = [
    "DEFAULT_SKIP_KEY",
    "DEFAULT_SKIP_VALUE",
    "ContainerExecutor",
    "ExecutorError",
    "PodExecutor",
    "merge_resources",
    "to_cri_resources",
    "to_hook_resources",
]

DEFAULT_SKIP_KEY = "runtimeproxy.koordinator.sh/skip-hookserver"
"""Koordinator's ``--runtime-hook-server-key``: a pod labelled ``<key>=<value>`` bypasses the hooks (the
hook server itself, so that its own pod can start while it is down)."""
DEFAULT_SKIP_VALUE = "true"


class ExecutorError(ValueError):
    """The proxy could not build a hook request (e.g. a container whose pod it never saw)."""


def to_hook_resources(r: cri.LinuxContainerResources) -> LinuxContainerResources:
    out = LinuxContainerResources()
    out.ParseFromString(r.SerializeToString())
    return out


def to_cri_resources(r: LinuxContainerResources) -> cri.LinuxContainerResources:
    out = cri.LinuxContainerResources()
    out.ParseFromString(r.SerializeToString())
    return out


def _merge_map(into: MutableMapping[str, str], update: Mapping[str, str]) -> None:
    for k, v in update.items():
        into[k] = v


def merge_resources(
    a: LinuxContainerResources, b: LinuxContainerResources, *, from_update: bool = False
) -> None:
    """Merge a hook's (or an ``UpdateContainerResources``') resources ``b`` into ``a`` in place.

    ``from_update``: Koordinator's ``updateResourceByUpdateContainerResourceRequest`` -- the kubelet's update
    request leaves oom_score_adj alone and changes a cpuset only when it names one."""
    if b.cpu_period > 0:
        a.cpu_period = b.cpu_period
    if b.cpu_quota != 0:
        a.cpu_quota = b.cpu_quota
    if b.cpu_shares > 0:
        a.cpu_shares = b.cpu_shares
    if b.memory_limit_in_bytes > 0:
        a.memory_limit_in_bytes = b.memory_limit_in_bytes
    if from_update:
        if b.cpuset_cpus:
            a.cpuset_cpus = b.cpuset_cpus
        if b.cpuset_mems:
            a.cpuset_mems = b.cpuset_mems
    else:
        if -1000 <= b.oom_score_adj <= 1000:
            a.oom_score_adj = b.oom_score_adj
        a.cpuset_cpus = b.cpuset_cpus
        a.cpuset_mems = b.cpuset_mems
    _merge_map(a.unified, b.unified)
    if b.memory_swap_limit_in_bytes > 0:
        a.memory_swap_limit_in_bytes = b.memory_swap_limit_in_bytes


def _envs_to_map(envs: Iterable[cri.KeyValue]) -> dict[str, str]:
    # Koordinator keeps envs as a map: a repeated key keeps its last value (as the OCI runtime would).
    out: dict[str, str] = {}
    for kv in envs:
        out[kv.key] = kv.value
    return out


def _set_envs(config: cri.ContainerConfig, envs: Mapping[str, str]) -> None:
    """Replace the container's envs by ``envs``, keeping the kubelet's order for the keys it sent (the hook
    answer is a map) and adding new keys after them, sorted, so the result does not depend on map order."""
    order = [kv.key for kv in config.envs]
    keys = [k for k in dict.fromkeys(order) if k in envs] + sorted(k for k in envs if k not in set(order))
    del config.envs[:]
    for k in keys:
        config.envs.add(key=k, value=envs[k])


def is_skipped(labels: Mapping[str, str], key: str, value: str) -> bool:
    return labels.get(key) == value


class PodExecutor:
    """``RunPodSandbox`` / ``StopPodSandbox``."""

    def __init__(self, store: MetaStore) -> None:
        self.store = store
        self.info = PodSandboxHookRequest()

    @property
    def where(self) -> str:
        m = self.info.pod_meta
        return f"pod {m.namespace}/{m.name} (uid {m.uid})" if m.name else "pod ?"

    def parse_run(self, req: cri.RunPodSandboxRequest) -> None:
        cfg = req.config
        self.info = PodSandboxHookRequest(
            pod_meta=PodSandboxMetadata(
                name=cfg.metadata.name,
                uid=cfg.metadata.uid,
                namespace=cfg.metadata.namespace,
                attempt=cfg.metadata.attempt,
            ),
            runtime_handler=req.runtime_handler,
            labels=dict(cfg.labels),
            annotations=dict(cfg.annotations),
            cgroup_parent=cfg.linux.cgroup_parent,
        )
        # Koordinator leaves these out; the kubelet sends them (CRI >= 1.23), and a hook may use them.
        if cfg.linux.HasField("resources"):
            self.info.resources.CopyFrom(to_hook_resources(cfg.linux.resources))
        if cfg.linux.HasField("overhead"):
            self.info.overhead.CopyFrom(to_hook_resources(cfg.linux.overhead))

    def parse_sandbox(self, sandbox: cri.PodSandbox) -> None:
        """Failover: what ``ListPodSandbox`` tells (no cgroup parent, as in Koordinator)."""
        self.info = PodSandboxHookRequest(
            pod_meta=PodSandboxMetadata(
                name=sandbox.metadata.name,
                uid=sandbox.metadata.uid,
                namespace=sandbox.metadata.namespace,
                attempt=sandbox.metadata.attempt,
            ),
            runtime_handler=sandbox.runtime_handler,
            labels=dict(sandbox.labels),
            annotations=dict(sandbox.annotations),
        )

    def load(self, sandbox_id: str) -> None:
        info = self.store.pod(sandbox_id)
        if info is None:
            raise ExecutorError(f"no pod known for sandbox {sandbox_id}")
        self.info = info

    def skipped(self, key: str, value: str) -> bool:
        return is_skipped(self.info.labels, key, value)

    def hook_request(self) -> PodSandboxHookRequest:
        out = PodSandboxHookRequest()
        out.CopyFrom(self.info)
        return out

    def apply(self, resp: PodSandboxHookResponse, req: cri.RunPodSandboxRequest | None) -> None:
        _merge_map(self.info.annotations, resp.annotations)
        _merge_map(self.info.labels, resp.labels)
        if resp.cgroup_parent:
            self.info.cgroup_parent = resp.cgroup_parent
        if req is None:
            return
        cfg = req.config
        _merge_map(cfg.annotations, self.info.annotations)
        _merge_map(cfg.labels, self.info.labels)
        if self.info.cgroup_parent:
            cfg.linux.cgroup_parent = self.info.cgroup_parent

    def checkpoint(self, sandbox_id: str) -> None:
        self.store.write_pod(sandbox_id, self.info)


class ContainerExecutor:
    """``CreateContainer``, ``StartContainer``, ``UpdateContainerResources``, ``StopContainer``."""

    def __init__(self, store: MetaStore) -> None:
        self.store = store
        self.info = ContainerResourceHookRequest()

    @property
    def where(self) -> str:
        m = self.info.pod_meta
        pod = f"pod {m.namespace}/{m.name} (uid {m.uid})" if m.name else "pod ?"
        return f"{pod} container {self.info.container_meta.name or '?'}"

    def parse_create(self, req: cri.CreateContainerRequest) -> None:
        pod = self.store.pod(req.pod_sandbox_id)
        name = req.config.metadata.name
        if pod is None:
            raise ExecutorError(f"container {name}: no pod known for sandbox {req.pod_sandbox_id}")
        self.info = ContainerResourceHookRequest(
            pod_meta=pod.pod_meta,
            container_meta=ContainerMetadata(name=name, attempt=req.config.metadata.attempt),
            container_annotations=dict(req.config.annotations),
            pod_annotations=dict(pod.annotations),
            pod_labels=dict(pod.labels),
            pod_cgroup_parent=req.sandbox_config.linux.cgroup_parent,
            container_envs=_envs_to_map(req.config.envs),
        )
        if pod.HasField("resources"):
            self.info.pod_resources.CopyFrom(pod.resources)
        # Koordinator always sends container resources (zero values when the kubelet gave none).
        self.info.container_resources.CopyFrom(to_hook_resources(req.config.linux.resources))

    def parse_container(self, container: cri.Container) -> None:
        """Failover: what ``ListContainers`` tells, with its pod from the store (no resources, no envs)."""
        pod = self.store.pod(container.pod_sandbox_id)
        if pod is None:
            raise ExecutorError(
                f"container {container.metadata.name} ({container.id}): "
                f"no pod known for sandbox {container.pod_sandbox_id}"
            )
        self.info = ContainerResourceHookRequest(
            pod_meta=pod.pod_meta,
            container_meta=ContainerMetadata(
                name=container.metadata.name, attempt=container.metadata.attempt, id=container.id
            ),
            container_annotations=dict(container.annotations),
            pod_annotations=dict(pod.annotations),
            pod_labels=dict(pod.labels),
            pod_cgroup_parent=pod.cgroup_parent,
        )

    def load(self, container_id: str, call: str) -> None:
        info = self.store.container(container_id)
        if info is None:
            raise ExecutorError(f"{call}: no container known with id {container_id}")
        self.info = info

    def parse_update(self, req: cri.UpdateContainerResourcesRequest) -> None:
        self.load(req.container_id, "UpdateContainerResources")
        merge_resources(self.info.container_resources, to_hook_resources(req.linux), from_update=True)

    def skipped(self, key: str, value: str) -> bool:
        return is_skipped(self.info.pod_labels, key, value)

    def hook_request(self) -> ContainerResourceHookRequest:
        out = ContainerResourceHookRequest()
        out.CopyFrom(self.info)
        return out

    def apply(
        self,
        resp: ContainerResourceHookResponse,
        req: cri.CreateContainerRequest | cri.UpdateContainerResourcesRequest | None,
    ) -> None:
        _merge_map(self.info.container_annotations, resp.container_annotations)
        if resp.HasField("container_resources"):
            merge_resources(self.info.container_resources, resp.container_resources)
        if resp.pod_cgroup_parent:
            self.info.pod_cgroup_parent = resp.pod_cgroup_parent
        if resp.container_envs:
            self.info.container_envs.clear()
            _merge_map(self.info.container_envs, resp.container_envs)
        if isinstance(req, cri.CreateContainerRequest):
            _merge_map(req.config.annotations, self.info.container_annotations)
            req.config.linux.resources.CopyFrom(to_cri_resources(self.info.container_resources))
            if self.info.pod_cgroup_parent:
                req.sandbox_config.linux.cgroup_parent = self.info.pod_cgroup_parent
            _set_envs(req.config, self.info.container_envs)
        elif isinstance(req, cri.UpdateContainerResourcesRequest):
            _merge_map(req.annotations, self.info.container_annotations)
            req.linux.CopyFrom(to_cri_resources(self.info.container_resources))

    def checkpoint(self, container_id: str) -> None:
        self.info.container_meta.id = container_id
        self.store.write_container(container_id, self.info)
