"""Typed requests and responses of the runtime hooks (Koordinator's ``runtimehooks/protocol``).

A hook reads a *request* (what the runtime is about to do, or what the reconciler found running) and edits
a *response* (what to change). Every field of a response is optional: ``None`` means "leave it as the
runtime has it". The field names follow Koordinator's ``apis/runtime/v1alpha1`` messages so that the gRPC
transport maps one to one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

__all__ = [
    "ContainerMeta",
    "ContainerRequest",
    "ContainerResources",
    "ContainerResponse",
    "FailurePolicy",
    "KubeQOSRequest",
    "KubeQOSResponse",
    "Mount",
    "PodSandboxMeta",
    "PodSandboxRequest",
    "PodSandboxResponse",
    "Stage",
]


class Stage(StrEnum):
    """Koordinator's ``RuntimeHookType``: when a hook runs."""

    PRE_RUN_POD_SANDBOX = "PreRunPodSandbox"
    POST_STOP_POD_SANDBOX = "PostStopPodSandbox"
    PRE_CREATE_CONTAINER = "PreCreateContainer"
    PRE_START_CONTAINER = "PreStartContainer"
    POST_START_CONTAINER = "PostStartContainer"
    PRE_UPDATE_CONTAINER_RESOURCES = "PreUpdateContainerResources"
    POST_STOP_CONTAINER = "PostStopContainer"
    PRE_REMOVE_RUN_POD_SANDBOX = "PreRemoveRunPodSandbox"

    @property
    def hook_name(self) -> str:
        """The pluggy hook (snake case) that serves this stage."""
        return _HOOK_NAMES[self]

    @property
    def is_pod_stage(self) -> bool:
        return self in _POD_STAGES


_HOOK_NAMES = {
    Stage.PRE_RUN_POD_SANDBOX: "pre_run_pod_sandbox",
    Stage.POST_STOP_POD_SANDBOX: "post_stop_pod_sandbox",
    Stage.PRE_CREATE_CONTAINER: "pre_create_container",
    Stage.PRE_START_CONTAINER: "pre_start_container",
    Stage.POST_START_CONTAINER: "post_start_container",
    Stage.PRE_UPDATE_CONTAINER_RESOURCES: "pre_update_container_resources",
    Stage.POST_STOP_CONTAINER: "post_stop_container",
    Stage.PRE_REMOVE_RUN_POD_SANDBOX: "pre_remove_run_pod_sandbox",
}
_POD_STAGES = frozenset(
    {Stage.PRE_RUN_POD_SANDBOX, Stage.POST_STOP_POD_SANDBOX, Stage.PRE_REMOVE_RUN_POD_SANDBOX}
)


class FailurePolicy(StrEnum):
    """Koordinator's ``FailurePolicyType``: what a failing hook does to the runtime request."""

    FAIL = "Fail"
    """Stop at the failing hook and refuse the request (the runtime returns the error)."""
    IGNORE = "Ignore"
    """Log and count the error, drop that hook's edits, run the next hook."""
    NONE = ""
    """No policy configured: treated like ``Ignore`` (as Koordinator's proxy does)."""

    @property
    def stops(self) -> bool:
        return self is FailurePolicy.FAIL


@dataclass(slots=True)
class PodSandboxMeta:
    """Koordinator's ``PodSandboxMetadata``."""

    name: str = ""
    uid: str = ""
    namespace: str = ""
    attempt: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class ContainerMeta:
    """Koordinator's ``ContainerMetadata`` (the id is empty before the runtime created it)."""

    name: str = ""
    id: str = ""
    attempt: int = 0


