"""Between the wire (``runtime.v1alpha1`` messages) and the extension point's typed requests and responses.

The hook server turns each proto request into the typed request the hooks read, runs them, and answers
with what Koordinator's proxyserver answers: the request's own values (labels, annotations, cgroup parent,
resources, env) with the hooks' edits laid over them, so that a proxy merging the answer into the CRI
request never loses a value the kubelet set. On the wire zero means "not specified" (proto3 scalars), so
a zero in the request becomes ``None`` in the typed request and a ``None`` in the typed response keeps the
request's value.

Not carried by CRI, hence not on the wire: ``cpu_bvt`` and ``cpu_idle`` (the server writes them to the
pod's cgroup itself, as Koordinator's ``injectForExt`` does) and ``add_mounts`` (only NRI can add mounts).
"""

from __future__ import annotations

from koord_framework.koordlet.runtimehooks.proto import api_pb2
from koord_framework.koordlet.runtimehooks.protocol import (
    ContainerMeta,
    ContainerRequest,
    ContainerResources,
    ContainerResponse,
    PodSandboxMeta,
    PodSandboxRequest,
    PodSandboxResponse,
)

__all__ = [
    "container_request",
    "container_response",
    "passthrough_container_response",
    "passthrough_pod_response",
    "pod_request",
    "pod_response",
    "resources_from_proto",
    "resources_to_proto",
]

_INT_FIELDS = ("cpu_period", "cpu_quota", "cpu_shares", "memory_limit_in_bytes", "oom_score_adj")
_STR_FIELDS = ("cpuset_cpus", "cpuset_mems")


def cgroup_dir(parent: str) -> str:
    """The kubelet's cgroupfs cgroup parent (``/kubepods/burstable/pod<uid>``) as the dir relative to a
    subsystem root the hooks work with (``kubepods/burstable/pod<uid>``); a systemd slice name is kept."""
    return parent.strip("/")


def resources_from_proto(
    msg: api_pb2.LinuxContainerResources, present: bool = True
) -> ContainerResources | None:
    """The typed resources of a wire message; ``None`` when the message was not sent."""
    if not present:
        return None
    res = ContainerResources()
    for name in _INT_FIELDS:
        value = int(getattr(msg, name))
        setattr(res, name, value if value != 0 else None)
    for name in _STR_FIELDS:
        text = str(getattr(msg, name))
        setattr(res, name, text or None)
    res.unified = dict(msg.unified)
    return res


def resources_to_proto(
    base: api_pb2.LinuxContainerResources | None, edits: ContainerResources
) -> api_pb2.LinuxContainerResources:
    """``base`` (the request's resources) with every field a hook set laid over it."""
    out = api_pb2.LinuxContainerResources()
    if base is not None:
        out.CopyFrom(base)
    for name in (*_INT_FIELDS, *_STR_FIELDS):
        value = getattr(edits, name)
        if value is not None:
            setattr(out, name, value)
    for key, val in edits.unified.items():
        out.unified[key] = val
    return out


def _pod_meta(msg: api_pb2.PodSandboxMetadata) -> PodSandboxMeta:
    return PodSandboxMeta(name=msg.name, uid=msg.uid, namespace=msg.namespace, attempt=int(msg.attempt))


def pod_request(msg: api_pb2.PodSandboxHookRequest) -> PodSandboxRequest:
    return PodSandboxRequest(
        pod_meta=_pod_meta(msg.pod_meta),
        labels=dict(msg.labels),
        annotations=dict(msg.annotations),
        cgroup_parent=cgroup_dir(msg.cgroup_parent),
        resources=resources_from_proto(msg.resources, msg.HasField("resources")),
        runtime_handler=msg.runtime_handler,
    )


def passthrough_pod_response(msg: api_pb2.PodSandboxHookRequest) -> api_pb2.PodSandboxHookResponse:
    """The answer that changes nothing: the request's own values (Koordinator's starting response)."""
    out = api_pb2.PodSandboxHookResponse(cgroup_parent=msg.cgroup_parent)
    out.labels.update(msg.labels)
    out.annotations.update(msg.annotations)
    if msg.HasField("resources"):
        out.resources.CopyFrom(msg.resources)
    return out


def pod_response(
    msg: api_pb2.PodSandboxHookRequest, edits: PodSandboxResponse
) -> api_pb2.PodSandboxHookResponse:
    out = passthrough_pod_response(msg)
    out.labels.update(edits.labels)
    out.annotations.update(edits.annotations)
    if edits.cgroup_parent is not None:
        out.cgroup_parent = edits.cgroup_parent
    if not _cri_empty(edits.resources):
        out.resources.CopyFrom(
            resources_to_proto(msg.resources if msg.HasField("resources") else None, edits.resources)
        )
    return out


def container_request(msg: api_pb2.ContainerResourceHookRequest) -> ContainerRequest:
    return ContainerRequest(
        pod_meta=_pod_meta(msg.pod_meta),
        container_meta=ContainerMeta(
            name=msg.container_meta.name, id=msg.container_meta.id, attempt=int(msg.container_meta.attempt)
        ),
        pod_labels=dict(msg.pod_labels),
        pod_annotations=dict(msg.pod_annotations),
        container_annotations=dict(msg.container_annotations),
        cgroup_parent=cgroup_dir(msg.pod_cgroup_parent),
        resources=resources_from_proto(msg.container_resources, msg.HasField("container_resources")),
        env=dict(msg.container_envs),
        pod_resources=resources_from_proto(msg.pod_resources, msg.HasField("pod_resources")),
    )


def passthrough_container_response(
    msg: api_pb2.ContainerResourceHookRequest,
) -> api_pb2.ContainerResourceHookResponse:
    out = api_pb2.ContainerResourceHookResponse(pod_cgroup_parent=msg.pod_cgroup_parent)
    out.container_annotations.update(msg.container_annotations)
    out.container_envs.update(msg.container_envs)
    if msg.HasField("container_resources"):
        out.container_resources.CopyFrom(msg.container_resources)
    return out


def container_response(
    msg: api_pb2.ContainerResourceHookRequest, edits: ContainerResponse
) -> api_pb2.ContainerResourceHookResponse:
    out = passthrough_container_response(msg)
    out.container_annotations.update(edits.container_annotations)
    out.container_envs.update(edits.add_env)
    if edits.pod_cgroup_parent is not None:
        out.pod_cgroup_parent = edits.pod_cgroup_parent
    if not _cri_empty(edits.resources):
        base = msg.container_resources if msg.HasField("container_resources") else None
        out.container_resources.CopyFrom(resources_to_proto(base, edits.resources))
    return out


def _cri_empty(res: ContainerResources) -> bool:
    """No field CRI carries was set (bvt / idle alone do not go on the wire)."""
    return all(getattr(res, n) is None for n in (*_INT_FIELDS, *_STR_FIELDS)) and not res.unified
