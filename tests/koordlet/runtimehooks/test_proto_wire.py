"""The committed runtime hook API is wire-compatible with Koordinator's ``apis/runtime/v1alpha1``.

The expected table is Koordinator's api.proto at a7a1b76b, field by field: a renumbered or retyped field
would make a Go koord-runtime-proxy and this koordlet silently disagree on the wire.
"""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor

from koord_framework.koordlet.runtimehooks.proto import api_pb2

_T = FieldDescriptor
STR, I64, U32, U64, MSG = _T.TYPE_STRING, _T.TYPE_INT64, _T.TYPE_UINT32, _T.TYPE_UINT64, _T.TYPE_MESSAGE

# message -> {field: (number, type, repeated, message type or "map")}
EXPECTED = {
    "PodSandboxMetadata": {"name": (1, STR), "uid": (2, STR), "namespace": (3, STR), "attempt": (4, U32)},
    "PodSandboxHookRequest": {
        "pod_meta": (1, MSG, "PodSandboxMetadata"),
        "runtime_handler": (2, STR),
        "labels": (3, MSG, "map"),
        "annotations": (4, MSG, "map"),
        "cgroup_parent": (5, STR),
        "overhead": (6, MSG, "LinuxContainerResources"),
        "resources": (7, MSG, "LinuxContainerResources"),
    },
    "PodSandboxHookResponse": {
        "labels": (1, MSG, "map"),
        "annotations": (2, MSG, "map"),
        "cgroup_parent": (3, STR),
        "resources": (4, MSG, "LinuxContainerResources"),
    },
    "LinuxContainerResources": {
        "cpu_period": (1, I64),
        "cpu_quota": (2, I64),
        "cpu_shares": (3, I64),
        "memory_limit_in_bytes": (4, I64),
        "oom_score_adj": (5, I64),
        "cpuset_cpus": (6, STR),
        "cpuset_mems": (7, STR),
        "hugepage_limits": (8, MSG, "HugepageLimit"),
        "unified": (9, MSG, "map"),
        "memory_swap_limit_in_bytes": (10, I64),
    },
    "HugepageLimit": {"page_size": (1, STR), "limit": (2, U64)},
    "ContainerMetadata": {"name": (1, STR), "attempt": (2, U32), "id": (3, STR)},
    "ContainerResourceHookRequest": {
        "pod_meta": (1, MSG, "PodSandboxMetadata"),
        "container_meta": (2, MSG, "ContainerMetadata"),
        "container_annotations": (3, MSG, "map"),
        "container_resources": (4, MSG, "LinuxContainerResources"),
        "pod_resources": (5, MSG, "LinuxContainerResources"),
        "pod_annotations": (6, MSG, "map"),
        "pod_labels": (7, MSG, "map"),
        "pod_cgroup_parent": (8, STR),
        "container_envs": (9, MSG, "map"),
    },
    "ContainerResourceHookResponse": {
        "container_annotations": (1, MSG, "map"),
        "container_resources": (2, MSG, "LinuxContainerResources"),
        "pod_cgroup_parent": (3, STR),
        "container_envs": (4, MSG, "map"),
    },
}

POD = ("PodSandboxHookRequest", "PodSandboxHookResponse")
CONTAINER = ("ContainerResourceHookRequest", "ContainerResourceHookResponse")
METHODS = {
    "PreRunPodSandboxHook": POD,
    "PostStopPodSandboxHook": POD,
    "PreCreateContainerHook": CONTAINER,
    "PreStartContainerHook": CONTAINER,
    "PostStartContainerHook": CONTAINER,
    "PostStopContainerHook": CONTAINER,
    "PreUpdateContainerResourcesHook": CONTAINER,
}


def test_package_and_messages() -> None:
    file = api_pb2.DESCRIPTOR
    assert file.package == "runtime.v1alpha1"
    assert set(file.message_types_by_name) == set(EXPECTED)


def test_every_field_number_and_type() -> None:
    for message, fields in EXPECTED.items():
        desc = api_pb2.DESCRIPTOR.message_types_by_name[message]
        assert set(desc.fields_by_name) == set(fields), message
        for name, spec in fields.items():
            field = desc.fields_by_name[name]
            assert field.number == spec[0], f"{message}.{name}"
            assert field.type == spec[1], f"{message}.{name}"
            if len(spec) == 3 and spec[2] == "map":
                assert field.message_type.GetOptions().map_entry, f"{message}.{name} is a map"
                key, value = (
                    field.message_type.fields_by_name["key"],
                    field.message_type.fields_by_name["value"],
                )
                assert (key.type, value.type) == (STR, STR), f"{message}.{name} is map<string, string>"
            elif len(spec) == 3:
                assert field.message_type.full_name == f"runtime.v1alpha1.{spec[2]}", f"{message}.{name}"
    hugepages = api_pb2.DESCRIPTOR.message_types_by_name["LinuxContainerResources"].fields_by_name
    assert hugepages["hugepage_limits"].is_repeated


def test_service_methods() -> None:
    service = api_pb2.DESCRIPTOR.services_by_name["RuntimeHookService"]
    assert service.full_name == "runtime.v1alpha1.RuntimeHookService"
    got = {m.name: (m.input_type.name, m.output_type.name) for m in service.methods}
    assert got == METHODS
    assert not any(m.client_streaming or m.server_streaming for m in service.methods)


def test_round_trip_keeps_every_field() -> None:
    request = api_pb2.ContainerResourceHookRequest(
        pod_meta=api_pb2.PodSandboxMetadata(name="p", uid="u", namespace="ns", attempt=1),
        container_meta=api_pb2.ContainerMetadata(name="c", id="abc", attempt=2),
        container_resources=api_pb2.LinuxContainerResources(
            cpu_shares=1024,
            cpuset_cpus="0-3",
            hugepage_limits=[api_pb2.HugepageLimit(page_size="2MB", limit=4)],
        ),
        pod_annotations={"a": "b"},
        container_envs={"K": "V"},
        pod_cgroup_parent="kubepods/podu",
    )
    again = api_pb2.ContainerResourceHookRequest.FromString(request.SerializeToString())
    assert again == request