@dataclass(slots=True)
class ContainerResources:
    """Koordinator's ``LinuxContainerResources`` subset plus the koordlet-only knobs (bvt, ...).

    ``None`` everywhere means "no opinion". ``-1`` is "unlimited" for quota and memory, as in cgroup v1.
    """

    cpu_period: int | None = None
    cpu_quota: int | None = None
    cpu_shares: int | None = None
    memory_limit_in_bytes: int | None = None
    oom_score_adj: int | None = None
    cpuset_cpus: str | None = None
    """A cpuset list (``0-3,8``); ``""`` means "clear" (Koordinator writes it for BestEffort dirs)."""
    cpuset_mems: str | None = None
    cpu_bvt: int | None = None
    """Group identity (``cpu.bvt_warp_ns``): -1, 0, 1 or 2; not a CRI field, written by the koordlet."""
    cpu_idle: int | None = None
    unified: dict[str, str] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return all(getattr(self, f) in (None, {}) for f in self.__slots__)

    def copy(self) -> ContainerResources:
        """An independent copy (``unified`` is the only mutable field)."""
        out = object.__new__(ContainerResources)
        for name in self.__slots__:
            setattr(out, name, getattr(self, name))
        out.unified = dict(self.unified)
        return out


@dataclass(frozen=True, slots=True)
class Mount:
    """An OCI mount a hook adds to a container."""

    destination: str
    source: str
    type: str = "bind"
    options: tuple[str, ...] = ()


@dataclass(slots=True)
class PodSandboxRequest:
    """What a pod-level hook reads (``PodSandboxHookRequest``), also built by the reconciler."""

    pod_meta: PodSandboxMeta
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cgroup_parent: str = ""
    """The pod's cgroup dir relative to a subsystem root (``kubepods/burstable/pod<uid>``)."""
    resources: ContainerResources | None = None
    """The pod's current (reconciler) or requested (runtime) resources, when known."""
    runtime_handler: str = ""


@dataclass(slots=True)
class PodSandboxResponse:
    """What a pod-level hook may change (``PodSandboxHookResponse``)."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    cgroup_parent: str | None = None
    resources: ContainerResources = field(default_factory=ContainerResources)


@dataclass(slots=True)
class ContainerRequest:
    """What a container-level hook reads (``ContainerResourceHookRequest``)."""

    pod_meta: PodSandboxMeta
    container_meta: ContainerMeta
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    container_annotations: Mapping[str, str] = field(default_factory=dict)
    cgroup_parent: str = ""
    """The *pod's* cgroup dir (the runtime's ``PodCgroupParent``)."""
    container_cgroup: str = ""
    """The container's own cgroup dir when it exists (reconciler), else ``""``."""
    resources: ContainerResources | None = None
    """The container's current (reconciler) or requested (runtime) resources."""
    env: Mapping[str, str] = field(default_factory=dict)
    pod_resources: ContainerResources | None = None


@dataclass(slots=True)
class ContainerResponse:
    """What a container-level hook may change (``ContainerResourceHookResponse``)."""

    container_annotations: dict[str, str] = field(default_factory=dict)
    resources: ContainerResources = field(default_factory=ContainerResources)
    pod_cgroup_parent: str | None = None
    add_env: dict[str, str] = field(default_factory=dict)
    add_mounts: list[Mount] = field(default_factory=list)


@dataclass(slots=True)
class KubeQOSRequest:
    """The reconciler's kubeQOS level: one of the three QoS dirs (``kubepods``, ``.../burstable``, ...)."""

    kube_qos: str
    """``Guaranteed``, ``Burstable`` or ``BestEffort``."""
    cgroup_dir: str


@dataclass(slots=True)
class KubeQOSResponse:
    resources: ContainerResources = field(default_factory=ContainerResources)


ResponseT = TypeVar("ResponseT", PodSandboxResponse, ContainerResponse, KubeQOSResponse)


def copy_response(response: ResponseT) -> ResponseT:
    """A private copy of a response for one hook to edit: the same as ``copy.deepcopy`` for these
    dataclasses (dicts and lists copied, resources copied, frozen ``Mount``s shared) at a tenth of its cost
    -- it runs once per hook per runtime request."""
    out = object.__new__(type(response))
    for name in response.__slots__:
        value = getattr(response, name)
        if isinstance(value, dict):
            value = dict(value)
        elif isinstance(value, list):
            value = list(value)
        elif isinstance(value, ContainerResources):
            value = value.copy()
        setattr(out, name, value)
    return out


def merge_response(into: ResponseT, edited: ResponseT) -> ResponseT:
    """Copy what a hook set on ``edited`` (a private copy) onto ``into``; returns ``into``."""
    for name in into.__slots__:
        setattr(into, name, getattr(edited, name))
    return into
